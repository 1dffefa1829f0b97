//! Security toward external brokers: the TLS keys of a RabbitMQ source or sink
//! ([`AmqpTlsConfig`], used with `amqps://` URIs) and the TLS and SASL keys of a Kafka
//! source or sink ([`KafkaSecurityConfig`], mapped onto librdkafka properties by
//! [`KafkaSecurityConfig::librdkafka`]).
//!
//! Both are flattened into their `[sources.NAME]` / `[sinks.NAME]` table, so the keys sit
//! beside `uri` or `bootstrap_servers`. Validation is pure and names the key; whether the
//! files and the password can be read is checked by [`super::preflight`], and they are read
//! again on every connection, so a renewed certificate or password is picked up when the
//! source or sink reconnects. A password is never part of any error or `Debug` output.

use super::ConfigError;
use super::secret::KafkaProperties;
use lapin::uri::{AMQPScheme, AMQPUri};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// TLS toward an external RabbitMQ, for a source or sink whose `uri` is `amqps://`
/// (TLS 1.2 or 1.3).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AmqpTlsConfig {
    /// PEM file of the CA certificates the broker's certificate must chain to; absent: the
    /// system's trusted roots (`/etc/ssl/certs`, or `SSL_CERT_FILE`).
    pub ca_file: Option<PathBuf>,
    /// PEM file of the client certificate (chain) Ferry presents, for a broker that
    /// verifies its clients (`ssl_options.verify = verify_peer`); needs `key_file`.
    pub cert_file: Option<PathBuf>,
    /// PEM file of the client certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: Option<PathBuf>,
    /// The name the broker's certificate must carry; absent: the URI's host.
    pub server_name: Option<String>,
}

impl AmqpTlsConfig {
    /// Checks the keys against `uri` (already known to parse); `at` makes a key's path.
    ///
    /// # Errors
    /// A TLS key with an `amqp://` URI, half a client certificate, or a bad `server_name`.
    pub fn validate(&self, at: &dyn Fn(&str) -> String, uri: &AMQPUri) -> Result<(), ConfigError> {
        if uri.scheme != AMQPScheme::AMQPS {
            let set = [
                ("ca_file", self.ca_file.is_some()),
                ("cert_file", self.cert_file.is_some()),
                ("key_file", self.key_file.is_some()),
                ("server_name", self.server_name.is_some()),
            ];
            if let Some((key, _)) = set.iter().find(|(_, set)| *set) {
                return Err(ConfigError::invalid(
                    at(key),
                    format!("is for TLS; {} must then start with amqps://", at("uri")),
                ));
            }
        }
        pair(at, &self.cert_file, &self.key_file)?;
        if let Some(name) = &self.server_name
            && rustls::pki_types::ServerName::try_from(name.as_str()).is_err()
        {
            return Err(ConfigError::invalid(
                at("server_name"),
                format!("'{name}' is not a DNS name or an IP address"),
            ));
        }
        Ok(())
    }

    /// The files set, with their keys, for preflight.
    pub fn files(&self) -> Vec<(&'static str, &Path)> {
        files(&[
            ("ca_file", &self.ca_file),
            ("cert_file", &self.cert_file),
            ("key_file", &self.key_file),
        ])
    }
}

/// Kafka's `security.protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum SecurityProtocol {
    /// No TLS, no SASL (librdkafka's default).
    #[serde(rename = "PLAINTEXT")]
    Plaintext,
    /// TLS, no SASL.
    #[serde(rename = "SSL")]
    Ssl,
    /// SASL without TLS.
    #[serde(rename = "SASL_PLAINTEXT")]
    SaslPlaintext,
    /// SASL over TLS.
    #[serde(rename = "SASL_SSL")]
    SaslSsl,
}

impl SecurityProtocol {
    /// Every protocol, as written in the config.
    pub const NAMES: [&str; 4] = ["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"];

    /// The protocol a `security.protocol` value names (any case, as librdkafka takes it).
    pub fn parse(value: &str) -> Option<Self> {
        let all = [
            Self::Plaintext,
            Self::Ssl,
            Self::SaslPlaintext,
            Self::SaslSsl,
        ];
        Self::NAMES
            .iter()
            .position(|n| n.eq_ignore_ascii_case(value))
            .map(|i| all[i])
    }

    /// The name, as Kafka and librdkafka spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => Self::NAMES[0],
            Self::Ssl => Self::NAMES[1],
            Self::SaslPlaintext => Self::NAMES[2],
            Self::SaslSsl => Self::NAMES[3],
        }
    }

    /// Whether the connection is TLS.
    pub fn tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    /// Whether the client authenticates with SASL.
    pub fn sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }
}

