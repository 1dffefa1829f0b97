//! One run of a scenario against one broker through lapin: each client connection goes
//! through its own [`Proxy`] (so a socket can be cut), an observer connection straight to
//! the broker reads queue depths, and after every operation the run waits — bounded, never
//! a fixed sleep — until the broker is quiet: each queue's ready messages plus those the
//! channels hold are what the [`Ledger`] expects, and each consumer is full or its queue
//! empty. What each step did and what the channels then held is the run's trace, which
//! [`super`] compares between brokers. At the end every connection closes and each queue is
//! drained with basic.get, accounting for every message.

use super::ledger::{Delivery, Ending, Ledger};
use super::ops::{CHANNELS, CONNECTIONS, Cut, How, Op, QUEUES};
use super::proxy::Proxy;
use crate::common::amqp::{self, WAIT, reply_code};
use crate::common::fronts::AmqpServer;
use crate::common::rabbitmq::{self, RabbitNode};
use futures::{FutureExt, Stream, StreamExt};
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicGetOptions, BasicNackOptions,
    BasicPublishOptions, BasicQosOptions, BasicRecoverOptions, BasicRejectOptions,
    ConfirmSelectOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Confirmation, Connection, Consumer, Event};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::time::{Duration, Instant};

/// Upper bound on the wait for a broker to be quiet after an operation.
const SETTLE: Duration = Duration::from_secs(5);
/// How often a settling run looks again.
const SETTLE_POLL: Duration = Duration::from_millis(5);
/// A delivery tag no channel of a scenario reaches.
const UNKNOWN_TAG: u64 = 10_000;
/// The routing key of unroutable publishes (no queue has this name).
const NOWHERE: &str = "ferry-test-diff-nowhere";

/// The broker a run drives.
pub enum Broker<'a> {
    /// The test suite's RabbitMQ node (shared: never restarted).
    RabbitMq(&'a RabbitNode),
    /// Ferry's AMQP front in this process.
    Ferry(&'a mut AmqpServer),
}

impl Broker<'_> {
    /// The broker's AMQP URI (guest, vhost `/`).
    fn uri(&self) -> String {
        match self {
            Broker::RabbitMq(node) => node.uri().to_owned(),
            Broker::Ferry(server) => server.uri(),
        }
    }

    /// Where the broker listens.
    fn addr(&self) -> SocketAddr {
        match self {
            // amqp://guest:guest@HOST:PORT[/vhost]
            Broker::RabbitMq(node) => {
                let (_, host) = node.uri().rsplit_once('@').unwrap();
                host.split('/').next().unwrap().parse().unwrap()
            }
            Broker::Ferry(server) => server.addr,
        }
    }

    /// Restarts Ferry on its store. The RabbitMQ node is shared by the suite and must not
    /// restart: the caller cuts every connection instead, which for persistent messages
    /// on durable queues is what a restart is to clients (their unacknowledged deliveries
    /// come back, redelivered; what was confirmed, committed or read stays).
    async fn restart(&mut self) {
        if let Broker::Ferry(server) = self {
            server.restart().await;
        }
    }
}

/// One step of a run as its clients saw it.
pub struct Step {
    /// The step's number and operation.
    pub op: String,
    /// What it did, the deliveries that came while the broker settled, and what each
    /// channel held then.
    pub seen: String,
    /// Whether no cut made an outcome uncertain before it (only such steps must match
    /// between brokers).
    pub certain: bool,
}

/// What a run saw.
pub struct Outcome {
    pub steps: Vec<Step>,
    /// Each queue's messages at the end.
    pub depths: Vec<usize>,
    /// What broke the ledger's rules.
    pub violations: Vec<String>,
    /// Whether a cut made an outcome uncertain.
    pub uncertain: bool,
}

/// A channel's publishing mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Plain,
    Confirm,
    Tx,
}

