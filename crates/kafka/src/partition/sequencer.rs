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
//! Large batches: a batch kept in a spill ([`crate::partition::log`]) is staged as its header alone;
//! the sequencer moves it like any other, in the same transaction, handing the spill's
//! reference from the stage entry to the log, and counts it against its byte budget by
//! its staged record, not its size.
//!
//! Transactions: a transactional batch opens its producer's transaction in the partition
//! (`open` records its first offset) and a marker staged by the transaction coordinator
//! ([`crate::coordinator::transactions`]) closes it, recording an aborted transaction when the marker
//! aborts; the marker also fences the producer's older epochs in the partition.
//!
//! The same task renews its lease (every third of `kafka.sequencer_lease_ms`) and applies
//! retention on a timer, so everything that writes the log is serialised in one place —
//! but for compaction ([`crate::partition::compaction`]), which works in a task of its own beside it,
//! for as long as it holds the lease, so that a long pass never delays sequencing (it
//! rewrites only batches below the newest, which no append touches).
//!
//! Balance: every third of the lease term each instance counts the live brokers and takes
//! its share, `ceil(partitions / live brokers)`: it claims unheld partitions while it holds
//! fewer, and hands over the partitions it holds beyond its share. A partition being handed
//! over refuses new produce requests (`NOT_LEADER_OR_FOLLOWER`), its sequencer moves what is
//! already staged (answering those producers), then releases the lease so an instance with
//! room claims it on its next round.

