//! RabbitMQ → Ferry → RabbitMQ through a bridge route, against the test run's private
//! RabbitMQ node ([`crate::common::rabbitmq`]) as the external broker: properties, headers and bodies
//! arrive exactly once; exactly once holds under repeated `kill -9`; a missing queue and
//! a wrong password are reported in `/readyz` without stopping other routes; the source and
//! the sink reconnect when the broker closes their connections; an
//! unroutable message ends in the route's dead-letter stage; a message-id is staged once
//! within the dedup window and forgotten after it; RabbitMQ → Ferry's Kafka front is
//! exactly once, and Ferry's Kafka front → RabbitMQ loses nothing, under repeated
//! `kill -9`.

use crate::common::crash::kill_points;
use crate::common::daemon::{Daemon, Setup};
use crate::common::kafka::client_config;
use crate::common::rabbitmq::{RabbitNode, unique};
use crate::common::wait;
use futures::StreamExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    ExchangeDeleteOptions, QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedReceiver;

/// `ferry run` in `dir` with `config` alone (the bridge's sources, sinks and routes) and
/// leases that a killed daemon's successor takes over after 2 s.
fn start(dir: &std::path::Path, config: &str) -> Daemon {
    Setup::config(dir, config)
        .env("FERRY__STAGE__LEASE_TTL_MS", "2000")
        .start()
}

/// The external broker (the run's private node) and one test's topology on it, deleted
/// when dropped (also when the test fails).
pub(crate) struct Rabbit {
    /// The node; kept until the topology is deleted.
    node: Arc<RabbitNode>,
    channel: Channel,
    queues: Vec<String>,
    exchanges: Vec<String>,
}

impl Rabbit {
    async fn connect() -> Self {
        Self::on(RabbitNode::get()).await
    }

    /// Test topology on `node`, over its plain AMQP listener.
    pub(crate) async fn on(node: Arc<RabbitNode>) -> Self {
        let connection = Connection::connect(node.uri(), ConnectionProperties::default())
            .await
            .expect("the private RabbitMQ node");
        let channel = connection.create_channel().await.unwrap();
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .unwrap();
        Self {
            node,
            channel,
            queues: Vec::new(),
            exchanges: Vec::new(),
        }
    }

    /// The node's AMQP URI.
    pub(crate) fn uri(&self) -> &str {
        self.node.uri()
    }

    pub(crate) async fn queue(&mut self, name: &str) {
        self.channel
            .queue_declare(
                name.into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        self.queues.push(name.to_owned());
    }

    /// A fanout exchange bound to `queue` (or unbound when `None`).
    pub(crate) async fn exchange(&mut self, name: &str, queue: Option<&str>) {
        self.channel
            .exchange_declare(
                name.into(),
                ExchangeKind::Fanout,
                ExchangeDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        if let Some(q) = queue {
            self.channel
                .queue_bind(
                    q.into(),
                    name.into(),
                    "".into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await
                .unwrap();
        }
        self.exchanges.push(name.to_owned());
    }

    /// Publishes every message to `queue` with pipelined confirms.
    pub(crate) async fn publish(&self, queue: &str, messages: &[(BasicProperties, Vec<u8>)]) {
        for chunk in messages.chunks(5_000) {
            let mut confirms = Vec::with_capacity(chunk.len());
            for (properties, body) in chunk {
                confirms.push(
                    self.channel
                        .basic_publish(
                            "".into(),
                            queue.into(),
                            BasicPublishOptions::default(),
                            body,
                            properties.clone(),
                        )
                        .await
                        .unwrap(),
                );
            }
            for c in confirms {
                assert!(c.await.unwrap().is_ack());
            }
        }
    }

    /// Messages in `queue`.
    pub(crate) async fn depth(&self, queue: &str) -> u32 {
        crate::common::amqp::ready(&self.channel, queue).await
    }
}

/// Deletes the test's queues and exchanges also when the test fails: from a thread of
/// its own with its own runtime and connection, since a panicking test's runtime may be
/// unwinding.
impl Drop for Rabbit {
    fn drop(&mut self) {
        let (queues, exchanges) = (
            std::mem::take(&mut self.queues),
            std::mem::take(&mut self.exchanges),
        );
        if queues.is_empty() && exchanges.is_empty() {
            return;
        }
        let uri = self.uri().to_owned();
        let cleanup = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let Ok(connection) =
                    Connection::connect(&uri, ConnectionProperties::default()).await
                else {
                    return;
                };
                let Ok(channel) = connection.create_channel().await else {
                    return;
                };
                for q in &queues {
                    let _ = channel
                        .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
                        .await;
                }
                for x in &exchanges {
                    let _ = channel
                        .exchange_delete(x.as_str().into(), ExchangeDeleteOptions::default())
                        .await;
                }
                let _ = connection.close(200, "test topology deleted".into()).await;
            });
        });
        let _ = cleanup.join();
    }
}

