//! Consuming on one channel: consumers, basic.get, deliveries, prefetch, and the
//! acknowledgements that settle them.
//!
//! **Leases.** Each consumer (and the channel's basic.get) has its own lease holder, so a
//! stage consumer never mistakes another consumer's lease for its own. A consumer leases
//! at most its prefetch room at a time ([`ferry_stage::Consumer`], with the
//! high-contention dequeue when consumers compete); an idle one waits on the stage's
//! watches. Deliveries are written to the socket only after the lease committed.
//!
//! **Back-pressure.** A consumer leases its next batch only once the frames of its last
//! one were taken by the connection's writer ([`Consumers::sent`]), whose queue is bounded
//! in bytes ([`crate::writer::QUEUE_BYTES`]). So a consumer whose client reads
//! nothing — without a prefetch limit, too — holds at most one leased batch beyond what the
//! writer holds; normal consumers lose nothing, the writer taking a batch at once.
//!
//! **Settling.** basic.ack/nack/reject and recover are collected and committed in batches
//! (one transaction while the previous one commits: a [`GroupCommit`]), like publishes. Acknowledgements
//! wait up to [`BATCH_DELAY`] or until [`SETTLE_BATCH`] are pending, since nothing
//! answers them; requeues and rejections commit at once. A consumer forgets a
//! settled lease only after that commit, so it never takes a still-held lease for unseen.
//!
//! **Closing.** When the channel closes, every holder is released: unacknowledged
//! deliveries return to their original positions and come back with `redelivered` set.

use super::codec;
use super::context::ConnectionContext;
use super::direct_reply::Reply;
use super::errors::{AmqpError, TxError};
use super::large;
use super::message::StoredMessage;
use super::registry::LiveConsumer;
use super::sac;
use super::settle::{How, Settlement, settle_in};
use super::topology::Queue;
use amq_protocol::protocol::{AMQPClass, basic};
use ferry_stage::GroupCommit;
use ferry_stage::{self as stage, Delivery, Holders, MessageId, StageError, Step, now_ms, spill};
use ferry_telemetry::amqp as metric;
use ferry_telemetry::compat::rabbitmq::state::{self as rabbitmq, DeliveryMode};
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Messages one lease takes at most, whatever the prefetch.
pub const LEASE_BATCH: usize = 1000;
/// Settlements commit once this many deliveries are pending, or after [`BATCH_DELAY`].
const SETTLE_BATCH: usize = 256;
/// How long pending settlements wait for more before they commit, and how long a
/// consumer with less than a quarter of its prefetch free waits for more room before it
/// leases: fewer, larger transactions (AMQP acknowledgements have no reply to delay).
const BATCH_DELAY: Duration = Duration::from_millis(4);

/// When the oldest unacknowledged delivery of a timeout times out: (deadline, delivery
/// tag, the timeout in ms), ordered by deadline.
type AckDeadline = std::cmp::Reverse<(Instant, u64, u64)>;

/// A delivery not yet acknowledged.
#[derive(Debug, Clone)]
struct Unacked {
    queue: Arc<Queue>,
    holder: u64,
    id: MessageId,
    /// The consumer that received it (`None`: basic.get).
    consumer: Option<String>,
    /// Bytes dead-lettering it copies ([`stage::Stage::dead_letter_copies`]).
    copies: u64,
}

/// News from a consumer's background work.
pub enum Event {
    /// A lease step finished.
    Stepped {
        tag: String,
        consumer: Box<stage::Consumer>,
        result: Result<Step, StageError>,
    },
    /// A watch fired: messages may be ready.
    Woke { tag: String },
    /// A single-active-consumer queue's turn came to this consumer.
    Activated { tag: String },
    /// The consumer's queue was deleted.
    QueueDeleted { tag: String },
}

