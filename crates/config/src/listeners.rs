//! Kafka's listener syntax, `PROTOCOL://host:port`, as `kafka.listeners` and
//! `kafka.advertised_listeners` take it (Kafka's `listeners` and `advertised.listeners`,
//! where each listener is named by its security protocol).

use super::ConfigError;
use std::fmt;

/// A Kafka listener's security protocol (Kafka's `security.protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SecurityProtocol {
    /// Plain TCP.
    Plaintext,
    /// TLS.
    Ssl,
    /// Plain TCP; SASL authentication before any other request.
    SaslPlaintext,
    /// TLS; SASL authentication before any other request.
    SaslSsl,
}

impl SecurityProtocol {
    /// Every protocol, in Kafka's spelling order.
    pub const ALL: [Self; 4] = [
        Self::Plaintext,
        Self::Ssl,
        Self::SaslPlaintext,
        Self::SaslSsl,
    ];

    /// The name as Kafka writes it (`SASL_SSL`), also the listener's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Plaintext => "PLAINTEXT",
            Self::Ssl => "SSL",
            Self::SaslPlaintext => "SASL_PLAINTEXT",
            Self::SaslSsl => "SASL_SSL",
        }
    }

    /// Whether connections are TLS.
    pub fn is_tls(self) -> bool {
        matches!(self, Self::Ssl | Self::SaslSsl)
    }

    /// Whether clients must authenticate with SASL before other requests.
    pub fn is_sasl(self) -> bool {
        matches!(self, Self::SaslPlaintext | Self::SaslSsl)
    }

    /// The protocol named `name` (case-insensitive, as Kafka reads it).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One `PROTOCOL://host:port` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    /// The security protocol, which also names the listener.
    pub protocol: SecurityProtocol,
    /// `host:port`: where to bind, or (advertised) where clients are told to connect.
    pub addr: String,
}

impl ListenerSpec {
    /// Parses `entry`, the value of `key`; the address is only split off here, its syntax
    /// is checked with every other listen address.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming `key` when the entry is not `PROTOCOL://host:port`
    /// with a known protocol.
    pub fn parse(key: &str, entry: &str) -> Result<Self, ConfigError> {
        let Some((protocol, addr)) = entry.split_once("://") else {
            return Err(ConfigError::invalid(
                key,
                format!("'{entry}' is not PROTOCOL://host:port"),
            ));
        };
        let protocol = SecurityProtocol::parse(protocol).ok_or_else(|| {
            ConfigError::invalid(
                key,
                format!(
                    "'{protocol}' is not a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)"
                ),
            )
        })?;
        Ok(Self {
            protocol,
            addr: addr.to_owned(),
        })
    }
}

/// Parses every entry of the list at `key` (`kafka.listeners`), each protocol at most once.
///
/// # Errors
/// [`ConfigError::Invalid`] naming the entry (`kafka.listeners[1]`).
pub fn parse_list(key: &str, entries: &[String]) -> Result<Vec<ListenerSpec>, ConfigError> {
    let mut specs: Vec<ListenerSpec> = Vec::with_capacity(entries.len());
    for (i, entry) in entries.iter().enumerate() {
        let entry_key = format!("{key}[{i}]");
        let spec = ListenerSpec::parse(&entry_key, entry)?;
        if specs.iter().any(|s| s.protocol == spec.protocol) {
            return Err(ConfigError::invalid(
                entry_key,
                format!("a {} listener is listed twice", spec.protocol),
            ));
        }
        specs.push(spec);
    }
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_parse_into_protocol_and_address() {
        let spec = ListenerSpec::parse("k", "sasl_ssl://0.0.0.0:9094").unwrap();
        assert_eq!(spec.protocol, SecurityProtocol::SaslSsl);
        assert_eq!(spec.addr, "0.0.0.0:9094");
        assert!(spec.protocol.is_tls() && spec.protocol.is_sasl());
    }

    #[test]
    fn bad_entries_are_named() {
        assert_eq!(
            ListenerSpec::parse("kafka.listeners[0]", "0.0.0.0:9092")
                .unwrap_err()
                .to_string(),
            "kafka.listeners[0]: '0.0.0.0:9092' is not PROTOCOL://host:port"
        );
        assert_eq!(
            ListenerSpec::parse("kafka.listeners[0]", "TLS://h:1")
                .unwrap_err()
                .to_string(),
            "kafka.listeners[0]: 'TLS' is not a security protocol (PLAINTEXT, SSL, \
             SASL_PLAINTEXT or SASL_SSL)"
        );
        let twice = ["SSL://a:1".to_owned(), "SSL://a:2".to_owned()];
        assert_eq!(
            parse_list("kafka.listeners", &twice)
                .unwrap_err()
                .to_string(),
            "kafka.listeners[1]: a SSL listener is listed twice"
        );
    }
}
