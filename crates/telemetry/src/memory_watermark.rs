//! The memory high-water mark (`daemon.max_memory_mb`, RabbitMQ's
//! `vm_memory_high_watermark`): a monitor reads the process's resident memory every
//! [`CHECK`] and raises an alarm when it goes above the mark, cleared once it is back under
//! 95% of it. Both fronts follow it: the
//! AMQP front blocks publishing connections (`connection.blocked`, the socket unread), the
//! Kafka front throttles producers (`throttle_time_ms`, the connection unread meanwhile).
//! Consumers are never held back, so a backlog drains.

use crate::process;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// How often the resident memory is read (a read of `/proc/self/statm` costs microseconds).
pub const CHECK: std::time::Duration = std::time::Duration::from_millis(200);
/// Share of the available memory the mark is when `daemon.max_memory_mb` is 0 (RabbitMQ's
/// default `vm_memory_high_watermark.relative`).
const DEFAULT_SHARE: f64 = 0.4;

/// Whether the process is above its mark; cheap to clone.
#[derive(Debug, Clone)]
pub struct MemoryWatermark {
    /// Why the alarm is raised, while it is.
    alarm: watch::Receiver<Option<String>>,
    /// The mark, in bytes (`u64::MAX` for a mark without a monitor).
    limit_bytes: u64,
}

impl MemoryWatermark {
    /// Starts the monitor of the mark `max_memory_mb` (0: [`DEFAULT_SHARE`] of the
    /// available memory), reading until `shutdown`.
    pub fn monitor(max_memory_mb: u64, shutdown: CancellationToken) -> Self {
        let limit_bytes = limit_bytes(max_memory_mb);
        let (raise, mut watermark) = Self::manual();
        watermark.limit_bytes = limit_bytes;
        info!(limit_mb = limit_bytes / MIB, "memory high-water mark");
        metrics::gauge!(crate::names::MEMORY_LIMIT_BYTES).set(limit_bytes as f64);
        tokio::spawn(watch_resident(limit_bytes, raise, shutdown));
        watermark
    }

    /// A mark with no monitor: the alarm is raised and cleared through the sender (tests,
    /// and fronts run without a daemon).
    pub fn manual() -> (watch::Sender<Option<String>>, Self) {
        let (raise, alarm) = watch::channel(None);
        let limit_bytes = u64::MAX;
        (raise, Self { alarm, limit_bytes })
    }

    /// A mark that is never reached.
    pub fn unlimited() -> Self {
        Self::manual().1
    }

    /// The mark, in bytes: resident memory above it raises the alarm.
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }

    /// Why publishers must be held back now, if they must.
    pub fn raised(&self) -> Option<String> {
        self.alarm.borrow().clone()
    }

    /// Resolves when the alarm is next raised or cleared (never, once nothing can change
    /// it any more).
    pub async fn changed(&mut self) {
        if self.alarm.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

const MIB: u64 = 1024 * 1024;

/// The mark in bytes for `daemon.max_memory_mb`.
pub fn limit_bytes(max_memory_mb: u64) -> u64 {
    if max_memory_mb > 0 {
        return max_memory_mb.saturating_mul(MIB);
    }
    process::available_memory_bytes().map_or(u64::MAX, |available| {
        (available as f64 * DEFAULT_SHARE) as u64
    })
}

/// Raises the alarm when the resident memory goes above `limit_bytes` and clears it once
/// it is back under [`CLEAR_BELOW`] of it (so a process hovering at the mark does not
/// block and unblock its publishers every check), until `shutdown`.
async fn watch_resident(
    limit_bytes: u64,
    alarm: watch::Sender<Option<String>>,
    shutdown: CancellationToken,
) {
    let mut ticks = tokio::time::interval(CHECK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let Some(resident) = process::resident_bytes() else {
            continue;
        };
        let raised = alarm.borrow().is_some();
        match next(raised, resident, limit_bytes) {
            Change::Raise(reason) => {
                warn!(reason = %reason, "memory alarm raised: holding back publishers");
                alarm.send_replace(Some(reason));
            }
            Change::Clear => {
                info!(resident_mb = resident / MIB, "memory alarm cleared");
                alarm.send_replace(None);
            }
            Change::Keep => {}
        }
        let raised = alarm.borrow().is_some();
        metrics::gauge!(crate::names::MEMORY_ALARM).set(if raised { 1.0 } else { 0.0 });
    }
}

/// Share of the mark the resident memory must fall under before a raised alarm clears.
const CLEAR_BELOW: f64 = 0.95;

/// What a reading does to the alarm.
#[derive(Debug, PartialEq, Eq)]
enum Change {
    /// Raise it, for this reason.
    Raise(String),
    /// Clear it.
    Clear,
    /// Leave it as it is.
    Keep,
}

/// What `resident` bytes do to the alarm (`raised` or not) of a mark of `limit_bytes`.
fn next(raised: bool, resident: u64, limit_bytes: u64) -> Change {
    if !raised && resident > limit_bytes {
        Change::Raise(format!(
            "{} MiB resident memory exceeds daemon.max_memory_mb ({})",
            resident / MIB,
            limit_bytes / MIB
        ))
    } else if raised && (resident as f64) < limit_bytes as f64 * CLEAR_BELOW {
        Change::Clear
    } else {
        Change::Keep
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_alarm_rises_above_the_mark_and_clears_under_95_percent_of_it() {
        assert_eq!(next(false, 100 * MIB, 100 * MIB), Change::Keep);
        assert_eq!(
            next(false, 101 * MIB, 100 * MIB),
            Change::Raise("101 MiB resident memory exceeds daemon.max_memory_mb (100)".into())
        );
        assert_eq!(next(true, 101 * MIB, 100 * MIB), Change::Keep);
        assert_eq!(next(true, 96 * MIB, 100 * MIB), Change::Keep);
        assert_eq!(next(true, 94 * MIB, 100 * MIB), Change::Clear);
        assert_eq!(next(false, 94 * MIB, 100 * MIB), Change::Keep);
    }

    #[test]
    fn zero_is_a_share_of_the_available_memory() {
        assert_eq!(limit_bytes(512), 512 * MIB);
        let available = process::available_memory_bytes().unwrap();
        let default = limit_bytes(0);
        assert!(
            default < available && default > available / 4,
            "{default} of {available}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_monitor_raises_the_alarm_above_the_mark() {
        let shutdown = CancellationToken::new();
        // One mebibyte: any process is above it.
        let mark = MemoryWatermark::monitor(1, shutdown.clone());
        let mut alarm = mark.alarm.clone();
        alarm.wait_for(Option::is_some).await.unwrap();
        assert!(mark.raised().unwrap().contains("daemon.max_memory_mb (1)"));
        shutdown.cancel();
    }
}
