//! The free-disk alarm (`store.min_free_disk_mb`, RabbitMQ's `disk_free_limit`): a thread
//! reads the free space of the data directory's file system every [`PERIOD`] and raises the
//! alarm while it is below the limit, clearing it when space returns; each change is
//! logged once. The fronts read the alarm ([`super::EmbeddedDb::disk_alarm`]) and stop
//! taking publishes while it is raised (AMQP `connection.blocked`, Kafka produce errors),
//! but acknowledgements and consumers go on, so the space the queues hold can come back.
//! Tests pretend a free space through [`super::Faults::pretend_free_bytes`].

use super::Shared;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;
use tracing::{info, warn};

/// Time between two readings.
pub(super) const PERIOD: Duration = Duration::from_secs(1);

/// The last reading.
#[derive(Debug, Clone, Default)]
pub(super) struct Reading {
    /// Free bytes, when they could be read.
    pub(super) free_bytes: Option<u64>,
    /// Why publishers are blocked, while the free space is below the limit.
    pub(super) alarm: Option<String>,
}

/// What the monitor watches.
pub(super) struct Monitor {
    /// The data directory.
    pub(super) path: PathBuf,
    /// `store.min_free_disk_mb`, in bytes (0: no alarm).
    pub(super) min_free_bytes: u64,
}

impl Monitor {
    /// Reads the free space now (or what a test pretends).
    fn free_bytes(&self, shared: &Shared) -> Option<u64> {
        shared
            .faults
            .pretended_free_bytes()
            .or_else(|| ferry_telemetry::file_system::available_bytes(&self.path))
    }

    /// The alarm for `free` bytes.
    fn alarm(&self, free: Option<u64>) -> Option<String> {
        let free = free?;
        (free < self.min_free_bytes).then(|| {
            format!(
                "{} MiB free on the file system of {} is below store.min_free_disk_mb ({})",
                free >> 20,
                self.path.display(),
                self.min_free_bytes >> 20
            )
        })
    }

    /// Takes one reading into `shared`, logging a change of the alarm.
    pub(super) fn read(&self, shared: &Shared) {
        let free_bytes = self.free_bytes(shared);
        let alarm = self.alarm(free_bytes);
        let mut reading = shared.disk.lock();
        if reading.alarm != alarm {
            match &alarm {
                Some(reason) => warn!(%reason, "free disk alarm: blocking publishers"),
                None => info!("free disk alarm cleared: unblocking publishers"),
            }
        }
        *reading = Reading { free_bytes, alarm };
    }

    /// Reads every [`PERIOD`] until `stop` is dropped.
    pub(super) fn run(self, shared: &Arc<Shared>, stop: &Receiver<()>) {
        loop {
            self.read(shared);
            match stop.recv_timeout(PERIOD) {
                Err(RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }
}
