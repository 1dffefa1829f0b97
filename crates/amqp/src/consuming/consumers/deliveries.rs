//! Deliveries to a channel's consumers: basic.consume and basic.cancel, the lease steps
//! that take each consumer's messages within its prefetch, and the frames that deliver
//! them.
//!
//! **Leases.** Each consumer (and the channel's basic.get) has its own lease holder, so a
//! stage consumer never mistakes another consumer's lease for its own. A consumer leases
//! at most its prefetch room at a time ([`ferry_stage::Consumer`], with the
//! high-contention dequeue when consumers compete); an idle one waits on the stage's
//! watches. Deliveries are written to the socket only after the lease committed.
//!
//! **Back-pressure.** A consumer leases its next batch only once the frames of its last
//! one were taken by the connection's writer ([`Consumers::sent`]), whose queue is bounded
//! in bytes ([`crate::wire::writer::QUEUE_BYTES`]). So a consumer whose client reads
//! nothing — without a prefetch limit, too — holds at most one leased batch beyond what the
//! writer holds; normal consumers lose nothing, the writer taking a batch at once.

use super::{BATCH_DELAY, ConsumerState, Consumers, Event, LEASE_BATCH, Unacked, flushes};
use crate::consuming::sac;
use crate::consuming::settle::{How, Settlement};
use crate::message::large;
use crate::message::stored::StoredMessage;
use crate::state::registry::LiveConsumer;
use crate::state::topology::Queue;
use crate::wire::codec;
use crate::wire::errors::AmqpError;
use amq_protocol::protocol::{AMQPClass, basic};
use ferry_stage::{self as stage, Delivery, StageError, Step};
use ferry_telemetry::amqp as metric;
use ferry_telemetry::compat::rabbitmq::state::{self as rabbitmq, DeliveryMode};
use std::sync::Arc;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

impl Consumers {
    /// basic.consume: registers a consumer (the caller sends consume-ok, then calls
    /// [`Consumers::start`]).
    ///
    /// # Errors
    /// 530 for a consumer tag in use, 403 for exclusivity conflicts, 541 when the store
    /// fails.
    pub(crate) async fn consume(
        &mut self,
        queue: Arc<Queue>,
        tag: &str,
        no_ack: bool,
        exclusive: bool,
    ) -> Result<String, AmqpError> {
        let tag = self.unused_tag(tag)?;
        self.ctx.vhost.add_consumer(&queue, exclusive)?;
        let broker = &self.ctx.broker;
        let holder = match broker.holders.register(broker.liveness.ttl()).await {
            Ok(h) => h,
            Err(e) => {
                let _ = self.ctx.vhost.remove_consumer(&queue, exclusive).await;
                return Err(e.into());
            }
        };
        self.holders.push(holder);
        self.owner_of.insert(holder, tag.clone());
        let stop = CancellationToken::new();
        let single = queue.spec.args.single_active_consumer;
        if single {
            let (broker, events, key, stop, tag) = (
                broker.clone(),
                self.events_tx.clone(),
                self.ctx.vhost.keys().active_consumer(queue.stage.id()),
                stop.clone(),
                tag.clone(),
            );
            tokio::spawn(async move {
                if sac::await_turn(&broker, &key, holder, &stop).await {
                    let _ = events.send(Event::Activated { tag });
                }
            });
        }
        {
            let (deleted, stop, events, tag) = (
                queue.deleted.clone(),
                stop.clone(),
                self.events_tx.clone(),
                tag.clone(),
            );
            tokio::spawn(async move {
                tokio::select! {
                    () = deleted.cancelled() => { let _ = events.send(Event::QueueDeleted { tag }); }
                    () = stop.cancelled() => {}
                }
            });
        }
        let consumer = stage::Consumer::new(
            queue.stage.clone(),
            broker.holders.clone(),
            holder,
            LEASE_BATCH,
        );
        self.ctx.live.consumer_started(
            self.channel,
            LiveConsumer {
                tag: tag.clone(),
                queue: queue.name.clone(),
                ack_required: !no_ack,
                exclusive,
                prefetch: u16::try_from(self.consumer_prefetch).unwrap_or(u16::MAX),
            },
        );
        let queue_name = queue.name.clone();
        self.consumers.insert(
            tag.clone(),
            ConsumerState {
                queue,
                no_ack,
                exclusive,
                holder,
                limit: self.consumer_prefetch,
                unacked: 0,
                reserved: 0,
                stage: Some(consumer),
                step: None,
                waiting: false,
                unsent: false,
                active: !single,
                forget_later: Vec::new(),
                stop,
                cancelling: false,
                flushes: flushes::Flushes::default(),
            },
        );
        self.ctx
            .consumed
            .add(self.channel, &queue_name, &self.mailbox_tx);
        Ok(tag)
    }

