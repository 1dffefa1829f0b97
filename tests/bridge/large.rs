//! Large messages through routes, with the real `ferry` process and lapin: 16 and 100 MiB
//! messages cross a route from an exchange of the AMQP front to another exchange of it
//! (stored in the routed queue by reference to their spill), and a 3.5 MiB one that the
//! route's sink fans out to three queues (three copies would not fit one transaction); a
//! 16 MiB message crosses from the run's RabbitMQ node into the front, and another from
//! the front to the node; a 20 MiB Kafka record (kept in a spill by the Kafka front) crosses
//! a route from a topic of the front into an exchange of it, and another a route from an
//! external Kafka source (rdkafka consuming the front) into an exchange; 16 and 100 MiB messages cross
//! a route from an exchange of the front into a topic of it (each batch staged by reference
//! to a spill), and rdkafka reads each as one record, once even when `kill -9` cuts the
//! route's delivery short. Every byte arrives, with its
//! properties, and once everything is acknowledged the spills hold nothing
//! (`ferry_stage_spill_bytes`) but what a topic's log keeps.

use crate::common::amqp::{declare_bound, declare_exchange, payload, publish_acked};
use crate::common::daemon::{Daemon, EXIT, Setup};
use crate::common::kafka::{client_config, consumer, producer};
use crate::common::process::Ports;
use crate::common::rabbitmq::{RabbitNode, unique};
use crate::rabbitmq::{Rabbit, collect};
use futures::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::Consumer;
use rdkafka::message::Headers;
use rdkafka::producer::FutureRecord;
use rdkafka::{Message, Offset, TopicPartitionList};
use std::time::Duration;

const MIB: usize = 1024 * 1024;
/// How long one large message may take to arrive (a debug build on a busy machine).
const PATIENCE: Duration = Duration::from_secs(120);
/// The settings of an rdkafka consumer of records up to 128 MiB.
const LARGE_FETCHES: [(&str, &str); 3] = [
    ("fetch.max.bytes", "200000000"),
    ("max.partition.fetch.bytes", "200000000"),
    ("receive.message.max.bytes", "250000000"),
];

/// A confirming channel on the daemon's AMQP front.
async fn channel(ferry: &Daemon) -> (Connection, Channel) {
    let conn = Connection::connect(&ferry.amqp_uri(), ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    (conn, ch)
}

/// The properties a large message is published with, to check they cross intact.
fn properties(id: &str) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert("size".into(), AMQPValue::LongString(id.into()));
    BasicProperties::default()
        .with_message_id(id.into())
        .with_content_type("application/octet-stream".into())
        .with_priority(3)
        .with_headers(headers)
}

/// Publishes `body` with `properties(id)` under confirms; asserts the ack.
async fn publish(ch: &Channel, exchange: &str, key: &str, id: &str, body: &[u8]) {
    publish_acked(ch, exchange, key, body, properties(id)).await;
}

/// Asserts `d` is the message `id` with `body`, its properties intact.
fn assert_whole(d: &lapin::message::Delivery, id: &str, body: &[u8]) {
    assert_eq!(d.data.len(), body.len(), "{id} arrives with its length");
    assert!(d.data == body, "{id} arrives whole and unchanged");
    assert_eq!(d.properties, properties(id), "{id} keeps its properties");
}

