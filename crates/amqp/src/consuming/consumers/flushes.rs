//! Requests from a publishing channel of the same connection to deliver now what its
//! commit stored, before it confirms ([`crate::state::consumed`]).
//!
//! Each consumer of a queue named in a request keeps the request's token through one
//! lease step that starts after the request arrived (so the step sees what the commit
//! stored), then until the frames of that step were taken by the connection's writer
//! ([`Consumers::sent`]); dropping the token answers. A consumer that cannot step (no
//! prefetch room, flow stopped, not its turn, cancelling) drops it at once: it would not
//! receive the message now, so the confirm does not wait for it.

use super::Consumers;
use crate::state::consumed::{DeliverNow, Flushed};

/// One consumer's tokens, by how far their step got.
#[derive(Debug, Default)]
pub(super) struct Flushes {
    /// Waiting for the consumer's next step to start.
    next: Vec<Flushed>,
    /// Held by the running step.
    stepping: Vec<Flushed>,
    /// Held until the step's frames are with the connection's writer.
    unsent: Vec<Flushed>,
}

impl Flushes {
    /// Whether a request waits for a step: the consumer leases now, whatever batching or
    /// watch it was waiting for.
    pub(super) fn wanted(&self) -> bool {
        !self.next.is_empty()
    }

    /// A step starts: it takes the waiting requests.
    pub(super) fn step_started(&mut self) {
        self.stepping.append(&mut self.next);
    }

    /// The step returned, with frames to write (`unsent`) or none (answered now).
    pub(super) fn step_returned(&mut self, unsent: bool) {
        if unsent {
            self.unsent.append(&mut self.stepping);
        } else {
            self.stepping.clear();
        }
    }

    /// The step's frames were taken by the writer: answered.
    pub(super) fn sent(&mut self) {
        self.unsent.clear();
    }

    /// The consumer cannot step now: the waiting requests are answered.
    pub(super) fn cannot_step(&mut self) {
        self.next.clear();
    }
}

impl Consumers {
    /// Handles a [`DeliverNow`] request: each consumer of its queues leases now, if it may.
    pub(crate) fn deliver_now(&mut self, request: DeliverNow) {
        let tags: Vec<String> = self
            .consumers
            .iter_mut()
            .filter(|(_, c)| request.queues.contains(&c.queue.name))
            .map(|(tag, c)| {
                c.flushes.next.push(request.flushed.clone());
                tag.clone()
            })
            .collect();
        for tag in tags {
            self.kick(&tag);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::consumed::ConsumedQueues;
    use tokio::sync::mpsc;

    /// A token, and what resolves once every clone of it is dropped.
    fn token() -> (Flushed, tokio::sync::oneshot::Receiver<()>) {
        let consumed = ConsumedQueues::default();
        let (tx, mut rx) = mpsc::unbounded_channel();
        consumed.add(1, "q", &tx);
        let done = consumed.ask(["q"]).expect("consumed");
        (rx.try_recv().expect("asked").flushed, done)
    }

    #[test]
    fn a_request_is_answered_once_its_steps_frames_were_sent() {
        let (flushed, mut done) = token();
        let mut flushes = Flushes::default();
        flushes.next.push(flushed);
        assert!(flushes.wanted());
        flushes.step_started();
        assert!(!flushes.wanted());
        flushes.step_returned(true);
        assert!(
            done.try_recv()
                .is_err_and(|e| e == tokio::sync::oneshot::error::TryRecvError::Empty)
        );
        flushes.sent();
        assert!(
            done.try_recv()
                .is_err_and(|e| e == tokio::sync::oneshot::error::TryRecvError::Closed)
        );
    }

    #[test]
    fn a_step_with_nothing_to_write_answers_at_once() {
        let (flushed, mut done) = token();
        let mut flushes = Flushes::default();
        flushes.next.push(flushed);
        flushes.step_started();
        flushes.step_returned(false);
        assert!(
            done.try_recv()
                .is_err_and(|e| e == tokio::sync::oneshot::error::TryRecvError::Closed)
        );
    }
}
