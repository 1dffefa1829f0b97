//! The channel's consumer of direct replies (`amq.rabbitmq.reply-to`,
//! [`crate::state::direct_reply`]): its reply address, and replies delivered to it
//! without acknowledgement.

use super::Consumers;
use crate::state::direct_reply::Reply;
use crate::wire::codec;
use crate::wire::errors::AmqpError;
use amq_protocol::protocol::{AMQPClass, basic};
use tokio::sync::mpsc;

/// The channel's consumer of direct replies (`amq.rabbitmq.reply-to`).
pub(super) struct ReplyConsumer {
    /// Its consumer tag.
    pub(super) tag: String,
    /// The channel's reply address.
    pub(super) address: String,
    /// Replies published to the address.
    pub(super) replies: mpsc::UnboundedReceiver<Reply>,
}

impl Consumers {
    /// basic.consume on `amq.rabbitmq.reply-to`: makes the channel's reply address and
    /// returns the consumer tag.
    ///
    /// # Errors
    /// 406 when `no_ack` is off or the channel has a reply consumer already (RabbitMQ's
    /// words), 530 for a tag in use.
    pub(crate) fn consume_replies(&mut self, tag: &str, no_ack: bool) -> Result<String, AmqpError> {
        if !no_ack {
            return Err(AmqpError::precondition_failed(
                "reply consumer cannot acknowledge",
            ));
        }
        if self.reply.is_some() {
            return Err(AmqpError::precondition_failed("reply consumer already set"));
        }
        let tag = self.unused_tag(tag)?;
        let (address, replies) = self.ctx.broker.direct_replies.register();
        self.reply = Some(ReplyConsumer {
            tag: tag.clone(),
            address,
            replies,
        });
        Ok(tag)
    }

    /// The channel's reply address, while it consumes direct replies.
    pub(crate) fn reply_address(&self) -> Option<&str> {
        self.reply.as_ref().map(|r| r.address.as_str())
    }

    /// Encodes `reply` as a delivery to the reply consumer (no acknowledgement expected).
    pub(crate) fn deliver_reply(&mut self, reply: &Reply) -> Vec<u8> {
        let mut out = Vec::new();
        let Some(consumer) = &self.reply else {
            return out;
        };
        self.last_tag += 1;
        codec::encode_method(
            &mut out,
            self.channel,
            AMQPClass::Basic(basic::AMQPMethod::Deliver(basic::Deliver {
                consumer_tag: consumer.tag.as_str().into(),
                delivery_tag: self.last_tag,
                redelivered: false,
                exchange: "".into(),
                routing_key: reply.routing_key.as_str().into(),
            })),
        );
        codec::encode_content(
            &mut out,
            self.channel,
            &reply.raw_properties,
            &reply.body,
            self.ctx.frame_max,
        );
        out
    }

    /// Stops the reply consumer if `tag` is its tag; returns whether it was.
    pub(super) fn cancel_replies(&mut self, tag: &str) -> bool {
        match &self.reply {
            Some(r) if r.tag == tag => {
                self.ctx.broker.direct_replies.unregister(&r.address);
                self.reply = None;
                true
            }
            _ => false,
        }
    }
}
