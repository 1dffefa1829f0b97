//! Routes between Ferry's own fronts, through the real `ferry` process and real clients:
//! lapin publishes to an exchange on the AMQP front and an rdkafka consumer reads the
//! route's Kafka topic (properties and headers mapped as `docs/mapping.md` says); rdkafka
//! produces to a topic on the Kafka front and lapin consumes the routed queue (key,
//! headers and timestamp mapped) — both moved front to front in the source's transactions,
//! never through the route's stage; a full reject-publish queue holds records back in the
//! route's stage until it has room; partitions added while a route reads a topic are read
//! too; a route reads a topic as `read_committed` does (aborted transactions never cross,
//! open ones wait for their commit); a batch whose records do not decode is skipped and
//! counted; and under repeated `kill -9` every confirmed message crosses from the AMQP
//! front to the Kafka front exactly once.

use crate::common::amqp::declare_exchange;
use crate::common::crash::{
    Flow, Restart, kill_at, kill_points, produce_until_acknowledged, publish_until_confirmed,
};
use crate::common::daemon::{Daemon, Setup};
use crate::common::kafka::client_config;
use crate::common::kafka::raw::{Raw, with_header_count_beyond_the_batch};
use crate::common::wait;
use futures::StreamExt;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ResponseKind, TopicName};
use kafka_protocol::protocol::StrBytes;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use rdkafka::Message;
use rdkafka::admin::{AdminClient, AdminOptions, NewPartitions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// How long one test may run.
const TEST_LIMIT: Duration = Duration::from_secs(240);
/// How long a single wait (a port, a message) may take.
const PATIENCE: Duration = Duration::from_secs(60);
/// Messages of the mapping tests.
const MESSAGES: usize = 2_000;

/// A channel on a new connection to `uri`, or the error while the daemon is down.
async fn channel(uri: &str) -> lapin::Result<(Connection, Channel)> {
    let conn = Connection::connect(uri, ConnectionProperties::default()).await?;
    let ch = conn.create_channel().await?;
    Ok((conn, ch))
}

/// A consumer of `topic` from its beginning, in its own group.
fn kafka_consumer(bootstrap: &str, topic: &str) -> StreamConsumer {
    let group = format!("test-{}", fastrand::u64(..));
    let c = crate::common::kafka::consumer(bootstrap, &group, &[]);
    c.subscribe(&[topic]).unwrap();
    c
}

/// Declares `exchange` and a durable `queue` (with `args`) bound to it for every routing key.
async fn bound_queue(ch: &Channel, exchange: &str, queue: &str, args: FieldTable) {
    declare_exchange(ch, exchange, ExchangeKind::Topic).await;
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    ch.queue_declare(queue.into(), durable, args).await.unwrap();
    ch.queue_bind(
        queue.into(),
        exchange.into(),
        "#".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
}

/// A route `name` from the Kafka front's topic `topic` to the AMQP front's exchange
/// `exchange`, with `extra` route settings (TOML lines).
fn kafka_to_amqp_route(name: &str, topic: &str, exchange: &str, extra: &str) -> String {
    format!(
        "[[routes]]\nname = \"{name}\"\nfrom = {{ kafka_topic = \"{topic}\" }}\nto = [{{ amqp_exchange = \"{exchange}\" }}]\n{extra}\n"
    )
}

/// Consumes `queue` with `prefetch`, acknowledging each delivery, until `n` bodies arrived
/// or none came for [`PATIENCE`]; returns the consumer and the bodies in arrival order.
async fn receive_bodies(
    ch: &Channel,
    queue: &str,
    prefetch: u16,
    n: usize,
) -> (lapin::Consumer, Vec<String>) {
    ch.basic_qos(prefetch, BasicQosOptions::default())
        .await
        .unwrap();
    let mut consumer = ch
        .basic_consume(
            queue.into(),
            "t".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let mut bodies = Vec::with_capacity(n);
    while bodies.len() < n {
        let Ok(Some(next)) = tokio::time::timeout(PATIENCE, consumer.next()).await else {
            break;
        };
        let d = next.unwrap();
        bodies.push(String::from_utf8(d.data.clone()).unwrap());
        d.ack(BasicAckOptions::default()).await.unwrap();
    }
    (consumer, bodies)
}

/// The sum of metric `name`'s series for stage `stage` once a stage metrics pass ran after
/// `witness`'s popped count reached `popped` (the moves the test waited for are in it);
/// `None` when the stage has no series.
fn stage_metric(
    ferry: &Daemon,
    witness: &str,
    popped: usize,
    name: &str,
    stage: &str,
) -> Option<f64> {
    let witness = format!("stage=\"{witness}\"");
    ferry.wait_for("a stage metrics pass after the last move", PATIENCE, |f| {
        f.metric("ferry_stage_popped_total", &[&witness]) >= popped as f64
    });
    let stage = format!("stage=\"{stage}\"");
    ferry
        .metrics()
        .lines()
        .any(|l| l.starts_with(name) && l.contains(&stage))
        .then(|| ferry.metric(name, &[&stage]))
}

/// Asserts that route `route`'s `n` messages went from front to front in the source's
/// transactions, never through the route's stage (`bridge.ROUTE.0`), and were counted as
/// delivered; `witness` is a front queue whose popped count reaches `n` after the moves.
fn assert_moved_straight(ferry: &Daemon, route: &str, witness: &str, n: usize) {
    let stage = format!("bridge.{route}.0");
    let pushed = stage_metric(ferry, witness, n, "ferry_stage_pushed_total", &stage);
    assert_eq!(pushed, Some(0.0), "staged in {stage}");
    let route = format!("route=\"{route}\"");
    assert_eq!(
        ferry.metric("ferry_bridge_messages_out_total", &[&route]),
        n as f64,
        "counted as delivered"
    );
}

fn header<'a>(m: &'a rdkafka::message::BorrowedMessage<'_>, name: &str) -> Option<&'a [u8]> {
    m.headers()?
        .iter()
        .find(|h| h.key == name)
        .and_then(|h| h.value)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_front_messages_reach_a_kafka_front_topic_once_with_their_properties() {
    tokio::time::timeout(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let ferry = Setup::shipped_with(
            dir.path(),
            r#"
[[routes]]
name = "a2k"
from = { amqp_exchange = "orders", binding_key = "order.#" }
to = [{ kafka_topic = "orders-out" }]
"#,
        )
        .start();
        let (amqp, kafka) = (ferry.amqp_uri(), ferry.kafka_bootstrap());
        let (_conn, ch) = channel(&amqp).await.unwrap();
        declare_exchange(&ch, "orders", ExchangeKind::Topic).await;
        ferry.wait_for_amqp_exchange_source().await;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .unwrap();
        let mut confirms = Vec::with_capacity(MESSAGES);
        for i in 0..MESSAGES {
            let mut headers = FieldTable::default();
            headers.insert("n".into(), AMQPValue::LongLongInt(i as i64));
            headers.insert("tag".into(), AMQPValue::LongString(format!("t{i}").into()));
            let properties = BasicProperties::default()
                .with_message_id(format!("m{i}").into())
                .with_content_type("text/plain".into())
                .with_priority((i % 10) as u8)
                .with_headers(headers);
            confirms.push(
                ch.basic_publish(
                    "orders".into(),
                    format!("order.{}", i % 7).as_str().into(),
                    BasicPublishOptions::default(),
                    format!("body {i}").as_bytes(),
                    properties,
                )
                .await
                .unwrap(),
            );
        }
        for c in confirms {
            assert!(c.await.unwrap().is_ack());
        }
        let consumer = kafka_consumer(&kafka, "orders-out");
        let mut seen: BTreeMap<usize, usize> = BTreeMap::new();
        let mut stream = consumer.stream();
        while seen.len() < MESSAGES {
            let Ok(m) = tokio::time::timeout(PATIENCE, stream.next()).await else {
                panic!(
                    "the Kafka topic stopped after {} messages; ferry's log:\n{}",
                    seen.len(),
                    ferry.log()
                );
            };
            let m = m.unwrap().unwrap();
            let id = std::str::from_utf8(header(&m, "amqp.message-id").unwrap()).unwrap();
            let i: usize = id[1..].parse().unwrap();
            assert_eq!(m.payload().unwrap(), format!("body {i}").as_bytes());
            assert_eq!(m.key().unwrap(), format!("order.{}", i % 7).as_bytes());
            assert_eq!(header(&m, "amqp.exchange").unwrap(), b"orders");
            assert_eq!(header(&m, "amqp.content-type").unwrap(), b"text/plain");
            assert_eq!(
                header(&m, "amqp.priority").unwrap(),
                (i % 10).to_string().as_bytes()
            );
            assert_eq!(header(&m, "n").unwrap(), i.to_string().as_bytes());
            assert_eq!(header(&m, "tag").unwrap(), format!("t{i}").as_bytes());
            *seen.entry(i).or_default() += 1;
        }
        // Anything more would be a duplicate: give it a moment to show up.
        while let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(2), stream.next()).await {
            let m = m.unwrap();
            let id = std::str::from_utf8(header(&m, "amqp.message-id").unwrap()).unwrap();
            *seen.entry(id[1..].parse().unwrap()).or_default() += 1;
        }
        let duplicates: usize = seen.values().map(|n| n - 1).sum();
        println!(
            "amqp front -> kafka front: {} distinct, {duplicates} duplicates",
            seen.len()
        );
        assert_eq!(seen.len(), MESSAGES);
        assert_eq!(duplicates, 0);
        assert_moved_straight(&ferry, "a2k", "amqp/1///ferry.bridge.a2k", MESSAGES);
    })
    .await
    .expect("the test took too long");
}

/// Issue 33: a route whose source exchange did not exist yet retried with a backoff, and a
/// message published after an application declared the exchange but before the retry
/// bound the route's queue was dropped as unroutable. The route now declares the missing
/// exchange itself (durable, `topic`) and binds at once: the application's own declare
/// of it is an equivalent redeclare, and its first message arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_declares_its_missing_source_exchange_so_the_first_message_arrives() {
    tokio::time::timeout(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let ferry = Setup::shipped_with(
            dir.path(),
            r#"
[[routes]]
name = "early"
from = { amqp_exchange = "declared-later" }
to = [{ kafka_topic = "early-out" }]
"#,
        )
        .start();
        ferry.wait_for_amqp_exchange_source().await;
        let (_conn, ch) = channel(&ferry.amqp_uri()).await.unwrap();
        declare_exchange(&ch, "declared-later", ExchangeKind::Topic).await;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .unwrap();
        let confirm = ch
            .basic_publish(
                "declared-later".into(),
                "any.key".into(),
                BasicPublishOptions {
                    mandatory: true,
                    ..BasicPublishOptions::default()
                },
                b"first",
                BasicProperties::default(),
            )
            .await
            .unwrap()
            .await
            .unwrap();
        assert!(
            confirm.is_ack() && confirm.take_message().is_none(),
            "routed"
        );
        let consumer = kafka_consumer(&ferry.kafka_bootstrap(), "early-out");
        let m = tokio::time::timeout(PATIENCE, consumer.stream().next())
            .await
            .expect("the first message reaches the topic")
            .unwrap()
            .unwrap();
        assert_eq!(m.payload().unwrap(), b"first");
    })
    .await
    .expect("within the test's limit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_front_records_reach_an_amqp_front_queue_once_with_key_headers_and_timestamp() {
    tokio::time::timeout(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let ferry = Setup::shipped_with(
            dir.path(),
            &kafka_to_amqp_route("k2a", "events", "events-in", ""),
        )
        .start();
        let (amqp, kafka) = (ferry.amqp_uri(), ferry.kafka_bootstrap());
        let (_conn, ch) = channel(&amqp).await.unwrap();
        bound_queue(&ch, "events-in", "events", FieldTable::default()).await;
        let producer: FutureProducer = client_config(&kafka, &[])
            .set("acks", "all")
            .set("linger.ms", "5")
            .set("enable.idempotence", "true")
            .create()
            .unwrap();
        let mut sends = Vec::with_capacity(MESSAGES);
        for i in 0..MESSAGES {
            let key = format!("k{}", i % 13);
            let value = format!("value {i}");
            let headers = OwnedHeaders::new()
                .insert(Header {
                    key: "n",
                    value: Some(i.to_string().as_bytes()),
                })
                .insert(Header {
                    key: "source",
                    value: Some("test"),
                })
                .insert(Header {
                    key: "tag",
                    value: Some("a"),
                })
                .insert(Header {
                    key: "tag",
                    value: Some("b"),
                });
            let record = FutureRecord::to("events")
                .key(&key)
                .payload(&value)
                .timestamp(1_700_000_000_000 + i as i64)
                .headers(headers);
            sends.push(producer.send_result(record).unwrap());
        }
        for s in sends {
            s.await.unwrap().unwrap();
        }
        ch.basic_qos(500, BasicQosOptions::default()).await.unwrap();
        let mut consumer = ch
            .basic_consume(
                "events".into(),
                "t".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        let mut seen: HashMap<usize, usize> = HashMap::new();
        let text = |v: &AMQPValue| match v {
            AMQPValue::LongString(s) => s.to_string(),
            other => panic!("not a string: {other:?}"),
        };
        let mut total = 0;
        loop {
            let wait = if seen.len() < MESSAGES {
                PATIENCE
            } else {
                Duration::from_secs(2)
            };
            let Ok(next) = tokio::time::timeout(wait, consumer.next()).await else {
                break;
            };
            let d = next.unwrap().unwrap();
            total += 1;
            let body = String::from_utf8(d.data.clone()).unwrap();
            let i: usize = body["value ".len()..].parse().unwrap();
            let headers = d.properties.headers().as_ref().unwrap().inner();
            assert_eq!(text(&headers["n"]), i.to_string());
            assert_eq!(text(&headers["source"]), "test");
            // A repeated name keeps every value, in order, in the exact copy.
            let AMQPValue::FieldArray(exact) = &headers["x-kafka-headers"] else {
                panic!("no x-kafka-headers: {headers:?}");
            };
            let tags: Vec<&AMQPValue> = exact
                .as_slice()
                .iter()
                .filter_map(|pair| match pair {
                    AMQPValue::FieldArray(p)
                        if p.as_slice()[0] == AMQPValue::LongString("tag".into()) =>
                    {
                        Some(&p.as_slice()[1])
                    }
                    _ => None,
                })
                .collect();
            assert_eq!(
                tags,
                [
                    &AMQPValue::ByteArray(b"a".to_vec().into()),
                    &AMQPValue::ByteArray(b"b".to_vec().into())
                ]
            );
            assert_eq!(
                headers["x-kafka-timestamp"],
                AMQPValue::LongLongInt(1_700_000_000_000 + i as i64)
            );
            assert_eq!(
                headers["x-kafka-key"],
                AMQPValue::ByteArray(format!("k{}", i % 13).into_bytes().into())
            );
            assert_eq!(d.routing_key.as_str(), format!("k{}", i % 13));
            *seen.entry(i).or_default() += 1;
            d.ack(BasicAckOptions::default()).await.unwrap();
        }
        println!(
            "kafka front -> amqp front: {} distinct of {total} delivered",
            seen.len()
        );
        assert_eq!(seen.len(), MESSAGES);
        assert_eq!(total, MESSAGES, "duplicates were delivered");
        assert_moved_straight(&ferry, "k2a", "amqp/1///events", MESSAGES);
    })
    .await
    .expect("the test took too long");
}

/// A queue at its `x-max-length` with `x-overflow: reject-publish` refuses what the route
/// brings, as it would nack a publisher: the records wait in the route's stage and arrive
/// once the consumer makes room — none dropped, none twice, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_reject_publish_queue_holds_records_back_until_it_has_room() {
    const RECORDS: usize = 500;
    const MAX_LENGTH: i64 = 100;
    tokio::time::timeout(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let ferry = Setup::shipped_with(
            dir.path(),
            &kafka_to_amqp_route(
                "full",
                "bounded",
                "bounded-in",
                "retry_initial_ms = 50\nretry_max_ms = 500",
            ),
        )
        .start();
        let (amqp, kafka) = (ferry.amqp_uri(), ferry.kafka_bootstrap());
        let (_conn, ch) = channel(&amqp).await.unwrap();
        let mut args = FieldTable::default();
        args.insert("x-max-length".into(), AMQPValue::LongLongInt(MAX_LENGTH));
        args.insert(
            "x-overflow".into(),
            AMQPValue::LongString("reject-publish".into()),
        );
        bound_queue(&ch, "bounded-in", "bounded", args).await;
        let producer: FutureProducer = client_config(&kafka, &[])
            .set("acks", "all")
            .create()
            .unwrap();
        let sends: Vec<_> = (0..RECORDS)
            .map(|i| {
                let value = i.to_string();
                producer
                    .send_result(FutureRecord::<(), _>::to("bounded").payload(&value))
                    .unwrap()
            })
            .collect();
        for s in sends {
            s.await.unwrap().unwrap();
        }
        // The queue fills to its limit and stays there while nobody consumes.
        let passive = QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        };
        let depth = async || {
            let q = ch
                .queue_declare("bounded".into(), passive, FieldTable::default())
                .await
                .unwrap();
            i64::from(q.message_count())
        };
        wait::until("the queue filling to its limit", PATIENCE, async || {
            (depth().await == MAX_LENGTH).then_some(())
        })
        .await;
        // The point: nothing more gets in while nobody consumes, for a while.
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(depth().await, MAX_LENGTH, "the limit holds");

        let (mut consumer, arrived) = receive_bodies(&ch, "bounded", 10, RECORDS).await;
        let arrived: Vec<usize> = arrived.iter().map(|b| b.parse().unwrap()).collect();
        if arrived.len() < RECORDS {
            panic!(
                "{} of {RECORDS} arrived; log:\n{}",
                arrived.len(),
                ferry.log()
            );
        }
        assert!(
            tokio::time::timeout(Duration::from_secs(2), consumer.next())
                .await
                .is_err(),
            "nothing more arrives"
        );
        assert_eq!(
            arrived,
            (0..RECORDS).collect::<Vec<_>>(),
            "each once, in order"
        );
        // What the full queue refused waited in the route's stage.
        let staged = stage_metric(
            &ferry,
            "amqp/1///bounded",
            RECORDS,
            "ferry_stage_pushed_total",
            "bridge.full.0",
        );
        assert!(staged.is_some_and(|n| n > 0.0), "staged: {staged:?}");
    })
    .await
    .expect("the test took too long");
}