    /// Starts delivering to a consumer registered by [`Consumers::consume`].
    pub(crate) fn start(&mut self, tag: &str) {
        self.kick(tag);
    }

    /// How many messages `c` may receive now.
    fn room(&self, c: &ConsumerState) -> usize {
        if c.no_ack {
            return LEASE_BATCH.saturating_sub(self.no_ack_unsettled + self.reserved);
        }
        let mut room = LEASE_BATCH;
        if c.limit > 0 {
            room = room.min(c.limit.saturating_sub(c.unacked));
        }
        if self.channel_prefetch > 0 {
            room = room.min(
                self.channel_prefetch
                    .saturating_sub(self.unacked.len() + self.reserved),
            );
        }
        room
    }

    /// Starts a lease step for `tag` if it may receive and is not busy.
    pub(super) fn kick(&mut self, tag: &str) {
        self.kick_at_least(tag, 1);
    }

    /// Starts a lease step for `tag` if it may receive at least `least` messages and is
    /// not busy.
    ///
    /// A request to deliver now ([`flushes`]) makes it lease at once, even while it waits
    /// on a watch (the watch may not have fired yet), or answers the request when it
    /// cannot.
    fn kick_at_least(&mut self, tag: &str, least: usize) {
        let Some(c) = self.consumers.get(tag) else {
            return;
        };
        let flush = c.flushes.wanted();
        if c.unsent || c.step.is_some() || (c.waiting && !flush) {
            // A request waits for the step after these.
            return;
        }
        let room = self.room(c);
        if !self.flowing || !c.active || c.cancelling || room == 0 {
            if let Some(c) = self.consumers.get_mut(tag) {
                c.flushes.cannot_step();
            }
            return;
        }
        let least = if flush { 1 } else { least };
        if room < least.min(self.prefetch_of(c)) {
            // Too little room for a worthwhile lease now; take what there is if no more
            // frees up soon.
            self.lease_due
                .get_or_insert_with(|| Instant::now() + BATCH_DELAY);
            return;
        }
        let c = self.consumers.get_mut(tag).expect("looked up above");
        let Some(mut consumer) = c.stage.take() else {
            return;
        };
        consumer.set_batch(room);
        c.flushes.step_started();
        c.waiting = false;
        c.reserved = room;
        self.reserved += room;
        let (events, tag) = (self.events_tx.clone(), tag.to_owned());
        c.step = Some(tokio::spawn(async move {
            let result = consumer.step().await;
            let _ = events.send(Event::Stepped {
                tag,
                consumer: Box::new(consumer),
                result,
            });
        }));
    }

    /// Starts a lease step for `tag` if it may receive a quarter of its prefetch (or
    /// anything, once [`BATCH_DELAY`] passed), so a lease never takes one message per
    /// acknowledgement.
    fn kick_batched(&mut self, tag: &str) {
        if let Some(c) = self.consumers.get(tag) {
            let least = (self.prefetch_of(c) / 4).max(1);
            self.kick_at_least(tag, least);
        }
    }

    pub(super) fn kick_all(&mut self) {
        let tags: Vec<String> = self.consumers.keys().cloned().collect();
        for tag in tags {
            self.kick(&tag);
        }
    }

    pub(super) fn kick_all_batched(&mut self) {
        let tags: Vec<String> = self.consumers.keys().cloned().collect();
        for tag in tags {
            self.kick_batched(&tag);
        }
    }

    /// The frames returned so far were taken by the connection's writer: consumers whose
    /// batch was among them may lease their next.
    pub(crate) fn sent(&mut self) {
        let tags: Vec<String> = self
            .consumers
            .iter_mut()
            .filter_map(|(tag, c)| {
                c.flushes.sent();
                std::mem::take(&mut c.unsent).then(|| tag.clone())
            })
            .collect();
        for tag in tags {
            self.kick_batched(&tag);
        }
    }

