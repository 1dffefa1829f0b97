//! The transaction coordinator (Kafka's KIP-98): transactional ids, their producers'
//! epochs, and the partitions and groups of each open transaction — all in the store, so
//! every step is one store transaction and any instance can coordinate any transactional
//! id (FindCoordinator names the instance asked).
//!
//! - InitProducerId with a transactional id gives the id's producer (allocated on first
//!   use) the next epoch, fencing older ones, and aborts the transaction the previous
//!   epoch left open.
//! - AddPartitionsToTxn and AddOffsetsToTxn record what the open transaction touches; a
//!   transactional batch is staged only when its partition was added at its producer's
//!   current epoch ([`Transactions::stage_produced`] checks it in the staging transaction,
//!   so a batch is ordered before or after an EndTxn, never across it).
//! - TxnOffsetCommit writes the group's offsets as pending, under the producer.
//! - EndTxn stages a commit or abort marker ([`crate::wire::batch::marker`]) for every partition
//!   of the transaction and, on commit, moves the pending offsets to the group's committed
//!   offsets — in the one store transaction that closes the transaction. The partitions'
//!   sequencers write the markers behind the transaction's batches; `read_committed`
//!   fetchers see the batches once the marker is in the log.
//! - A transaction open longer than its producer's `transaction.timeout.ms` is aborted
//!   with a bumped epoch (the producer is fenced), checked every [`EXPIRY_CHECK`].
//!
//! Group offsets written by a commit do not check the group's coordinator lease: the
//! transaction's commit is the decision, as the marker Kafka writes to the offsets topic.

use crate::coordinator::groups::store::{CommittedOffset, encode_offset};
use crate::keys::KafkaKeys;
use crate::metadata::topics::{Partition, Topics};
use crate::partition::large::LargeBatches;
use crate::partition::producers::allocate_in;
use crate::partition::staged;
use crate::partition::waiters::Waiters;
use crate::wire::batch::{BatchHeader, marker};
use ferry_stage::{NewMessage, StageError, now_ms};
use ferry_store::{Database, RangeOption, StoreError, Transaction, TransactionError};
use ferry_telemetry::kafka as m;
use foundationdb_tuple::{pack, unpack};
use kafka_protocol::ResponseError;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Format version of [`TxnState`] values.
const FORMAT: u16 = 1;
/// How often open transactions are checked against their timeouts.
pub(crate) const EXPIRY_CHECK: Duration = Duration::from_secs(1);
/// Deadline entries read per expiry transaction.
const EXPIRY_BATCH: usize = 1_000;
/// Most `transaction.timeout.ms` a producer may ask for (Kafka's
/// `transaction.max.timeout.ms` default).
const MAX_TIMEOUT_MS: i32 = 900_000;

/// Why a transaction step failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TxnError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Staging a marker failed.
    #[error(transparent)]
    Stage(#[from] StageError),
    /// The request is refused with this Kafka error.
    #[error("refused: {0:?}")]
    Refused(ResponseError),
    /// A stored value does not decode.
    #[error("the store holds a transaction state this ferry cannot decode ({0})")]
    Corrupt(String),
}

impl TransactionError for TxnError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) | Self::Stage(StageError::Store(e)) => Some(e),
            _ => None,
        }
    }
}

impl TxnError {
    /// The Kafka error code answered for it.
    pub fn code(&self) -> i16 {
        match self {
            Self::Refused(e) => e.code(),
            Self::Store(_) | Self::Stage(_) | Self::Corrupt(_) => {
                ResponseError::CoordinatorNotAvailable.code()
            }
        }
    }
}

/// A transactional producer as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnState {
    /// Its transactional id.
    pub transactional_id: String,
    /// Its producer id.
    pub producer_id: i64,
    /// Its current epoch.
    pub epoch: i16,
    /// Its `transaction.timeout.ms`.
    pub timeout_ms: i32,
    /// When its open transaction began, ms since the epoch; 0 when none is open.
    pub started_ms: u64,
    /// The partitions the open transaction wrote to.
    pub partitions: BTreeSet<(String, i32)>,
    /// The groups whose offsets the open transaction commits.
    pub groups: BTreeSet<String>,
}

