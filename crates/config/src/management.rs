//! `[management]`: where Ferry serves its RabbitMQ-compatible management HTTP API
//! (`docs/management.md`), over HTTPS whenever `[tls]` has a certificate.

use serde::Deserialize;

/// The key path of [`ManagementConfig::listen`], as errors and environment overrides name it.
pub const LISTEN_KEY: &str = "management.listen";

/// Default for `management.listen`: RabbitMQ's management port (its HTTPS port is 15671).
pub const DEFAULT_MANAGEMENT_LISTEN: &str = "0.0.0.0:15672";

/// `[management]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ManagementConfig {
    /// `host:port` of the management HTTP API; "" turns it off. It speaks HTTPS with the
    /// certificate of `[tls]` when `tls.cert_file` is set, plain HTTP otherwise.
    pub listen: String,
}

impl Default for ManagementConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_MANAGEMENT_LISTEN.to_owned(),
        }
    }
}