    /// Handles [`Work::Due`]: consumers that waited for more room lease what they have.
    pub(crate) fn on_due(&mut self) {
        if self.lease_due.is_some_and(|due| due <= Instant::now()) {
            self.lease_due = None;
            self.kick_all();
        }
    }

    /// Handles a consumer event; returns frames to send.
    ///
    /// # Errors
    /// 541 when the store fails or a stored message cannot be read.
    pub(crate) async fn on_event(&mut self, event: Event) -> Result<Vec<u8>, AmqpError> {
        match event {
            Event::Stepped {
                tag,
                consumer,
                result,
            } => self.stepped(&tag, consumer, result).await,
            Event::Woke { tag } => {
                if let Some(c) = self.consumers.get_mut(&tag) {
                    c.waiting = false;
                }
                self.kick(&tag);
                Ok(Vec::new())
            }
            Event::Activated { tag } => {
                if let Some(c) = self.consumers.get_mut(&tag) {
                    c.active = true;
                }
                self.kick(&tag);
                Ok(Vec::new())
            }
            Event::QueueDeleted { tag } => {
                if !self.consumers.contains_key(&tag) {
                    return Ok(Vec::new());
                }
                let mut out = self.cancel(&tag).await?;
                if self.ctx.capabilities.consumer_cancel_notify {
                    codec::encode_method(
                        &mut out,
                        self.channel,
                        AMQPClass::Basic(basic::AMQPMethod::Cancel(basic::Cancel {
                            consumer_tag: tag.as_str().into(),
                            nowait: true,
                        })),
                    );
                }
                Ok(out)
            }
        }
    }

    /// Takes back a stage consumer after its step: delivers what it leased (the caller
    /// hands the frames to the writer, then calls [`Consumers::sent`]) or starts waiting on
    /// its watches, then steps again if it may.
    async fn stepped(
        &mut self,
        tag: &str,
        mut consumer: Box<stage::Consumer>,
        result: Result<Step, StageError>,
    ) -> Result<Vec<u8>, AmqpError> {
        let Some(c) = self.consumers.get_mut(tag) else {
            return Ok(Vec::new());
        };
        c.step = None;
        self.reserved -= std::mem::take(&mut c.reserved);
        consumer.forget(&std::mem::take(&mut c.forget_later));
        c.stage = Some(*consumer);
        let out = match result? {
            Step::Delivered(deliveries) => {
                let out = self.deliver(tag, deliveries).await?;
                let unsent = !out.is_empty();
                if let Some(c) = self.consumers.get_mut(tag) {
                    c.flushes.step_returned(unsent);
                    c.unsent |= unsent;
                }
                if unsent {
                    return Ok(out);
                }
                out
            }
            Step::Idle(wakeup) => {
                c.flushes.step_returned(false);
                c.waiting = true;
                let (events, stop, tag) = (self.events_tx.clone(), c.stop.clone(), tag.to_owned());
                tokio::spawn(async move {
                    tokio::select! {
                        // A failed watch (unknown commit outcome) just means: look again.
                        _ = wakeup.wait() => { let _ = events.send(Event::Woke { tag }); }
                        () = stop.cancelled() => {}
                    }
                });
                Vec::new()
            }
        };
        self.kick_batched(tag);
        Ok(out)
    }