/// One consumer.
struct ConsumerState {
    queue: Arc<Queue>,
    no_ack: bool,
    exclusive: bool,
    holder: u64,
    /// Its prefetch (0: unlimited).
    limit: usize,
    /// Its deliveries not yet acknowledged.
    unacked: usize,
    /// The room its running step may fill (counted against the channel's prefetch until
    /// the step returns).
    reserved: usize,
    /// The stage consumer; `None` while a step runs with it.
    stage: Option<stage::Consumer>,
    /// The running step.
    step: Option<JoinHandle<()>>,
    /// Whether it waits on a watch.
    waiting: bool,
    /// Whether the frames of its last batch wait for the connection's writer: it leases
    /// again only once they are taken ([`Consumers::sent`]).
    unsent: bool,
    /// Whether it may receive (single active consumer: its turn came).
    active: bool,
    /// Settled leases to forget once the step returns the stage consumer.
    forget_later: Vec<MessageId>,
    /// Stops its helper tasks (watch wait, turn wait, deletion watch).
    stop: CancellationToken,
    /// Set once basic.cancel (or the queue's deletion) began removing it.
    cancelling: bool,
}

/// What [`Consumers::next_work`] found.
pub enum Work {
    /// A consumer event.
    Event(Event),
    /// The settle commit finished.
    Settled(Result<Settled, AmqpError>),
    /// A batching delay ([`BATCH_DELAY`]) ended: call [`Consumers::on_due`], then
    /// [`Consumers::start_commit`].
    Due,
    /// An unacknowledged delivery's deadline passed: ask [`Consumers::ack_timed_out`].
    AckDeadline,
    /// A direct reply arrived: deliver it with [`Consumers::deliver_reply`].
    Reply(Reply),
}

/// A finished settle commit.
pub struct Settled {
    settlements: Vec<Settlement>,
    result: Result<(), AmqpError>,
}

/// The channel's consumer of direct replies (`amq.rabbitmq.reply-to`).
struct ReplyConsumer {
    /// Its consumer tag.
    tag: String,
    /// The channel's reply address.
    address: String,
    /// Replies published to the address.
    replies: mpsc::UnboundedReceiver<Reply>,
}

/// One channel's consumers and unacknowledged deliveries.
pub struct Consumers {
    ctx: Arc<ConnectionContext>,
    channel: u16,
    consumers: HashMap<String, ConsumerState>,
    /// Which consumer owns a holder.
    owner_of: HashMap<u64, String>,
    /// Every holder the channel registered (consumers', the channel's own), to renew and
    /// release.
    holders: Vec<u64>,
    /// The channel's own holder, registered when first needed: it leases basic.get's
    /// messages and holds spills (large bodies being published or sent).
    channel_holder: Option<u64>,
    unacked: BTreeMap<u64, Unacked>,
    /// The acknowledgement deadlines of unacknowledged deliveries (settled ones are
    /// dropped when they reach the top).
    ack_deadlines: BinaryHeap<AckDeadline>,
    last_tag: u64,
    /// basic.qos global=false: the prefetch of consumers created from now on.
    consumer_prefetch: usize,
    /// basic.qos global=true: the prefetch shared by the channel's consumers.
    channel_prefetch: usize,
    /// channel.flow: whether deliveries may flow.
    flowing: bool,
    /// No-ack deliveries sent and not yet removed from their stage.
    no_ack_unsettled: usize,
    /// The room all running steps may fill.
    reserved: usize,
    /// Settlements waiting for (or in) a store commit.
    settlements: GroupCommit<Settlement, Settled>,
    /// When consumers that wait for more prefetch room lease what they have.
    lease_due: Option<Instant>,
    /// The direct-reply consumer, if the channel has one.
    reply: Option<ReplyConsumer>,
    events_tx: mpsc::UnboundedSender<Event>,
    events: mpsc::UnboundedReceiver<Event>,
}

impl Consumers {
    /// No consumers yet.
    pub fn new(ctx: Arc<ConnectionContext>, channel: u16) -> Self {
        let (events_tx, events) = mpsc::unbounded_channel();
        Self {
            ctx,
            channel,
            consumers: HashMap::new(),
            owner_of: HashMap::new(),
            holders: Vec::new(),
            channel_holder: None,
            unacked: BTreeMap::new(),
            ack_deadlines: BinaryHeap::new(),
            last_tag: 0,
            consumer_prefetch: 0,
            channel_prefetch: 0,
            flowing: true,
            no_ack_unsettled: 0,
            reserved: 0,
            settlements: GroupCommit::default(),
            lease_due: None,
            reply: None,
            events_tx,
            events,
        }
    }

