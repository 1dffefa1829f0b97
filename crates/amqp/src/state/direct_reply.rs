//! Direct reply-to (`amq.rabbitmq.reply-to`), as RabbitMQ implements it: an RPC client
//! consumes from the pseudo-queue `amq.rabbitmq.reply-to` in no-ack mode and publishes its
//! requests with `reply_to` set to that name; the server rewrites it to the channel's own
//! address (`amq.rabbitmq.reply-to.KEY`, KEY unguessable); a reply published to the
//! default exchange with that address as routing key goes straight to the consuming channel
//! — never stored, never queued, confirmed to its publisher at once. A reply to an address
//! whose channel is gone is dropped (returned with 312 NO_ROUTE when mandatory).
//!
//! The addresses live in this instance's memory: a reply reaches a channel of the same
//! Ferry instance (docs/amqp.md says so).

use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use tokio::sync::mpsc;

/// The pseudo-queue a client consumes from and names in `reply_to`.
pub(crate) const PSEUDO_QUEUE: &str = "amq.rabbitmq.reply-to";
/// The prefix of every channel's reply address.
pub(crate) const ADDRESS_PREFIX: &str = "amq.rabbitmq.reply-to.";

/// Whether `name` is the pseudo-queue or a reply address.
pub(crate) fn is_reply_queue(name: &str) -> bool {
    name == PSEUDO_QUEUE || name.starts_with(ADDRESS_PREFIX)
}

/// A reply on its way to the channel that consumes its address.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The address it was published to (its routing key).
    pub routing_key: String,
    /// Its properties, as the publisher encoded them.
    pub raw_properties: Bytes,
    /// Its body.
    pub body: Bytes,
}

/// The reply addresses of this instance's channels.
#[derive(Debug, Default)]
pub struct DirectReplies {
    channels: Mutex<HashMap<String, mpsc::UnboundedSender<Reply>>>,
}

impl DirectReplies {
    /// A new address and the receiver of its replies (for as long as the receiver lives
    /// or until [`DirectReplies::unregister`]).
    pub fn register(&self) -> (String, mpsc::UnboundedReceiver<Reply>) {
        let key: String = ferry_auth::scram::random_bytes(18)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let address = format!("{ADDRESS_PREFIX}{key}");
        let (tx, rx) = mpsc::unbounded_channel();
        self.channels.lock().insert(address.clone(), tx);
        (address, rx)
    }

    /// Forgets `address`.
    pub fn unregister(&self, address: &str) {
        self.channels.lock().remove(address);
    }

    /// Hands `reply` to the channel of its routing key; `false` when there is none.
    pub fn deliver(&self, reply: Reply) -> bool {
        let mut channels = self.channels.lock();
        match channels.get(&reply.routing_key) {
            Some(tx) => match tx.send(reply) {
                Ok(()) => true,
                Err(gone) => {
                    channels.remove(&gone.0.routing_key);
                    false
                }
            },
            None => false,
        }
    }

    /// Whether `address` belongs to a channel now.
    pub fn exists(&self, address: &str) -> bool {
        self.channels.lock().contains_key(address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(to: &str) -> Reply {
        Reply {
            routing_key: to.to_owned(),
            raw_properties: Bytes::new(),
            body: Bytes::from_static(b"pong"),
        }
    }

    #[test]
    fn a_reply_reaches_its_address_and_no_other() {
        let replies = DirectReplies::default();
        let (a, mut a_rx) = replies.register();
        let (b, _b_rx) = replies.register();
        assert_ne!(a, b);
        assert!(a.starts_with(ADDRESS_PREFIX) && a.len() == ADDRESS_PREFIX.len() + 36);
        assert!(replies.deliver(reply(&a)));
        assert_eq!(&a_rx.try_recv().unwrap().body[..], b"pong");
        assert!(replies.exists(&b));
        assert!(!replies.deliver(reply("amq.rabbitmq.reply-to.nobody")));
        replies.unregister(&a);
        assert!(!replies.deliver(reply(&a)) && !replies.exists(&a));
    }

    #[test]
    fn a_dropped_receiver_forgets_its_address() {
        let replies = DirectReplies::default();
        let (a, rx) = replies.register();
        drop(rx);
        assert!(!replies.deliver(reply(&a)));
        assert!(!replies.exists(&a));
    }
}