use crate::keys::{PartitionKeys, decode_i64, encode_i64};
use crate::metadata::brokers::Brokers;
use crate::metadata::settings::broker::BrokerSettings;
use crate::metadata::topics::{Partition, Topics};
use crate::partition::compaction::Compactor;
use crate::partition::leader_epochs;
use crate::partition::lease::Lease;
use crate::partition::log::{Log, LogError, Stored};
use crate::partition::producers::{ProducerState, Verdict};
use crate::partition::staged::{self, Waiter};
use crate::partition::waiters::{BatchOutcome, Waiters};
use crate::wire::batch::{BatchHeader, marker_commits, set_base_offset, set_leader_epoch};
use bytes::BytesMut;
use ferry_stage::Liveness;
use ferry_stage::{Delivery, MessageId, Spills, StageError, Wakeup, now_ms};
use ferry_store::{Database, StoreError, Transaction, TransactionError};
use ferry_telemetry::kafka as m;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Most staged bytes one sequencer transaction moves (well inside the 10 MB limit, which
/// counts the pop's clears and the log's writes). A batch kept in a spill counts by its
/// staged record (its header), as only that moves.
const MAX_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;
/// Staging tokens remembered per partition, to drop a batch staged twice by a retried
/// append whose first commit reported an unknown result.
const RECENT_TOKENS: usize = 65_536;
/// Most batches one retention (or DeleteRecords) transaction deletes.
const RETENTION_BATCH: usize = 512;
/// Most retention transactions in one pass (the next pass continues).
const RETENTION_ROUNDS: usize = 64;
/// How long a partition being handed over keeps sequencing after it began refusing produce
/// requests, so the batches of requests accepted just before are moved (and answered) here.
const HANDOFF_GRACE: Duration = Duration::from_millis(100);
/// Pause after a failed sequencer transaction.
const ERROR_PAUSE: Duration = Duration::from_millis(200);

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

/// Why DeleteRecords did not move a partition's log start offset.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DeleteRecordsError {
    /// This instance does not sequence the partition (or is handing it over).
    #[error("this instance is not the partition's leader")]
    NotLeader,
    /// The offset is beyond the high watermark, or negative and not -1.
    #[error("offset {offset} is outside the log (its high watermark is {high_watermark})")]
    OutOfRange {
        /// The offset asked for.
        offset: i64,
        /// The partition's high watermark.
        high_watermark: i64,
    },
    /// The store failed.
    #[error(transparent)]
    Failed(#[from] SequencerError),
}

impl DeleteRecordsError {
    /// The Kafka error code answering it.
    pub fn code(&self) -> i16 {
        match self {
            Self::NotLeader => ResponseError::NotLeaderOrFollower.code(),
            Self::OutOfRange { .. } => ResponseError::OffsetOutOfRange.code(),
            Self::Failed(_) => ResponseError::KafkaStorageError.code(),
        }
    }
}

/// What one DeleteRecords transaction did.
enum Trimmed {
    /// Deleted a full round of batches; more are below the offset.
    More,
    /// Done: the log start offset now.
    Done(i64),
    /// The offset is outside the log, whose high watermark is this.
    OutOfRange(i64),
    /// The lease belongs to someone else now.
    Lost,
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

    /// DeleteRecords: moves `partition`'s log start offset to `offset` (-1: the high
    /// watermark), deleting the batches that end before it, as its sequencer applies
    /// retention: in transactions that check the sequencer's lease (a conflicting read, so
    /// a takeover makes them fail) and read the bounds with conflicts (so an append
    /// committed meanwhile makes them retry). Only the partition's leader does it, as in
    /// Kafka. Returns the log start offset after it (the low watermark).
    ///
    /// # Errors
    /// [`DeleteRecordsError`].
    pub async fn delete_records(
        &self,
        partition: &Partition,
        offset: i64,
    ) -> Result<i64, DeleteRecordsError> {
        let epoch = self
            .shared
            .running
            .lock()
            .get(&(partition.topic_id, partition.index))
            .filter(|r| !r.handoff.is_cancelled())
            .map(|r| r.epoch)
            .ok_or(DeleteRecordsError::NotLeader)?;
        let shared = &self.shared;
        let keys = &partition.keys;
        loop {
            let round = shared
                .db
                .run(|tx| async move {
                    let now = now_ms();
                    let holder = (shared.node, epoch);
                    if !Lease::hold(&tx, &keys.lease(), holder, shared.liveness, now).await? {
                        return Ok(Trimmed::Lost);
                    }
                    let log = Log::new(keys);
                    let bounds = log.bounds(&tx, false).await?;
                    let to = if offset == -1 {
                        bounds.high_watermark
                    } else {
                        offset
                    };
                    if !(0..=bounds.high_watermark).contains(&to) {
                        return Ok(Trimmed::OutOfRange(bounds.high_watermark));
                    }
                    let spills = partition.stage.spills();
                    let deleted = log
                        .trim(&tx, &spills, RETENTION_BATCH, to, |entry, _| {
                            entry.last < to
                        })
                        .await?;
                    Ok::<_, SequencerError>(if deleted == RETENTION_BATCH {
                        Trimmed::More
                    } else {
                        Trimmed::Done(to.max(bounds.start))
                    })
                })
                .await?;
            match round {
                Trimmed::More => {}
                Trimmed::Done(start) => {
                    publish_bounds(&shared.db, partition).await;
                    return Ok(start);
                }
                Trimmed::OutOfRange(high_watermark) => {
                    return Err(DeleteRecordsError::OutOfRange {
                        offset,
                        high_watermark,
                    });
                }
                Trimmed::Lost => return Err(DeleteRecordsError::NotLeader),
            }
        }
    }

    /// Takes this instance's share of the partitions: claims unheld ones while it holds
    /// fewer than `ceil(partitions / live brokers)`, and hands over those it holds beyond
    /// that (the last ones in topic and index order). When the live brokers cannot be read,
    /// it claims every unheld partition and hands nothing over.
    pub async fn balance(&self) {
        let partitions: Vec<Partition> = self
            .shared
            .topics
            .all()
            .iter()
            .flat_map(|t| t.partitions.iter().cloned())
            .collect();
        let share = match self.shared.brokers.live().await {
            Ok(live) => partitions.len().div_ceil(live.len().max(1)),
            Err(e) => {
                warn!(error = %e, "cannot read the live brokers; claiming every unheld partition");
                usize::MAX
            }
        };
        let mut local: Vec<&Partition> = partitions
            .iter()
            .filter(|p| self.is_local(p.topic_id, p.index))
            .collect();
        for partition in &partitions {
            if local.len() >= share {
                break;
            }
            if !self.is_local(partition.topic_id, partition.index) && self.claim(partition).await {
                local.push(partition);
            }
        }
        if local.len() > share {
            local.sort_by_key(|p| (p.topic_id, p.index));
            for partition in &local[share..] {
                self.hand_over(partition);
            }
        }
    }

    /// Starts handing `partition` over: new produce requests for it are refused from now
    /// on, and its sequencer releases the lease once it has moved what is staged.
    fn hand_over(&self, partition: &Partition) {
        if let Some(handoff) = self
            .shared
            .running
            .lock()
            .get(&(partition.topic_id, partition.index))
        {
            info!(topic = %partition.topic, partition = partition.index, "handing the partition over: this instance holds more than its share");
            handoff.handoff.cancel();
        }
    }

    /// Takes `partition`'s lease if no other live instance holds it, and starts its
    /// sequencer; returns whether it did (false when this instance sequences it already).
    pub async fn claim(&self, partition: &Partition) -> bool {
        let id = (partition.topic_id, partition.index);
        if self.shared.shutdown.is_cancelled() || self.shared.running.lock().contains_key(&id) {
            return false;
        }
        let shared = &self.shared;
        let keys = &partition.keys;
        let claimed = shared
            .db
            .run(|tx| async move {
                let claimed =
                    Lease::claim(&tx, &keys.lease(), shared.node, shared.liveness, now_ms())
                        .await?;
                let Ok(lease) = claimed else {
                    return Ok::<_, SequencerError>(None);
                };
                // The new leader epoch begins where the log ends now.
                let bounds = Log::new(keys).bounds(&tx, false).await?;
                leader_epochs::begin_in(&tx, keys, lease.epoch, bounds.high_watermark).await?;
                Ok(Some(lease.epoch))
            })
            .await;
        match claimed {
            Ok(Some(epoch)) => {
                let handoff = CancellationToken::new();
                let running = Running {
                    handoff: handoff.clone(),
                    epoch,
                };
                if shared.running.lock().insert(id, running).is_some() {
                    return false;
                }
                metrics::gauge!(m::SEQUENCERS).increment(1.0);
                info!(topic = %partition.topic, partition = partition.index, epoch, "sequencing partition");
                let task = Sequencer {
                    shared: shared.clone(),
                    partition: partition.clone(),
                    epoch,
                    handoff,
                    recent_tokens: RecentTokens::default(),
                };
                shared.tasks.lock().spawn(task.run());
                true
            }
            Ok(None) => false,
            Err(e) => {
                warn!(topic = %partition.topic, partition = partition.index, error = %e, "cannot claim the sequencer lease");
                false
            }
        }
    }

    /// Balances (claiming partitions of new topics from other instances and leases that
    /// lapsed, handing over what is beyond this instance's share) every third of the lease
    /// until shutdown; then waits for the sequencers to stop and release their leases so
    /// another instance can take over at once.
    pub async fn run(self) {
        self.shared
            .liveness
            .renew_until(&self.shared.shutdown, || self.balance())
            .await;
        let mut tasks = std::mem::take(&mut *self.shared.tasks.lock());
        while tasks.join_next().await.is_some() {}
    }
}

/// Staging tokens one sequencer has seen recently.
#[derive(Default)]
struct RecentTokens {
    /// In arrival order, to forget the oldest.
    order: VecDeque<Waiter>,
    /// For lookup.
    set: HashSet<Waiter>,
}

impl RecentTokens {
    fn contains(&self, id: Waiter) -> bool {
        self.set.contains(&id)
    }

    fn insert(&mut self, id: Waiter) {
        if self.set.insert(id) {
            self.order.push_back(id);
            if self.order.len() > RECENT_TOKENS
                && let Some(old) = self.order.pop_front()
            {
                self.set.remove(&old);
            }
        }
    }
}

/// What became of one staged batch.
#[derive(Debug, Clone)]
struct Sequenced {
    /// Who waits for it.
    waiter: Waiter,
    /// Its place in the stage.
    staged: MessageId,
    /// Its outcome.
    outcome: BatchOutcome,
    /// Bytes and records written to the log, when it was.
    written: Option<(i64, i32)>,
}

/// The log's state as one sequencer transaction advances it.
struct Cursor {
    /// The next offset.
    high_watermark: i64,
    /// The newest timestamp so far.
    newest: i64,
    /// Idempotent producers' states, as read and as changed.
    producers: HashMap<i64, Option<ProducerState>>,
    /// Where each transactional producer's open transaction begins, as read and as changed.
    open: HashMap<i64, Option<i64>>,
    /// Producers whose `open` entry changed.
    opened_or_closed: HashSet<i64>,
    /// Tokens sequenced in this transaction.
    seen: HashSet<Waiter>,
    /// Tokens of earlier attempts whose commit was reported unknown, with the stage entries
    /// they took.
    uncertain: HashMap<Waiter, Vec<MessageId>>,
}

/// Producers' states in a partition, and where transactional producers' open
/// transactions begin, by producer id.
type ProducerStates = (
    HashMap<i64, Option<ProducerState>>,
    HashMap<i64, Option<i64>>,
);

/// What one sequencer transaction did.
enum Step {
    /// Moved batches.
    Moved {
        /// Per staged batch, in order.
        outcomes: Vec<Sequenced>,
        /// The high watermark after the transaction.
        high_watermark: i64,
    },
    /// Nothing staged; wait on this.
    Idle(Wakeup),
    /// The lease belongs to someone else now.
    Lost,
}

/// The sequencer of one partition.
struct Sequencer {
    /// What all sequencers share.
    shared: Arc<Shared>,
    /// The partition.
    partition: Partition,
    /// The lease epoch this sequencer holds.
    epoch: i64,
    /// Fired when the partition is to be handed over to another instance.
    handoff: CancellationToken,
    /// Staging tokens already sequenced.
    recent_tokens: RecentTokens,
}

impl Sequencer {
    async fn run(mut self) {
        let id = (self.partition.topic_id, self.partition.index);
        let renew_every = self.shared.liveness.renew_every();
        let mut next_retention = tokio::time::Instant::now() + self.shared.retention_interval;
        let mut handoff_since = None;
        publish_bounds(&self.shared.db, &self.partition).await;
        // The compactor works beside this task for as long as it holds the lease.
        let stop_compactor = self.shared.shutdown.child_token();
        let compactor = Compactor::new(
            self.shared.db.clone(),
            self.partition.clone(),
            (self.shared.node, self.epoch),
            self.shared.max_decompressed,
        );
        let compactor = tokio::spawn(compactor.run(
            self.shared.topics.clone(),
            self.shared.broker_settings.clone(),
            self.shared.compaction_interval,
            stop_compactor.clone(),
        ));
        loop {
            if self.shared.shutdown.is_cancelled() {
                break;
            }
            let handing_off = self
                .handoff
                .is_cancelled()
                .then(|| *handoff_since.get_or_insert_with(tokio::time::Instant::now));
            if handing_off.is_some_and(|since| since.elapsed() >= renew_every) {
                // Batches keep arriving: the next holder sequences the rest.
                break;
            }
            if tokio::time::Instant::now() >= next_retention {
                self.retention().await;
                next_retention = tokio::time::Instant::now() + self.shared.retention_interval;
            }
            let (step, committed_earlier) = match self.step().await {
                Ok(done) => done,
                Err(e) => {
                    warn!(topic = %self.partition.topic, partition = self.partition.index, error = %e, "sequencer transaction failed; retrying");
                    tokio::select! {
                        () = self.shared.shutdown.cancelled() => break,
                        () = tokio::time::sleep(ERROR_PAUSE) => {}
                    }
                    continue;
                }
            };
            self.answer(committed_earlier);
            match step {
                Step::Moved {
                    outcomes,
                    high_watermark,
                } => {
                    self.answer(outcomes);
                    metrics::gauge!(m::PARTITION_HIGH_WATERMARK, m::LABEL_TOPIC => self.partition.topic.to_string(), m::LABEL_PARTITION => self.partition.index.to_string())
                        .set(high_watermark as f64);
                }
                Step::Idle(wakeup) => {
                    let mut wake_by =
                        (tokio::time::Instant::now() + renew_every).min(next_retention);
                    if let Some(since) = handing_off {
                        if since.elapsed() >= HANDOFF_GRACE {
                            break;
                        }
                        wake_by = wake_by.min(since + HANDOFF_GRACE);
                    }
                    tokio::select! {
                        () = self.shared.shutdown.cancelled() => break,
                        _ = wakeup.wait() => {}
                        () = tokio::time::sleep_until(wake_by) => {}
                        () = self.handoff.cancelled(), if handing_off.is_none() => {}
                    }
                }
                Step::Lost => {
                    info!(topic = %self.partition.topic, partition = self.partition.index, "sequencer lease taken over; stopping");
                    break;
                }
            }
        }
        stop_compactor.cancel();
        if let Err(e) = compactor.await {
            warn!(topic = %self.partition.topic, partition = self.partition.index, error = %e, "the compactor task failed");
        }
        if self.shared.shutdown.is_cancelled() || self.handoff.is_cancelled() {
            self.release().await;
        }
        // Only now may this instance claim the partition again.
        self.shared.running.lock().remove(&id);
        metrics::gauge!(m::SEQUENCERS).decrement(1.0);
    }

    /// One transaction: check and renew the lease, move staged batches into the log.
    ///
    /// Also returns the outcomes of earlier attempts that committed although their commit
    /// was reported unknown (`commit_unknown_result`): their batches left the stage, so the
    /// attempt that finally commits does not see them, yet their producers wait. An earlier
    /// attempt that did not commit left its batches at the head, where the final attempt
    /// takes them again, so its outcomes are superseded by token.
    async fn step(&self) -> Result<(Step, Vec<Sequenced>), SequencerError> {
        let recent = &self.recent_tokens;
        let latest: Mutex<Vec<Sequenced>> = Mutex::default();
        let uncertain: Mutex<Vec<Sequenced>> = Mutex::default();
        let step = self
            .shared
            .db
            .run(|tx| {
                let (latest, uncertain) = (&latest, &uncertain);
                async move {
                    let previous = std::mem::take(&mut *latest.lock());
                    if tx.maybe_committed() {
                        uncertain.lock().extend(previous);
                    }
                    let now = now_ms();
                    if !self.hold_lease(&tx, now).await? {
                        return Ok::<_, SequencerError>(Step::Lost);
                    }
                    let stage = &self.partition.stage;
                    let staged = stage
                        .pop_exclusive_in(&tx, self.shared.batch, MAX_TRANSACTION_BYTES)
                        .await?;
                    if staged.is_empty() {
                        return Ok(Step::Idle(stage.watch_ready(&tx)));
                    }
                    let log = Log::new(&self.partition.keys);
                    let (bounds, newest) =
                        futures::try_join!(log.bounds(&tx, false), log.newest_timestamp(&tx))?;
                    let (producers, open) = self.producer_states(&tx, &staged).await?;
                    let spills = stage.spills();
                    let mut cursor = Cursor {
                        high_watermark: bounds.high_watermark,
                        newest,
                        producers,
                        open,
                        opened_or_closed: HashSet::new(),
                        seen: HashSet::new(),
                        uncertain: uncertain.lock().iter().fold(
                            HashMap::new(),
                            |mut by_waiter: HashMap<_, Vec<_>>, o| {
                                by_waiter.entry(o.waiter).or_default().push(o.staged);
                                by_waiter
                            },
                        ),
                    };
                    let outcomes: Vec<Sequenced> = staged
                        .into_iter()
                        .filter_map(|d| self.sequence(&tx, &log, &spills, d, recent, &mut cursor))
                        .collect();
                    for (id, state) in &cursor.producers {
                        if let Some(state) = state {
                            tx.set(&self.partition.keys.producer(*id), state.encode());
                        }
                    }
                    for id in &cursor.opened_or_closed {
                        let key = self.partition.keys.open_transaction(*id);
                        match cursor.open.get(id).copied().flatten() {
                            Some(first) => tx.set(&key, &encode_i64(first)),
                            None => tx.clear(&key),
                        }
                    }
                    let high_watermark = cursor.high_watermark;
                    log.seal(&tx, high_watermark, cursor.newest);
                    latest.lock().clone_from(&outcomes);
                    Ok(Step::Moved {
                        outcomes,
                        high_watermark,
                    })
                }
            })
            .await?;
        // An earlier attempt is superseded where the final one took the same stage entry.
        let taken_now: HashSet<MessageId> = match &step {
            Step::Moved { outcomes, .. } => outcomes.iter().map(|o| o.staged).collect(),
            _ => HashSet::new(),
        };
        let mut earlier = uncertain.into_inner();
        earlier.retain(|o| !taken_now.contains(&o.staged));
        Ok((step, earlier))
    }

    /// Decides what becomes of one staged batch within the transaction, writing it to the
    /// log at the cursor when it is new; `None` for an undecodable staged record. A batch
    /// kept in a spill (its staged record holds only its header) moves into the log by
    /// reference: the log takes a reference to the spill from `spills` as the popped stage
    /// entry drops its own.
    fn sequence(
        &self,
        tx: &Transaction,
        log: &Log<'_>,
        spills: &Spills,
        delivery: Delivery,
        recent: &RecentTokens,
        cursor: &mut Cursor,
    ) -> Option<Sequenced> {
        let staged = delivery.id;
        let spill = delivery.envelope.spill;
        // The store's read buffer, rewritten in place and written to the log as slices of it.
        let mut body = BytesMut::from(delivery.body);
        let Some(waiter) = staged::waiter(&body) else {
            warn!(topic = %self.partition.topic, "dropping an undecodable staged record");
            return None;
        };
        let skipped = |outcome| {
            Some(Sequenced {
                waiter,
                staged,
                outcome,
                written: None,
            })
        };
        // A token staged twice is an append retried after an unknown commit result whose
        // first attempt did commit: sequence it once, as its oldest copy. That copy was
        // sequenced earlier in this transaction, or by an earlier transaction: one that
        // answered it (the token is recent), or an attempt reported unknown that took an
        // older copy — which, had the attempt not committed, would still be staged ahead
        // of this one and seen first here.
        let first_here = cursor.seen.insert(waiter);
        let sequenced_before = recent.contains(waiter)
            || cursor
                .uncertain
                .get(&waiter)
                .is_some_and(|ids| ids.iter().any(|id| *id < staged));
        if sequenced_before || !first_here {
            return skipped(BatchOutcome::Duplicate(-1));
        }
        let batch = staged::batch_mut(&mut body);
        let Ok(header) = BatchHeader::parse(batch) else {
            return skipped(BatchOutcome::Refused(ResponseError::CorruptMessage));
        };
        let base = cursor.high_watermark;
        let producer = header.producer_id;
        if header.is_control() {
            let state = cursor.producers.get(&producer).cloned().flatten();
            let fenced = ProducerState::at_epoch(state, header.producer_epoch);
            cursor.producers.insert(producer, Some(fenced));
            if let Some(first) = cursor.open.get(&producer).copied().flatten() {
                cursor.open.insert(producer, None);
                cursor.opened_or_closed.insert(producer);
                if marker_commits(batch) == Some(false) {
                    tx.set(
                        &self.partition.keys.aborted(base, producer),
                        &encode_i64(first),
                    );
                }
            }
        } else if header.is_idempotent() {
            let state = cursor.producers.get(&producer).cloned().flatten();
            match ProducerState::judge(state.as_ref(), &header) {
                Verdict::Append => {
                    let after = ProducerState::after(state, &header, base);
                    cursor.producers.insert(producer, Some(after));
                }
                Verdict::Duplicate(at) => return skipped(BatchOutcome::Duplicate(at)),
                Verdict::Refuse(e) => return skipped(BatchOutcome::Refused(e)),
            }
            if header.is_transactional() && cursor.open.get(&producer).copied().flatten().is_none()
            {
                cursor.open.insert(producer, Some(base));
                cursor.opened_or_closed.insert(producer);
            }
        }
        let leader_epoch = leader_epochs::leader_epoch(self.epoch);
        let batch = match spill {
            Some(spill) => Stored::Spilled {
                spill,
                leader_epoch,
            },
            None => {
                set_base_offset(batch, base);
                set_leader_epoch(batch, leader_epoch);
                Stored::Inline(body.freeze().slice(staged::HEADER_LEN..))
            }
        };
        let written = header.size as i64;
        cursor.newest = log.append(tx, spills, base, batch, &header, cursor.newest);
        cursor.high_watermark += header.offset_span();
        Some(Sequenced {
            waiter,
            staged,
            outcome: BatchOutcome::Appended(base),
            written: Some((written, header.record_count)),
        })
    }

    /// Checks the lease is still this sequencer's (a conflicting read: a takeover makes
    /// this transaction fail) and renews it once a third of its term has passed.
    async fn hold_lease(&self, tx: &Transaction, now: u64) -> Result<bool, SequencerError> {
        let holder = (self.shared.node, self.epoch);
        let key = self.partition.keys.lease();
        Ok(Lease::hold(tx, &key, holder, self.shared.liveness, now).await?)
    }

    /// The stored state of every idempotent producer among `staged`, and where the open
    /// transaction of each transactional one begins.
    async fn producer_states(
        &self,
        tx: &Transaction,
        staged: &[Delivery],
    ) -> Result<ProducerStates, SequencerError> {
        let headers: Vec<BatchHeader> = staged
            .iter()
            .filter_map(|d| BatchHeader::parse(staged::batch(&d.body)).ok())
            .filter(BatchHeader::is_idempotent)
            .collect();
        let ids: HashSet<i64> = headers.iter().map(|h| h.producer_id).collect();
        let transactional: HashSet<i64> = headers
            .iter()
            .filter(|h| h.is_transactional())
            .map(|h| h.producer_id)
            .collect();
        let keys = &self.partition.keys;
        let states = ids.into_iter().map(|id| async move {
            let v = tx.get(&keys.producer(id), false).await?;
            Ok::<_, StoreError>((id, v.as_deref().and_then(ProducerState::decode)))
        });
        let open = transactional.into_iter().map(|id| async move {
            let v = tx.get(&keys.open_transaction(id), false).await?;
            Ok::<_, StoreError>((id, v.as_deref().map(|v| decode_i64(Some(v)))))
        });
        let (states, open) = futures::try_join!(
            futures::future::try_join_all(states),
            futures::future::try_join_all(open)
        )?;
        Ok((states.into_iter().collect(), open.into_iter().collect()))
    }

    /// Answers the waiting producers of committed outcomes and counts them.
    fn answer(&mut self, outcomes: Vec<Sequenced>) {
        if outcomes.is_empty() {
            return;
        }
        let topic = self.partition.topic.to_string();
        metrics::histogram!(m::SEQUENCER_BATCH_SIZE).record(outcomes.len() as f64);
        let (mut bytes, mut records, mut duplicates) = (0i64, 0i64, 0u64);
        for Sequenced {
            waiter,
            outcome,
            written,
            ..
        } in outcomes
        {
            self.recent_tokens.insert(waiter);
            if let Some((b, r)) = written {
                bytes += b;
                records += i64::from(r);
            }
            if matches!(outcome, BatchOutcome::Duplicate(_)) {
                duplicates += 1;
            }
            self.shared.waiters.answer(waiter, outcome);
        }
        metrics::counter!(m::PRODUCED_BYTES_TOTAL, m::LABEL_TOPIC => topic.clone())
            .increment(bytes as u64);
        metrics::counter!(m::PRODUCED_RECORDS_TOTAL, m::LABEL_TOPIC => topic.clone())
            .increment(records as u64);
        if duplicates > 0 {
            metrics::counter!(m::DUPLICATE_BATCHES_TOTAL, m::LABEL_TOPIC => topic)
                .increment(duplicates);
        }
    }

    /// Deletes batches past the topic's retention, in bounded transactions (none for a
    /// topic whose `cleanup.policy` is `compact` alone, as in Kafka).
    async fn retention(&self) {
        let Some(topic) = self.shared.topics.get(&self.partition.topic) else {
            return;
        };
        let defaults = self.shared.broker_settings.topic_defaults();
        let config = defaults.resolve(&topic.meta.config);
        if !config.cleanup_policy().deletes() {
            return;
        }
        let retention_ms = defaults.retention_ms(&config);
        let retention_bytes = defaults.retention_bytes(&config);
        if retention_ms < 0 && retention_bytes < 0 {
            return;
        }
        for _ in 0..RETENTION_ROUNDS {
            let deleted = self
                .shared
                .db
                .run(|tx| async move {
                    let now = now_ms() as i64;
                    if !self.hold_lease(&tx, now as u64).await? {
                        return Ok(0);
                    }
                    let log = Log::new(&self.partition.keys);
                    let spills = self.partition.stage.spills();
                    let n = log
                        .trim(&tx, &spills, RETENTION_BATCH, i64::MIN, |entry, size| {
                            (retention_ms >= 0
                                && entry.max_timestamp < now.saturating_sub(retention_ms))
                                || (retention_bytes >= 0 && size > retention_bytes)
                        })
                        .await?;
                    Ok::<_, SequencerError>(n)
                })
                .await;
            match deleted {
                Ok(n) if n == RETENTION_BATCH => continue,
                Ok(_) => break,
                Err(e) => {
                    warn!(topic = %self.partition.topic, partition = self.partition.index, error = %e, "retention failed");
                    break;
                }
            }
        }
        publish_bounds(&self.shared.db, &self.partition).await;
    }

    /// Lets the lease lapse now, so another instance need not wait for its term.
    async fn release(&self) {
        let keys = &self.partition.keys;
        let (node, epoch) = (self.shared.node, self.epoch);
        let released = self
            .shared
            .db
            .run(|tx| async move { Lease::release(&tx, &keys.lease(), (node, epoch)).await })
            .await;
        if let Err(e) = released {
            warn!(topic = %self.partition.topic, partition = self.partition.index, error = %e, "cannot release the sequencer lease");
        }
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

/// A partition's leader as Metadata names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leader {
    /// The node holding its sequencer lease.
    pub node: i32,
    /// Its leader epoch ([`leader_epochs`]).
    pub epoch: i32,
}

/// The leader of every partition of `keys` for Metadata answers (`None` where no live
/// sequencer holds the lease).
///
/// # Errors
/// The store's error.
pub async fn leaders(
    db: &Database,
    keys: &[PartitionKeys],
) -> Result<Vec<Option<Leader>>, SequencerError> {
    let tx = db.begin()?;
    let now = now_ms();
    let reads = keys.iter().map(|k| {
        let tx = tx.clone();
        async move {
            let lease = Lease::read(&tx, &k.lease(), true).await?;
            Ok(lease.and_then(|l| {
                Lease::holder(Some(l), now).map(|node| Leader {
                    node,
                    epoch: leader_epochs::leader_epoch(l.epoch),
                })
            }))
        }
    });
    futures::future::try_join_all(reads).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_tokens_forget_the_oldest() {
        let mut r = RecentTokens::default();
        let waiter = |token| Waiter {
            incarnation: 1,
            token,
        };
        for t in 0..=RECENT_TOKENS as u64 {
            r.insert(waiter(t));
        }
        assert!(!r.contains(waiter(0)));
        assert!(r.contains(waiter(RECENT_TOKENS as u64)));
    }
}
