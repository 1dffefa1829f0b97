//! Settling a channel's deliveries: basic.ack/nack/reject and recover, grouped by queue
//! and holder, and committed in batches.
//!
//! **Settling.** basic.ack/nack/reject and recover are collected and committed in batches
//! (one transaction while the previous one commits: a [`GroupCommit`]), like publishes. Acknowledgements
//! wait up to [`BATCH_DELAY`] or until [`SETTLE_BATCH`] are pending, since nothing
//! answers them; requeues and rejections commit at once. A consumer forgets a
//! settled lease only after that commit, so it never takes a still-held lease for unseen.
//!
//! [`GroupCommit`]: ferry_stage::GroupCommit

use super::{BATCH_DELAY, Consumers, Unacked};
use crate::consuming::settle::{How, Settlement, settle_in};
use crate::wire::errors::{AmqpError, TxError};
use ferry_stage::{now_ms, spill};
use ferry_telemetry::amqp as metric;
use ferry_telemetry::compat::rabbitmq::state as rabbitmq;
use std::sync::Arc;
use std::time::Instant;

/// Settlements commit once this many deliveries are pending, or after [`BATCH_DELAY`].
const SETTLE_BATCH: usize = 256;

/// A finished settle commit.
pub(crate) struct Settled {
    settlements: Vec<Settlement>,
    result: Result<(), AmqpError>,
}

impl Consumers {
    /// basic.ack, basic.nack and basic.reject: settles the deliveries `tag` names (with
    /// `multiple`, every one up to it; tag 0 with `multiple`: all). Returns the settlements
    /// for a transactional channel to hold instead of queueing them.
    ///
    /// # Errors
    /// 406 for an unknown delivery tag.
    pub(crate) fn settle(
        &mut self,
        tag: u64,
        multiple: bool,
        how: How,
    ) -> Result<Vec<Settlement>, AmqpError> {
        let tags: Vec<u64> = if multiple {
            let upto = if tag == 0 { u64::MAX } else { tag };
            self.unacked.range(..=upto).map(|(t, _)| *t).collect()
        } else if self.unacked.contains_key(&tag) {
            vec![tag]
        } else {
            Vec::new()
        };
        if tags.is_empty() && !(multiple && tag == 0) {
            return Err(AmqpError::precondition_failed(format!(
                "unknown delivery tag {tag}"
            )));
        }
        let entries: Vec<Unacked> = tags.iter().filter_map(|t| self.unacked.remove(t)).collect();
        Ok(self.group(entries, how))
    }

    /// basic.recover with requeue: every unacknowledged delivery goes back.
    pub(crate) fn recover(&mut self) -> Vec<Settlement> {
        let entries: Vec<Unacked> = std::mem::take(&mut self.unacked).into_values().collect();
        self.group(entries, How::Requeue)
    }

    /// Groups entries by (queue, holder) and frees their consumers' prefetch room. A
    /// requeue or rejection may dead-letter (copy) what it settles, so a group of them
    /// copies at most [`spill::RUN_BYTES`] (one larger message alone), and a settle commit
    /// takes such groups while their sum stays within it ([`Consumers::commit_pending`]).
    fn group(&mut self, entries: Vec<Unacked>, how: How) -> Vec<Settlement> {
        let mut groups: Vec<Settlement> = Vec::new();
        for e in entries {
            if let Some(c) = e.consumer.as_ref().and_then(|t| self.consumers.get_mut(t)) {
                c.unacked = c.unacked.saturating_sub(1);
            }
            let copies = if how == How::Ack { 0 } else { e.copies };
            match groups.iter_mut().find(|s| {
                s.holder == e.holder
                    && Arc::ptr_eq(&s.queue, &e.queue)
                    && (s.copies == 0 || s.copies + copies <= spill::RUN_BYTES)
            }) {
                Some(s) => {
                    s.ids.push(e.id);
                    s.copies += copies;
                }
                None => groups.push(Settlement {
                    queue: e.queue,
                    holder: e.holder,
                    ids: vec![e.id],
                    how,
                    copies,
                }),
            }
        }
        groups
    }

    /// Queues settlements for the next settle commit.
    ///
    /// The room acknowledgements free is used at once by a consumer that can now lease a
    /// quarter of its prefetch, so leasing overlaps settling. Room freed by a requeue waits
    /// for its commit (which follows at once): the requeued message must be back in its
    /// place first, to be delivered again before every later message, as RabbitMQ does.
    pub(crate) fn queue_settlements(&mut self, settlements: Vec<Settlement>) {
        let requeues = settlements.iter().any(|s| s.how == How::Requeue);
        self.queue_pending(settlements);
        if !requeues {
            self.kick_all_batched();
        }
    }

