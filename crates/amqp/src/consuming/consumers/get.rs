//! basic.get on a channel: one message from the head of a queue, leased by the channel's
//! own holder (or popped, without acknowledgement), or get-empty.

use super::deliveries::count_deliveries;
use super::{Consumers, Unacked};
use crate::message::large;
use crate::message::stored::StoredMessage;
use crate::state::topology::Queue;
use crate::wire::codec;
use crate::wire::errors::AmqpError;
use amq_protocol::protocol::{AMQPClass, basic};
use ferry_stage::{Delivery, Holders, StageError, now_ms};
use ferry_telemetry::compat::rabbitmq::state::{self as rabbitmq, DeliveryMode};
use std::sync::Arc;

impl Consumers {
    /// basic.get: one message, or get-empty.
    ///
    /// # Errors
    /// 541 when the store fails.
    pub(crate) async fn get(
        &mut self,
        queue: Arc<Queue>,
        no_ack: bool,
    ) -> Result<Vec<u8>, AmqpError> {
        queue.touch();
        let mut got = if no_ack {
            self.pop_holding_spill(&queue).await?
        } else {
            let holder = self.channel_holder().await?;
            queue.stage.lease(holder, 1).await?
        };
        let mut out = Vec::new();
        let Some(d) = got.pop() else {
            rabbitmq::get_empty();
            codec::encode_method(
                &mut out,
                self.channel,
                AMQPClass::Basic(basic::AMQPMethod::GetEmpty(basic::GetEmpty {})),
            );
            return Ok(out);
        };
        let message = StoredMessage::decode(d.body.clone())
            .map_err(|e| AmqpError::internal(e.to_string()))?;
        let remaining = queue.stage.depth().await?.ready.max(0) as u32;
        self.last_tag += 1;
        if let (false, Some(holder)) = (no_ack, self.channel_holder) {
            self.track(
                self.last_tag,
                Unacked {
                    queue: queue.clone(),
                    holder,
                    id: d.id,
                    consumer: None,
                    copies: queue.stage.dead_letter_copies(&d.envelope),
                },
            );
        }
        // A popped message's delivery is not counted, so any earlier one makes it a
        // redelivery.
        let (redelivered, returns) = if no_ack {
            (d.envelope.delivery_count > 0, d.envelope.delivery_count)
        } else {
            (d.redelivered(), d.envelope.delivery_count.saturating_sub(1))
        };
        let properties = message
            .delivered_properties(queue.is_quorum(), returns)
            .map_err(|e| AmqpError::internal(e.to_string()))?;
        count_deliveries(
            &queue,
            DeliveryMode { get: true, no_ack },
            1,
            u64::from(redelivered),
        );
        codec::encode_method(
            &mut out,
            self.channel,
            AMQPClass::Basic(basic::AMQPMethod::GetOk(basic::GetOk {
                delivery_tag: self.last_tag,
                redelivered,
                exchange: message.exchange.as_str().into(),
                routing_key: message.routing_key.as_str().into(),
                message_count: remaining,
            })),
        );
        let Some(spill) = d.envelope.spill else {
            codec::encode_content(
                &mut out,
                self.channel,
                &properties,
                &message.body,
                self.ctx.frame_max,
            );
            return Ok(out);
        };
        large::send_content(&self.ctx, self.channel, out, &properties, spill).await?;
        if let (true, Some(holder)) = (no_ack, self.channel_holder) {
            let spills = self.ctx.broker.stages.spills();
            if let Err(e) = spills.let_go(holder, spill.id).await {
                tracing::warn!(error = %e, "cannot let go of a sent message's spill; it is freed when the channel closes");
            }
        }
        Ok(Vec::new())
    }

    /// The channel's own lease holder, registered on first use.
    ///
    /// # Errors
    /// 541 when the store fails.
    pub(crate) async fn channel_holder(&mut self) -> Result<u64, AmqpError> {
        if let Some(h) = self.channel_holder {
            return Ok(h);
        }
        let broker = &self.ctx.broker;
        let h = broker.holders.register(broker.liveness.ttl()).await?;
        self.holders.push(h);
        self.channel_holder = Some(h);
        Ok(h)
    }

    /// basic.get without acknowledgement: pops the head. Popping drops a large message's
    /// reference to its spill, so the channel's holder takes one in the same transaction
    /// (registered then, when the channel has none), kept until the body is sent.
    async fn pop_holding_spill(&mut self, queue: &Queue) -> Result<Vec<Delivery>, AmqpError> {
        let broker = &self.ctx.broker;
        let (known, fresh) = (self.channel_holder, Holders::new_id());
        let (stage, spills, ttl) = (&queue.stage, broker.stages.spills(), broker.liveness.ttl());
        let now = now_ms();
        let (got, registered) = broker
            .db
            .run(|tx| {
                let spills = spills.clone();
                async move {
                    let got = stage.pop_in(&tx, 1, now).await?;
                    let spilled: Vec<_> = got.iter().filter_map(|d| d.envelope.spill).collect();
                    if spilled.is_empty() {
                        return Ok::<_, StageError>((got, false));
                    }
                    let holder = known.unwrap_or(fresh);
                    if known.is_none() {
                        broker.holders.register_in(&tx, fresh, ttl);
                    }
                    for spill in spilled {
                        spills.hold_in(&tx, holder, spill.id);
                    }
                    Ok((got, known.is_none()))
                }
            })
            .await?;
        if registered {
            self.holders.push(fresh);
            self.channel_holder = Some(fresh);
        }
        Ok(got)
    }
}
