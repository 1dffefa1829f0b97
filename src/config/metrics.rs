//! `[metrics]`: where Ferry serves Prometheus metrics and its health endpoints.

use serde::Deserialize;

/// The key path of [`MetricsConfig::listen`], as errors and environment overrides name it.
pub const LISTEN_KEY: &str = "metrics.listen";

/// Default for `metrics.listen`.
pub const DEFAULT_METRICS_LISTEN: &str = "0.0.0.0:9464";

/// `[metrics]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsConfig {
    /// `host:port` of the HTTP server for `/metrics`, `/healthz` and `/readyz`; a port of its
    /// own so scrapes and probes never queue behind broker traffic.
    pub listen: String,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_METRICS_LISTEN.to_owned(),
        }
    }
}