/// Partitions added to a Kafka-front topic while a route reads it are read too, without a
/// restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_of_partitions_added_while_a_route_runs_arrive() {
    tokio::time::timeout(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let ferry = Setup::shipped_with(dir.path(), &kafka_to_amqp_route("grow", "grow", "grow-in", "")).start();
        let (amqp, kafka) = (ferry.amqp_uri(), ferry.kafka_bootstrap());
        let (_conn, ch) = channel(&amqp).await.unwrap();
        bound_queue(&ch, "grow-in", "grow", FieldTable::default()).await;
        let send = |producer: FutureProducer, partition: i32, values: std::ops::Range<usize>| async move {
            for i in values {
                let value = i.to_string();
                producer
                    .send(
                        FutureRecord::<(), _>::to("grow").payload(&value).partition(partition),
                        Duration::from_secs(30),
                    )
                    .await
                    .unwrap();
            }
        };
        let producer = || -> FutureProducer { client_config(&kafka, &[]).set("acks", "all").create().unwrap() };
        send(producer(), 0, 0..50).await;
        let admin: AdminClient<DefaultClientContext> = client_config(&kafka, &[]).create().unwrap();
        let grown = admin
            .create_partitions(&[NewPartitions::new("grow", 3)], &AdminOptions::new())
            .await
            .unwrap();
        assert!(grown.iter().all(Result::is_ok), "{grown:?}");
        // A new producer sees the three partitions at once.
        let fresh = producer();
        send(fresh.clone(), 1, 50..100).await;
        send(fresh, 2, 100..150).await;

        let (_consumer, arrived) = receive_bodies(&ch, "grow", 500, 150).await;
        let mut arrived: Vec<usize> = arrived.iter().map(|b| b.parse().unwrap()).collect();
        if arrived.len() < 150 {
            panic!("{} of 150 arrived; log:\n{}", arrived.len(), ferry.log());
        }
        arrived.sort_unstable();
        assert_eq!(arrived, (0..150).collect::<Vec<_>>(), "each record once");
    })
    .await
    .expect("the test took too long");
}