/// Consumes `queue` until the messages `expected` (id, body) arrived, in order; acks each.
async fn receive(ferry: &Daemon, ch: &Channel, queue: &str, expected: &[(&str, &[u8])]) {
    let mut consumer = ch
        .basic_consume(
            queue.into(),
            "".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    for (id, body) in expected {
        let Ok(Some(d)) = tokio::time::timeout(PATIENCE, consumer.next()).await else {
            panic!("{id} did not reach {queue}; ferry's log:\n{}", ferry.log());
        };
        let d = d.unwrap();
        assert_whole(&d, id, body);
        d.ack(BasicAckOptions::default()).await.unwrap();
    }
}

/// Waits until the spills hold nothing: every large message was acknowledged everywhere
/// and the collector freed its spill.
fn spills_empty(ferry: &Daemon) {
    ferry.wait_for("the spills emptied", PATIENCE, |d| {
        let m = d.metrics();
        m.lines().any(|l| l.starts_with("ferry_stage_spill_bytes "))
            && crate::common::daemon::sum_of(&m, "ferry_stage_spill_bytes", &[]) == 0.0
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_cross_a_route_between_exchanges_of_the_front_by_reference() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped_with(
        dir.path(),
        r#"
[[routes]]
name = "big"
from = { amqp_exchange = "big-in" }
to = [{ amqp_exchange = "big-out" }]
"#,
    )
    .env("FERRY__AMQP__MAX_MESSAGE_SIZE", &(128 * MIB).to_string())
    .start();
    let (_conn, ch) = channel(&ferry).await;
    declare_exchange(&ch, "big-in", ExchangeKind::Topic).await;
    declare_exchange(&ch, "big-out", ExchangeKind::Topic).await;
    declare_bound(&ch, "whole", "big-out", "whole.#").await;
    let fanned = ["fan-1", "fan-2", "fan-3"];
    for q in fanned {
        declare_bound(&ch, q, "big-out", "fan.#").await;
    }
    ferry.wait_for_amqp_exchange_source().await;

    let (m16, m100) = (payload(16 * MIB, 1), payload(100 * MIB, 2));
    publish(&ch, "big-in", "whole.16", "m16", &m16).await;
    publish(&ch, "big-in", "whole.100", "m100", &m100).await;
    receive(
        &ferry,
        &ch,
        "whole",
        &[("m16", &m16[..]), ("m100", &m100[..])],
    )
    .await;
    drop((m16, m100));

    // 3.5 MiB stays inline in the route's stage; three copies would not fit one
    // transaction, so the sink stores it by reference to a spill.
    let fan = payload(3 * MIB + MIB / 2, 3);
    publish(&ch, "big-in", "fan.x", "fan", &fan).await;
    for q in fanned {
        receive(&ferry, &ch, q, &[("fan", &fan[..])]).await;
    }
    spills_empty(&ferry);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_16_mib_message_crosses_from_rabbitmq_to_the_front_and_back_whole() {
    let mut rabbit = Rabbit::on(RabbitNode::get()).await;
    let (src, dst, x) = (unique("big-src"), unique("big-dst"), unique("big-x"));
    rabbit.queue(&src).await;
    rabbit.queue(&dst).await;
    rabbit.exchange(&x, Some(&dst)).await;
    let mut arrivals = collect(rabbit.uri(), &dst).await;
    let uri = rabbit.uri();
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped_with(
        dir.path(),
        &format!(
            r#"
[sources.big-in]
kind = "rabbitmq"
uri = "{uri}"
queue = "{src}"

[sinks.big-out]
kind = "rabbitmq"
uri = "{uri}"
exchange = "{x}"

[[routes]]
name = "r2f"
from = {{ source = "big-in" }}
to = [{{ amqp_exchange = "from-rabbit" }}]

[[routes]]
name = "f2r"
from = {{ amqp_exchange = "to-rabbit" }}
to = [{{ sink = "big-out" }}]
"#
        ),
    )
    .start();
    let (_conn, ch) = channel(&ferry).await;
    declare_exchange(&ch, "from-rabbit", ExchangeKind::Topic).await;
    declare_exchange(&ch, "to-rabbit", ExchangeKind::Topic).await;
    declare_bound(&ch, "landed", "from-rabbit", "#").await;
    ferry.wait_for_amqp_exchange_source().await;

    // RabbitMQ → Ferry: staged through a spill, not rejected upstream.
    let inbound = payload(16 * MIB, 4);
    rabbit
        .publish(&src, &[(properties("in16"), inbound.clone())])
        .await;
    receive(&ferry, &ch, "landed", &[("in16", &inbound[..])]).await;
    drop(inbound);

    // Ferry → RabbitMQ: the sink reads the body whole and publishes it.
    let outbound = payload(16 * MIB, 5);
    publish(&ch, "to-rabbit", "k", "out16", &outbound).await;
    let Ok(Some(d)) = tokio::time::timeout(PATIENCE, arrivals.recv()).await else {
        panic!(
            "out16 did not reach RabbitMQ; ferry's log:\n{}",
            ferry.log()
        );
    };
    assert_whole(&d, "out16", &outbound);
    spills_empty(&ferry);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_20_mib_kafka_record_crosses_a_route_from_a_topic_into_an_exchange_whole() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped_with(
        dir.path(),
        r#"
[[routes]]
name = "big-records"
from = { kafka_topic = "big-records" }
to = [{ amqp_exchange = "records-out" }]
"#,
    )
    .env("FERRY__KAFKA__MAX_MESSAGE_BYTES", &(32 * MIB).to_string())
    .env("FERRY__AMQP__MAX_MESSAGE_SIZE", &(32 * MIB).to_string())
    .start();
    a_20_mib_record_crosses(&ferry, "big-records", "records-out", 6).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_20_mib_record_of_an_external_kafka_source_crosses_a_route_into_an_exchange_whole() {
    // The external cluster is the daemon's own Kafka front, reached through rdkafka as any
    // cluster is: the source stages what its consumer receives.
    let ports = Ports::free();
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped_with(
        dir.path(),
        &format!(
            r#"
[sources.external]
kind = "kafka"
bootstrap_servers = "127.0.0.1:{}"
topics = ["external-records"]
group_id = "ferry-external"

[[routes]]
name = "external-records"
from = {{ source = "external" }}
to = [{{ amqp_exchange = "external-out" }}]
"#,
            ports.kafka
        ),
    )
    .ports(ports)
    .env("FERRY__KAFKA__MAX_MESSAGE_BYTES", &(32 * MIB).to_string())
    .env("FERRY__AMQP__MAX_MESSAGE_SIZE", &(32 * MIB).to_string())
    .start();
    let admin: AdminClient<DefaultClientContext> = client_config(&ferry.kafka_bootstrap(), &[])
        .create()
        .unwrap();
    let topic = NewTopic::new("external-records", 1, TopicReplication::Fixed(1));
    let created = admin
        .create_topics([&topic], &AdminOptions::new())
        .await
        .unwrap();
    assert!(created.iter().all(Result::is_ok), "{created:?}");
    a_20_mib_record_crosses(&ferry, "external-records", "external-out", 10).await;
}

/// Sends a small record, a 20 MiB one and another small one to `topic` of `ferry`'s Kafka
/// front (whose topics take 32 MiB), and checks they reach a queue bound to `exchange`, to
/// which a route of `ferry` takes them, in order and whole; then that the route's spill
/// of the large one is freed (the topic's log keeps its own).
async fn a_20_mib_record_crosses(ferry: &Daemon, topic: &str, exchange: &str, seed: u32) {
    let (_conn, ch) = channel(ferry).await;
    declare_exchange(&ch, exchange, ExchangeKind::Topic).await;
    let queue = format!("{exchange}-queue");
    declare_bound(&ch, &queue, exchange, "#").await;

    // Before it: a small record; after the large one, another, so the offsets around a
    // spilled record are moved too.
    let large = payload(20 * MIB, seed);
    let p = producer(
        &ferry.kafka_bootstrap(),
        &[("message.max.bytes", &(32 * MIB).to_string())],
    );
    for value in [&b"before"[..], &large[..], &b"after"[..]] {
        p.send(
            FutureRecord::<(), [u8]>::to(topic).payload(value),
            Duration::from_secs(60),
        )
        .await
        .unwrap_or_else(|(e, _)| panic!("the produce is acknowledged: {e}"));
    }
    let mut consumer = ch
        .basic_consume(
            queue.as_str().into(),
            "".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    for expected in [&b"before"[..], &large[..], &b"after"[..]] {
        let Ok(Some(d)) = tokio::time::timeout(PATIENCE, consumer.next()).await else {
            panic!(
                "a record did not cross the route; ferry's log:\n{}",
                ferry.log()
            );
        };
        let d = d.unwrap();
        assert_eq!(d.data.len(), expected.len(), "the records arrive in order");
        assert!(d.data == expected, "and whole");
        d.ack(BasicAckOptions::default()).await.unwrap();
    }
    drop(p);
    ferry.wait_for("the route's spill freed", PATIENCE, |d| {
        // The topic keeps its batch's spill; the route's copy of it is gone.
        crate::common::daemon::sum_of(&d.metrics(), "ferry_stage_spill_bytes", &[])
            <= (20 * MIB + 1024) as f64
    });
}

/// A daemon in `dir` with the route `route` from the exchange `exchange` to the topic
/// `topic` (created by the route), taking AMQP messages and Kafka batches of 128 MiB, as a
/// producer could send.
fn route_into_topic(dir: &std::path::Path, route: &str, exchange: &str, topic: &str) -> Setup {
    Setup::shipped_with(
        dir,
        &format!(
            r#"
[[routes]]
name = "{route}"
from = {{ amqp_exchange = "{exchange}" }}
to = [{{ kafka_topic = "{topic}" }}]
"#
        ),
    )
    .env("FERRY__AMQP__MAX_MESSAGE_SIZE", &(128 * MIB).to_string())
    .env("FERRY__KAFKA__MAX_MESSAGE_BYTES", &(128 * MIB).to_string())
    .env("FERRY__KAFKA__MAX_REQUEST_SIZE", &(256 * MIB).to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_cross_a_route_from_an_exchange_into_a_topic_whole_as_one_record_each() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = route_into_topic(dir.path(), "to-topic", "big-to-topic", "big-records-out").start();
    let (_conn, ch) = channel(&ferry).await;
    declare_exchange(&ch, "big-to-topic", ExchangeKind::Topic).await;
    ferry.wait_for_amqp_exchange_source().await;

    let (m16, m100) = (payload(16 * MIB, 7), payload(100 * MIB, 8));
    let sent: [(&str, &[u8]); 3] = [("m16", &m16), ("m100", &m100), ("small", b"after")];
    for (id, body) in sent {
        publish(&ch, "big-to-topic", "big", id, body).await;
    }

    let records = consumer(&ferry.kafka_bootstrap(), "large", &LARGE_FETCHES);
    records.subscribe(&["big-records-out"]).unwrap();
    for (offset, (id, body)) in sent.into_iter().enumerate() {
        let Ok(m) = tokio::time::timeout(PATIENCE, records.recv()).await else {
            panic!(
                "{id} did not reach the topic; ferry's log:\n{}",
                ferry.log()
            );
        };
        let m = m.unwrap();
        assert_eq!(
            m.offset(),
            offset as i64,
            "{id} arrives in order, one record each"
        );
        let value = m.payload().unwrap_or_default();
        assert_eq!(value.len(), body.len(), "{id} arrives with its length");
        assert!(value == body, "{id} arrives whole and unchanged");
        assert_eq!(
            m.key(),
            Some(&b"big"[..]),
            "{id} is keyed by its routing key"
        );
        let headers: Vec<(&str, &[u8])> = m
            .headers()
            .unwrap()
            .iter()
            .map(|h| (h.key, h.value.unwrap_or_default()))
            .collect();
        for expected in [
            ("amqp.message-id", id.as_bytes()),
            ("amqp.content-type", b"application/octet-stream"),
            ("amqp.priority", b"3"),
            ("size", id.as_bytes()),
        ] {
            assert!(
                headers.contains(&expected),
                "{id} carries its mapped header {expected:?}: {headers:?}"
            );
        }
    }
    drop(records);
    assert_eq!(
        ferry.metric("ferry_bridge_dead_letters_total", &[]),
        0.0,
        "nothing is dead-lettered"
    );
    // The topic's log keeps each large batch in a spill of its own; the publishes' spills,
    // and anything the route wrote and did not store, are freed.
    let kept = (116 * MIB) as f64;
    ferry.wait_for("only the topic's batches kept", PATIENCE, |d| {
        let spilled = crate::common::daemon::sum_of(&d.metrics(), "ferry_stage_spill_bytes", &[]);
        (kept..kept + 4096.0).contains(&spilled)
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_message_whose_route_is_cut_short_by_kill_9_reaches_the_topic_once() {
    const COMMITS: &str = "ferry_store_commits_total";
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = route_into_topic(dir.path(), "cut", "cut-in", "cut-out").start();
    let (conn, ch) = channel(&ferry).await;
    declare_exchange(&ch, "cut-in", ExchangeKind::Topic).await;
    ferry.wait_for_amqp_exchange_source().await;

    // The kill strikes about when the route has written half of the 27 segments of the
    // record's batch to its spill. Each is a commit, after about 38 others since the
    // confirm (the route's source, and its sink reading the body in segments); measured in
    // a debug build, the batch was staged some 70 commits after the confirm. Wherever it
    // strikes, the record must arrive once, and no spill must be left but the log's.
    let body = payload(100 * MIB, 9);
    publish(&ch, "cut-in", "k", "cut", &body).await;
    let confirmed = ferry.metric(COMMITS, &[]);
    ferry.wait_for("the route's spill half written", PATIENCE, |f| {
        f.metric(COMMITS, &[]) >= confirmed + 50.0
    });
    ferry.kill();
    drop((ch, conn));
    ferry.restart();

    // Assigned, not subscribed: the test reads, it does not join a group.
    let records = consumer(&ferry.kafka_bootstrap(), "cut", &LARGE_FETCHES);
    let mut partition = TopicPartitionList::new();
    partition
        .add_partition_offset("cut-out", 0, Offset::Beginning)
        .unwrap();
    records.assign(&partition).unwrap();
    let Ok(m) = tokio::time::timeout(PATIENCE, records.recv()).await else {
        panic!(
            "the message did not reach the topic; ferry's log:\n{}",
            ferry.log()
        );
    };
    {
        // Dropped before the consumer: librdkafka's destroy waits for its messages.
        let m = m.unwrap();
        assert_eq!(m.offset(), 0);
        assert!(m.payload() == Some(&body[..]), "it arrives whole");
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (low, high) = records
        .fetch_watermarks("cut-out", 0, Duration::from_secs(30))
        .unwrap();
    assert_eq!((low, high), (0, 1), "once, and no part of a batch besides");
    drop(records);
    let kept = (100 * MIB) as f64;
    ferry.wait_for("only the topic's batch kept in a spill", PATIENCE, |d| {
        let spilled = crate::common::daemon::sum_of(&d.metrics(), "ferry_stage_spill_bytes", &[]);
        (kept..kept + 4096.0).contains(&spilled)
    });
    ferry.signal(libc::SIGTERM);
    assert!(ferry.wait_exit(EXIT).status.success());
}
