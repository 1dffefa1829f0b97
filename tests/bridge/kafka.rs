//! The bridge's external Kafka source and sink, run in the real `ferry` process against
//! librdkafka's in-process mock cluster (`rdkafka::mocking::MockCluster`, reachable from
//! the child process on loopback):
//! - records with keys, null values, repeated and null headers and timestamps go
//!   Kafka → Ferry → Kafka byte-identical, each exactly once;
//! - `kill -9` at progress points (after each sixth of the records arrived), restarted on
//!   the same data dir, loses and duplicates nothing on the way Kafka → Ferry →
//!   transactional Kafka sink. The sink's Kafka is a
//!   second Ferry process's Kafka front (which keeps Kafka's transactions; the mock
//!   cluster keeps neither transactional offsets nor markers), read `read_committed`;
//! - an unreachable broker leaves the daemon running and `/readyz` naming it down.

use crate::common::crash::kill_points;
use crate::common::daemon::{Daemon, EXIT, Setup};
use crate::common::http::get;
use crate::common::wait;
use rdkafka::ClientConfig;
use rdkafka::Message;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::mocking::MockCluster;
use rdkafka::producer::{DefaultProducerContext, FutureProducer, FutureRecord};
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// Partitions of each test topic.
const PARTITIONS: i32 = 3;

/// One record as a Kafka client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<Vec<u8>>)>,
    timestamp_ms: i64,
}

/// A mock cluster with a source topic `in` and a destination topic `out`.
fn cluster() -> MockCluster<'static, DefaultProducerContext> {
    let cluster = MockCluster::new(3).unwrap();
    cluster.create_topic("in", PARTITIONS, 1).unwrap();
    cluster.create_topic("out", PARTITIONS, 1).unwrap();
    cluster
}

/// A daemon in `dir` with the shipped config plus a Kafka source on `in`, a Kafka sink on
/// `out` and a route between them, logging at `info`.
fn setup(dir: &Path, source: &str, sink: &str, transactional: bool) -> Setup {
    let bridge = format!(
        r#"
[sources.in]
kind = "kafka"
bootstrap_servers = "{source}"
topics = ["in"]
group_id = "ferry-bridge"
# A killed member leaves the group quickly, so a restart resumes quickly.
properties = {{ "session.timeout.ms" = "6000", "heartbeat.interval.ms" = "500" }}

[sinks.out]
kind = "kafka"
bootstrap_servers = "{sink}"
topic = "out"
transactional = {transactional}

[[routes]]
name = "k2k"
from = {{ source = "in" }}
to = [{{ sink = "out" }}]
retry_initial_ms = 50
retry_max_ms = 1000
"#
    );
    Setup::shipped_with(dir, &bridge).env("FERRY__LOG__LEVEL", "info")
}

/// The `i`th test record: a unique key, every 7th value null, repeated header names with
/// null values among them, and a distinct timestamp.
fn record(i: usize) -> Record {
    let mut headers = vec![
        ("h".to_owned(), Some(format!("first-{i}").into_bytes())),
        ("h".to_owned(), None),
        ("h".to_owned(), Some(vec![0, 255, i as u8])),
    ];
    if i.is_multiple_of(3) {
        headers.push(("trace".to_owned(), Some(Vec::new())));
    }
    Record {
        key: format!("key-{i:06}").into_bytes(),
        value: (!i.is_multiple_of(7)).then(|| format!("value {i} \u{1F6A2}").into_bytes()),
        headers,
        timestamp_ms: 1_700_000_000_000 + i as i64,
    }
}

/// Writes `records` to topic `in` and waits for every acknowledgement.
async fn produce(bootstrap: &str, records: &[Record]) {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("enable.idempotence", "true")
        .set("linger.ms", "5")
        .create()
        .unwrap();
    for chunk in records.chunks(5_000) {
        let sends = chunk.iter().map(|r| {
            let headers = r.headers.iter().fold(OwnedHeaders::new(), |h, (k, v)| {
                h.insert(Header {
                    key: k,
                    value: v.as_deref(),
                })
            });
            let mut record = FutureRecord::<[u8], [u8]>::to("in")
                .key(&r.key)
                .headers(headers)
                .timestamp(r.timestamp_ms);
            if let Some(v) = &r.value {
                record = record.payload(v.as_slice());
            }
            producer.send(record, Duration::from_secs(30))
        });
        for result in futures::future::join_all(sends).await {
            result.unwrap();
        }
    }
}

/// A consumer of topic `out` that sees only committed records.
fn reader(bootstrap: &str) -> StreamConsumer {
    let c: StreamConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", format!("reader-{}", fastrand::u64(..)))
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .unwrap();
    c.subscribe(&["out"]).unwrap();
    c
}

