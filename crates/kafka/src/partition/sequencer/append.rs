//! The sequencer of one partition: the loop that moves its staged batches into the log,
//! one transaction at a time, and answers their producers after each commit.
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

use super::{SequencerError, Shared, publish_bounds, retention};
use crate::keys::{decode_i64, encode_i64};
use crate::metadata::topics::Partition;
use crate::partition::compaction::Compactor;
use crate::partition::leader_epochs;
use crate::partition::lease::Lease;
use crate::partition::log::{Log, Stored};
use crate::partition::producers::{ProducerState, Verdict};
use crate::partition::staged::{self, Waiter};
use crate::partition::waiters::BatchOutcome;
use crate::wire::batch::{BatchHeader, marker_commits, set_base_offset, set_leader_epoch};
use bytes::BytesMut;
use ferry_stage::{Delivery, MessageId, Spills, Wakeup, now_ms};
use ferry_store::{StoreError, Transaction};
use ferry_telemetry::kafka as m;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Most staged bytes one sequencer transaction moves (well inside the 10 MB limit, which
/// counts the pop's clears and the log's writes). A batch kept in a spill counts by its
/// staged record (its header), as only that moves.
const MAX_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;
/// Staging tokens remembered per partition, to drop a batch staged twice by a retried
/// append whose first commit reported an unknown result.
const RECENT_TOKENS: usize = 65_536;
/// How long a partition being handed over keeps sequencing after it began refusing produce
/// requests, so the batches of requests accepted just before are moved (and answered) here.
const HANDOFF_GRACE: Duration = Duration::from_millis(100);
/// Pause after a failed sequencer transaction.
const ERROR_PAUSE: Duration = Duration::from_millis(200);

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
pub(super) struct Sequencer {
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
    /// The sequencer of `partition`, whose lease this instance claimed at `epoch`;
    /// `handoff` fires when the partition is to be handed over.
    pub(super) fn new(
        shared: Arc<Shared>,
        partition: Partition,
        epoch: i64,
        handoff: CancellationToken,
    ) -> Self {
        Self {
            shared,
            partition,
            epoch,
            handoff,
            recent_tokens: RecentTokens::default(),
        }
    }

    /// Sequences the partition until shutdown, a handover or a takeover; then releases the
    /// lease (but after a takeover) and lets this instance claim the partition again.
    pub(super) async fn run(mut self) {
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
                retention::apply(&self.shared, &self.partition, self.epoch).await;
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
                    if !self
                        .shared
                        .hold_lease(&tx, &self.partition.keys, self.epoch, now)
                        .await?
                    {
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
