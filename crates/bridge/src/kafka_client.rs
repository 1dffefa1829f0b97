//! The librdkafka configuration of the bridge's Kafka clients (a source's consumer, a
//! sink's producer and its transaction marker consumer), built one way for all of them:
//! `bootstrap.servers`, the client's own defaults, the TLS and SASL keys
//! ([`KafkaSecurityConfig::librdkafka`]), then the raw `properties`. Validation has made
//! sure no raw property sets what a typed key sets.
//!
//! The password is read from its file or variable each time a client is built, so a
//! changed one is used from the next reconnect on; it goes to librdkafka only.

use ferry_config::{KafkaProperties, KafkaSecurityConfig};
use rdkafka::ClientConfig;
use rdkafka::error::KafkaError;

/// Where and how a Kafka source or sink connects.
#[derive(Debug, Clone)]
pub(crate) struct KafkaEndpoint {
    /// The source's or sink's key path (`sources.NAME`), for errors.
    pub key: String,
    /// `bootstrap.servers`.
    pub bootstrap_servers: String,
    /// The typed TLS and SASL keys.
    pub security: KafkaSecurityConfig,
    /// Extra librdkafka properties.
    pub properties: KafkaProperties,
}

impl KafkaEndpoint {
    /// A client configuration with `defaults` (which `properties` may override).
    ///
    /// # Errors
    /// [`KafkaError::ClientCreation`] when the password cannot be read (naming the key,
    /// never the password).
    pub(crate) fn client_config(
        &self,
        defaults: &[(&str, &str)],
    ) -> Result<ClientConfig, KafkaError> {
        let at = |k: &str| format!("{}.{k}", self.key);
        let password = self
            .security
            .password(&at)
            .map_err(|e| KafkaError::ClientCreation(e.to_string()))?;
        let mut config = ClientConfig::new();
        config.set("bootstrap.servers", &self.bootstrap_servers);
        for (k, v) in defaults {
            config.set(*k, *v);
        }
        for (k, v) in self.security.librdkafka(password) {
            config.set(k, v);
        }
        for (k, v) in self.properties.iter() {
            config.set(k, v);
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_config::{SaslMechanism, SecurityProtocol};
    use std::collections::BTreeMap;

    fn endpoint(security: KafkaSecurityConfig, properties: &[(&str, &str)]) -> KafkaEndpoint {
        KafkaEndpoint {
            key: "sinks.out".into(),
            bootstrap_servers: "b:9093".into(),
            security,
            properties: properties
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>()
                .into(),
        }
    }

    #[test]
    fn typed_keys_become_librdkafka_properties() {
        let dir = tempfile::tempdir().unwrap();
        let password = dir.path().join("password");
        std::fs::write(&password, "s3cret\n").unwrap();
        let security = KafkaSecurityConfig {
            security_protocol: Some(SecurityProtocol::SaslSsl),
            sasl_mechanism: Some(SaslMechanism::ScramSha512),
            username: Some("bridge".into()),
            password_file: Some(password),
            ca_file: Some("/etc/ferry/ca.pem".into()),
            cert_file: Some("/etc/ferry/client.pem".into()),
            key_file: Some("/etc/ferry/client.key".into()),
            ..KafkaSecurityConfig::default()
        };
        let config = endpoint(security, &[("client.id", "ferry")])
            .client_config(&[("acks", "all")])
            .unwrap();
        for (k, v) in [
            ("bootstrap.servers", "b:9093"),
            ("acks", "all"),
            ("security.protocol", "SASL_SSL"),
            ("sasl.mechanism", "SCRAM-SHA-512"),
            ("sasl.username", "bridge"),
            ("sasl.password", "s3cret"),
            ("ssl.ca.location", "/etc/ferry/ca.pem"),
            ("ssl.certificate.location", "/etc/ferry/client.pem"),
            ("ssl.key.location", "/etc/ferry/client.key"),
            ("client.id", "ferry"),
        ] {
            assert_eq!(config.get(k), Some(v), "{k}");
        }
    }

    #[test]
    fn raw_properties_alone_still_configure_security() {
        let config = endpoint(
            KafkaSecurityConfig::default(),
            &[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "PLAIN"),
            ],
        )
        .client_config(&[])
        .unwrap();
        assert_eq!(config.get("security.protocol"), Some("SASL_SSL"));
        assert_eq!(config.get("sasl.mechanism"), Some("PLAIN"));
    }

    #[test]
    fn the_password_comes_from_the_environment() {
        // A variable every test process has, read rather than set (setting one races
        // with other threads).
        let var = "PATH";
        let security = KafkaSecurityConfig {
            security_protocol: Some(SecurityProtocol::SaslPlaintext),
            sasl_mechanism: Some(SaslMechanism::Plain),
            username: Some("bridge".into()),
            password_env: Some(var.into()),
            ..KafkaSecurityConfig::default()
        };
        let config = endpoint(security, &[]).client_config(&[]).unwrap();
        let want = std::env::var(var).unwrap();
        assert_eq!(config.get("sasl.password"), Some(want.as_str()));
    }

    #[test]
    fn an_unreadable_password_names_the_key() {
        let security = KafkaSecurityConfig {
            security_protocol: Some(SecurityProtocol::SaslSsl),
            sasl_mechanism: Some(SaslMechanism::Plain),
            username: Some("bridge".into()),
            password_env: Some("FERRY_TEST_NO_SUCH_VARIABLE".into()),
            ..KafkaSecurityConfig::default()
        };
        let err = endpoint(security, &[])
            .client_config(&[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "sinks.out.password_env: environment variable FERRY_TEST_NO_SUCH_VARIABLE"
            ),
            "{err}"
        );
    }
}