/// Kafka's `sasl.mechanism`, of those Ferry's bridge configures by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum SaslMechanism {
    /// User name and password in the clear (use it with `SASL_SSL`).
    #[serde(rename = "PLAIN")]
    Plain,
    /// SCRAM with SHA-256 (RFC 7677): the password never crosses the wire.
    #[serde(rename = "SCRAM-SHA-256")]
    ScramSha256,
    /// SCRAM with SHA-512.
    #[serde(rename = "SCRAM-SHA-512")]
    ScramSha512,
}

impl SaslMechanism {
    /// The name, as Kafka and librdkafka spell it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::ScramSha256 => "SCRAM-SHA-256",
            Self::ScramSha512 => "SCRAM-SHA-512",
        }
    }
}

/// TLS and SASL toward an external Kafka cluster. Every key is optional; absent keys
/// leave librdkafka's defaults (or what `properties` sets) alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSecurityConfig {
    /// `security.protocol`: `PLAINTEXT`, `SSL`, `SASL_PLAINTEXT` or `SASL_SSL`; absent:
    /// `properties."security.protocol"`, else PLAINTEXT.
    pub security_protocol: Option<SecurityProtocol>,
    /// `sasl.mechanism`: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`; needed with
    /// `username`.
    pub sasl_mechanism: Option<SaslMechanism>,
    /// `sasl.username`; needs `password_file` or `password_env`.
    pub username: Option<String>,
    /// A file whose content (without a trailing line break) is the SASL password.
    pub password_file: Option<PathBuf>,
    /// The environment variable that holds the SASL password.
    pub password_env: Option<String>,
    /// `ssl.ca.location`: PEM file of the CA certificates the brokers' certificates must
    /// chain to; absent: the system's trusted roots.
    pub ca_file: Option<PathBuf>,
    /// `ssl.certificate.location`: PEM file of the client certificate, for brokers that
    /// verify clients; needs `key_file`.
    pub cert_file: Option<PathBuf>,
    /// `ssl.key.location`: PEM file of the client certificate's private key.
    pub key_file: Option<PathBuf>,
}

impl KafkaSecurityConfig {
    /// Checks the keys together with the raw `properties`; `at` makes a key's path.
    ///
    /// # Errors
    /// A typed key whose property `properties` sets too (naming both), an unknown
    /// `security.protocol`, SASL keys without a SASL protocol, TLS files without a TLS
    /// protocol, a user without a password source (or two sources), half a client
    /// certificate.
    pub fn validate(
        &self,
        at: &dyn Fn(&str) -> String,
        properties: &KafkaProperties,
    ) -> Result<(), ConfigError> {
        for (key, property, set) in self.keys() {
            if set && properties.contains_key(property) {
                return Err(ConfigError::invalid(
                    at(key),
                    format!(
                        "conflicts with {}.\"{property}\", which sets the same librdkafka property; keep one",
                        at("properties")
                    ),
                ));
            }
        }
        let protocol = match (self.security_protocol, properties.get("security.protocol")) {
            (Some(p), _) => p,
            (None, Some(raw)) => SecurityProtocol::parse(raw).ok_or_else(|| {
                ConfigError::invalid(
                    format!("{}.\"security.protocol\"", at("properties")),
                    format!(
                        "'{raw}' is not one of {}",
                        SecurityProtocol::NAMES.join(", ")
                    ),
                )
            })?,
            (None, None) => SecurityProtocol::Plaintext,
        };
        let needs_sasl = [
            "sasl_mechanism",
            "username",
            "password_file",
            "password_env",
        ];
        if let Some(key) = needs_sasl.iter().find(|k| self.is_set(k))
            && !protocol.sasl()
        {
            return Err(ConfigError::invalid(
                at(key),
                format!(
                    "needs security_protocol SASL_PLAINTEXT or SASL_SSL, not {}",
                    protocol.name()
                ),
            ));
        }
        let needs_tls = ["ca_file", "cert_file", "key_file"];
        if let Some(key) = needs_tls.iter().find(|k| self.is_set(k))
            && !protocol.tls()
        {
            return Err(ConfigError::invalid(
                at(key),
                format!(
                    "needs security_protocol SSL or SASL_SSL, not {}",
                    protocol.name()
                ),
            ));
        }
        if self.password_file.is_some() && self.password_env.is_some() {
            return Err(ConfigError::invalid(
                at("password_env"),
                format!("{} is set too; keep one", at("password_file")),
            ));
        }
        let has_password = self.password_file.is_some() || self.password_env.is_some();
        match (&self.username, has_password) {
            (Some(_), false) => {
                return Err(ConfigError::invalid(
                    at("username"),
                    "needs password_file or password_env",
                ));
            }
            (None, true) => {
                return Err(ConfigError::invalid(
                    at(if self.password_file.is_some() {
                        "password_file"
                    } else {
                        "password_env"
                    }),
                    "needs username",
                ));
            }
            _ => {}
        }
        if self.username.is_some()
            && self.sasl_mechanism.is_none()
            && !properties.contains_key("sasl.mechanism")
        {
            return Err(ConfigError::invalid(
                at("sasl_mechanism"),
                "must be set with username: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512",
            ));
        }
        if let Some(var) = &self.password_env
            && var.trim().is_empty()
        {
            return Err(ConfigError::invalid(
                at("password_env"),
                "must name an environment variable",
            ));
        }
        pair(at, &self.cert_file, &self.key_file)
    }

