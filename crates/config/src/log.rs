//! `[log]`: how much Ferry logs and in which format.

use serde::Deserialize;

/// How log lines are written to standard error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines, for a terminal or the systemd journal.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// Default for `log.level`.
pub const DEFAULT_LOG_LEVEL: &str = "info";
/// Default for `log.format`.
pub const DEFAULT_LOG_FORMAT: LogFormat = LogFormat::Text;

/// `[log]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A `tracing` filter (`info`, or `warn,ferry::stage=debug`); `RUST_LOG`, when set,
    /// replaces it so a running unit can be debugged without editing its file.
    pub level: String,
    /// `text` or `json`.
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            level: DEFAULT_LOG_LEVEL.to_owned(),
            format: DEFAULT_LOG_FORMAT,
        }
    }
}