/// A route from a topic written by a transactional producer carries committed records
/// only: an aborted transaction's never cross, an open one's cross when it commits, and
/// records after an open transaction wait for it, as for a `read_committed` consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_carries_committed_transactions_only() {
    tokio::time::timeout(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let ferry =
            Setup::shipped_with(dir.path(), &kafka_to_amqp_route("txn", "txn", "txn-in", ""))
                .start();
        let (amqp, kafka) = (ferry.amqp_uri(), ferry.kafka_bootstrap());
        let (_conn, ch) = channel(&amqp).await.unwrap();
        bound_queue(&ch, "txn-in", "txn", FieldTable::default()).await;
        let producer: FutureProducer = client_config(&kafka, &[])
            .set("transactional.id", "route-writer")
            .create()
            .unwrap();
        producer.init_transactions(PATIENCE).unwrap();
        let send = |values: &'static [&'static str]| {
            let producer = producer.clone();
            async move {
                for v in values {
                    producer
                        .send(
                            FutureRecord::<(), _>::to("txn").payload(*v).partition(0),
                            PATIENCE,
                        )
                        .await
                        .unwrap();
                }
            }
        };
        producer.begin_transaction().unwrap();
        send(&["a1", "a2"]).await;
        producer.commit_transaction(PATIENCE).unwrap();
        producer.begin_transaction().unwrap();
        send(&["b1", "b2"]).await;
        producer.abort_transaction(PATIENCE).unwrap();
        producer.begin_transaction().unwrap();
        send(&["c1"]).await;
        let plain: FutureProducer = client_config(&kafka, &[])
            .set("acks", "all")
            .create()
            .unwrap();
        plain
            .send(
                FutureRecord::<(), _>::to("txn")
                    .payload("after-c")
                    .partition(0),
                PATIENCE,
            )
            .await
            .unwrap();
        let (mut consumer, arrived) = receive_bodies(&ch, "txn", 100, 2).await;
        assert_eq!(arrived, ["a1", "a2"], "log:\n{}", ferry.log());
        // The open transaction holds back its record and the one after it.
        let early = tokio::time::timeout(Duration::from_secs(2), consumer.next()).await;
        assert!(
            early.is_err(),
            "a record crossed before its transaction committed"
        );
        producer.commit_transaction(PATIENCE).unwrap();
        let mut rest = Vec::new();
        while rest.len() < 2 {
            let d = tokio::time::timeout(PATIENCE, consumer.next())
                .await
                .expect("the committed records arrive")
                .unwrap()
                .unwrap();
            rest.push(String::from_utf8(d.data.clone()).unwrap());
            d.ack(BasicAckOptions::default()).await.unwrap();
        }
        assert_eq!(rest, ["c1", "after-c"]);
    })
    .await
    .expect("the test took too long");
}