    /// Waits for the next consumer event or the end of the settle commit under way.
    pub async fn next_work(&mut self) -> Work {
        let due = self.due();
        let ack_deadline = self.next_ack_deadline();
        let (settlements, events, reply) =
            (&mut self.settlements, &mut self.events, &mut self.reply);
        let settled = async {
            settlements
                .committed()
                .await
                .map_err(|e| AmqpError::internal(format!("a settle commit panicked: {e}")))
        };
        tokio::select! {
            // The channel holds a sender, so the stream of events never ends.
            Some(event) = events.recv() => Work::Event(event),
            done = settled => Work::Settled(done),
            () = sleep_until(due) => Work::Due,
            () = sleep_until(ack_deadline) => Work::AckDeadline,
            Some(r) = async {
                match reply {
                    Some(c) => c.replies.recv().await,
                    None => std::future::pending().await,
                }
            } => Work::Reply(r),
        }
    }

    /// basic.consume on `amq.rabbitmq.reply-to`: makes the channel's reply address and
    /// returns the consumer tag.
    ///
    /// # Errors
    /// 406 when `no_ack` is off or the channel has a reply consumer already (RabbitMQ's
    /// words), 530 for a tag in use.
    pub fn consume_replies(&mut self, tag: &str, no_ack: bool) -> Result<String, AmqpError> {
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

    /// `tag`, or a generated one (RabbitMQ's `amq.ctag-` form) when it is empty.
    ///
    /// # Errors
    /// 530 when a consumer of the channel has it.
    fn unused_tag(&self, tag: &str) -> Result<String, AmqpError> {
        let tag = if tag.is_empty() {
            format!(
                "amq.ctag-{:016x}{:016x}",
                fastrand::u64(..),
                fastrand::u64(..)
            )
        } else {
            tag.to_owned()
        };
        if self.consumers.contains_key(&tag) || self.reply.as_ref().is_some_and(|r| r.tag == tag) {
            return Err(AmqpError::not_allowed(format!(
                "attempt to reuse consumer tag '{tag}'"
            )));
        }
        Ok(tag)
    }

    /// The channel's reply address, while it consumes direct replies.
    pub fn reply_address(&self) -> Option<&str> {
        self.reply.as_ref().map(|r| r.address.as_str())
    }

    /// Encodes `reply` as a delivery to the reply consumer (no acknowledgement expected).
    pub fn deliver_reply(&mut self, reply: &Reply) -> Vec<u8> {
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
    fn cancel_replies(&mut self, tag: &str) -> bool {
        match &self.reply {
            Some(r) if r.tag == tag => {
                self.ctx.broker.direct_replies.unregister(&r.address);
                self.reply = None;
                true
            }
            _ => false,
        }
    }

    /// The earliest acknowledgement deadline of a delivery still unacknowledged.
    fn next_ack_deadline(&mut self) -> Option<Instant> {
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
    pub fn ack_timed_out(&mut self) -> Option<u64> {
        let due = self.next_ack_deadline()? <= Instant::now();
        let std::cmp::Reverse((_, _, timeout)) = self.ack_deadlines.peek()?;
        due.then_some(*timeout)
    }

    /// Notes delivery `tag` from `queue` as unacknowledged from now.
    fn track(&mut self, tag: u64, unacked: Unacked) {
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

    /// Every holder of the channel, to renew.
    pub fn holders(&self) -> &[u64] {
        &self.holders
    }

    /// basic.qos.
    pub fn qos(&mut self, prefetch: u16, global: bool) {
        self.ctx.live.set_prefetch(self.channel, prefetch, global);
        if global {
            self.channel_prefetch = prefetch.into();
        } else {
            self.consumer_prefetch = prefetch.into();
        }
    }

    /// channel.flow: pauses or resumes deliveries.
    pub fn flow(&mut self, active: bool) {
        self.flowing = active;
        self.kick_all();
    }

    /// Whether `tag` names a consumer of this channel.
    pub fn has(&self, tag: &str) -> bool {
        self.consumers.contains_key(tag)
    }

    /// basic.consume: registers a consumer (the caller sends consume-ok, then calls
    /// [`Consumers::start`]).
    ///
    /// # Errors
    /// 530 for a consumer tag in use, 403 for exclusivity conflicts, 541 when the store
    /// fails.
    pub async fn consume(
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
            },
        );
        Ok(tag)
    }

    /// Starts delivering to a consumer registered by [`Consumers::consume`].
    pub fn start(&mut self, tag: &str) {
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
    fn kick(&mut self, tag: &str) {
        self.kick_at_least(tag, 1);
    }

    /// Starts a lease step for `tag` if it may receive at least `least` messages and is
    /// not busy.
    fn kick_at_least(&mut self, tag: &str, least: usize) {
        let Some(c) = self.consumers.get(tag) else {
            return;
        };
        if !self.flowing || !c.active || c.cancelling || c.waiting || c.unsent || c.step.is_some() {
            return;
        }
        let room = self.room(c);
        if room == 0 {
            return;
        }
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

    fn kick_all(&mut self) {
        let tags: Vec<String> = self.consumers.keys().cloned().collect();
        for tag in tags {
            self.kick(&tag);
        }
    }

    fn kick_all_batched(&mut self) {
        let tags: Vec<String> = self.consumers.keys().cloned().collect();
        for tag in tags {
            self.kick_batched(&tag);
        }
    }

    /// The frames returned so far were taken by the connection's writer: consumers whose
    /// batch was among them may lease their next.
    pub fn sent(&mut self) {
        let tags: Vec<String> = self
            .consumers
            .iter_mut()
            .filter_map(|(tag, c)| std::mem::take(&mut c.unsent).then(|| tag.clone()))
            .collect();
        for tag in tags {
            self.kick_batched(&tag);
        }
    }

    /// Handles [`Work::Due`]: consumers that waited for more room lease what they have.
    pub fn on_due(&mut self) {
        if self.lease_due.is_some_and(|due| due <= Instant::now()) {
            self.lease_due = None;
            self.kick_all();
        }
    }

    /// Handles a consumer event; returns frames to send.
    ///
    /// # Errors
    /// 541 when the store fails or a stored message cannot be read.
    pub async fn on_event(&mut self, event: Event) -> Result<Vec<u8>, AmqpError> {
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
                if !out.is_empty() {
                    if let Some(c) = self.consumers.get_mut(tag) {
                        c.unsent = true;
                    }
                    return Ok(out);
                }
                out
            }
            Step::Idle(wakeup) => {
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

    /// basic.get: one message, or get-empty.
    ///
    /// # Errors
    /// 541 when the store fails.
    pub async fn get(&mut self, queue: Arc<Queue>, no_ack: bool) -> Result<Vec<u8>, AmqpError> {
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
    pub async fn channel_holder(&mut self) -> Result<u64, AmqpError> {
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

    /// basic.ack, basic.nack and basic.reject: settles the deliveries `tag` names (with
    /// `multiple`, every one up to it; tag 0 with `multiple`: all). Returns the settlements
    /// for a transactional channel to hold instead of queueing them.
    ///
    /// # Errors
    /// 406 for an unknown delivery tag.
    pub fn settle(
        &mut self,
        tag: u64,
        multiple: bool,
        how: How,
    ) -> Result<Vec<Settlement>, AmqpError> {
        let tags: Vec<u64> = if multiple {
            let upto = if tag == 0 { u64::MAX } else { tag };
            self.unacked.range(..=upto).map(|(t, _)| *t).collect()
        } else if self.unacked.contains_key(&tag) {
            vec![tag]
        } else {
            Vec::new()
        };
        if tags.is_empty() && !(multiple && tag == 0) {
            return Err(AmqpError::precondition_failed(format!(
                "unknown delivery tag {tag}"
            )));
        }
        let entries: Vec<Unacked> = tags.iter().filter_map(|t| self.unacked.remove(t)).collect();
        Ok(self.group(entries, how))
    }

    /// basic.recover with requeue: every unacknowledged delivery goes back.
    pub fn recover(&mut self) -> Vec<Settlement> {
        let entries: Vec<Unacked> = std::mem::take(&mut self.unacked).into_values().collect();
        self.group(entries, How::Requeue)
    }

    /// Groups entries by (queue, holder) and frees their consumers' prefetch room. A
    /// requeue or rejection may dead-letter (copy) what it settles, so a group of them
    /// copies at most [`spill::RUN_BYTES`] (one larger message alone), and a settle commit
    /// takes such groups while their sum stays within it ([`Consumers::commit_pending`]).
    fn group(&mut self, entries: Vec<Unacked>, how: How) -> Vec<Settlement> {
        let mut groups: Vec<Settlement> = Vec::new();
        for e in entries {
            if let Some(c) = e.consumer.as_ref().and_then(|t| self.consumers.get_mut(t)) {
                c.unacked = c.unacked.saturating_sub(1);
            }
            let copies = if how == How::Ack { 0 } else { e.copies };
            match groups.iter_mut().find(|s| {
                s.holder == e.holder
                    && Arc::ptr_eq(&s.queue, &e.queue)
                    && (s.copies == 0 || s.copies + copies <= spill::RUN_BYTES)
            }) {
                Some(s) => {
                    s.ids.push(e.id);
                    s.copies += copies;
                }
                None => groups.push(Settlement {
                    queue: e.queue,
                    holder: e.holder,
                    ids: vec![e.id],
                    how,
                    copies,
                }),
            }
        }
        groups
    }

    /// Queues settlements for the next settle commit.
    ///
    /// The room acknowledgements free is used at once by a consumer that can now lease a
    /// quarter of its prefetch, so leasing overlaps settling. Room freed by a requeue waits
    /// for its commit (which follows at once): the requeued message must be back in its
    /// place first, to be delivered again before every later message, as RabbitMQ does.
    pub fn queue_settlements(&mut self, settlements: Vec<Settlement>) {
        let requeues = settlements.iter().any(|s| s.how == How::Requeue);
        self.queue_pending(settlements);
        if !requeues {
            self.kick_all_batched();
        }
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

    /// The next end of a batching delay: pending settlements (when no commit is under
    /// way) or consumers waiting for more room.
    fn due(&self) -> Option<Instant> {
        let settle = self
            .settlements
            .waiting_since()
            .filter(|_| !self.settlements.is_committing())
            .map(|since| since + BATCH_DELAY);
        settle.into_iter().chain(self.lease_due).min()
    }

    fn queue_pending(&mut self, settlements: Vec<Settlement>) {
        self.settlements.extend(settlements);
    }

    /// Starts a settle commit of what is pending, unless one is under way or the pending
    /// settlements are a few recent acknowledgements ([`BATCH_DELAY`]). Requeues and
    /// rejections commit at once: the message is back in its place (or dead-lettered) for
    /// whatever the client does next.
    pub fn start_commit(&mut self) {
        let pending = self.settlements.pending();
        let ids: usize = pending.iter().map(|s| s.ids.len()).sum();
        let only_acks = pending.iter().all(|s| s.how == How::Ack);
        if only_acks
            && ids < SETTLE_BATCH
            && self
                .settlements
                .waiting_since()
                .is_some_and(|since| since.elapsed() < BATCH_DELAY)
        {
            return;
        }
        self.commit_pending();
    }

    /// Commits the first run of pending settlements whose dead-letter copies fit one
    /// transaction ([`spill::runs`]); the rest follow in the next commits.
    fn commit_pending(&mut self) {
        let db = self.ctx.broker.db.clone();
        let copies: Vec<u64> = self
            .settlements
            .pending()
            .iter()
            .map(|s| s.copies)
            .collect();
        let take = spill::runs(&copies).first().map_or(0, |run| run.end);
        self.settlements.start(take, |settlements| async move {
            let now = now_ms();
            let list = &settlements;
            let result = db
                .run(|tx| async move {
                    for s in list {
                        settle_in(&tx, s, now).await?;
                    }
                    Ok::<_, TxError>(())
                })
                .await
                .map_err(AmqpError::from);
            Settled {
                settlements,
                result,
            }
        });
    }

    /// Takes a finished settle commit: counts it and lets consumers forget what it settled.
    ///
    /// # Errors
    /// 541 when the commit failed.
    pub fn finish_commit(&mut self, done: Settled) -> Result<(), AmqpError> {
        done.result?;
        self.settled(&done.settlements);
        Ok(())
    }

    /// Accounts for committed settlements (also those of tx.commit).
    pub fn settled(&mut self, settlements: &[Settlement]) {
        for s in settlements {
            let n = s.ids.len() as u64;
            // A no-ack consumer's deliveries settle as acks too; RabbitMQ counts only the
            // acknowledgements clients send.
            let no_ack_consumer = self
                .owner_of
                .get(&s.holder)
                .and_then(|tag| self.consumers.get(tag))
                .is_some_and(|c| c.no_ack);
            if matches!(s.how, How::Ack) && !no_ack_consumer {
                rabbitmq::acknowledged(n);
            }
            let labels = s.queue.labels();
            match s.how {
                How::Ack => metrics::counter!(metric::ACKS_TOTAL, &labels).increment(n),
                How::Requeue | How::Reject => {
                    metrics::counter!(metric::NACKS_TOTAL, &labels).increment(n);
                }
            }
            let Some(tag) = self.owner_of.get(&s.holder) else {
                continue;
            };
            let Some(c) = self.consumers.get_mut(tag) else {
                continue;
            };
            if c.no_ack {
                self.no_ack_unsettled = self.no_ack_unsettled.saturating_sub(s.ids.len());
            }
            match c.stage.as_mut() {
                Some(consumer) => consumer.forget(&s.ids),
                None => c.forget_later.extend_from_slice(&s.ids),
            }
        }
        self.kick_all_batched();
    }

    /// Commits every pending settlement and waits for the commit under way.
    ///
    /// # Errors
    /// 541 when a commit fails.
    pub async fn flush(&mut self) -> Result<(), AmqpError> {
        loop {
            if self.settlements.is_committing() {
                let done =
                    self.settlements.committed().await.map_err(|e| {
                        AmqpError::internal(format!("a settle commit panicked: {e}"))
                    })?;
                done.result?;
                self.settled(&done.settlements);
            }
            if self.settlements.pending().is_empty() {
                return Ok(());
            }
            self.commit_pending();
        }
    }

    /// Takes every pending settlement (tx.commit applies them itself).
    pub fn take_pending(&mut self) -> Vec<Settlement> {
        self.settlements.take_pending()
    }

    /// basic.cancel: stops a consumer (deliveries already leased to it are delivered
    /// first); its unacknowledged deliveries stay until acknowledged or the channel
    /// closes. Returns frames to send before cancel-ok.
    ///
    /// # Errors
    /// 541 when the store fails.
    pub async fn cancel(&mut self, tag: &str) -> Result<Vec<u8>, AmqpError> {
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

    /// Closes every consumer and returns every unacknowledged delivery: pending
    /// settlements are committed first (the client acknowledged those), then each holder
    /// is released.
    pub async fn close(&mut self) {
        if let Some(r) = self.reply.take() {
            self.ctx.broker.direct_replies.unregister(&r.address);
        }
        // Cancelling, so nothing starts a new lease step from here on (the flush below
        // frees prefetch room and would otherwise lease more, after the wait for running
        // steps and racing the release of its holder: messages stranded in flight).
        for c in self.consumers.values_mut() {
            c.cancelling = true;
            c.stop.cancel();
        }
        // Steps still running hold stage consumers; wait for them so no lease commits
        // after its holder was released.
        while self.consumers.values().any(|c| c.step.is_some()) {
            match self.events.recv().await {
                Some(Event::Stepped { tag, consumer, .. }) => {
                    if let Some(c) = self.consumers.get_mut(&tag) {
                        c.step = None;
                        self.reserved -= std::mem::take(&mut c.reserved);
                        c.stage = Some(*consumer);
                    }
                }
                Some(_) => {}
                None => break,
            }
        }
        if let Err(e) = self.flush().await {
            tracing::warn!(error = %e, "cannot commit acknowledgements of a closing channel");
        }
        let broker = self.ctx.broker.clone();
        for (tag, c) in self.consumers.drain() {
            self.ctx.live.consumer_stopped(self.channel, &tag);
            if c.queue.spec.args.single_active_consumer {
                sac::give_up_turn(
                    &broker,
                    &self.ctx.vhost.keys().active_consumer(c.queue.stage.id()),
                    c.holder,
                )
                .await;
            }
            let _ = self.ctx.vhost.remove_consumer(&c.queue, c.exclusive).await;
        }
        for holder in self.holders.drain(..) {
            if let Err(e) = broker.holders.release(holder).await {
                tracing::warn!(error = %e, "cannot return a closed channel's deliveries; they return when its lease expires");
            }
        }
        self.unacked.clear();
        self.ack_deadlines.clear();
    }
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

fn count_deliveries(queue: &Queue, how: DeliveryMode, delivered: usize, redelivered: u64) {
    rabbitmq::delivered(how, delivered as u64, redelivered);
    let labels = queue.labels();
    metrics::counter!(metric::DELIVERED_TOTAL, &labels).increment(delivered as u64);
    if redelivered > 0 {
        metrics::counter!(metric::REDELIVERED_TOTAL, &labels).increment(redelivered);
    }
}