/// Everything that arrives in `queue` on the broker at `uri`, collected in the background
/// (auto-ack).
pub(crate) async fn collect(uri: &str, queue: &str) -> UnboundedReceiver<Delivery> {
    let connection = Connection::connect(uri, ConnectionProperties::default())
        .await
        .unwrap();
    let channel = connection.create_channel().await.unwrap();
    let mut consumer = channel
        .basic_consume(
            queue.into(),
            "".into(),
            BasicConsumeOptions {
                no_ack: true,
                ..BasicConsumeOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let _keep = connection;
        while let Some(Ok(d)) = consumer.next().await {
            if tx.send(d).is_err() {
                return;
            }
        }
    });
    rx
}

/// Receives until `n` messages arrived or `timeout` passed.
pub(crate) async fn receive(
    rx: &mut UnboundedReceiver<Delivery>,
    n: usize,
    timeout: Duration,
) -> Vec<Delivery> {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut out = Vec::new();
    while out.len() < n {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(d)) => out.push(d),
            _ => break,
        }
    }
    out
}

/// Arrived messages grouped by a key (see [`Key`]): the message-id of every copy.
type Arrivals = HashMap<String, Vec<String>>;

/// What arrivals are grouped by.
type Key = fn(&Delivery) -> String;

/// Groups by message-id.
fn message_id(d: &Delivery) -> String {
    d.properties
        .message_id()
        .clone()
        .expect("a message-id")
        .to_string()
}

/// Groups by routing key.
fn routing_key(d: &Delivery) -> String {
    d.routing_key.to_string()
}

/// Adds `got` to `arrivals`, grouped by `key`.
fn absorb(arrivals: &mut Arrivals, key: Key, got: Vec<Delivery>) {
    for d in got {
        arrivals.entry(key(&d)).or_default().push(message_id(&d));
    }
}

/// Receives from `rx` into `arrivals` (grouped by `key`) until `n` distinct keys arrived;
/// panics with `daemon`'s `/readyz` when `deadline` passes first.
async fn receive_until(
    rx: &mut UnboundedReceiver<Delivery>,
    arrivals: &mut Arrivals,
    key: Key,
    n: usize,
    deadline: Instant,
    daemon: &Daemon,
) {
    while arrivals.len() < n {
        assert!(
            Instant::now() < deadline,
            "only {} of {n} arrived in time; /readyz:\n{}",
            arrivals.len(),
            daemon.readyz()
        );
        let more = receive(rx, n - arrivals.len(), Duration::from_secs(1)).await;
        absorb(arrivals, key, more);
    }
}

/// A route `route` from a RabbitMQ source on `source_queue` at `source_uri` to a RabbitMQ
/// sink publishing to `exchange` at `sink_uri`, with `extra` route settings (TOML lines).
fn route_config(
    source_uri: &str,
    route: &str,
    source_queue: &str,
    sink_uri: &str,
    exchange: &str,
    extra: &str,
) -> String {
    format!(
        r#"
[sources.{route}-in]
kind = "rabbitmq"
uri = "{source_uri}"
queue = "{source_queue}"
prefetch = 2000

[sinks.{route}-out]
kind = "rabbitmq"
uri = "{sink_uri}"
exchange = "{exchange}"

[[routes]]
name = "{route}"
from = {{ source = "{route}-in" }}
to = [{{ sink = "{route}-out" }}]
{extra}
"#
    )
}

