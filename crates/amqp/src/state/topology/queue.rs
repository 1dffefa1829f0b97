//! A queue: its declaration, the stage that holds its messages, and what this Ferry
//! instance knows about its use (consumers, last use), which auto-delete, exclusive
//! consumers, `if-unused` and `x-expires` act on.

use super::args::QueueArgs;
use ferry_stage::{DeadLetterReason, Stage};
use ferry_telemetry::amqp as metric;
use parking_lot::Mutex;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// A queue's declaration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSpec {
    /// Whether it survives a restart.
    pub durable: bool,
    /// The connection (its lease holder) that owns it exclusively; `None`: shared.
    pub exclusive_owner: Option<u64>,
    /// Whether it is deleted when its last consumer goes.
    pub auto_delete: bool,
    /// The recognised arguments.
    pub args: QueueArgs,
    /// The lease holder whose death removes a transient queue (0: durable).
    pub owner: u64,
}

/// A queue, shared by every channel that uses it.
#[derive(Debug)]
pub struct Queue {
    /// Its name.
    pub name: String,
    /// Its virtual host.
    pub vhost: String,
    /// Its declaration.
    pub spec: QueueSpec,
    /// The stage holding its messages.
    pub stage: Stage,
    /// The hidden stage its dead-lettered messages wait in until the dead-letter router
    /// republishes them through `x-dead-letter-exchange`.
    pub dead_letter_stage: Option<Stage>,
    /// Cancelled when the queue is deleted: consumers get basic.cancel, background tasks
    /// for the queue stop.
    pub deleted: CancellationToken,
    /// Use of the queue on this instance.
    pub local: Mutex<LocalUse>,
}

/// What this instance knows about a queue's use.
#[derive(Debug)]
pub struct LocalUse {
    /// Consumers registered on this instance.
    pub consumers: usize,
    /// Whether one of them consumes exclusively.
    pub exclusive_consumer: bool,
    /// Whether it ever had a consumer (auto-delete acts only after the first one).
    pub had_consumer: bool,
    /// The last declare, consume or get, for `x-expires`.
    pub last_used: Instant,
}

impl Queue {
    /// Whether it was declared with `x-queue-type` `quorum`.
    pub(crate) fn is_quorum(&self) -> bool {
        self.spec.args.queue_type == super::args::QueueType::Quorum
    }

    /// A queue over `stage`.
    pub fn new(
        name: String,
        vhost: String,
        spec: QueueSpec,
        stage: Stage,
        dead_letter_stage: Option<Stage>,
    ) -> Self {
        Self {
            name,
            vhost,
            spec,
            stage,
            dead_letter_stage,
            deleted: CancellationToken::new(),
            local: Mutex::new(LocalUse {
                consumers: 0,
                exclusive_consumer: false,
                had_consumer: false,
                last_used: Instant::now(),
            }),
        }
    }

    /// The `vhost` and `queue` labels of its metrics.
    pub(crate) fn labels(&self) -> [(&'static str, String); 2] {
        [
            (metric::LABEL_VHOST, self.vhost.clone()),
            (metric::LABEL_QUEUE, self.name.clone()),
        ]
    }

    /// Exports the queue's counters at 0 (the dead-letter counter for every reason when
    /// it has a dead-letter exchange), so `increase(...)` sees its first event; called
    /// once the queue is open on this instance (loaded at start or declared).
    pub(crate) fn export_counters(&self) {
        let labels = self.labels();
        for name in [
            metric::PUBLISHED_TOTAL,
            metric::DELIVERED_TOTAL,
            metric::REDELIVERED_TOTAL,
            metric::ACKS_TOTAL,
            metric::NACKS_TOTAL,
        ] {
            metrics::counter!(name, &labels).increment(0);
        }
        if self.dead_letter_stage.is_some() {
            for reason in DeadLetterReason::ALL {
                let mut labels = labels.to_vec();
                labels.push((metric::LABEL_REASON, reason.as_str().to_owned()));
                metrics::counter!(metric::DEAD_LETTERED_TOTAL, &labels).increment(0);
            }
        }
    }

    /// Whether `connection` may use it (it is not exclusive to another connection).
    pub(crate) fn accessible_by(&self, connection: u64) -> bool {
        self.spec
            .exclusive_owner
            .is_none_or(|owner| owner == connection)
    }

    /// Notes a use (declare, consume, get) for `x-expires`.
    pub(crate) fn touch(&self) {
        self.local.lock().last_used = Instant::now();
    }

    /// Consumers on this instance.
    pub fn consumers(&self) -> usize {
        self.local.lock().consumers
    }

    /// Publishes the consumer gauge.
    pub(crate) fn publish_consumers(&self, consumers: usize) {
        metrics::gauge!(metric::CONSUMERS, &self.labels()).set(consumers as f64);
    }
}
