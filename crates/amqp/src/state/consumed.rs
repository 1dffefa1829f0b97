//! Which channels of one connection consume which queues, so a publishing channel of the
//! same connection can ask them to deliver what its commit stored before it confirms.
//!
//! A client that consumes what it publishes should read a message's delivery before its
//! confirm, so a connection cut between the two never leaves it a confirm for a message it
//! was not sent (issue 33; RabbitMQ 3.10 does not keep this order). Here a confirm is
//! ready once the append committed, and each consumer leases in a transaction of its
//! own; so the publishing channel asks the connection's consumers of the queues it stored
//! to ([`ConsumedQueues::ask`]) and holds the confirm until they answer
//! ([`crate::publishing::confirm_order`]).
//!
//! **Answering is dropping.** Every consumer asked keeps a clone of the request's
//! [`Flushed`] token until its deliveries of what the commit stored were handed to the
//! connection's writer (or it cannot receive: no prefetch room, flow stopped, cancelled,
//! its channel closed); the confirm is released when the last clone is gone. So a
//! channel that closes or a consumer cancelled meanwhile releases the confirm by being
//! dropped, and no channel ever waits for another: the request is a message, the held
//! confirm is state of the publishing channel's loop.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// A request's token: the confirm waits until every clone is dropped.
#[derive(Debug, Clone)]
pub(crate) struct Flushed {
    /// Never sent on: its drop, once no clone is left, resolves the receiver.
    _release: Arc<oneshot::Sender<()>>,
}

/// A request to a consuming channel: deliver now what is ready in `queues`, then drop
/// `flushed`.
#[derive(Debug)]
pub(crate) struct DeliverNow {
    /// The queues a commit stored to that the channel consumes.
    pub queues: Vec<String>,
    /// Dropped once the channel's consumers of `queues` delivered (or cannot).
    pub flushed: Flushed,
}

/// A consuming channel: its mailbox and how many of its consumers read each queue.
#[derive(Debug)]
struct Consuming {
    mailbox: mpsc::UnboundedSender<DeliverNow>,
    queues: HashMap<String, usize>,
}

/// The connection's consuming channels.
#[derive(Debug, Default)]
pub(crate) struct ConsumedQueues {
    channels: Mutex<HashMap<u16, Consuming>>,
}

impl ConsumedQueues {
    /// A consumer of channel `channel` started reading `queue`; requests for it go to
    /// `mailbox`.
    pub(crate) fn add(
        &self,
        channel: u16,
        queue: &str,
        mailbox: &mpsc::UnboundedSender<DeliverNow>,
    ) {
        let mut channels = self.channels.lock().expect("not poisoned");
        let c = channels.entry(channel).or_insert_with(|| Consuming {
            mailbox: mailbox.clone(),
            queues: HashMap::new(),
        });
        *c.queues.entry(queue.to_owned()).or_default() += 1;
    }

    /// A consumer of channel `channel` of `queue` stopped.
    pub(crate) fn remove(&self, channel: u16, queue: &str) {
        let mut channels = self.channels.lock().expect("not poisoned");
        let Some(c) = channels.get_mut(&channel) else {
            return;
        };
        if let Some(n) = c.queues.get_mut(queue) {
            *n -= 1;
            if *n == 0 {
                c.queues.remove(queue);
            }
        }
        if c.queues.is_empty() {
            channels.remove(&channel);
        }
    }

    /// Asks the channels that consume any of `queues` to deliver what is ready in them;
    /// returns what resolves once they did, or `None` when no channel consumes them (the
    /// confirm goes at once).
    pub(crate) fn ask<'a>(
        &self,
        queues: impl IntoIterator<Item = &'a str>,
    ) -> Option<oneshot::Receiver<()>> {
        let channels = self.channels.lock().expect("not poisoned");
        if channels.is_empty() {
            return None;
        }
        let queues: Vec<&str> = queues.into_iter().collect();
        let (tx, rx) = oneshot::channel();
        let flushed = Flushed {
            _release: Arc::new(tx),
        };
        let mut asked = false;
        for c in channels.values() {
            let consumed: Vec<String> = queues
                .iter()
                .filter(|q| c.queues.contains_key(**q))
                .map(|q| (*q).to_owned())
                .collect();
            if consumed.is_empty() {
                continue;
            }
            let request = DeliverNow {
                queues: consumed,
                flushed: flushed.clone(),
            };
            asked |= c.mailbox.send(request).is_ok();
        }
        asked.then_some(rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_queue_nobody_consumes_asks_nobody() {
        let consumed = ConsumedQueues::default();
        let (tx, _rx) = mpsc::unbounded_channel();
        consumed.add(1, "q", &tx);
        assert!(consumed.ask(["other"]).is_none());
        consumed.remove(1, "q");
        assert!(consumed.ask(["q"]).is_none());
    }

    #[tokio::test]
    async fn the_confirm_waits_until_every_asked_channel_dropped_its_token() {
        let consumed = ConsumedQueues::default();
        let (tx1, mut rx1) = mpsc::unbounded_channel();
        let (tx2, mut rx2) = mpsc::unbounded_channel();
        consumed.add(1, "a", &tx1);
        consumed.add(2, "b", &tx2);
        let mut done = consumed.ask(["a", "b", "c"]).expect("both consume");
        let first = rx1.recv().await.expect("asked");
        let second = rx2.recv().await.expect("asked");
        assert_eq!(first.queues, ["a"]);
        assert_eq!(second.queues, ["b"]);
        drop(first);
        assert!(
            done.try_recv()
                .is_err_and(|e| e == oneshot::error::TryRecvError::Empty)
        );
        drop(second);
        assert!(done.await.is_err(), "released by the last drop");
    }
}