type StateTuple = (u16, String, i64, i64, u64, Vec<(String, i64)>, Vec<String>);

impl TxnState {
    fn encode(&self) -> Vec<u8> {
        let partitions: Vec<(String, i64)> = self
            .partitions
            .iter()
            .map(|(t, p)| (t.clone(), i64::from(*p)))
            .collect();
        let groups: Vec<String> = self.groups.iter().cloned().collect();
        pack(&(
            FORMAT,
            self.transactional_id.as_str(),
            i64::from(self.epoch),
            i64::from(self.timeout_ms),
            self.started_ms,
            partitions,
            groups,
        ))
    }

    pub(crate) fn decode(producer_id: i64, bytes: &[u8]) -> Result<Self, TxnError> {
        let (_, transactional_id, epoch, timeout_ms, started_ms, partitions, groups) =
            unpack::<StateTuple>(bytes).map_err(|e| TxnError::Corrupt(format!("{e:?}")))?;
        Ok(Self {
            transactional_id,
            producer_id,
            epoch: i16::try_from(epoch).map_err(|e| TxnError::Corrupt(e.to_string()))?,
            timeout_ms: i32::try_from(timeout_ms).unwrap_or(MAX_TIMEOUT_MS),
            started_ms,
            partitions: partitions
                .into_iter()
                .map(|(t, p)| (t, i32::try_from(p).unwrap_or(-1)))
                .collect(),
            groups: groups.into_iter().collect(),
        })
    }

    /// Whether a transaction is open.
    pub fn is_open(&self) -> bool {
        self.started_ms > 0
    }

    /// Its state as Kafka's coordinator names it: `Ongoing` while a transaction is open,
    /// else `Empty` (Ferry keeps no `Complete*` state: a transaction ends in the one store
    /// transaction that writes its markers).
    pub fn kafka_state(&self) -> &'static str {
        if self.is_open() { "Ongoing" } else { "Empty" }
    }

    /// When the open transaction times out, ms since the epoch.
    fn deadline_ms(&self) -> u64 {
        self.started_ms
            .saturating_add(u64::try_from(self.timeout_ms).unwrap_or(0))
    }
}

/// A produced batch to stage ([`Transactions::stage_produced`]).
pub struct ProducedBatch<'a> {
    /// Its partition.
    pub partition: &'a Partition,
    /// Its staged record (for a large batch, its head, naming its spill).
    pub message: &'a NewMessage,
    /// Its header, when it belongs to a transaction.
    pub transactional: Option<&'a BatchHeader>,
}

/// The transaction coordinator; cheap to clone.
#[derive(Clone)]
pub struct Transactions {
    db: Database,
    keys: KafkaKeys,
    topics: Topics,
    waiters: Arc<Waiters>,
}

impl Transactions {
    /// The coordinator of the transactional ids under `keys`; markers are staged with
    /// `waiters`' incarnation (nobody waits for them).
    pub fn new(db: Database, keys: KafkaKeys, topics: Topics, waiters: Arc<Waiters>) -> Self {
        Self {
            db,
            keys,
            topics,
            waiters,
        }
    }

