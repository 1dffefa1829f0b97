//! `[tls]`: the certificate, key and client CA every TLS listener of Ferry uses (`amqps` on
//! `amqp.tls_listen`, Kafka's `SSL://` and `SASL_SSL://` listeners, HTTPS on
//! `metrics.listen` with `metrics.tls`).
//!
//! TLS's own section of `ferry.toml`. The daemon's configuration embeds it and checks its
//! values (and whether a listener that needs TLS has a certificate); preflight and the
//! daemon read the files.

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Default for `tls.handshake_timeout_ms`.
pub const DEFAULT_HANDSHAKE_TIMEOUT_MS: u64 = 10_000;
/// Default for `tls.reload_check_ms`.
pub const DEFAULT_RELOAD_CHECK_MS: u64 = 5_000;

/// The key path of [`TlsConfig::cert_file`].
pub const CERT_FILE_KEY: &str = "tls.cert_file";
/// The key path of [`TlsConfig::key_file`].
pub const KEY_FILE_KEY: &str = "tls.key_file";
/// The key path of [`TlsConfig::ca_file`].
pub const CA_FILE_KEY: &str = "tls.ca_file";

/// `[tls]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// PEM file with the server's certificate chain, leaf first; empty: no TLS listener
    /// may be configured.
    pub cert_file: PathBuf,
    /// PEM file with the private key of the leaf certificate (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    /// PEM file with the CA certificates client certificates must chain to; needed when
    /// `verify_peer` is `optional` or `required`.
    pub ca_file: PathBuf,
    /// Whether clients must present a certificate: `none` (never asked), `optional`
    /// (verified when presented), `required` (a client without a valid one is refused in
    /// the handshake).
    pub verify_peer: VerifyPeer,
    /// The oldest TLS version accepted: `1.2` or `1.3`.
    pub min_version: TlsVersion,
    /// Milliseconds a client has to finish the TLS handshake before its connection is
    /// closed, so stalled handshakes cannot hold connection slots.
    pub handshake_timeout_ms: u64,
    /// Milliseconds between two looks at the files' modification times; a change reloads
    /// them (as SIGHUP does) for new handshakes.
    pub reload_check_ms: u64,
}

impl Default for TlsConfig {
    fn default() -> Self {
        Self {
            cert_file: PathBuf::new(),
            key_file: PathBuf::new(),
            ca_file: PathBuf::new(),
            verify_peer: VerifyPeer::None,
            min_version: TlsVersion::V1_2,
            handshake_timeout_ms: DEFAULT_HANDSHAKE_TIMEOUT_MS,
            reload_check_ms: DEFAULT_RELOAD_CHECK_MS,
        }
    }
}

/// `tls.verify_peer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifyPeer {
    /// Clients are not asked for a certificate.
    None,
    /// A certificate is verified when the client presents one.
    Optional,
    /// A client without a certificate signed by `tls.ca_file` is refused.
    Required,
}

/// `tls.min_version`. Written `"1.2"` or `"1.3"`; a bare number is taken too, since an
/// environment override `FERRY__TLS__MIN_VERSION=1.3` arrives as one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsVersion {
    /// TLS 1.2 and 1.3.
    V1_2,
    /// TLS 1.3 only.
    V1_3,
}

impl<'de> Deserialize<'de> for TlsVersion {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Version;
        impl Visitor<'_> for Version {
            type Value = TlsVersion;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"1.2\" or \"1.3\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<TlsVersion, E> {
                match v.trim() {
                    "1.2" => Ok(TlsVersion::V1_2),
                    "1.3" => Ok(TlsVersion::V1_3),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<TlsVersion, E> {
                self.visit_str(&v.to_string())
            }
        }
        deserializer.deserialize_any(Version)
    }
}

impl TlsConfig {
    /// The handshake deadline.
    pub fn handshake_timeout(&self) -> Duration {
        Duration::from_millis(self.handshake_timeout_ms)
    }

    /// The period of the files' modification check.
    pub fn reload_check(&self) -> Duration {
        Duration::from_millis(self.reload_check_ms)
    }

    /// Whether a certificate is configured (a TLS listener can be served).
    pub fn has_certificate(&self) -> bool {
        !self.cert_file.as_os_str().is_empty()
    }

    /// The files `[tls]` names, each with its key, in the order they are loaded.
    pub fn files(&self) -> Vec<(&'static str, &PathBuf)> {
        [
            (CERT_FILE_KEY, &self.cert_file),
            (KEY_FILE_KEY, &self.key_file),
            (CA_FILE_KEY, &self.ca_file),
        ]
        .into_iter()
        .filter(|(_, path)| !path.as_os_str().is_empty())
        .collect()
    }
}

impl VerifyPeer {
    /// The value as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Optional => "optional",
            Self::Required => "required",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_from_strings_and_numbers() {
        #[derive(Deserialize)]
        struct V {
            v: TlsVersion,
        }
        let parse = |text: &str| toml_value(text).map(|v: V| v.v);
        assert_eq!(parse("v = \"1.2\"").unwrap(), TlsVersion::V1_2);
        assert_eq!(parse("v = \"1.3\"").unwrap(), TlsVersion::V1_3);
        assert_eq!(parse("v = 1.3").unwrap(), TlsVersion::V1_3);
        assert!(parse("v = \"1.1\"").is_err());
    }

    fn toml_value<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, String> {
        config::Config::builder()
            .add_source(config::File::from_str(text, config::FileFormat::Toml))
            .build()
            .and_then(config::Config::try_deserialize)
            .map_err(|e| e.to_string())
    }
}