/// A channel's consumer.
struct Consuming {
    consumer: Consumer,
    queue: usize,
    /// Its basic.qos prefetch (0: no limit).
    prefetch: u16,
    /// Its number in the run (the ledger's name for it).
    id: u64,
}

/// An open channel.
struct Chan {
    ch: Channel,
    mode: Mode,
    consuming: Option<Consuming>,
}

/// An open client connection.
struct Conn {
    conn: Connection,
    /// The connection's events: a channel exception lapin reports only here when the
    /// broker's close overtook the client's next method.
    events: Pin<Box<dyn Stream<Item = Event> + Send>>,
    proxy: Proxy,
    chans: [Option<Chan>; 2],
}

/// A run in progress.
struct Run<'a> {
    broker: Broker<'a>,
    /// The scenario's queues on this broker (names of their own).
    queues: [String; QUEUES],
    /// A connection straight to the broker, for queue depths and the final drain.
    observer: (Connection, Channel),
    conns: [Option<Conn>; CONNECTIONS],
    ledger: Ledger,
    /// Consumers started so far.
    consumers: u64,
}

/// Runs `ops` against `broker`.
pub async fn run(broker: Broker<'_>, ops: &[Op]) -> Outcome {
    let mut run = Run::open(broker).await;
    let mut steps = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let name = format!("step {i} ({op})");
        run.ledger.at(name.clone());
        let certain = !run.ledger.uncertain();
        let Ok(mut seen) = tokio::time::timeout(WAIT, run.apply(i, op)).await else {
            run.ledger.violation(format!("no answer within {WAIT:?}"));
            steps.push(Step {
                op: name,
                seen: "no answer".to_owned(),
                certain,
            });
            break;
        };
        let settled = if ops.get(i + 1).is_some_and(Op::rushes) {
            Ok(())
        } else {
            let mut delivered = BTreeMap::new();
            let settled = run.settle(&mut delivered).await;
            seen.push_str(&run.snapshot(&delivered));
            settled
        };
        steps.push(Step {
            op: name,
            seen,
            certain,
        });
        if let Err(e) = settled {
            run.ledger.violation(e);
            break;
        }
    }
    run.ledger.at("the end".to_owned());
    let depths = run.finish().await;
    Outcome {
        steps,
        depths,
        violations: run.ledger.violations().to_vec(),
        uncertain: run.ledger.uncertain(),
    }
}

/// A round trip on `ch` (a passive declare of `queue`): the broker has read everything
/// written on the channel before.
async fn round_trip(ch: &Channel, queue: &str) -> lapin::Result<()> {
    let passive = QueueDeclareOptions {
        passive: true,
        ..QueueDeclareOptions::default()
    };
    ch.queue_declare(queue.into(), passive, FieldTable::default())
        .await
        .map(drop)
}

/// What a close did, for the trace: a broker's exception, or `ok` (also when lapin finds
/// the close already under way, a race of the client's own).
fn closed(result: lapin::Result<()>) -> String {
    match result.as_ref().map_err(reply_code) {
        Err(Some(code)) => format!("error {code}"),
        _ => "ok".to_owned(),
    }
}

/// What a method that succeeds or fails did, for the trace.
fn done(result: lapin::Result<()>) -> Result<String, lapin::Error> {
    result.map(|()| "ok".to_owned())
}

