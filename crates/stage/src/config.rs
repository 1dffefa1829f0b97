//! `[stage]`, the stage's own section of `ferry.toml`: how long leases outlive a silent
//! holder. The daemon's configuration embeds it.

use serde::Deserialize;

/// `[stage]` section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StageConfig {
    /// Milliseconds a lease holder stays alive without renewing; after that its leased
    /// messages return to their stages. A restarted instance returns its earlier run's at
    /// once, so this matters for an instance that died for good.
    pub lease_ttl_ms: u64,
}

/// Default for `stage.lease_ttl_ms`.
pub const DEFAULT_LEASE_TTL_MS: u64 = 30_000;

impl StageConfig {
    /// `lease_ttl_ms` as a duration.
    pub fn lease_ttl(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.lease_ttl_ms)
    }
}

impl Default for StageConfig {
    fn default() -> Self {
        Self {
            lease_ttl_ms: DEFAULT_LEASE_TTL_MS,
        }
    }
}
