//! Confirms held until the connection's own consumers delivered what they confirm, so a
//! client that consumes what it publishes reads a message's delivery before its confirm
//! ([`crate::state::consumed`]; RabbitMQ 3.10 does not keep this order, docs/amqp.md).
//!
//! A channel's confirms leave in the order of their commits: once one is held, the later
//! ones (held or not) queue behind it. A held confirm waits at most [`FALLBACK`]: the
//! consumers asked answer as soon as their deliveries are with the connection's writer,
//! or at once when they cannot receive, so the fallback only covers a consumer that
//! never gets to the request (its channel stuck on a full socket, say) — it bounds the
//! delay, the normal path does not depend on it.

use std::collections::VecDeque;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// The longest a confirm waits for the consumers asked.
const FALLBACK: Duration = Duration::from_secs(1);

/// A commit's confirm frames and what they wait for.
struct Held {
    frames: Vec<u8>,
    /// Resolves once the consumers asked delivered (`None`: waits only for the confirms
    /// before it).
    flushed: Option<oneshot::Receiver<()>>,
    /// When it goes anyway.
    deadline: Instant,
}

/// One channel's held confirms, oldest first.
#[derive(Default)]
pub(crate) struct HeldConfirms {
    queue: VecDeque<Held>,
}

impl HeldConfirms {
    /// Takes a commit's confirm frames, waiting for `flushed` (if any); returns them when
    /// they may be written now (nothing is held and nothing needs waiting for).
    pub(crate) fn hold(
        &mut self,
        frames: Vec<u8>,
        flushed: Option<oneshot::Receiver<()>>,
    ) -> Option<Vec<u8>> {
        if self.queue.is_empty() && flushed.is_none() {
            return Some(frames);
        }
        self.queue.push_back(Held {
            frames,
            flushed,
            deadline: Instant::now() + FALLBACK,
        });
        None
    }

    /// Waits until the oldest held confirm may be written and returns it (forever when
    /// none is held, so it can sit in a `select!`).
    pub(crate) async fn released(&mut self) -> Vec<u8> {
        let Some(held) = self.queue.front_mut() else {
            return std::future::pending().await;
        };
        if let Some(flushed) = held.flushed.as_mut() {
            // Answered or dropped: either way the consumers are done with it.
            let _ = tokio::time::timeout_at(held.deadline, flushed).await;
        }
        self.queue.pop_front().expect("looked at above").frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn nothing_held_goes_at_once() {
        let mut held = HeldConfirms::default();
        assert_eq!(held.hold(vec![1], None), Some(vec![1]));
    }

    #[tokio::test(start_paused = true)]
    async fn a_confirm_waits_for_its_consumers_and_the_next_one_waits_behind_it() {
        let mut held = HeldConfirms::default();
        let (tx, rx) = oneshot::channel();
        assert_eq!(held.hold(vec![1], Some(rx)), None);
        assert_eq!(held.hold(vec![2], None), None, "behind the held one");
        let waiting = tokio::time::timeout(Duration::from_millis(10), held.released()).await;
        assert!(waiting.is_err(), "the consumers have not answered");
        drop(tx);
        assert_eq!(held.released().await, vec![1]);
        assert_eq!(held.released().await, vec![2]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_consumer_that_never_answers_delays_the_confirm_by_the_fallback_only() {
        let mut held = HeldConfirms::default();
        let (_tx, rx) = oneshot::channel();
        held.hold(vec![1], Some(rx));
        let start = Instant::now();
        assert_eq!(held.released().await, vec![1]);
        assert_eq!(start.elapsed(), FALLBACK);
    }
}