    /// Each typed key, the librdkafka property it sets, and whether it is set.
    fn keys(&self) -> [(&'static str, &'static str, bool); 8] {
        [
            (
                "security_protocol",
                "security.protocol",
                self.security_protocol.is_some(),
            ),
            (
                "sasl_mechanism",
                "sasl.mechanism",
                self.sasl_mechanism.is_some(),
            ),
            ("username", "sasl.username", self.username.is_some()),
            (
                "password_file",
                "sasl.password",
                self.password_file.is_some(),
            ),
            ("password_env", "sasl.password", self.password_env.is_some()),
            ("ca_file", "ssl.ca.location", self.ca_file.is_some()),
            (
                "cert_file",
                "ssl.certificate.location",
                self.cert_file.is_some(),
            ),
            ("key_file", "ssl.key.location", self.key_file.is_some()),
        ]
    }

    /// Whether the typed key `key` is set.
    fn is_set(&self, key: &str) -> bool {
        self.keys().iter().any(|(k, _, set)| *k == key && *set)
    }

    /// The librdkafka properties the typed keys set, with `password` (from
    /// [`Self::password`]) as `sasl.password`. Pure; a [validated](Self::validate) config
    /// never sets one of them in `properties` too.
    pub fn librdkafka(&self, password: Option<String>) -> Vec<(&'static str, String)> {
        let path = |p: &Path| p.display().to_string();
        [
            self.security_protocol
                .map(|p| ("security.protocol", p.name().to_owned())),
            self.sasl_mechanism
                .map(|m| ("sasl.mechanism", m.name().to_owned())),
            self.username.clone().map(|u| ("sasl.username", u)),
            password.map(|p| ("sasl.password", p)),
            self.ca_file
                .as_deref()
                .map(|p| ("ssl.ca.location", path(p))),
            self.cert_file
                .as_deref()
                .map(|p| ("ssl.certificate.location", path(p))),
            self.key_file
                .as_deref()
                .map(|p| ("ssl.key.location", path(p))),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// The SASL password from `password_file` (without a trailing line break) or
    /// `password_env`; `None` when neither is set. Reads the file or the environment.
    ///
    /// # Errors
    /// The key and why it gives no password (the file cannot be read or is empty, the
    /// variable is unset or empty); never the password itself.
    pub fn password(&self, at: &dyn Fn(&str) -> String) -> Result<Option<String>, ConfigError> {
        let password = if let Some(file) = &self.password_file {
            let text = std::fs::read_to_string(file).map_err(|e| {
                ConfigError::invalid(
                    at("password_file"),
                    format!("cannot read '{}': {e}", file.display()),
                )
            })?;
            let password = text.strip_suffix('\n').unwrap_or(&text);
            let password = password.strip_suffix('\r').unwrap_or(password).to_owned();
            if password.is_empty() {
                return Err(ConfigError::invalid(
                    at("password_file"),
                    format!("'{}' is empty", file.display()),
                ));
            }
            password
        } else if let Some(var) = &self.password_env {
            match std::env::var(var) {
                Ok(p) if !p.is_empty() => p,
                Ok(_) => {
                    return Err(ConfigError::invalid(
                        at("password_env"),
                        format!("environment variable {var} is empty"),
                    ));
                }
                Err(e) => {
                    return Err(ConfigError::invalid(
                        at("password_env"),
                        format!("environment variable {var}: {e}"),
                    ));
                }
            }
        } else {
            return Ok(None);
        };
        Ok(Some(password))
    }

    /// The files set, with their keys, for preflight.
    pub fn files(&self) -> Vec<(&'static str, &Path)> {
        files(&[
            ("ca_file", &self.ca_file),
            ("cert_file", &self.cert_file),
            ("key_file", &self.key_file),
            ("password_file", &self.password_file),
        ])
    }
}

/// A client certificate comes with its key, and a key with its certificate.
fn pair(
    at: &dyn Fn(&str) -> String,
    cert: &Option<PathBuf>,
    key: &Option<PathBuf>,
) -> Result<(), ConfigError> {
    match (cert, key) {
        (Some(_), None) => Err(ConfigError::invalid(at("cert_file"), "needs key_file")),
        (None, Some(_)) => Err(ConfigError::invalid(at("key_file"), "needs cert_file")),
        _ => Ok(()),
    }
}

/// The files of `keys` that are set.
fn files<'a>(keys: &[(&'static str, &'a Option<PathBuf>)]) -> Vec<(&'static str, &'a Path)> {
    keys.iter()
        .filter_map(|(key, path)| path.as_deref().map(|p| (*key, p)))
        .collect()
}
