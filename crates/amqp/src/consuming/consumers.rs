//! Consuming on one channel: its consumers and unacknowledged deliveries ([`Consumers`]),
//! split by job: deliveries to consumers, leased within their prefetch ([`deliveries`]);
//! basic.get ([`get`]); the direct reply-to consumer ([`replies`]); consumer timeouts
//! ([`timeouts`]); the acknowledgements that settle deliveries, committed in batches
//! ([`batching`]); and requests of the connection's publishing channels to deliver now,
//! before they confirm ([`flushes`]). The channel's loop waits on [`Consumers::next_work`] and hands each
//! [`Work`] to the method it names.
//!
//! **Closing.** When the channel closes, every holder is released: unacknowledged
//! deliveries return to their original positions and come back with `redelivered` set.

mod batching;
mod deliveries;
mod flushes;
mod get;
mod replies;
mod timeouts;

use super::sac;
use super::settle::Settlement;
use crate::state::consumed::DeliverNow;
use crate::state::context::ConnectionContext;
use crate::state::direct_reply::Reply;
use crate::state::topology::Queue;
use crate::wire::errors::AmqpError;
use ferry_stage::GroupCommit;
use ferry_stage::{self as stage, MessageId, StageError, Step};
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Messages one lease takes at most, whatever the prefetch.
pub const LEASE_BATCH: usize = 1000;
/// How long pending settlements wait for more before they commit, and how long a
/// consumer with less than a quarter of its prefetch free waits for more room before it
/// leases: fewer, larger transactions (AMQP acknowledgements have no reply to delay).
const BATCH_DELAY: Duration = Duration::from_millis(4);

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
pub(crate) enum Event {
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
    /// Publishing channels' requests to deliver now ([`flushes`]).
    flushes: flushes::Flushes,
}

/// What [`Consumers::next_work`] found.
pub(crate) enum Work {
    /// A consumer event.
    Event(Event),
    /// The settle commit finished.
    Settled(Result<batching::Settled, AmqpError>),
    /// A batching delay ([`BATCH_DELAY`]) ended: call [`Consumers::on_due`], then
    /// [`Consumers::start_commit`].
    Due,
    /// An unacknowledged delivery's deadline passed: ask [`Consumers::ack_timed_out`].
    AckDeadline,
    /// A direct reply arrived: deliver it with [`Consumers::deliver_reply`].
    Reply(Reply),
    /// A publishing channel of the connection asks to deliver now: hand it to
    /// [`Consumers::deliver_now`].
    DeliverNow(DeliverNow),
}

/// One channel's consumers and unacknowledged deliveries.
pub(crate) struct Consumers {
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
    ack_deadlines: BinaryHeap<timeouts::AckDeadline>,
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
    settlements: GroupCommit<Settlement, batching::Settled>,
    /// When consumers that wait for more prefetch room lease what they have.
    lease_due: Option<Instant>,
    /// The direct-reply consumer, if the channel has one.
    reply: Option<replies::ReplyConsumer>,
    events_tx: mpsc::UnboundedSender<Event>,
    events: mpsc::UnboundedReceiver<Event>,
    /// Where the connection's publishing channels send [`DeliverNow`] requests
    /// ([`crate::state::consumed`]).
    mailbox_tx: mpsc::UnboundedSender<DeliverNow>,
    mailbox: mpsc::UnboundedReceiver<DeliverNow>,
}

impl Consumers {
    /// No consumers yet.
    pub(crate) fn new(ctx: Arc<ConnectionContext>, channel: u16) -> Self {
        let (events_tx, events) = mpsc::unbounded_channel();
        let (mailbox_tx, mailbox) = mpsc::unbounded_channel();
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
            mailbox_tx,
            mailbox,
        }
    }

    /// Waits for the next consumer event or the end of the settle commit under way.
    pub(crate) async fn next_work(&mut self) -> Work {
        let due = self.due();
        let ack_deadline = self.next_ack_deadline();
        let (settlements, events, reply, mailbox) = (
            &mut self.settlements,
            &mut self.events,
            &mut self.reply,
            &mut self.mailbox,
        );
        let settled = async {
            settlements
                .committed()
                .await
                .map_err(|e| AmqpError::internal(format!("a settle commit panicked: {e}")))
        };
        tokio::select! {
            // The channel holds a sender, so the stream of events never ends.
            Some(event) = events.recv() => Work::Event(event),
            // The channel holds a sender of its mailbox too.
            Some(request) = mailbox.recv() => Work::DeliverNow(request),
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

    /// Every holder of the channel, to renew.
    pub(crate) fn holders(&self) -> &[u64] {
        &self.holders
    }

    /// basic.qos.
    pub(crate) fn qos(&mut self, prefetch: u16, global: bool) {
        self.ctx.live.set_prefetch(self.channel, prefetch, global);
        if global {
            self.channel_prefetch = prefetch.into();
        } else {
            self.consumer_prefetch = prefetch.into();
        }
    }

    /// channel.flow: pauses or resumes deliveries.
    pub(crate) fn flow(&mut self, active: bool) {
        self.flowing = active;
        self.kick_all();
    }

    /// Closes every consumer and returns every unacknowledged delivery: pending
    /// settlements are committed first (the client acknowledged those), then each holder
    /// is released.
    pub(crate) async fn close(&mut self) {
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
            self.ctx.consumed.remove(self.channel, &c.queue.name);
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
