//! Produce requests waiting for their batches to reach the log.
//!
//! A produce handler registers a token before it stages a batch and puts the token, with
//! this process's incarnation, in the staged record. When the partition's sequencer (in
//! this process) has committed the batch to the log, it answers the token with the offset
//! or the refusal — an in-process notification after the commit, so no one polls and
//! nothing is written for it. A batch staged by another process (or by an earlier
//! incarnation of this one) carries a foreign incarnation and is sequenced without
//! notification; its producer, if still waiting, times out and resends, and idempotence
//! recognises the resend.

use crate::partition::staged::Waiter;
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::oneshot;

/// What became of a staged batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOutcome {
    /// Written to the log at this base offset.
    Appended(i64),
    /// Already in the log at this base offset (an idempotent resend).
    Duplicate(i64),
    /// Refused with this error.
    Refused(ResponseError),
}

/// The tokens of this process's waiting produce requests.
#[derive(Debug)]
pub struct Waiters {
    /// Random per process start, so tokens of an earlier run never match.
    incarnation: u64,
    /// The next token (0 means "nobody waits").
    next: AtomicU64,
    /// Waiting requests by token.
    waiting: Mutex<HashMap<u64, oneshot::Sender<BatchOutcome>>>,
}

impl Default for Waiters {
    fn default() -> Self {
        Self {
            incarnation: fastrand::u64(1..),
            next: AtomicU64::new(1),
            waiting: Mutex::default(),
        }
    }
}

impl Waiters {
    /// Registers a waiter; stage the batch with it.
    pub fn register(&self) -> (Waiter, oneshot::Receiver<BatchOutcome>) {
        let waiter = self.unwaited();
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().insert(waiter.token, tx);
        (waiter, rx)
    }

    /// A waiter for a batch nobody waits for (`acks=0`, a transaction marker, a bridge
    /// route's batch): its token is unique, so the sequencer can still recognise the batch
    /// if it is staged twice.
    pub fn unwaited(&self) -> Waiter {
        Waiter {
            incarnation: self.incarnation,
            token: self.next.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Stops waiting for `token` (its request timed out or its connection closed).
    pub fn forget(&self, token: u64) {
        self.waiting.lock().remove(&token);
    }

    /// Answers `waiter` if it was staged by this incarnation and someone still waits.
    pub fn answer(&self, waiter: Waiter, outcome: BatchOutcome) {
        if waiter.incarnation != self.incarnation || waiter.token == 0 {
            return;
        }
        if let Some(tx) = self.waiting.lock().remove(&waiter.token) {
            let _ = tx.send(outcome);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_registered_token_hears_its_outcome_once() {
        let w = Waiters::default();
        let (waiter, rx) = w.register();
        let foreign = Waiter {
            incarnation: waiter.incarnation ^ 1,
            ..waiter
        };
        w.answer(foreign, BatchOutcome::Appended(1));
        w.answer(waiter, BatchOutcome::Appended(7));
        w.answer(waiter, BatchOutcome::Appended(8));
        assert_eq!(rx.await.unwrap(), BatchOutcome::Appended(7));
    }

    #[test]
    fn a_forgotten_token_is_not_kept() {
        let w = Waiters::default();
        let (waiter, rx) = w.register();
        w.forget(waiter.token);
        w.answer(waiter, BatchOutcome::Appended(1));
        drop(rx);
        assert!(w.waiting.lock().is_empty());
    }
}