    /// The next end of a batching delay: pending settlements (when no commit is under
    /// way) or consumers waiting for more room.
    pub(super) fn due(&self) -> Option<Instant> {
        let settle = self
            .settlements
            .waiting_since()
            .filter(|_| !self.settlements.is_committing())
            .map(|since| since + BATCH_DELAY);
        settle.into_iter().chain(self.lease_due).min()
    }

    pub(super) fn queue_pending(&mut self, settlements: Vec<Settlement>) {
        self.settlements.extend(settlements);
    }

    /// Starts a settle commit of what is pending, unless one is under way or the pending
    /// settlements are a few recent acknowledgements ([`BATCH_DELAY`]). Requeues and
    /// rejections commit at once: the message is back in its place (or dead-lettered) for
    /// whatever the client does next.
    pub(crate) fn start_commit(&mut self) {
        let pending = self.settlements.pending();
        let ids: usize = pending.iter().map(|s| s.ids.len()).sum();
        let only_acks = pending.iter().all(|s| s.how == How::Ack);
        if only_acks
            && ids < SETTLE_BATCH
            && self
                .settlements
                .waiting_since()
                .is_some_and(|since| since.elapsed() < BATCH_DELAY)
        {
            return;
        }
        self.commit_pending();
    }

    /// Commits the first run of pending settlements whose dead-letter copies fit one
    /// transaction ([`spill::runs`]); the rest follow in the next commits.
    fn commit_pending(&mut self) {
        let db = self.ctx.broker.db.clone();
        let copies: Vec<u64> = self
            .settlements
            .pending()
            .iter()
            .map(|s| s.copies)
            .collect();
        let take = spill::runs(&copies).first().map_or(0, |run| run.end);
        self.settlements.start(take, |settlements| async move {
            let now = now_ms();
            let list = &settlements;
            let result = db
                .run(|tx| async move {
                    for s in list {
                        settle_in(&tx, s, now).await?;
                    }
                    Ok::<_, TxError>(())
                })
                .await
                .map_err(AmqpError::from);
            Settled {
                settlements,
                result,
            }
        });
    }

    /// Takes a finished settle commit: counts it and lets consumers forget what it settled.
    ///
    /// # Errors
    /// 541 when the commit failed.
    pub(crate) fn finish_commit(&mut self, done: Settled) -> Result<(), AmqpError> {
        done.result?;
        self.settled(&done.settlements);
        Ok(())
    }

    /// Accounts for committed settlements (also those of tx.commit).
    pub(crate) fn settled(&mut self, settlements: &[Settlement]) {
        for s in settlements {
            let n = s.ids.len() as u64;
            // A no-ack consumer's deliveries settle as acks too; RabbitMQ counts only the
            // acknowledgements clients send.
            let no_ack_consumer = self
                .owner_of
                .get(&s.holder)
                .and_then(|tag| self.consumers.get(tag))
                .is_some_and(|c| c.no_ack);
            if matches!(s.how, How::Ack) && !no_ack_consumer {
                rabbitmq::acknowledged(n);
            }
            let labels = s.queue.labels();
            match s.how {
                How::Ack => metrics::counter!(metric::ACKS_TOTAL, &labels).increment(n),
                How::Requeue | How::Reject => {
                    metrics::counter!(metric::NACKS_TOTAL, &labels).increment(n);
                }
            }
            let Some(tag) = self.owner_of.get(&s.holder) else {
                continue;
            };
            let Some(c) = self.consumers.get_mut(tag) else {
                continue;
            };
            if c.no_ack {
                self.no_ack_unsettled = self.no_ack_unsettled.saturating_sub(s.ids.len());
            }
            match c.stage.as_mut() {
                Some(consumer) => consumer.forget(&s.ids),
                None => c.forget_later.extend_from_slice(&s.ids),
            }
        }
        self.kick_all_batched();
    }

    /// Commits every pending settlement and waits for the commit under way.
    ///
    /// # Errors
    /// 541 when a commit fails.
    pub(crate) async fn flush(&mut self) -> Result<(), AmqpError> {
        loop {
            if self.settlements.is_committing() {
                let done =
                    self.settlements.committed().await.map_err(|e| {
                        AmqpError::internal(format!("a settle commit panicked: {e}"))
                    })?;
                done.result?;
                self.settled(&done.settlements);
            }
            if self.settlements.pending().is_empty() {
                return Ok(());
            }
            self.commit_pending();
        }
    }
}