/// A batch whose records do not decode (a valid CRC around a header count beyond the
/// batch), produced to a topic a route reads: the route skips it and counts it, the records
/// around it arrive, and the daemon keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_records_do_not_decode_is_skipped_and_counted() {
    tokio::time::timeout(TEST_LIMIT, async {
        let dir = tempfile::tempdir().unwrap();
        let ferry = Setup::shipped_with(
            dir.path(),
            &kafka_to_amqp_route("skip", "mixed", "mixed-in", ""),
        )
        .start();
        let (amqp, kafka) = (ferry.amqp_uri(), ferry.kafka_bootstrap());
        let (_conn, ch) = channel(&amqp).await.unwrap();
        bound_queue(&ch, "mixed-in", "mixed", FieldTable::default()).await;
        let producer: FutureProducer = client_config(&kafka, &[])
            .set("acks", "all")
            .create()
            .unwrap();
        let send = |value: &'static str| {
            let producer = producer.clone();
            async move {
                producer
                    .send(
                        FutureRecord::<(), _>::to("mixed").payload(value),
                        Duration::from_secs(30),
                    )
                    .await
                    .unwrap();
            }
        };
        send("before").await;
        let mut raw = Raw::connect(([127, 0, 0, 1], ferry.ports().kafka).into()).await;
        let request = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(10_000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_static_str("mixed")))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(with_header_count_beyond_the_batch("bad"))),
                    ]),
            ]);
        let ResponseKind::Produce(r) = raw.request(ApiKey::Produce, 9, &request).await else {
            panic!("not a Produce answer");
        };
        assert_eq!(
            r.responses[0].partition_responses[0].error_code, 0,
            "the front stores a batch whose header and CRC are right"
        );
        send("after").await;

        let (_consumer, arrived) = receive_bodies(&ch, "mixed", 10, 2).await;
        if arrived.len() < 2 {
            panic!("only {arrived:?} arrived; log:\n{}", ferry.log());
        }
        assert_eq!(arrived, ["before", "after"]);
        let metrics = ferry.metrics();
        let skipped = crate::common::daemon::sum_of(
            &metrics,
            "ferry_bridge_undecodable_records_total",
            &["route=\"skip\""],
        );
        assert_eq!(skipped, 1.0, "{metrics}");
    })
    .await
    .expect("the test took too long");
}

