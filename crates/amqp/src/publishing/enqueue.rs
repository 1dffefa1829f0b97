//! Storing messages into queues inside a caller's transaction, with each queue's rules:
//! its message TTL, its priority lanes, and `x-max-length` with `x-overflow`. Publishing
//! and the dead-letter router both store through here.
//!
//! Length limits read the queue's counters with snapshot reads, so appends never conflict
//! on them; concurrent publishers on several channels can overshoot a limit by what they
//! commit at the same moment (RabbitMQ's single queue process is exact). Within one
//! transaction the count is exact. After a `commit_unknown_result`, the retry appends
//! idempotently but does not drop the head again, so a limit may be overshot by that
//! batch rather than messages being dropped twice.

use crate::state::topology::Queue;
use crate::state::topology::args::Overflow;
use ferry_stage::{AppendOutcome, NewMessage, StageError};
use ferry_store::Transaction;
use std::sync::Arc;

/// One message for one queue.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// Which message of the batch it is (confirms are per message, not per queue).
    pub item: usize,
    /// What to append (body, priority, expiry, idempotency key).
    pub message: NewMessage,
}

/// The messages of a batch for one queue, in order.
#[derive(Debug, Clone)]
pub(crate) struct QueueBatch {
    /// The queue.
    pub queue: Arc<Queue>,
    /// Its messages.
    pub messages: Vec<Entry>,
}

/// What storing a batch did, per queue and per message.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stored {
    /// Items refused by a queue with `x-overflow: reject-publish` at its limit.
    pub rejected: Vec<usize>,
    /// Per queue (index into the batches): messages appended.
    pub appended: Vec<usize>,
}

/// Appends `batches` within `tx`, at `now` (ms since the epoch).
///
/// # Errors
/// The stage's error.
pub(crate) async fn enqueue_in(
    tx: &Transaction,
    batches: &[QueueBatch],
    now: u64,
) -> Result<Stored, StageError> {
    let mut stored = Stored {
        appended: vec![0; batches.len()],
        ..Stored::default()
    };
    for (i, batch) in batches.iter().enumerate() {
        let queue = &batch.queue;
        let args = &queue.spec.args;
        let mut accepted: Vec<NewMessage> = Vec::with_capacity(batch.messages.len());
        let mut overflowed: Vec<NewMessage> = Vec::new();
        match args.max_length {
            None => accepted.extend(batch.messages.iter().map(|d| d.message.clone())),
            Some(max) => {
                let ready = queue.stage.depth_in(tx).await?.ready.max(0) as u64;
                match args.overflow {
                    Overflow::RejectPublish => {
                        for d in &batch.messages {
                            if ready + (accepted.len() as u64) < max {
                                accepted.push(d.message.clone());
                            } else {
                                stored.rejected.push(d.item);
                            }
                        }
                    }
                    Overflow::DropHead => {
                        let incoming = batch.messages.len() as u64;
                        let excess = (ready + incoming).saturating_sub(max);
                        // The oldest go first: stored ones, then the batch's own.
                        let from_store = excess.min(ready);
                        let from_batch = (excess - from_store) as usize;
                        if from_store > 0 && !tx.maybe_committed() {
                            queue
                                .stage
                                .drop_head_in(tx, from_store as usize, now)
                                .await?;
                        }
                        for (n, d) in batch.messages.iter().enumerate() {
                            if n < from_batch {
                                overflowed.push(d.message.clone());
                            } else {
                                accepted.push(d.message.clone());
                            }
                        }
                    }
                }
            }
        }
        for m in &mut accepted {
            m.priority = args.lane_priority(m.priority);
        }
        let outcomes = queue.stage.append_in(tx, &accepted, now).await?;
        stored.appended[i] = outcomes
            .iter()
            .filter(|o| **o == AppendOutcome::Appended)
            .count();
        if !overflowed.is_empty() {
            // Messages dropped before they were ever stored go straight to the
            // dead-letter stage; the router knows them by their missing stage
            // dead-letter record (see `dead_letter`).
            if let Some(dl) = &queue.dead_letter_stage {
                dl.append_in(tx, &overflowed, now).await?;
            }
        }
    }
    Ok(stored)
}

/// The TTL in ms a message's `expiration` property asks for: an integer from 0 to 2³²−1,
/// as RabbitMQ reads it (`rabbit_basic:parse_expiration`).
///
/// # Errors
/// The reason a publish is refused (RabbitMQ's precondition-failed text).
pub(crate) fn parse_expiration(expiration: &str) -> Result<u64, String> {
    expiration
        .parse::<u64>()
        .ok()
        .filter(|ms| *ms <= u64::from(u32::MAX))
        .ok_or_else(|| format!("invalid expiration '{expiration}'"))
}

/// The expiry of a message arriving at `now` in `queue` whose own TTL (the
/// `expiration` property) is `message_ttl` ms: the sooner of it and the queue's
/// `x-message-ttl`; 0 when neither applies.
pub(crate) fn expires_at(queue: &Queue, message_ttl: Option<u64>, now: u64) -> u64 {
    match (queue.spec.args.message_ttl, message_ttl) {
        (None, None) => 0,
        (a, b) => now.saturating_add(a.unwrap_or(u64::MAX).min(b.unwrap_or(u64::MAX))),
    }
}

/// Tells the expiry sweeper the soonest expiry among each batch's messages, so it looks
/// at those queues' heads in time. Only a hint: giving it for a transaction that is then
/// retried just makes the sweeper look early.
pub(crate) fn hint_expiries(expiry: &crate::state::expiry::ExpiryHints, batches: &[QueueBatch]) {
    for batch in batches {
        let soonest = batch
            .messages
            .iter()
            .map(|e| e.message.expires_ms)
            .filter(|at| *at != 0)
            .min();
        if let Some(at) = soonest {
            expiry.hint(&batch.queue, at);
        }
    }
}