    /// InitProducerId for `transactional_id`: the producer id and its next epoch. With
    /// `current` (KIP-360: a producer recovering from an abortable error) the stored id and
    /// epoch must match it. A transaction left open is aborted first.
    ///
    /// # Errors
    /// `INVALID_TRANSACTION_TIMEOUT`, `INVALID_PRODUCER_EPOCH` for a stale `current`, or
    /// the store's error.
    pub async fn init(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
        current: Option<(i64, i16)>,
    ) -> Result<(i64, i16), TxnError> {
        if !(1..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
            return Err(TxnError::Refused(ResponseError::InvalidTransactionTimeout));
        }
        let (id, epoch, aborted) = self
            .db
            .run(|tx| async move {
                let id_key = self.keys.transactional_id(transactional_id);
                let Some(state) = self.state_of(&tx, transactional_id).await? else {
                    let producer_id = allocate_in(&tx, &self.keys).await?;
                    tx.set(&id_key, pack(&(producer_id,)));
                    let state = TxnState {
                        transactional_id: transactional_id.to_owned(),
                        producer_id,
                        epoch: 0,
                        timeout_ms,
                        started_ms: 0,
                        partitions: BTreeSet::new(),
                        groups: BTreeSet::new(),
                    };
                    tx.set(&self.keys.transaction(producer_id), state.encode());
                    return Ok::<_, TxnError>((producer_id, 0, false));
                };
                if let Some(given) = current
                    && given != (state.producer_id, state.epoch)
                {
                    return Err(TxnError::Refused(ResponseError::InvalidProducerEpoch));
                }
                let mut state = state;
                let aborted = state.is_open();
                if state.epoch >= i16::MAX - 1 {
                    // Epochs are exhausted: a new producer id, as Kafka does.
                    self.finish(&tx, &mut state, false).await?;
                    tx.clear(&self.keys.transaction(state.producer_id));
                    state.producer_id = allocate_in(&tx, &self.keys).await?;
                    state.epoch = 0;
                    tx.set(&id_key, pack(&(state.producer_id,)));
                } else {
                    state.epoch += 1;
                    self.finish(&tx, &mut state, false).await?;
                }
                state.timeout_ms = timeout_ms;
                tx.set(&self.keys.transaction(state.producer_id), state.encode());
                Ok((state.producer_id, state.epoch, aborted))
            })
            .await?;
        if aborted {
            ended("fenced");
            info!(
                transactional_id,
                producer_id = id,
                epoch,
                "aborted the transaction a previous epoch left open"
            );
        }
        Ok((id, epoch))
    }

    /// AddPartitionsToTxn: the partitions join the producer's open transaction (opening
    /// it). Unknown partitions are refused, and then nothing is added.
    ///
    /// # Errors
    /// `UNKNOWN_TOPIC_OR_PARTITION`, as [`Self::current`], or the store's error.
    pub async fn add_partitions(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: &[(String, i32)],
    ) -> Result<(), TxnError> {
        for (topic, p) in partitions {
            if self
                .topics
                .get(topic)
                .is_none_or(|t| t.partition(*p).is_none())
            {
                return Err(TxnError::Refused(ResponseError::UnknownTopicOrPartition));
            }
        }
        self.update(transactional_id, producer, |state| {
            state.partitions.extend(partitions.iter().cloned());
        })
        .await
    }

    /// AddOffsetsToTxn: the group's offsets may be committed in the open transaction.
    ///
    /// # Errors
    /// As [`Self::current`], or the store's error.
    pub async fn add_group(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        group: &str,
    ) -> Result<(), TxnError> {
        self.update(transactional_id, producer, |state| {
            state.groups.insert(group.to_owned());
        })
        .await
    }

    /// TxnOffsetCommit: `offsets` of `group` are written as pending under the producer,
    /// committed or dropped with its transaction.
    ///
    /// # Errors
    /// `INVALID_TXN_STATE` when the group was not added, as [`Self::current`], or the
    /// store's error.
    pub async fn commit_offsets(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        group: &str,
        offsets: &[(String, i32, CommittedOffset)],
    ) -> Result<(), TxnError> {
        let group_keys = self.keys.group(group);
        self.db
            .run(|tx| {
                let group_keys = &group_keys;
                async move {
                    let state = self.current(&tx, transactional_id, producer).await?;
                    if !state.is_open() || !state.groups.contains(group) {
                        return Err(TxnError::Refused(ResponseError::InvalidTxnState));
                    }
                    let now = now_ms();
                    for (topic, partition, offset) in offsets {
                        tx.set(
                            &group_keys.pending_offset(state.producer_id, topic, *partition),
                            encode_offset(offset, now),
                        );
                    }
                    Ok(())
                }
            })
            .await
    }

    /// EndTxn: commits or aborts the open transaction. Ending a transaction that is not
    /// open succeeds (a retried EndTxn).
    ///
    /// # Errors
    /// As [`Self::current`], or the store's error.
    pub async fn end(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        commit: bool,
    ) -> Result<(), TxnError> {
        let ended_now = self
            .db
            .run(|tx| async move {
                let mut state = self.current(&tx, transactional_id, producer).await?;
                let open = state.is_open();
                if open {
                    self.finish(&tx, &mut state, commit).await?;
                    tx.set(&self.keys.transaction(state.producer_id), state.encode());
                }
                Ok::<_, TxnError>(open)
            })
            .await?;
        if ended_now {
            ended(if commit { "commit" } else { "abort" });
        }
        Ok(())
    }