impl<'a> Run<'a> {
    /// Declares the run's queues on `broker`.
    async fn open(broker: Broker<'a>) -> Run<'a> {
        let name = rabbitmq::unique("diff");
        let queues = std::array::from_fn(|q| format!("{name}-q{q}"));
        let observer = amqp::channel(&broker.uri()).await;
        for queue in &queues {
            amqp::declare(&observer.1, queue, FieldTable::default()).await;
        }
        Run {
            broker,
            queues,
            observer,
            conns: Default::default(),
            ledger: Ledger::default(),
            consumers: 0,
        }
    }

    /// Runs operation number `step`; what it did, for the trace.
    async fn apply(&mut self, step: usize, op: &Op) -> String {
        let result = match *op {
            Op::Publish {
                ch,
                queue,
                how,
                count,
            } => self.publish(step, ch, queue, how, count).await,
            Op::Consume {
                ch,
                queue,
                prefetch,
            } => self.consume(ch, queue, prefetch).await,
            Op::Get { ch, queue, no_ack } => self.get(ch, queue, no_ack).await,
            Op::Ack { ch, pick, multiple } => self.answer(ch, pick, multiple, None).await,
            Op::Nack {
                ch,
                pick,
                multiple,
                requeue,
            } => self.answer(ch, pick, multiple, Some(requeue)).await,
            Op::Reject { ch, pick, requeue } => self.reject(ch, pick, requeue).await,
            Op::AckUnknown { ch } => self.ack_unknown(ch).await,
            Op::Cancel { ch } => self.cancel(ch).await,
            Op::Qos { ch, prefetch } => {
                let ch = self.channel(ch).await.ch.clone();
                done(
                    ch.basic_qos(prefetch, BasicQosOptions { global: false })
                        .await,
                )
            }
            Op::Recover { ch } => self.recover(ch).await,
            Op::CloseChannel { ch, rush } => Ok(self.close_channel(ch, rush).await),
            Op::CloseConnection { conn, rush } => Ok(self.close_connection(conn, rush).await),
            Op::Drop { conn, cut, rush } => Ok(self.cut(conn, cut, rush).await),
            Op::Restart => Ok(self.restart().await),
        };
        match result {
            Ok(seen) => seen,
            Err(e) => self.failed(op, e),
        }
    }

    /// The open channel of `slot`, if any.
    fn chan(&mut self, slot: usize) -> Option<&mut Chan> {
        self.conns[slot / 2].as_mut()?.chans[slot % 2].as_mut()
    }

    /// The channel of `slot`, opening it (and its connection, through a new proxy) first
    /// when needed.
    async fn channel(&mut self, slot: usize) -> &mut Chan {
        let c = slot / 2;
        if self.conns[c]
            .as_ref()
            .is_some_and(|conn| !conn.conn.status().connected())
        {
            self.ledger
                .violation(format!("the broker closed connection {c}"));
            self.end_connection(c, Ending::Cut, false);
        }
        if self.conns[c].is_none() {
            let proxy = Proxy::open(self.broker.addr()).await;
            let conn = amqp::connect(&format!("amqp://guest:guest@{}/%2f", proxy.addr)).await;
            self.conns[c] = Some(Conn {
                events: Box::pin(conn.events_listener()),
                conn,
                proxy,
                chans: [None, None],
            });
        }
        let conn = self.conns[c].as_mut().unwrap();
        if conn.chans[slot % 2].is_none() {
            let ch = conn.conn.create_channel().await.unwrap();
            conn.chans[slot % 2] = Some(Chan {
                ch,
                mode: Mode::Plain,
                consuming: None,
            });
        }
        conn.chans[slot % 2].as_mut().unwrap()
    }

    /// The slot whose consumer consumes `queue`, if one does.
    fn consumer_of(&self, queue: usize) -> Option<(usize, &Consuming)> {
        (0..CHANNELS).find_map(|slot| {
            let chan = self.conns[slot / 2].as_ref()?.chans[slot % 2].as_ref()?;
            let consuming = chan.consuming.as_ref()?;
            (consuming.queue == queue).then_some((slot, consuming))
        })
    }

    /// Records a failed method of operation `op`: a channel exception ends the channel, a
    /// connection exception or an I/O error the connection.
    fn failed(&mut self, op: &Op, e: lapin::Error) -> String {
        let slot = match *op {
            Op::Publish { ch, .. }
            | Op::Consume { ch, .. }
            | Op::Get { ch, .. }
            | Op::Ack { ch, .. }
            | Op::Nack { ch, .. }
            | Op::Reject { ch, .. }
            | Op::AckUnknown { ch }
            | Op::Cancel { ch }
            | Op::Qos { ch, .. }
            | Op::Recover { ch } => ch,
            _ => return format!("error {e}"),
        };
        match reply_code(&e) {
            // The broker read everything before the failing method, in order.
            Some(code) if code < 500 => {
                self.end_channel(slot, Ending::Read, false);
                format!("channel error {code}")
            }
            Some(code) => {
                self.end_connection(slot / 2, Ending::Read, false);
                format!("connection error {code}")
            }
            None => {
                self.end_connection(slot / 2, Ending::Cut, false);
                format!("error {e}")
            }
        }
    }

    /// Forgets the channel of `slot`, which ended as `ending` says; `rushed`: deliveries
    /// to its consumer may have been in flight.
    fn end_channel(&mut self, slot: usize, ending: Ending, rushed: bool) -> Option<Chan> {
        let chan = self.conns[slot / 2].as_mut()?.chans[slot % 2].take()?;
        let in_flight = rushed.then(|| chan.consuming.as_ref().map(|c| c.queue));
        self.ledger.ended(slot, ending, in_flight.flatten());
        Some(chan)
    }

    /// Forgets connection `c` and its channels, which ended as `ending` says.
    fn end_connection(&mut self, c: usize, ending: Ending, rushed: bool) -> Option<Conn> {
        for slot in [2 * c, 2 * c + 1] {
            self.end_channel(slot, ending, rushed);
        }
        self.conns[c].take()
    }

    /// Publishes `count` messages named after `step` to `queue` on `slot` as `how` says.
    async fn publish(
        &mut self,
        step: usize,
        slot: usize,
        queue: usize,
        how: How,
        count: usize,
    ) -> lapin::Result<String> {
        let chan = self.channel(slot).await;
        // Plain and unroutable publishes on a transactional channel are committed.
        let how = match (chan.mode, how) {
            (Mode::Tx, How::Plain | How::Unroutable) => How::Commit,
            _ => how,
        };
        let wanted = match how {
            How::Plain => chan.mode,
            How::Confirm | How::Unroutable => Mode::Confirm,
            How::Commit | How::Rollback => Mode::Tx,
        };
        if chan.mode != wanted {
            // Confirms on a transactional channel, or the reverse, are a channel error.
            match wanted {
                Mode::Confirm => {
                    chan.ch
                        .confirm_select(ConfirmSelectOptions::default())
                        .await?
                }
                _ => chan.ch.tx_select().await?,
            }
            chan.mode = wanted;
        }
        let ch = chan.ch.clone();
        let persistent = BasicProperties::default().with_delivery_mode(2);
        let q = self.queues[queue].as_str();
        if how == How::Unroutable {
            let mandatory = BasicPublishOptions {
                mandatory: true,
                ..BasicPublishOptions::default()
            };
            let confirm = ch
                .basic_publish(
                    "".into(),
                    NOWHERE.into(),
                    mandatory,
                    b"unroutable",
                    persistent,
                )
                .await?;
            return Ok(match tokio::time::timeout(WAIT, confirm).await {
                Ok(Ok(Confirmation::Ack(Some(returned)))) => {
                    format!("returned {}", returned.reply_code)
                }
                other => format!("not returned: {other:?}"),
            });
        }
        let bodies: Vec<String> = (0..count).map(|i| format!("{step}-{i}")).collect();
        let mut confirms = Vec::new();
        for body in &bodies {
            let options = BasicPublishOptions::default();
            let confirm = ch
                .basic_publish(
                    "".into(),
                    q.into(),
                    options,
                    body.as_bytes(),
                    persistent.clone(),
                )
                .await?;
            confirms.push(confirm);
        }
        match how {
            How::Plain => {
                for body in bodies {
                    self.ledger.published(slot, body, queue, None);
                }
                Ok("ok".to_owned())
            }
            How::Confirm => {
                let mut seen = Vec::new();
                for (body, confirm) in bodies.into_iter().zip(confirms) {
                    let confirmed = tokio::time::timeout(WAIT, confirm).await;
                    let acked = matches!(confirmed, Ok(Ok(Confirmation::Ack(None))));
                    if !acked {
                        seen.push(format!("{body} not confirmed: {confirmed:?}"));
                    }
                    self.ledger.published(slot, body, queue, Some(acked));
                }
                Ok(if seen.is_empty() {
                    "confirmed".to_owned()
                } else {
                    seen.join(", ")
                })
            }
            How::Commit => {
                ch.tx_commit().await?;
                for body in bodies {
                    self.ledger.published(slot, body, queue, Some(true));
                }
                Ok("committed".to_owned())
            }
            How::Rollback => {
                ch.tx_rollback().await?;
                for body in bodies {
                    self.ledger.rolled_back(body, queue);
                }
                Ok("rolled back".to_owned())
            }
            How::Unroutable => unreachable!("returned above"),
        }
    }

    /// basic.qos and basic.consume, unless `slot` or `queue` has a consumer.
    async fn consume(&mut self, slot: usize, queue: usize, prefetch: u16) -> lapin::Result<String> {
        let busy = self.chan(slot).is_some_and(|c| c.consuming.is_some());
        if busy || self.consumer_of(queue).is_some() {
            return Ok("skip".to_owned());
        }
        let ch = self.channel(slot).await.ch.clone();
        ch.basic_qos(prefetch, BasicQosOptions { global: false })
            .await?;
        let consumer = ch
            .basic_consume(
                self.queues[queue].as_str().into(),
                "".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        self.consumers += 1;
        let id = self.consumers;
        self.channel(slot).await.consuming = Some(Consuming {
            consumer,
            queue,
            prefetch,
            id,
        });
        Ok("ok".to_owned())
    }

    /// basic.get.
    async fn get(&mut self, slot: usize, queue: usize, no_ack: bool) -> lapin::Result<String> {
        let ch = self.channel(slot).await.ch.clone();
        let got = ch
            .basic_get(
                self.queues[queue].as_str().into(),
                BasicGetOptions { no_ack },
            )
            .await?;
        let Some(got) = got else {
            return Ok("empty".to_owned());
        };
        let body = String::from_utf8_lossy(&got.delivery.data).into_owned();
        let token = self.ledger.delivered(Delivery {
            slot,
            tag: got.delivery.delivery_tag,
            body: &body,
            redelivered: got.delivery.redelivered,
            consumer: None,
            no_ack,
        });
        Ok(format!("got {token}, {} left", got.message_count))
    }

    /// basic.ack (`requeue` `None`) or basic.nack of the `pick`-th delivery `slot` holds.
    async fn answer(
        &mut self,
        slot: usize,
        pick: usize,
        multiple: bool,
        requeue: Option<bool>,
    ) -> lapin::Result<String> {
        let Some(ch) = self.chan(slot).map(|c| c.ch.clone()) else {
            return Ok("skip".to_owned());
        };
        let Some((tag, bodies)) = self.ledger.pick(slot, pick, multiple) else {
            return Ok("skip".to_owned());
        };
        match requeue {
            None => ch.basic_ack(tag, BasicAckOptions { multiple }).await?,
            Some(requeue) => {
                ch.basic_nack(tag, BasicNackOptions { multiple, requeue })
                    .await?
            }
        }
        self.ledger.answered(slot, &bodies, requeue == Some(true));
        self.commit_answers(slot, &ch).await?;
        let verb = if requeue.is_none() { "acked" } else { "nacked" };
        Ok(format!("{verb} {}", bodies.join(",")))
    }

    /// basic.reject of the `pick`-th delivery `slot` holds.
    async fn reject(&mut self, slot: usize, pick: usize, requeue: bool) -> lapin::Result<String> {
        let Some(ch) = self.chan(slot).map(|c| c.ch.clone()) else {
            return Ok("skip".to_owned());
        };
        let Some((tag, bodies)) = self.ledger.pick(slot, pick, false) else {
            return Ok("skip".to_owned());
        };
        ch.basic_reject(tag, BasicRejectOptions { requeue }).await?;
        self.ledger.answered(slot, &bodies, requeue);
        self.commit_answers(slot, &ch).await?;
        Ok(format!("rejected {}", bodies.join(",")))
    }

    /// On a transactional channel, tx.commit of the answers just given: they are held
    /// until a commit, and a scenario's answers take effect at once.
    async fn commit_answers(&mut self, slot: usize, ch: &Channel) -> lapin::Result<()> {
        if self.chan(slot).is_some_and(|c| c.mode == Mode::Tx) {
            ch.tx_commit().await?;
            self.ledger.synced(slot);
        }
        Ok(())
    }

    /// basic.ack of a tag `slot` never had, then a round trip that reports the channel's
    /// exception.
    async fn ack_unknown(&mut self, slot: usize) -> lapin::Result<String> {
        let ch = self.channel(slot).await.ch.clone();
        let events = &mut self.conns[slot / 2].as_mut().unwrap().events;
        // Earlier exceptions of the connection are not this one.
        while let Some(Some(_)) = events.next().now_or_never() {}
        ch.basic_ack(UNKNOWN_TAG, BasicAckOptions::default())
            .await?;
        match round_trip(&ch, &self.queues[0]).await {
            Ok(()) => Ok("accepted".to_owned()),
            Err(e) if reply_code(&e).is_some() => Err(e),
            // The broker's close came before the round trip left: lapin reports the
            // exception among the connection's events.
            Err(e) => {
                let events = &mut self.conns[slot / 2].as_mut().unwrap().events;
                let exception = tokio::time::timeout(WAIT, async {
                    while let Some(event) = events.next().await {
                        if let Event::Error(error) = event {
                            return Some(error);
                        }
                    }
                    None
                });
                Err(exception.await.ok().flatten().unwrap_or(e))
            }
        }
    }

    /// basic.cancel of `slot`'s consumer; what came to it before the cancel stays held.
    async fn cancel(&mut self, slot: usize) -> lapin::Result<String> {
        let Some(chan) = self.chan(slot) else {
            return Ok("skip".to_owned());
        };
        let Some(mut consuming) = chan.consuming.take() else {
            return Ok("skip".to_owned());
        };
        let ch = chan.ch.clone();
        ch.basic_cancel(consuming.consumer.tag(), BasicCancelOptions::default())
            .await?;
        let mut seen = Vec::new();
        while let Some(Some(Ok(d))) = consuming.consumer.next().now_or_never() {
            seen.push(self.record(slot, Some(consuming.id), &d));
        }
        Ok(format!("ok {}", seen.join(",")))
    }

    /// basic.recover with requeue on `slot`.
    async fn recover(&mut self, slot: usize) -> lapin::Result<String> {
        let Some(ch) = self.chan(slot).map(|c| c.ch.clone()) else {
            return Ok("skip".to_owned());
        };
        ch.basic_recover(BasicRecoverOptions { requeue: true })
            .await?;
        self.ledger.recovered(slot);
        Ok("ok".to_owned())
    }

    /// channel.close of `slot`.
    async fn close_channel(&mut self, slot: usize, rush: bool) -> String {
        let Some(ch) = self.chan(slot).map(|c| c.ch.clone()) else {
            return "skip".to_owned();
        };
        let closed = closed(ch.close(200, "bye".into()).await);
        self.end_channel(slot, Ending::Read, rush);
        closed
    }

    /// connection.close of connection `c` (before lapin's channel handles drop, which
    /// would close each channel first).
    async fn close_connection(&mut self, c: usize, rush: bool) -> String {
        let Some(conn) = self.conns[c].as_ref() else {
            return "skip".to_owned();
        };
        let closed = closed(conn.conn.close(200, "bye".into()).await);
        self.end_connection(c, Ending::Read, rush);
        closed
    }

    /// Cuts connection `c`'s socket as `cut` says.
    async fn cut(&mut self, c: usize, cut: Cut, rush: bool) -> String {
        if self.conns[c].is_none() {
            return "skip".to_owned();
        }
        if cut == Cut::Synced {
            self.sync(c).await;
        }
        // Cut before lapin's handles drop: dropping them closes the channels in order.
        let flushed = cut != Cut::Abrupt;
        self.conns[c].as_mut().unwrap().proxy.cut(flushed).await;
        // Flushed, the broker read everything the client wrote before the cut.
        let ending = if flushed { Ending::Read } else { Ending::Cut };
        self.end_connection(c, ending, rush);
        "ok".to_owned()
    }

    /// A round trip on each channel of connection `c`.
    async fn sync(&mut self, c: usize) {
        for slot in [2 * c, 2 * c + 1] {
            let Some(ch) = self.chan(slot).map(|chan| chan.ch.clone()) else {
                continue;
            };
            match round_trip(&ch, &self.queues[0]).await {
                Ok(()) => self.ledger.synced(slot),
                Err(e) => self
                    .ledger
                    .violation(format!("round trip on ch{slot}: {e}")),
            }
        }
    }

    /// Restarts the broker (RabbitMQ: cuts every connection, see [`Broker::restart`])
    /// after a round trip on every channel.
    async fn restart(&mut self) -> String {
        for c in 0..CONNECTIONS {
            self.sync(c).await;
        }
        self.broker.restart().await;
        for c in 0..CONNECTIONS {
            if let Some(conn) = self.conns[c].as_mut() {
                conn.proxy.cut(true).await;
            }
            self.end_connection(c, Ending::Read, false);
        }
        // Ferry's restart closed the observer's connection too.
        self.observer = amqp::channel(&self.broker.uri()).await;
        "ok".to_owned()
    }

    /// Records a delivery that came to `consumer` on `slot`; its trace token.
    fn record(
        &mut self,
        slot: usize,
        consumer: Option<u64>,
        d: &lapin::message::Delivery,
    ) -> String {
        let body = String::from_utf8_lossy(&d.data);
        self.ledger.delivered(Delivery {
            slot,
            tag: d.delivery_tag,
            body: &body,
            redelivered: d.redelivered,
            consumer,
            no_ack: false,
        })
    }

    /// Takes what came to every consumer; the tokens, by slot.
    fn poll_consumers(&mut self, delivered: &mut BTreeMap<usize, Vec<String>>) {
        for slot in 0..CHANNELS {
            let mut came = Vec::new();
            let mut failed = None;
            if let Some(Consuming { consumer, id, .. }) =
                self.chan(slot).and_then(|c| c.consuming.as_mut())
            {
                loop {
                    match consumer.next().now_or_never() {
                        Some(Some(Ok(d))) => came.push((*id, d)),
                        Some(Some(Err(e))) => {
                            failed = Some(e.to_string());
                            break;
                        }
                        Some(None) | None => break,
                    }
                }
            }
            for (id, d) in came {
                let token = self.record(slot, Some(id), &d);
                delivered.entry(slot).or_default().push(token);
            }
            if let Some(e) = failed {
                self.ledger
                    .violation(format!("the consumer on ch{slot} failed: {e}"));
                self.end_channel(slot, Ending::Read, false);
            }
        }
    }

    /// Waits (up to [`SETTLE`]) until the broker is quiet, adding the deliveries that
    /// come meanwhile to `delivered`, by slot.
    ///
    /// # Errors
    /// A sentence saying what did not settle.
    async fn settle(&mut self, delivered: &mut BTreeMap<usize, Vec<String>>) -> Result<(), String> {
        let deadline = Instant::now() + SETTLE;
        loop {
            self.poll_consumers(delivered);
            let mut waiting = Vec::new();
            let mut over = Vec::new();
            for q in 0..QUEUES {
                let ready = amqp::ready(&self.observer.1, &self.queues[q]).await as usize;
                let held = self.ledger.held_of(q);
                let (least, most) = self.ledger.expected(q);
                if !(least..=most).contains(&(ready + held)) {
                    waiting.push(format!(
                        "q{q} has {ready} ready + {held} held by clients, expected \
                         {least}..={most}"
                    ));
                }
                if let Some((slot, c)) = self.consumer_of(q) {
                    let holds = self.ledger.held_by_consumer(slot, c.id);
                    let limit = usize::from(c.prefetch);
                    if ready > 0 && (limit == 0 || holds < limit) {
                        waiting.push(format!(
                            "q{q} has {ready} ready while its consumer on ch{slot} holds \
                             {holds} (prefetch {limit})"
                        ));
                    }
                    if limit > 0 && holds > limit {
                        over.push(format!(
                            "the consumer on ch{slot} holds {holds}, over its prefetch {limit}"
                        ));
                    }
                }
            }
            if waiting.is_empty() {
                over.into_iter().for_each(|v| self.ledger.violation(v));
                self.ledger.settled();
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "not settled within {SETTLE:?}: {}",
                    waiting.join("; ")
                ));
            }
            tokio::time::sleep(SETTLE_POLL).await;
        }
    }

