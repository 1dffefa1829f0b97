//! Partition sequencers: the one writer of each partition log.
//!
//! Producers append batches to a partition's stage (versionstamped, conflict-free, from
//! any instance). The partition's sequencer — the holder of a lease in the store, fenced by
//! an epoch — moves them into the log: in ONE transaction it reads the lease (a new holder
//! bumps the epoch, so a stale holder's transaction conflicts and fails), pops up to
//! `kafka.sequencer_batch` staged batches (the seeds' `pop_k`), checks idempotent
//! producers' sequences, rewrites each batch's base offset to the next dense offset,
//! writes it to the log and advances the high watermark. After the commit it answers the
//! waiting produce requests ([`Waiters`]); the high-watermark write wakes long-polling
//! fetchers through their watches. An idle sequencer sleeps on a watch of the stage.
//!
//! The same task renews its lease (every third of `kafka.sequencer_lease_ms`) and applies
//! retention on a timer, so everything that writes the log is serialised in one place —
//! but for compaction ([`crate::partition::compaction`]), which works in a task of its own beside it,
//! for as long as it holds the lease, so that a long pass never delays sequencing (it
//! rewrites only batches below the newest, which no append touches).
//!
//! Modules, by job: [`append`] (the loop of one partition's sequencer), [`retention`] (the
//! deletions it makes on a timer), [`delete_records`] (the deletions a client asks for)
//! and [`balance`] (which instance sequences which partition, and who leads each).

mod append;
mod balance;
mod delete_records;
mod retention;

pub(crate) use balance::Leader;
pub(crate) use delete_records::DeleteRecordsError;

use crate::keys::PartitionKeys;
use crate::metadata::brokers::Brokers;
use crate::metadata::settings::broker::BrokerSettings;
use crate::metadata::topics::{Partition, Topics};
use crate::partition::lease::Lease;
use crate::partition::log::{Log, LogError};
use crate::partition::waiters::Waiters;
use ferry_stage::Liveness;
use ferry_stage::StageError;
use ferry_store::{Database, StoreError, Transaction, TransactionError};
use ferry_telemetry::kafka as m;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Why the sequencer machinery failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SequencerError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The stage failed.
    #[error(transparent)]
    Stage(StageError),
    /// The log holds something undecodable.
    #[error(transparent)]
    Log(LogError),
}

impl TransactionError for SequencerError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) => Some(e),
            Self::Stage(StageError::Store(e)) => Some(e),
            Self::Log(LogError::Store(e)) => Some(e),
            _ => None,
        }
    }
}

impl From<StageError> for SequencerError {
    fn from(e: StageError) -> Self {
        Self::Stage(e)
    }
}

impl From<LogError> for SequencerError {
    fn from(e: LogError) -> Self {
        Self::Log(e)
    }
}

/// What the sequencers of one instance share.
struct Shared {
    /// The store.
    db: Database,
    /// The topics.
    topics: Topics,
    /// Produce requests waiting for their batches.
    waiters: Arc<Waiters>,
    /// This instance's node id.
    node: i32,
    /// How long a lease lasts unrenewed, and how often it is renewed.
    liveness: Liveness,
    /// Most staged batches per transaction.
    batch: usize,
    /// How often retention runs.
    retention_interval: Duration,
    /// How often compaction checks a compacted topic's partition.
    compaction_interval: Duration,
    /// Most bytes compaction decompresses a batch to.
    max_decompressed: usize,
    /// The dynamic broker settings, for the topic defaults (retention, compaction).
    broker_settings: BrokerSettings,
    /// The live instances, whose number sets this instance's share of the partitions.
    brokers: Brokers,
    /// Every partition this instance sequences, by (topic id, partition).
    running: Mutex<HashMap<(u64, i32), Running>>,
    /// The sequencer tasks.
    tasks: Mutex<JoinSet<()>>,
    /// Stops every sequencer.
    shutdown: CancellationToken,
}

/// A partition this instance sequences.
struct Running {
    /// Hands it over to another instance.
    handoff: CancellationToken,
    /// The epoch of the lease its sequencer holds.
    epoch: i64,
}

impl Shared {
    /// Checks that the lease of the partition at `keys` is still this instance's at
    /// `epoch` (a conflicting read: a takeover makes the transaction fail) and renews it
    /// once a third of its term has passed.
    async fn hold_lease(
        &self,
        tx: &Transaction,
        keys: &PartitionKeys,
        epoch: i64,
        now: u64,
    ) -> Result<bool, StoreError> {
        Lease::hold(tx, &keys.lease(), (self.node, epoch), self.liveness, now).await
    }
}

/// Settings of an instance's sequencers.
#[derive(Debug, Clone, Copy)]
pub struct SequencerSettings {
    /// This instance's node id.
    pub node: i32,
    /// How long a lease lasts unrenewed.
    pub lease: Duration,
    /// Most staged batches per transaction.
    pub batch: usize,
    /// How often retention runs.
    pub retention_interval: Duration,
    /// How often compaction checks a compacted topic's partition.
    pub compaction_interval: Duration,
    /// Most bytes compaction decompresses a batch to (`kafka.max_request_size`).
    pub max_decompressed: usize,
}

/// The sequencers of this instance; cheap to clone.
#[derive(Clone)]
pub struct Sequencers {
    /// Shared state.
    shared: Arc<Shared>,
}

impl Sequencers {
    /// Sequencers for the partitions of `topics`, sharing them with the other live
    /// `brokers`, applying the topic defaults of `broker_settings`, stopping on `shutdown`.
    pub fn new(
        db: Database,
        topics: Topics,
        waiters: Arc<Waiters>,
        brokers: Brokers,
        broker_settings: BrokerSettings,
        settings: SequencerSettings,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            shared: Arc::new(Shared {
                db,
                topics,
                waiters,
                node: settings.node,
                liveness: Liveness::new(settings.lease),
                batch: settings.batch,
                retention_interval: settings.retention_interval,
                compaction_interval: settings.compaction_interval,
                max_decompressed: settings.max_decompressed,
                broker_settings,
                brokers,
                running: Mutex::default(),
                tasks: Mutex::new(JoinSet::new()),
                shutdown,
            }),
        }
    }

    /// Whether this instance sequences the partition (and is not handing it over).
    pub fn is_local(&self, topic_id: u64, partition: i32) -> bool {
        self.shared
            .running
            .lock()
            .get(&(topic_id, partition))
            .is_some_and(|r| !r.handoff.is_cancelled())
    }
}

/// Sets `partition`'s offset and size gauges from the store.
async fn publish_bounds(db: &Database, partition: &Partition) {
    let Ok(tx) = db.begin() else {
        return;
    };
    let log = Log::new(&partition.keys);
    if let (Ok(bounds), Ok(size)) = (log.bounds(&tx, true).await, log.size(&tx).await) {
        let labels = [
            (m::LABEL_TOPIC, partition.topic.to_string()),
            (m::LABEL_PARTITION, partition.index.to_string()),
        ];
        metrics::gauge!(m::PARTITION_HIGH_WATERMARK, &labels).set(bounds.high_watermark as f64);
        metrics::gauge!(m::PARTITION_LOG_START_OFFSET, &labels).set(bounds.start as f64);
        metrics::gauge!(m::PARTITION_BYTES, &labels).set(size as f64);
    }
}