/// SIGKILLs in each crash test.
const KILLS: usize = 5;

/// Messages of the crash test (`FERRY_TEST_CRASH_MESSAGES` overrides).
fn crash_messages() -> usize {
    std::env::var("FERRY_TEST_CRASH_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

/// Kills `ferry` [`KILLS`] times as `flow`'s messages are confirmed.
fn flow_killer(ferry: Daemon, flow: &Flow) -> tokio::task::JoinHandle<(Daemon, Vec<Restart>)> {
    let points = kill_points(flow.ids.len(), KILLS);
    let flow = flow.clone();
    kill_at(ferry, points, TEST_LIMIT, move || flow.progress())
}

/// The copies beyond what the sender itself sent: `arrived[i]` copies of message `i`,
/// which was sent `sends[i]` times (a resend of an unconfirmed message may legitimately
/// have been stored twice upstream of the route). Also (copies of resent messages,
/// missing messages).
fn duplicates(arrived: &[u32], sends: &[u32]) -> (u32, u32, usize) {
    let made: u32 = arrived
        .iter()
        .zip(sends)
        .map(|(a, s)| a.saturating_sub((*s).max(1)))
        .sum();
    let resent: u32 = arrived
        .iter()
        .zip(sends)
        .filter(|(_, s)| **s > 1)
        .map(|(a, _)| a.saturating_sub(1))
        .sum();
    let missing = arrived.iter().filter(|n| **n == 0).count();
    (made, resent, missing)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_front_to_kafka_front_is_exactly_once_under_kill_9() {
    let total = crash_messages();
    let started = Instant::now();
    let deadline = started + TEST_LIMIT;
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped_with(
        dir.path(),
        r#"
[[routes]]
name = "crash"
from = { amqp_exchange = "crash" }
to = [{ kafka_topic = "crash-out" }]
key = "message_id"
"#,
    )
    .start();
    let (amqp, kafka) = (ferry.amqp_uri(), ferry.kafka_bootstrap());
    {
        let (_conn, ch) = channel(&amqp).await.unwrap();
        declare_exchange(&ch, "crash", ExchangeKind::Topic).await;
    }
    ferry.wait_for_amqp_exchange_source().await;

    let flow = Flow::new(0..total, deadline);
    let killer = flow_killer(ferry, &flow);
    let sends = publish_until_confirmed(&amqp, "crash", "k", &flow).await;
    let _ferry = killer.await.unwrap();
    let resent = sends.iter().filter(|n| **n > 1).count();

    let consumer = kafka_consumer(&kafka, "crash-out");
    let mut stream = consumer.stream();
    let mut arrived = vec![0u32; total];
    let mut distinct = 0;
    loop {
        let wait = if distinct < total {
            deadline.saturating_duration_since(Instant::now())
        } else {
            Duration::from_secs(3)
        };
        let Ok(Some(m)) = tokio::time::timeout(wait, stream.next()).await else {
            break;
        };
        let m = m.unwrap();
        let i: usize = std::str::from_utf8(m.payload().unwrap())
            .unwrap()
            .parse()
            .unwrap();
        if arrived[i] == 0 {
            distinct += 1;
        }
        arrived[i] += 1;
    }
    let (ferry_duplicates, publisher_duplicates, missing) = duplicates(&arrived, &sends);
    println!(
        "kill -9 x{KILLS}, {total} messages in {:?}: {distinct} arrived, {missing} missing, {resent} resent by the publisher, {publisher_duplicates} copies of resent messages, {ferry_duplicates} duplicates made by ferry",
        started.elapsed()
    );
    assert_eq!(missing, 0);
    assert_eq!(ferry_duplicates, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_front_to_amqp_front_is_exactly_once_under_kill_9() {
    let total = crash_messages();
    let started = Instant::now();
    let deadline = started + TEST_LIMIT;
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped_with(
        dir.path(),
        &kafka_to_amqp_route("crash", "crash-in", "crash-out", ""),
    )
    .start();
    let (amqp, kafka) = (ferry.amqp_uri(), ferry.kafka_bootstrap());
    {
        let (_conn, ch) = channel(&amqp).await.unwrap();
        bound_queue(&ch, "crash-out", "crash", FieldTable::default()).await;
    }
    let flow = Flow::new(0..total, deadline);
    let killer = flow_killer(ferry, &flow);
    let sends = produce_until_acknowledged(&kafka, "crash-in", &[], &flow).await;
    let _ferry = killer.await.unwrap();
    let resent = sends.iter().filter(|n| **n > 1).count();

    let (_conn, ch) = channel(&amqp).await.unwrap();
    ch.basic_qos(2_000, BasicQosOptions::default())
        .await
        .unwrap();
    let options = BasicConsumeOptions {
        no_ack: true,
        ..BasicConsumeOptions::default()
    };
    let mut consumer = ch
        .basic_consume("crash".into(), "t".into(), options, FieldTable::default())
        .await
        .unwrap();
    let mut arrived = vec![0u32; total];
    let mut distinct = 0;
    loop {
        let wait = if distinct < total {
            deadline.saturating_duration_since(Instant::now())
        } else {
            Duration::from_secs(3)
        };
        let Ok(Some(d)) = tokio::time::timeout(wait, consumer.next()).await else {
            break;
        };
        let d = d.unwrap();
        let i: usize = std::str::from_utf8(&d.data).unwrap().parse().unwrap();
        if arrived[i] == 0 {
            distinct += 1;
        }
        arrived[i] += 1;
    }
    let (ferry_duplicates, producer_duplicates, missing) = duplicates(&arrived, &sends);
    println!(
        "kill -9 x{KILLS}, {total} records in {:?}: {distinct} arrived, {missing} missing, {resent} resent by the producer, {producer_duplicates} copies of resent records, {ferry_duplicates} duplicates made by ferry",
        started.elapsed()
    );
    assert_eq!(missing, 0);
    assert_eq!(ferry_duplicates, 0);
}