    /// Allocates a new idempotent producer id (InitProducerId without a transactional id;
    /// its epoch is 0).
    ///
    /// # Errors
    /// The store's error.
    pub async fn allocate_producer_id(&self) -> Result<i64, StoreError> {
        let keys = &self.keys;
        self.db
            .run(|tx| async move { allocate_in(&tx, keys).await })
            .await
    }

    /// Stages a group of produced batches in one store transaction, in order: each
    /// transactional one only if [`Self::check_batch`] admits it in that transaction, and
    /// letting go of `large`'s hold on the spill of each large one. Returns the batches
    /// refused (by index in `batches`, with the error code), which are not staged.
    ///
    /// # Errors
    /// The store's or the stage's error: then none is staged.
    pub async fn stage_produced(
        &self,
        large: &LargeBatches,
        batches: &[ProducedBatch<'_>],
    ) -> Result<Vec<(usize, i16)>, TxnError> {
        let now = now_ms();
        self.db
            .run(|tx| async move {
                let mut refused = Vec::new();
                for (i, b) in batches.iter().enumerate() {
                    if let Some(spill) = b.message.spill {
                        large.let_go_in(&tx, spill).await?;
                    }
                    if let Some(header) = b.transactional {
                        let checked = self
                            .check_batch(&tx, header, &b.partition.topic, b.partition.index)
                            .await;
                        match checked {
                            Ok(()) => {}
                            Err(TxnError::Refused(e)) => {
                                refused.push((i, e.code()));
                                continue;
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    b.partition
                        .stage
                        .append_in(&tx, std::slice::from_ref(b.message), now)
                        .await?;
                }
                Ok(refused)
            })
            .await
    }

    /// Whether a transactional batch may be staged for `topic`/`partition`, read in the
    /// staging transaction `tx` (so an EndTxn conflicts with it).
    ///
    /// # Errors
    /// `INVALID_PRODUCER_EPOCH` for another epoch, `INVALID_TXN_STATE` when the partition
    /// is not in the producer's open transaction, `INVALID_PRODUCER_ID_MAPPING` for an
    /// unknown producer, or the store's error.
    async fn check_batch(
        &self,
        tx: &Transaction,
        header: &BatchHeader,
        topic: &str,
        partition: i32,
    ) -> Result<(), TxnError> {
        let state = self
            .state(tx, header.producer_id)
            .await?
            .ok_or(TxnError::Refused(ResponseError::InvalidProducerIdMapping))?;
        if state.epoch != header.producer_epoch {
            return Err(TxnError::Refused(ResponseError::InvalidProducerEpoch));
        }
        if !state.is_open() || !state.partitions.contains(&(topic.to_owned(), partition)) {
            return Err(TxnError::Refused(ResponseError::InvalidTxnState));
        }
        Ok(())
    }

    /// Aborts, with a bumped epoch, every transaction open longer than its timeout; every
    /// [`EXPIRY_CHECK`] until `stop`.
    pub async fn expire_until(self, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(EXPIRY_CHECK) => {}
            }
            if let Err(e) = self.expire(now_ms()).await {
                warn!(error = %e, "cannot check transactions for their timeouts");
            }
        }
    }

    /// Aborts every transaction open at `now` for longer than its timeout: those whose
    /// deadline entry is before `now`, read [`EXPIRY_BATCH`] at a time, so the check costs
    /// what is due, not what was ever used.
    async fn expire(&self, now: u64) -> Result<(), TxnError> {
        let (b, e) = self.keys.transactions_due_before(now);
        loop {
            let due = self
                .db
                .begin()?
                .get_range(
                    &RangeOption::new(b.clone(), e.clone()).limit(EXPIRY_BATCH),
                    true,
                )
                .await?;
            for kv in &due {
                let producer_id = self.keys.transaction_due_of(&kv.key).ok_or_else(|| {
                    TxnError::Corrupt("a transaction deadline key of another layout".into())
                })?;
                self.expire_one(&kv.key, producer_id, now).await?;
            }
            if due.len() < EXPIRY_BATCH {
                return Ok(());
            }
        }
    }

    /// Aborts `producer_id`'s transaction, with a bumped epoch, if it is still open past
    /// its timeout at `now` (which clears its deadline entry `due`); else `due` is stale and
    /// is cleared.
    async fn expire_one(&self, due: &[u8], producer_id: i64, now: u64) -> Result<(), TxnError> {
        let expired_now = self
            .db
            .run(|tx| async move {
                let state = self.state(&tx, producer_id).await?;
                let Some(mut state) = state.filter(|s| expired(s, now)) else {
                    // A stale entry: the transaction ended or moved its deadline.
                    tx.clear(due);
                    return Ok::<_, TxnError>(None);
                };
                state.epoch = state.epoch.saturating_add(1);
                self.finish(&tx, &mut state, false).await?;
                tx.set(&self.keys.transaction(producer_id), state.encode());
                Ok(Some(state))
            })
            .await?;
        if let Some(s) = expired_now {
            ended("timeout");
            warn!(transactional_id = %s.transactional_id, producer_id, epoch = s.epoch, timeout_ms = s.timeout_ms, "aborted a transaction open past its timeout; its producer is fenced");
        }
        Ok(())
    }

    /// Applies `change` to the open transaction of a producer at its current epoch,
    /// opening it.
    async fn update(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        change: impl Fn(&mut TxnState),
    ) -> Result<(), TxnError> {
        let change = &change;
        self.db
            .run(|tx| async move {
                let mut state = self.current(&tx, transactional_id, producer).await?;
                change(&mut state);
                if !state.is_open() {
                    state.started_ms = now_ms();
                    tx.set(&self.due_key(&state), b"");
                }
                tx.set(&self.keys.transaction(state.producer_id), state.encode());
                Ok(())
            })
            .await
    }

    /// The deadline entry of `state`'s open transaction.
    fn due_key(&self, state: &TxnState) -> Vec<u8> {
        self.keys
            .transaction_due(state.deadline_ms(), state.producer_id)
    }

    /// The state of `transactional_id`, which `producer` (id, epoch) must be.
    ///
    /// # Errors
    /// `INVALID_PRODUCER_ID_MAPPING` for an unknown transactional id or another producer,
    /// `INVALID_PRODUCER_EPOCH` for another epoch (a fenced producer).
    async fn current(
        &self,
        tx: &Transaction,
        transactional_id: &str,
        (id, epoch): (i64, i16),
    ) -> Result<TxnState, TxnError> {
        let state = self
            .state_of(tx, transactional_id)
            .await?
            .filter(|s| s.producer_id == id)
            .ok_or(TxnError::Refused(ResponseError::InvalidProducerIdMapping))?;
        if state.epoch != epoch {
            return Err(TxnError::Refused(ResponseError::InvalidProducerEpoch));
        }
        Ok(state)
    }

    /// The state of `transactional_id`, if it was ever initialised.
    async fn state_of(
        &self,
        tx: &Transaction,
        transactional_id: &str,
    ) -> Result<Option<TxnState>, TxnError> {
        let Some(v) = tx
            .get(&self.keys.transactional_id(transactional_id), false)
            .await?
        else {
            return Ok(None);
        };
        let (id,) = unpack::<(i64,)>(&v).map_err(|e| TxnError::Corrupt(format!("{e:?}")))?;
        self.state(tx, id).await
    }

    /// The state of `transactional_id`, if it is known.
    ///
    /// # Errors
    /// The store's error, or a state that does not decode.
    pub async fn describe(&self, transactional_id: &str) -> Result<Option<TxnState>, TxnError> {
        self.db
            .run(|tx| async move { self.state_of(&tx, transactional_id).await })
            .await
    }

    /// Every transactional producer's state (ListTransactions), read in one transaction.
    ///
    /// # Errors
    /// The store's error, or a state that does not decode.
    pub async fn list(&self) -> Result<Vec<TxnState>, TxnError> {
        self.db
            .run(|tx| async move {
                let (begin, end) = self.keys.transactions();
                let entries = tx.get_range(&RangeOption::new(begin, end), true).await?;
                entries
                    .iter()
                    .map(|kv| {
                        let producer_id =
                            self.keys.transaction_producer(&kv.key).ok_or_else(|| {
                                TxnError::Corrupt("a transaction key without a producer id".into())
                            })?;
                        TxnState::decode(producer_id, &kv.value)
                    })
                    .collect()
            })
            .await
    }

    /// The state of transactional producer `producer_id`.
    async fn state(
        &self,
        tx: &Transaction,
        producer_id: i64,
    ) -> Result<Option<TxnState>, TxnError> {
        match tx.get(&self.keys.transaction(producer_id), false).await? {
            Some(v) => TxnState::decode(producer_id, &v).map(Some),
            None => Ok(None),
        }
    }

    /// Closes the open transaction in `tx`, if one is: a marker at the state's epoch
    /// staged for every partition, and the pending offsets committed or dropped. The
    /// caller writes the state.
    async fn finish(
        &self,
        tx: &Transaction,
        state: &mut TxnState,
        commit: bool,
    ) -> Result<(), TxnError> {
        if !state.is_open() {
            return Ok(());
        }
        tx.clear(&self.due_key(state));
        let now = now_ms();
        let marker = marker(state.producer_id, state.epoch, commit, now as i64);
        for (topic, index) in &state.partitions {
            // A deleted topic has nothing left to mark.
            let Some(partition) = self
                .topics
                .get(topic)
                .and_then(|t| t.partition(*index).cloned())
            else {
                continue;
            };
            let body = staged::encode(self.waiters.unwaited(), &marker);
            partition
                .stage
                .append_in(tx, &[NewMessage::new(body)], now)
                .await?;
        }
        for group in &state.groups {
            let keys = self.keys.group(group);
            let (b, e) = keys.pending_offsets(state.producer_id);
            if commit {
                let pending = tx
                    .get_range(&RangeOption::new(b.clone(), e.clone()), false)
                    .await?;
                for kv in &pending {
                    if let Some((topic, partition)) = keys.pending_offset_of(&kv.key) {
                        tx.set(&keys.offset(&topic, partition), &kv.value);
                    }
                }
                if !pending.is_empty() {
                    tx.set(&self.keys.group_listing(group), b"");
                }
            }
            tx.clear_range(&b, &e);
        }
        state.partitions.clear();
        state.groups.clear();
        state.started_ms = 0;
        Ok(())
    }
}

/// Every way a transaction ends, as `ferry_kafka_transactions_total` labels it.
const OUTCOMES: [&str; 4] = ["commit", "abort", "fenced", "timeout"];

/// Exports `ferry_kafka_transactions_total` at 0 for every outcome.
pub(crate) fn export_counters() {
    for outcome in OUTCOMES {
        metrics::counter!(m::TRANSACTIONS_TOTAL, m::LABEL_OUTCOME => outcome).increment(0);
    }
}

/// Counts a transaction that ended with `outcome` (one of [`OUTCOMES`]).
fn ended(outcome: &'static str) {
    metrics::counter!(m::TRANSACTIONS_TOTAL, m::LABEL_OUTCOME => outcome).increment(1);
}

/// Whether `state`'s open transaction is past its timeout at `now`.
fn expired(state: &TxnState, now: u64) -> bool {
    state.is_open() && now > state.deadline_ms()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip() {
        let s = TxnState {
            transactional_id: "tx-1".into(),
            producer_id: 9,
            epoch: 3,
            timeout_ms: 60_000,
            started_ms: 1234,
            partitions: [("t".to_owned(), 0), ("t".to_owned(), 2)].into(),
            groups: ["g".to_owned()].into(),
        };
        assert_eq!(TxnState::decode(9, &s.encode()).unwrap(), s);
    }

    #[test]
    fn only_open_transactions_past_their_timeout_expire() {
        let mut s = TxnState {
            transactional_id: "tx".into(),
            producer_id: 1,
            epoch: 0,
            timeout_ms: 100,
            started_ms: 0,
            partitions: BTreeSet::new(),
            groups: BTreeSet::new(),
        };
        assert!(!expired(&s, 10_000));
        s.started_ms = 1_000;
        assert!(!expired(&s, 1_100));
        assert!(expired(&s, 1_101));
    }
}