fn record_of(m: &rdkafka::message::BorrowedMessage<'_>) -> Record {
    Record {
        key: m.key().unwrap_or_default().to_vec(),
        value: m.payload().map(<[u8]>::to_vec),
        headers: m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|h| (h.key.to_owned(), h.value.map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default(),
        timestamp_ms: m.timestamp().to_millis().unwrap_or(-1),
    }
}

/// Reads `out` into `got` (by key) until `want` distinct keys arrived — and then nothing
/// new came for `quiet`, when given — or `deadline` passed.
async fn read_until(
    reader: &StreamConsumer,
    got: &mut HashMap<Vec<u8>, Vec<Record>>,
    want: usize,
    quiet: Option<Duration>,
    deadline: Instant,
) {
    while Instant::now() < deadline {
        if got.len() >= want && quiet.is_none() {
            return;
        }
        let wait = quiet.unwrap_or_else(|| deadline.saturating_duration_since(Instant::now()));
        match tokio::time::timeout(wait, reader.recv()).await {
            Ok(Ok(m)) => {
                let r = record_of(&m);
                got.entry(r.key.clone()).or_default().push(r);
            }
            Ok(Err(e)) => panic!("reading the destination topic failed: {e}"),
            Err(_) if got.len() >= want => return,
            Err(_) => {}
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_records_cross_the_bridge_byte_identical_and_exactly_once() {
    let cluster = cluster();
    let bootstrap = cluster.bootstrap_servers();
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Record> = (0..5_000).map(record).collect();
    produce(&bootstrap, &records).await;
    let ferry = setup(dir.path(), &bootstrap, &bootstrap, false).start();

    let reader = reader(&bootstrap);
    let mut got = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    read_until(
        &reader,
        &mut got,
        records.len(),
        Some(Duration::from_secs(2)),
        deadline,
    )
    .await;
    let duplicates: usize = got.values().map(|v| v.len() - 1).sum();
    println!(
        "sent {}, arrived {} distinct, {duplicates} duplicates",
        records.len(),
        got.len()
    );
    assert_eq!(got.len(), records.len(), "records missing");
    assert_eq!(duplicates, 0);
    for r in &records {
        assert_eq!(&got[&r.key][0], r);
    }
    let metrics = ferry.metrics();
    assert!(
        metrics
            .contains(r#"ferry_bridge_messages_in_total{route="k2k",endpoint="source:in"} 5000"#),
        "{metrics}"
    );
}

/// A Ferry process whose Kafka front holds topic `out` with [`PARTITIONS`] partitions:
/// the transactional sink's Kafka.
async fn sink_kafka(dir: &Path) -> Daemon {
    let partitions = PARTITIONS.to_string();
    let ferry = Setup::shipped(dir)
        .env("FERRY__KAFKA__DEFAULT_PARTITIONS", &partitions)
        .start();
    let admin: AdminClient<DefaultClientContext> = ClientConfig::new()
        .set("bootstrap.servers", ferry.kafka_bootstrap())
        .create()
        .unwrap();
    let topic = NewTopic::new("out", PARTITIONS, TopicReplication::Fixed(1));
    let created = admin
        .create_topics([&topic], &AdminOptions::new())
        .await
        .unwrap();
    assert!(created.iter().all(Result::is_ok), "{created:?}");
    ferry
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_nothing_and_duplicates_nothing_through_a_transactional_sink() {
    const RECORDS: usize = 100_000;
    const KILLS: usize = 5;
    let cluster = cluster();
    let bootstrap = cluster.bootstrap_servers();
    let sink_dir = tempfile::tempdir().unwrap();
    let sink = sink_kafka(sink_dir.path()).await;
    let sink_bootstrap = sink.kafka_bootstrap();
    let dir = tempfile::tempdir().unwrap();
    let records: Vec<Record> = (0..RECORDS).map(record).collect();
    produce(&bootstrap, &records).await;

    let started = Instant::now();
    let deadline = started + Duration::from_secs(300);
    let reader = reader(&sink_bootstrap);
    let mut got = HashMap::new();
    let mut ferry = setup(dir.path(), &bootstrap, &sink_bootstrap, true).start();
    // Each kill comes once its share of the records arrived, so it lands while they flow.
    for (kill, point) in kill_points(RECORDS, KILLS).into_iter().enumerate() {
        read_until(&reader, &mut got, point, None, deadline).await;
        assert!(got.len() >= point, "only {} records arrived", got.len());
        ferry.kill();
        println!(
            "kill {} after {point} records: {} distinct keys arrived so far",
            kill + 1,
            got.len()
        );
        ferry.restart();
    }
    let quiet = Some(Duration::from_secs(3));
    read_until(&reader, &mut got, RECORDS, quiet, deadline).await;
    let duplicates: usize = got.values().map(|v| v.len() - 1).sum();
    println!(
        "sent {RECORDS}, {KILLS} kills, arrived {} distinct keys, {duplicates} duplicates, in {:?}",
        got.len(),
        started.elapsed()
    );
    assert_eq!(got.len(), RECORDS, "records lost");
    for r in &records {
        assert_eq!(&got[&r.key][0], r);
    }
    assert_eq!(duplicates, 0, "duplicates through the transactional sink");
    let commits = sink.metric("ferry_kafka_transactions_total", &[r#"outcome="commit""#]);
    assert!(
        commits > 0.0,
        "the sink's Ferry counts committed transactions"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_broker_is_named_in_readyz_and_the_daemon_keeps_running() {
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = setup(dir.path(), "127.0.0.1:1", "127.0.0.1:1", false).start();
    let readyz = || get(ferry.ports().metrics, "/readyz").unwrap();
    let named_down = |body: &str| {
        body.lines()
            .any(|l| l.starts_with("source:in: down: ") && !l.ends_with("connecting"))
    };
    wait::until_blocking(
        "a ready daemon naming the source down",
        Duration::from_secs(30),
        || matches!(readyz(), (200, body) if named_down(&body)).then_some(()),
    );
    println!("{}", readyz().1);
    // The point: the daemon keeps running and ready while the broker stays unreachable.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(readyz().0, 200);
    ferry.signal(libc::SIGTERM);
    assert_eq!(ferry.wait_exit(EXIT).status.code(), Some(0));
}
