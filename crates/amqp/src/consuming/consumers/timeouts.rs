//! Consumer timeouts: each unacknowledged delivery has a deadline (the queue's
//! `x-consumer-timeout`, or `amqp.consumer_timeout_ms`); once the oldest one passes, the
//! channel is closed, as RabbitMQ closes it.

use super::{Consumers, Unacked};
use std::time::Instant;

/// When the oldest unacknowledged delivery of a timeout times out: (deadline, delivery
/// tag, the timeout in ms), ordered by deadline.
pub(super) type AckDeadline = std::cmp::Reverse<(Instant, u64, u64)>;

impl Consumers {
    /// The earliest acknowledgement deadline of a delivery still unacknowledged.
    pub(super) fn next_ack_deadline(&mut self) -> Option<Instant> {
        while let Some(std::cmp::Reverse((at, tag, _))) = self.ack_deadlines.peek() {
            if self.unacked.contains_key(tag) {
                return Some(*at);
            }
            self.ack_deadlines.pop();
        }
        None
    }

    /// The timeout (ms) of an unacknowledged delivery whose deadline has passed, if any:
    /// the channel is then closed, as RabbitMQ closes it.
    pub(crate) fn ack_timed_out(&mut self) -> Option<u64> {
        let due = self.next_ack_deadline()? <= Instant::now();
        let std::cmp::Reverse((_, _, timeout)) = self.ack_deadlines.peek()?;
        due.then_some(*timeout)
    }

    /// Notes delivery `tag` from `queue` as unacknowledged from now.
    pub(super) fn track(&mut self, tag: u64, unacked: Unacked) {
        let timeout = self
            .ctx
            .broker
            .config
            .consumer_timeout(unacked.queue.spec.args.consumer_timeout);
        if let Some(timeout) = timeout {
            let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
            self.ack_deadlines
                .push(std::cmp::Reverse((Instant::now() + timeout, tag, ms)));
        }
        self.unacked.insert(tag, unacked);
    }
}