fn headers(i: usize) -> FieldTable {
    let mut t = FieldTable::default();
    t.insert("seq".into(), AMQPValue::LongLongInt(i as i64));
    t.insert("tag".into(), AMQPValue::LongString(format!("t{i}").into()));
    t.insert("flag".into(), AMQPValue::Boolean(i.is_multiple_of(2)));
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rabbitmq_to_rabbitmq_keeps_properties_headers_and_bodies_exactly_once() {
    const N: usize = 5_000;
    let mut rabbit = Rabbit::connect().await;
    let (src, dst, x, route) = (unique("src"), unique("dst"), unique("x"), unique("r"));
    rabbit.queue(&src).await;
    rabbit.queue(&dst).await;
    rabbit.exchange(&x, Some(&dst)).await;
    // Every tenth message has no message-id: the sink gives it its stable one.
    let sent: Vec<(BasicProperties, Vec<u8>)> = (0..N)
        .map(|i| {
            let mut p = BasicProperties::default()
                .with_content_type("text/plain".into())
                .with_correlation_id(format!("c{i}").into())
                .with_delivery_mode(2)
                .with_headers(headers(i));
            if !i.is_multiple_of(10) {
                p = p.with_message_id(format!("m{i}").into());
            }
            (p, format!("body-{i}").into_bytes())
        })
        .collect();
    rabbit.publish(&src, &sent).await;
    let mut rx = collect(rabbit.uri(), &dst).await;
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(
        dir.path(),
        &route_config(rabbit.uri(), &route, &src, rabbit.uri(), &x, ""),
    );

    let got = receive(&mut rx, N, Duration::from_secs(120)).await;
    assert_eq!(got.len(), N, "{}", daemon.readyz());
    // Nothing more comes: each message arrived once.
    assert!(receive(&mut rx, 1, Duration::from_secs(2)).await.is_empty());
    let mut ids = HashSet::new();
    for d in &got {
        let body = String::from_utf8(d.data.clone()).unwrap();
        let i: usize = body.strip_prefix("body-").unwrap().parse().unwrap();
        let want = &sent[i].0;
        let id = d
            .properties
            .message_id()
            .clone()
            .expect("a message-id")
            .to_string();
        assert!(ids.insert(id.clone()), "message-id {id} arrived twice");
        if i.is_multiple_of(10) {
            assert!(id.starts_with("ferry-"), "{id}");
        } else {
            assert_eq!(id, format!("m{i}"));
        }
        assert_eq!(d.properties.headers(), want.headers());
        assert_eq!(d.properties.content_type(), want.content_type());
        assert_eq!(d.properties.correlation_id(), want.correlation_id());
        assert_eq!(d.properties.delivery_mode(), want.delivery_mode());
        assert_eq!(d.routing_key.as_str(), src, "the message's own routing key");
    }
    assert_eq!(rabbit.depth(&src).await, 0);
    let route_label = format!("route=\"{route}\"");
    assert_eq!(
        daemon.metric("ferry_bridge_messages_in_total", &[&route_label]),
        N as f64
    );
    drop(daemon);
    drop(rabbit);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_missing_queue_and_a_wrong_password_are_reported_while_another_route_moves_messages() {
    let mut rabbit = Rabbit::connect().await;
    let (missing, bad_src, good_src, dst, x) = (
        unique("missing"),
        unique("badsrc"),
        unique("goodsrc"),
        unique("dst"),
        unique("x"),
    );
    for q in [&bad_src, &good_src, &dst] {
        rabbit.queue(q).await;
    }
    rabbit.exchange(&x, Some(&dst)).await;
    let wrong = rabbit.node.uri_with_password("not-the-password");
    let uri = rabbit.uri();
    let config = [
        route_config(uri, "nosuchqueue", &missing, uri, &x, ""),
        route_config(uri, "badpass", &bad_src, &wrong, &x, ""),
        route_config(uri, "good", &good_src, uri, &x, ""),
    ]
    .concat();
    let one = |i: usize| (BasicProperties::default(), format!("m{i}").into_bytes());
    rabbit.publish(&bad_src, &[one(0)]).await;
    rabbit
        .publish(&good_src, &(0..10).map(one).collect::<Vec<_>>())
        .await;
    let mut rx = collect(rabbit.uri(), &dst).await;
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(dir.path(), &config);

    let got = receive(&mut rx, 10, Duration::from_secs(60)).await;
    assert_eq!(got.len(), 10, "{}", daemon.readyz());
    let missing_line = format!("source:nosuchqueue-in: down: queue '{missing}' not found");
    daemon.wait_for("both failures in /readyz", Duration::from_secs(30), |d| {
        let r = d.readyz();
        r.contains(&missing_line)
            && r.contains("sink:badpass-out: down: cannot connect to amqp://guest:***@127.0.0.1")
    });
    let readyz = daemon.readyz();
    eprintln!("/readyz:\n{readyz}");
    assert!(readyz.starts_with("ready"), "{readyz}");
    assert!(!readyz.contains("not-the-password"), "{readyz}");
    assert!(readyz.contains("source:good-in: up"), "{readyz}");
    assert!(readyz.contains("sink:good-out: up"), "{readyz}");
    // The message for the unreachable sink waits in its stage, not lost.
    assert_eq!(rabbit.depth(&bad_src).await, 0);
    drop(daemon);
    drop(rabbit);
}

/// The pids of the broker's connections whose client properties contain `needle` (the
/// bridge names its connections `ferry bridge source:NAME` / `ferry bridge sink:NAME`).
fn connections_named(node: &RabbitNode, needle: &str) -> Vec<(String, String)> {
    let out = node.ctl(&[
        "list_connections",
        "--quiet",
        "--no-table-headers",
        "pid",
        "client_properties",
    ]);
    assert!(
        out.status.success(),
        "rabbitmqctl list_connections: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(needle))
        .filter_map(|l| {
            let (pid, properties) = l.split_once('\t')?;
            Some((pid.to_owned(), properties.to_owned()))
        })
        .collect()
}

/// A broker that closes the bridge's connections (as an operator or a broker restart
/// would) while messages flow: the source and the sink reconnect with backoff and every
/// message arrives; what the sink publishes again carries its message-id and is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_source_and_the_sink_reconnect_when_the_broker_closes_their_connections() {
    const CLOSES: usize = 3;
    let mut rabbit = Rabbit::connect().await;
    let (src, dst, x, route) = (unique("src"), unique("dst"), unique("x"), unique("r"));
    rabbit.queue(&src).await;
    rabbit.queue(&dst).await;
    rabbit.exchange(&x, Some(&dst)).await;
    let mut rx = collect(rabbit.uri(), &dst).await;
    let dir = tempfile::tempdir().unwrap();
    let extra = "retry_initial_ms = 100\nretry_max_ms = 1000";
    let daemon = start(
        dir.path(),
        &route_config(rabbit.uri(), &route, &src, rabbit.uri(), &x, extra),
    );

    // Messages keep coming until the closes are done, so both connections are busy (the
    // sink connects when it has something to send) whenever one is closed.
    let done = tokio_util::sync::CancellationToken::new();
    let publisher = {
        let (src, done) = (src.clone(), done.clone());
        tokio::spawn(async move {
            let rabbit = Rabbit::connect().await;
            let mut sent = 0;
            while !done.is_cancelled() {
                let messages: Vec<(BasicProperties, Vec<u8>)> = (sent..sent + 500)
                    .map(|i: usize| {
                        let p = BasicProperties::default().with_message_id(format!("c{i}").into());
                        (p, i.to_be_bytes().to_vec())
                    })
                    .collect();
                rabbit.publish(&src, &messages).await;
                sent += messages.len();
                // A steady trickle, not a flood: messages are in flight at every close.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            sent
        })
    };
    let mut counts = Arrivals::new();
    let names = [
        format!("ferry bridge source:{route}-in"),
        format!("ferry bridge sink:{route}-out"),
    ];
    let mut closed = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while closed.len() < CLOSES {
        assert!(Instant::now() < deadline, "closed only {closed:?} in 120 s");
        let more = receive(&mut rx, usize::MAX, Duration::from_millis(300)).await;
        absorb(&mut counts, message_id, more);
        let found: Vec<(String, String)> = names
            .iter()
            .flat_map(|n| connections_named(&rabbit.node, n))
            .collect();
        // Close when both are connected, so each close interrupts both.
        if found.len() < 2 {
            continue;
        }
        for (pid, _) in &found {
            let out = rabbit
                .node
                .ctl(&["close_connection", pid, "ferry test: forced close"]);
            assert!(out.status.success(), "rabbitmqctl close_connection {pid}");
        }
        closed.push(counts.len());
    }
    done.cancel();
    let n = publisher.await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    receive_until(&mut rx, &mut counts, message_id, n, deadline, &daemon).await;
    let stragglers = receive(&mut rx, usize::MAX, Duration::from_secs(2)).await;
    absorb(&mut counts, message_id, stragglers);
    let sent: HashSet<String> = (0..n).map(|i| format!("c{i}")).collect();
    assert!(
        counts.keys().all(|id| sent.contains(id)),
        "an id never sent arrived"
    );
    let duplicates: usize = counts.values().map(|c| c.len() - 1).sum();
    let route_label = format!("route=\"{route}\"");
    let reported = daemon.metric("ferry_bridge_redeliveries_total", &[&route_label]);
    eprintln!(
        "{n} messages, connections closed {CLOSES} times (ids arrived before each: {closed:?}): {duplicates} duplicates, {reported} redeliveries reported"
    );
    // Nothing was killed, so every resend was counted: a duplicate downstream is a resend.
    assert!(
        duplicates as f64 <= reported,
        "{duplicates} duplicates, only {reported} resends counted"
    );
    daemon.wait_for(
        "the source and the sink are up again",
        Duration::from_secs(30),
        |d| {
            let ready = d.readyz();
            names.iter().all(|n| {
                let up = format!("{}: up", n.trim_start_matches("ferry bridge "));
                ready.lines().any(|l| l.trim_end().ends_with(&up))
            })
        },
    );
    assert_eq!(rabbit.depth(&src).await, 0);
    drop(daemon);
    drop(rabbit);
}

/// Unroutable messages end in the route's dead-letter stage after `max_attempts`; their
/// refusals are logged at most once per 10 s with a count (issue 33: one WARN line per
/// message per attempt filled 63 MB in 2.5 minutes).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unroutable_messages_are_dead_lettered_after_max_attempts_and_logged_in_summary() {
    const N: usize = 40;
    let mut rabbit = Rabbit::connect().await;
    let (src, x, route) = (unique("src"), unique("unbound"), unique("r"));
    rabbit.queue(&src).await;
    rabbit.exchange(&x, None).await;
    let config = route_config(
        rabbit.uri(),
        &route,
        &src,
        rabbit.uri(),
        &x,
        "max_attempts = 2\nretry_initial_ms = 10\nretry_max_ms = 50\nbatch = 1",
    );
    let nowhere: Vec<_> = (0..N)
        .map(|i| {
            (
                BasicProperties::default(),
                format!("nowhere {i}").into_bytes(),
            )
        })
        .collect();
    rabbit.publish(&src, &nowhere).await;
    let dir = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let daemon = start(dir.path(), &config);

    let dead = format!("stage=\"bridge.{route}.0.dead\"");
    let route_label = format!("route=\"{route}\"");
    daemon.wait_for("every dead letter", Duration::from_secs(60), |d| {
        d.metric("ferry_bridge_dead_letters_total", &[&route_label]) == N as f64
    });
    daemon.wait_for(
        "the dead-letter stage gauge",
        Duration::from_secs(30),
        |d| d.metric("ferry_stage_ready", &[&dead]) == N as f64,
    );
    assert_eq!(
        daemon.metric("ferry_bridge_messages_out_total", &[&route_label]),
        0.0
    );
    // 80 refusals; one line at the first, then at most one per 10 s.
    let log = daemon.log();
    let lines = log
        .lines()
        .filter(|l| l.contains("destination refused"))
        .count();
    let allowed = 1 + started.elapsed().as_secs() / 10;
    assert!(
        (1..=allowed as usize).contains(&lines),
        "{lines} refusal lines in {:?}",
        started.elapsed()
    );
    drop(daemon);
    drop(rabbit);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_message_arrives_under_repeated_kill_9_and_a_crash_resends_at_most_its_window() {
    const N: usize = 100_000;
    const KILLS: usize = 6;
    let started = Instant::now();
    let mut rabbit = Rabbit::connect().await;
    let (src, dst, x, route) = (unique("src"), unique("dst"), unique("x"), unique("r"));
    rabbit.queue(&src).await;
    rabbit.queue(&dst).await;
    rabbit.exchange(&x, Some(&dst)).await;
    let sent: Vec<(BasicProperties, Vec<u8>)> = (0..N)
        .map(|i| {
            let p = BasicProperties::default().with_message_id(format!("k{i}").into());
            (p, i.to_be_bytes().to_vec())
        })
        .collect();
    rabbit.publish(&src, &sent).await;
    let mut rx = collect(rabbit.uri(), &dst).await;
    let dir = tempfile::tempdir().unwrap();
    const BATCH: usize = 1000;
    let config = route_config(
        rabbit.uri(),
        &route,
        &src,
        rabbit.uri(),
        &x,
        &format!("batch = {BATCH}"),
    );
    let route_label = format!("route=\"{route}\"");
    let redeliveries = |d: &Daemon| d.metric("ferry_bridge_redeliveries_total", &[&route_label]);

    let mut counts = Arrivals::with_capacity(N);
    let mut reported = 0.0;
    let mut source_duplicates = 0.0;
    let deadline = started + Duration::from_secs(300);
    let mut daemon = start(dir.path(), &config);
    // Each kill comes once its share of the ids arrived, so it lands while they flow.
    for point in kill_points(N, KILLS) {
        receive_until(&mut rx, &mut counts, message_id, point, deadline, &daemon).await;
        reported += redeliveries(&daemon);
        source_duplicates += daemon.metric("ferry_bridge_source_duplicates_total", &[&route_label]);
        daemon.kill_and_restart();
    }
    receive_until(&mut rx, &mut counts, message_id, N, deadline, &daemon).await;
    // Stragglers of the last redeliveries.
    let stragglers = receive(&mut rx, usize::MAX, Duration::from_secs(3)).await;
    absorb(&mut counts, message_id, stragglers);
    reported += redeliveries(&daemon);
    source_duplicates += daemon.metric("ferry_bridge_source_duplicates_total", &[&route_label]);

    let sent_ids: HashSet<String> = (0..N).map(|i| format!("k{i}")).collect();
    assert!(
        counts.keys().all(|id| sent_ids.contains(id)),
        "an id that was never sent arrived"
    );
    let duplicates: usize = counts.values().map(|c| c.len() - 1).sum();
    eprintln!(
        "{N} messages, {KILLS} kill -9: {duplicates} duplicates downstream, {reported} redeliveries reported, {source_duplicates} upstream redeliveries dropped by message-id, {:?}",
        started.elapsed()
    );
    // A crash can resend at most what was leased and unacknowledged at that moment: the
    // sink's window of batches.
    let per_crash = ferry_bridge::IN_FLIGHT_BATCHES * BATCH;
    assert!(
        duplicates <= KILLS * per_crash,
        "{duplicates} duplicates: more than {per_crash} per crash"
    );
    // Every resend is counted when its lease is taken; a killed daemon's counter loses
    // only what it counted after its last scrape (as any Prometheus counter of a killed
    // process does), so the counts roughly agree but need not be equal.
    assert!(
        duplicates == 0 || reported > 0.0,
        "{duplicates} duplicates but no redelivery was reported"
    );
    assert_eq!(rabbit.depth(&src).await, 0);
    drop(daemon);
    drop(rabbit);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_id_is_staged_once_within_the_dedup_window_and_again_after_it() {
    let mut rabbit = Rabbit::connect().await;
    let (src, dst, x, route) = (unique("src"), unique("dst"), unique("x"), unique("r"));
    rabbit.queue(&src).await;
    rabbit.queue(&dst).await;
    rabbit.exchange(&x, Some(&dst)).await;
    let config = route_config(rabbit.uri(), &route, &src, rabbit.uri(), &x, "")
        .replace("prefetch = 2000", "prefetch = 2000\ndedup_window_ms = 300");
    let mut rx = collect(rabbit.uri(), &dst).await;
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(dir.path(), &config);
    let with_id = |id: &str, body: &str| {
        (
            BasicProperties::default().with_message_id(id.into()),
            body.as_bytes().to_vec(),
        )
    };

    rabbit
        .publish(&src, &[with_id("same", "first"), with_id("same", "second")])
        .await;
    let got = receive(&mut rx, 2, Duration::from_secs(2)).await;
    assert_eq!(
        got.len(),
        1,
        "the second copy is a duplicate within the window"
    );
    assert_eq!(got[0].data, b"first");
    let route_label = format!("route=\"{route}\"");
    daemon.wait_for("the duplicate counted", Duration::from_secs(10), |d| {
        d.metric("ferry_bridge_source_duplicates_total", &[&route_label]) == 1.0
    });

    // Past the window (and a cleanup) the id is forgotten and staged again: letting the
    // window pass is the point of this sleep.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    rabbit.publish(&src, &[with_id("same", "third")]).await;
    let got = receive(&mut rx, 1, Duration::from_secs(10)).await;
    assert_eq!(got.len(), 1, "{}", daemon.readyz());
    assert_eq!(got[0].data, b"third");
    drop(daemon);
    drop(rabbit);
}

/// Waits until at most `depth` messages are ready in `queue`; panics with `daemon`'s
/// `/readyz` when `deadline` passes first.
async fn drain_to(rabbit: &Rabbit, queue: &str, depth: usize, deadline: Instant, daemon: &Daemon) {
    let left = deadline.saturating_duration_since(Instant::now());
    let drained = wait::try_until(left, async || {
        (rabbit.depth(queue).await as usize <= depth).then_some(())
    })
    .await;
    assert!(
        drained.is_some(),
        "'{queue}' did not drain to {depth} messages in time; /readyz:\n{}",
        daemon.readyz()
    );
}

/// Every record of Ferry's Kafka front topic `topic` (on `daemon`), as message-ids from
/// the `amqp.message-id` header, read from the beginning until `n` distinct ids arrived
/// or `patience` passed without a record.
async fn kafka_front_ids(daemon: &Daemon, topic: &str, n: usize) -> HashMap<String, usize> {
    use rdkafka::consumer::{Consumer, StreamConsumer};
    use rdkafka::message::{Headers, Message};
    let consumer: StreamConsumer = client_config(
        &daemon.kafka_bootstrap(),
        &[
            ("group.id", &unique("g")),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "false"),
        ],
    )
    .create()
    .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut ids: HashMap<String, usize> = HashMap::with_capacity(n);
    let patience = Duration::from_secs(20);
    while ids.len() < n {
        let Ok(Ok(m)) = tokio::time::timeout(patience, consumer.recv()).await else {
            break;
        };
        let id = m
            .headers()
            .and_then(|h| {
                h.iter()
                    .find(|h| h.key == "amqp.message-id")
                    .and_then(|h| h.value.map(|v| String::from_utf8_lossy(v).into_owned()))
            })
            .expect("every record carries its AMQP message-id");
        *ids.entry(id).or_default() += 1;
    }
    ids
}

/// Issue 5's first path with Ferry's own Kafka front as the Kafka side: the real RabbitMQ
/// → Ferry → Kafka, killed with SIGKILL five times. The source drops upstream
/// redeliveries by message-id and the Kafka front is written in the transaction that
/// takes the message from the route's stage, so every id arrives exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rabbitmq_to_kafka_front_is_exactly_once_under_kill_9() {
    const N: usize = 100_000;
    const KILLS: usize = 5;
    let started = Instant::now();
    let mut rabbit = Rabbit::connect().await;
    let (src, route, topic) = (unique("src"), unique("r"), unique("t"));
    rabbit.queue(&src).await;
    let sent: Vec<(BasicProperties, Vec<u8>)> = (0..N)
        .map(|i| {
            let p = BasicProperties::default().with_message_id(format!("k{i}").into());
            (p, i.to_be_bytes().to_vec())
        })
        .collect();
    rabbit.publish(&src, &sent).await;
    let dir = tempfile::tempdir().unwrap();
    let uri = rabbit.uri();
    let config = format!(
        r#"
[sources.in]
kind = "rabbitmq"
uri = "{uri}"
queue = "{src}"
prefetch = 2000

[[routes]]
name = "{route}"
from = {{ source = "in" }}
to = [{{ kafka_topic = "{topic}" }}]
batch = 1000
"#
    );
    let route_label = format!("route=\"{route}\"");
    let mut dropped_upstream = 0.0;
    let deadline = started + Duration::from_secs(300);
    let mut daemon = start(dir.path(), &config);
    // Each kill comes once its share of the messages left the source queue (staged, or
    // delivered to the source and not yet acknowledged), so it lands while they flow.
    for point in kill_points(N, KILLS) {
        drain_to(&rabbit, &src, N - point, deadline, &daemon).await;
        dropped_upstream += daemon.metric("ferry_bridge_source_duplicates_total", &[&route_label]);
        daemon.kill_and_restart();
    }
    drain_to(&rabbit, &src, 0, deadline, &daemon).await;
    let ids = kafka_front_ids(&daemon, &topic, N).await;
    dropped_upstream += daemon.metric("ferry_bridge_source_duplicates_total", &[&route_label]);
    let duplicates: usize = ids.values().map(|c| c - 1).sum();
    eprintln!(
        "{N} messages, {KILLS} kill -9: {} distinct ids in the Kafka topic, {duplicates} duplicates, {dropped_upstream} upstream redeliveries dropped by message-id, {:?}",
        ids.len(),
        started.elapsed()
    );
    let missing = (0..N)
        .filter(|i| !ids.contains_key(&format!("k{i}")))
        .count();
    assert_eq!(missing, 0, "ids missing from the Kafka topic");
    assert_eq!(ids.len(), N, "an id that was never sent arrived");
    assert_eq!(duplicates, 0, "duplicates in the Kafka topic");
    drop(daemon);
    drop(rabbit);
}

/// Issue 5's second path with Ferry's own Kafka front as the Kafka side: Kafka → Ferry →
/// the real RabbitMQ, killed with SIGKILL five times. The route reads the topic from its
/// own stored offsets (exactly once into its stage); the RabbitMQ sink may publish what a
/// crash left unconfirmed again, with the same message-id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kafka_front_to_rabbitmq_loses_nothing_under_kill_9() {
    use rdkafka::producer::{FutureProducer, FutureRecord};
    const N: usize = 100_000;
    const KILLS: usize = 5;
    const BATCH: usize = 1000;
    let started = Instant::now();
    let mut rabbit = Rabbit::connect().await;
    let (dst, x, route, topic) = (unique("dst"), unique("x"), unique("r"), unique("t"));
    rabbit.queue(&dst).await;
    rabbit.exchange(&x, Some(&dst)).await;
    let mut rx = collect(rabbit.uri(), &dst).await;
    let dir = tempfile::tempdir().unwrap();
    let uri = rabbit.uri();
    let config = format!(
        r#"
[sinks.out]
kind = "rabbitmq"
uri = "{uri}"
exchange = "{x}"

[[routes]]
name = "{route}"
from = {{ kafka_topic = "{topic}" }}
to = [{{ sink = "out" }}]
batch = {BATCH}
"#
    );
    let mut daemon = start(dir.path(), &config);
    let producer: FutureProducer = client_config(
        &daemon.kafka_bootstrap(),
        &[
            ("acks", "all"),
            ("enable.idempotence", "true"),
            ("linger.ms", "5"),
        ],
    )
    .create()
    .unwrap();
    for wave in (0..N).collect::<Vec<_>>().chunks(5_000) {
        let pending: Vec<_> = wave
            .iter()
            .map(|i| {
                let (key, payload) = (format!("k{i}"), i.to_string());
                producer
                    .send_result(FutureRecord::to(&topic).key(&key).payload(&payload))
                    .expect("the producer queue has room for a wave")
            })
            .collect();
        for p in pending {
            assert!(
                matches!(p.await, Ok(Ok(_))),
                "a record was not acknowledged"
            );
        }
    }
    drop(producer);
    // One crash more than the loop's, once every record is produced.
    daemon.kill_and_restart();

    // Routing key = record key (docs/mapping.md); each arrival's message-id is kept. Each
    // kill comes once its share of the records still to arrive did, so it lands while
    // they flow.
    let mut arrivals = Arrivals::with_capacity(N);
    let already = receive(&mut rx, usize::MAX, Duration::ZERO).await;
    absorb(&mut arrivals, routing_key, already);
    let before = arrivals.len();
    let deadline = started + Duration::from_secs(300);
    for point in kill_points(N - before, KILLS) {
        let n = before + point;
        receive_until(&mut rx, &mut arrivals, routing_key, n, deadline, &daemon).await;
        daemon.kill_and_restart();
    }
    receive_until(&mut rx, &mut arrivals, routing_key, N, deadline, &daemon).await;
    let stragglers = receive(&mut rx, usize::MAX, Duration::from_secs(3)).await;
    absorb(&mut arrivals, routing_key, stragglers);
    let duplicates: usize = arrivals.values().map(|v| v.len() - 1).sum();
    eprintln!(
        "{N} records, {KILLS} kill -9: {} distinct keys arrived, {duplicates} duplicates, {:?}",
        arrivals.len(),
        started.elapsed()
    );
    let sent: HashSet<String> = (0..N).map(|i| format!("k{i}")).collect();
    assert!(
        arrivals.keys().all(|k| sent.contains(k)),
        "a key that was never sent arrived"
    );
    assert!(
        arrivals
            .values()
            .all(|ids| ids.iter().all(|id| *id == ids[0])),
        "every copy of a record carries the same message-id"
    );
    let per_crash = ferry_bridge::IN_FLIGHT_BATCHES * BATCH;
    assert!(
        duplicates <= (KILLS + 1) * per_crash,
        "{duplicates} duplicates: more than {per_crash} per crash"
    );
    drop(daemon);
    drop(rabbit);
}
