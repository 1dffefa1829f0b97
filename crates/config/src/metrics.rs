//! `[metrics]`: where Ferry serves Prometheus metrics and its health endpoints, over HTTP
//! or HTTPS.

use serde::Deserialize;

/// The key path of [`MetricsConfig::listen`], as errors and environment overrides name it.
pub const LISTEN_KEY: &str = "metrics.listen";

/// The key path of [`MetricsConfig::tls`].
pub const TLS_KEY: &str = "metrics.tls";

/// Default for `metrics.listen`.
pub const DEFAULT_METRICS_LISTEN: &str = "0.0.0.0:9464";

/// `[metrics]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// `host:port` of the HTTP server for `/metrics`, `/healthz` and `/readyz`; a port of its
    /// own so scrapes and probes never queue behind broker traffic.
    pub listen: String,
    /// Whether the server speaks HTTPS with the certificate of `[tls]` (client
    /// certificates per `tls.verify_peer`) instead of plain HTTP.
    pub tls: bool,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_METRICS_LISTEN.to_owned(),
            tls: false,
        }
    }
}