    /// The trace's account of a settled broker: what came to each channel, and what each
    /// holds.
    fn snapshot(&self, delivered: &BTreeMap<usize, Vec<String>>) -> String {
        let mut out = String::new();
        for (slot, tokens) in delivered {
            out.push_str(&format!(" | ch{slot} got {}", tokens.join(",")));
        }
        for slot in 0..CHANNELS {
            let held = self.ledger.held(slot);
            if !held.is_empty() {
                let bodies: Vec<&str> = held.iter().map(|h| h.body.as_str()).collect();
                out.push_str(&format!(" | ch{slot} holds {}", bodies.join(",")));
            }
        }
        out
    }

    /// Closes every connection, waits until the broker is quiet, drains every queue
    /// (checking each message) and deletes the queues; each queue's depth.
    async fn finish(&mut self) -> Vec<usize> {
        for c in 0..CONNECTIONS {
            if let Some(conn) = self.end_connection(c, Ending::Read, false) {
                // A connection the broker dropped is already closed (or never answers).
                let _ = tokio::time::timeout(WAIT, conn.conn.close(200, "bye".into())).await;
            }
        }
        if let Err(e) = self.settle(&mut BTreeMap::new()).await {
            self.ledger.violation(e);
        }
        let mut depths = Vec::new();
        let ch = self.observer.1.clone();
        for queue in &self.queues {
            let mut depth = 0;
            // Bounded: a queue that never empties is reported by the depth, not a hang.
            while depth < 10_000 {
                let got = ch
                    .basic_get(queue.as_str().into(), BasicGetOptions { no_ack: true })
                    .await
                    .unwrap();
                let Some(got) = got else { break };
                let body = String::from_utf8_lossy(&got.delivery.data).into_owned();
                self.ledger.delivered(Delivery {
                    slot: 0,
                    tag: got.delivery.delivery_tag,
                    body: &body,
                    redelivered: got.delivery.redelivered,
                    consumer: None,
                    no_ack: true,
                });
                depth += 1;
            }
            depths.push(depth);
            ch.queue_delete(queue.as_str().into(), QueueDeleteOptions::default())
                .await
                .unwrap();
        }
        self.ledger.check_nothing_left();
        let _ = self.observer.0.close(200, "bye".into()).await;
        depths
    }
}