    /// Encodes deliveries for consumer `tag` and records them; a large message is sent
    /// (with what precedes it) as its body is read from its spill.
    async fn deliver(
        &mut self,
        tag: &str,
        deliveries: Vec<Delivery>,
    ) -> Result<Vec<u8>, AmqpError> {
        let c = self.consumers.get_mut(tag).expect("the caller found it");
        let (queue, holder, no_ack) = (c.queue.clone(), c.holder, c.no_ack);
        let quorum = queue.is_quorum();
        if !no_ack {
            c.unacked += deliveries.len();
        }
        let mut out = Vec::new();
        let mut redelivered = 0;
        let mut ids = Vec::new();
        let count = deliveries.len();
        for d in deliveries {
            self.last_tag += 1;
            let (id, redelivery) = (d.id, d.redelivered());
            let copies = queue.stage.dead_letter_copies(&d.envelope);
            // Leased: every earlier lease ended in a return.
            let returns = d.envelope.delivery_count.saturating_sub(1);
            let message =
                StoredMessage::decode(d.body).map_err(|e| AmqpError::internal(e.to_string()))?;
            redelivered += u64::from(redelivery);
            codec::encode_method(
                &mut out,
                self.channel,
                AMQPClass::Basic(basic::AMQPMethod::Deliver(basic::Deliver {
                    consumer_tag: tag.into(),
                    delivery_tag: self.last_tag,
                    redelivered: redelivery,
                    exchange: message.exchange.as_str().into(),
                    routing_key: message.routing_key.as_str().into(),
                })),
            );
            let properties = message
                .delivered_properties(quorum, returns)
                .map_err(|e| AmqpError::internal(e.to_string()))?;
            match d.envelope.spill {
                None => codec::encode_content(
                    &mut out,
                    self.channel,
                    &properties,
                    &message.body,
                    self.ctx.frame_max,
                ),
                Some(spill) => {
                    let before = std::mem::take(&mut out);
                    large::send_content(&self.ctx, self.channel, before, &properties, spill)
                        .await?;
                }
            }
            if no_ack {
                ids.push(id);
            } else {
                self.track(
                    self.last_tag,
                    Unacked {
                        queue: queue.clone(),
                        holder,
                        id,
                        consumer: Some(tag.to_owned()),
                        copies,
                    },
                );
            }
        }
        let how = DeliveryMode { get: false, no_ack };
        count_deliveries(&queue, how, count, redelivered);
        if no_ack {
            self.no_ack_unsettled += ids.len();
            self.queue_pending(vec![Settlement {
                queue,
                holder,
                ids,
                how: How::Ack,
                copies: 0,
            }]);
        }
        Ok(out)
    }

    /// The prefetch that bounds `c`: the smaller of its own and the channel's (or the
    /// largest lease when neither is set).
    fn prefetch_of(&self, c: &ConsumerState) -> usize {
        [c.limit, self.channel_prefetch]
            .into_iter()
            .filter(|p| *p > 0)
            .min()
            .unwrap_or(LEASE_BATCH)
            .min(LEASE_BATCH)
    }

    /// basic.cancel: stops a consumer (deliveries already leased to it are delivered
    /// first); its unacknowledged deliveries stay until acknowledged or the channel
    /// closes. Returns frames to send before cancel-ok.
    ///
    /// # Errors
    /// 541 when the store fails.
    pub(crate) async fn cancel(&mut self, tag: &str) -> Result<Vec<u8>, AmqpError> {
        let mut out = Vec::new();
        if self.cancel_replies(tag) {
            return Ok(out);
        }
        let Some(c) = self.consumers.get_mut(tag) else {
            return Ok(out);
        };
        c.cancelling = true;
        c.stop.cancel();
        // Let a running step finish, delivering what it leased: the client sees those
        // deliveries before cancel-ok, as with RabbitMQ.
        let mut later = Vec::new();
        while self.consumers.get(tag).is_some_and(|c| c.step.is_some()) {
            match self.events.recv().await {
                Some(Event::Stepped {
                    tag,
                    consumer,
                    result,
                }) => out.extend(self.stepped(&tag, consumer, result).await?),
                Some(other) => later.push(other),
                None => break,
            }
        }
        // Other news waits for the channel loop.
        for event in later {
            let _ = self.events_tx.send(event);
        }
        let Some(c) = self.consumers.remove(tag) else {
            return Ok(out);
        };
        self.ctx.live.consumer_stopped(self.channel, tag);
        self.ctx.consumed.remove(self.channel, &c.queue.name);
        if c.queue.spec.args.single_active_consumer {
            sac::give_up_turn(
                &self.ctx.broker,
                &self.ctx.vhost.keys().active_consumer(c.queue.stage.id()),
                c.holder,
            )
            .await;
        }
        self.ctx
            .vhost
            .remove_consumer(&c.queue, c.exclusive)
            .await?;
        Ok(out)
    }
}

/// Counts deliveries of `queue` (consumers' and basic.get's) in Ferry's and RabbitMQ's
/// metrics.
pub(super) fn count_deliveries(
    queue: &Queue,
    how: DeliveryMode,
    delivered: usize,
    redelivered: u64,
) {
    rabbitmq::delivered(how, delivered as u64, redelivered);
    let labels = queue.labels();
    metrics::counter!(metric::DELIVERED_TOTAL, &labels).increment(delivered as u64);
    if redelivered > 0 {
        metrics::counter!(metric::REDELIVERED_TOTAL, &labels).increment(redelivered);
    }
}
