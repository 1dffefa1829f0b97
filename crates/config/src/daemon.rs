//! `[daemon]`: how the long-running process behaves as a whole.

use serde::Deserialize;
use std::time::Duration;

/// Default for `daemon.shutdown_timeout_ms`.
pub const DEFAULT_SHUTDOWN_TIMEOUT_MS: u64 = 10_000;

/// `[daemon]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// Milliseconds a shutdown may spend draining (finishing commits, closing the store)
    /// before what is left is aborted; keep it below the supervisor's kill timeout
    /// (systemd `TimeoutStopSec`, Kubernetes `terminationGracePeriodSeconds`).
    pub shutdown_timeout_ms: u64,
    /// Resident memory, MiB, above which publishers are held back until it falls below:
    /// AMQP publishing connections are blocked, Kafka producers throttled (RabbitMQ's
    /// `vm_memory_high_watermark`); 0: 40% of the machine's memory, or of the cgroup's
    /// limit when it is lower.
    pub max_memory_mb: u64,
}

impl DaemonConfig {
    /// [`Self::shutdown_timeout_ms`] as a duration.
    pub fn shutdown_timeout(&self) -> Duration {
        Duration::from_millis(self.shutdown_timeout_ms)
    }
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self {
            shutdown_timeout_ms: DEFAULT_SHUTDOWN_TIMEOUT_MS,
            max_memory_mb: 0,
        }
    }
}
