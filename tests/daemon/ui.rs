//! The management web UI in a real browser: headless Chromium (Debian's chromium and
//! chromedriver), driven by selenium from `tests/python/ui_browser.py`, against a `ferry
//! run` this test starts, with lapin as the AMQP client whose queue and connection the UI
//! shows and closes, rdkafka as the Kafka client whose topic and group lag it shows, and a
//! route whose dead letter the UI replays and lapin then receives. What the UI changes is
//! checked with those clients: the topic it creates and the setting it changes as rdkafka
//! sees them, the topic it deletes gone from rdkafka's metadata, the group offset it
//! resets as rdkafka's OffsetFetch reads it, the message it publishes received by a lapin
//! consumer and the queue it deletes gone for lapin; an rdkafka producer left connected is
//! listed among the Kafka clients on the Connections page; and a share group that
//! confluent-kafka's `ShareConsumer` settled, with its archived records and lag.

use crate::common::amqp::{
    WAIT, declare, declare_exchange, publish_confirmed, reply_code, reply_text,
};
use crate::common::browser::Chromedriver;
use crate::common::clients::{self, python_script};
use crate::common::daemon::{Daemon, Setup};
use crate::common::kafka::{PATIENCE, client_config, consumer, producer};
use futures::StreamExt;
use lapin::options::{BasicConsumeOptions, BasicGetOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection, ConnectionProperties, Event, ExchangeKind};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::metadata::Metadata;
use rdkafka::producer::{FutureRecord, Producer};
use rdkafka::util::Timeout;
use rdkafka::{Message, Offset, TopicPartitionList};
use std::path::PathBuf;

/// What the test's client calls itself (`client_properties.connection_name`), so the
/// script finds its row on the Connections page.
const CLIENT_NAME: &str = "ui-test-client";

/// The Kafka topic and group the Kafka page shows.
const KAFKA_TOPIC: &str = "ui-events";
const KAFKA_GROUP: &str = "ui-readers";
/// Records produced to partition 0, and how many of them the group consumes and commits.
const PRODUCED: i64 = 3;
const COMMITTED: i64 = 1;

/// Produces [`PRODUCED`] records to partition 0 of [`KAFKA_TOPIC`], then consumes and
/// commits [`COMMITTED`] of them as [`KAFKA_GROUP`].
async fn commit_part_of_a_topic(bootstrap: &str) {
    let p = producer(bootstrap, &[]);
    for i in 0..PRODUCED {
        let value = format!("event {i}");
        p.send(
            FutureRecord::<(), _>::to(KAFKA_TOPIC)
                .partition(0)
                .payload(&value),
            Timeout::After(PATIENCE),
        )
        .await
        .expect("acknowledged");
    }
    let c = consumer(bootstrap, KAFKA_GROUP, &[]);
    c.subscribe(&[KAFKA_TOPIC]).unwrap();
    for expected in 0..COMMITTED {
        let m = tokio::time::timeout(PATIENCE, c.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!((m.partition(), m.offset()), (0, expected));
        if expected == COMMITTED - 1 {
            c.commit_message(&m, CommitMode::Sync).unwrap();
        }
    }
}

/// The share group the Kafka page lists and its topic: [`SHARED`] records, of which
/// `kafka_share_groups.py figures` rejects 2 and accepts the rest, then [`SHARE_LAG`] more.
const SHARE_GROUP: &str = "ui-sharers";
const SHARE_TOPIC: &str = "ui-shared";
const SHARED: i64 = 10;
const SHARE_LAG: i64 = 3;

/// Makes [`SHARE_GROUP`] with confluent-kafka's `ShareConsumer`: every record of
/// [`SHARE_TOPIC`] settled (2 archived), then [`SHARE_LAG`] records produced after.
async fn settle_a_share_group(bootstrap: &str) {
    let script = python_script("kafka_share_groups.py");
    let args = [
        script.as_str(),
        bootstrap,
        "figures",
        SHARE_TOPIC,
        SHARE_GROUP,
        &SHARED.to_string(),
    ];
    let out = clients::run("python3", &args, b"go\n").await;
    assert!(
        String::from_utf8_lossy(&out.stdout).ends_with("accepted all\n"),
        "{out:?}"
    );
    let p = producer(bootstrap, &[]);
    for i in 0..SHARE_LAG {
        let value = format!("later {i}");
        p.send(
            FutureRecord::<(), _>::to(SHARE_TOPIC)
                .partition(0)
                .payload(&value),
            Timeout::After(PATIENCE),
        )
        .await
        .expect("acknowledged");
    }
}

/// The topic the record browser reads: two records on partition 0, the first with a key,
/// a header and a JSON value at [`FIRST_RECORD_MS`], the second with bytes that are not
/// UTF-8 a minute later.
const RECORDS_TOPIC: &str = "ui-records";
const FIRST_RECORD_MS: i64 = 1_700_000_000_000;
const RECORD_KEY: &str = "order-7";
const RECORD_VALUE: &str = r#"{"order":7,"total":12.5}"#;
const BINARY_VALUE: &[u8] = &[0xff, 0x00, 0x7b];

async fn produce_records_to_browse(bootstrap: &str) {
    let p = producer(bootstrap, &[]);
    let headers = rdkafka::message::OwnedHeaders::new().insert(rdkafka::message::Header {
        key: "trace",
        value: Some("abc"),
    });
    p.send(
        FutureRecord::to(RECORDS_TOPIC)
            .partition(0)
            .key(RECORD_KEY)
            .headers(headers)
            .payload(RECORD_VALUE)
            .timestamp(FIRST_RECORD_MS),
        Timeout::After(PATIENCE),
    )
    .await
    .expect("acknowledged");
    p.send(
        FutureRecord::<(), _>::to(RECORDS_TOPIC)
            .partition(0)
            .payload(BINARY_VALUE)
            .timestamp(FIRST_RECORD_MS + 60_000),
        Timeout::After(PATIENCE),
    )
    .await
    .expect("acknowledged");
}

/// Topics enough for the Kafka page's list to take two pages (25 to a page); their names
/// sort after the others, which stay on the first page.
const PAGED_TOPICS: usize = 26;

/// Queues that sort after the test's others, so the Queues page (50 to a page) has a
/// second page.
const PAGED_QUEUES: usize = 50;

async fn create_topics_for_a_second_page(bootstrap: &str) {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap, &[]).create().unwrap();
    let names: Vec<String> = (0..PAGED_TOPICS)
        .map(|i| format!("zz-page-{i:02}"))
        .collect();
    let topics: Vec<NewTopic> = names
        .iter()
        .map(|n| NewTopic::new(n, 1, TopicReplication::Fixed(1)))
        .collect();
    let created = admin
        .create_topics(&topics, &AdminOptions::new())
        .await
        .unwrap();
    assert!(created.iter().all(Result::is_ok), "{created:?}");
}

/// The client id of an rdkafka producer left connected, which the Connections page lists.
const KAFKA_CLIENT: &str = "ui-kafka-client";

/// The topic the UI creates (3 partitions, `retention.ms` 60000 then 120000), and the
/// one it creates and deletes.
const CREATED_TOPIC: &str = "ui-created";
const DELETED_TOPIC: &str = "ui-doomed-topic";

/// The queue whose page shows its consumer and publishes to it, the consumer's tag, what
/// the UI publishes, and the queue the UI deletes.
const CONSUMED_QUEUE: &str = "ui-work";
const CONSUMER_TAG: &str = "ui-worker";
const PUBLISHED: &str = "published from the UI";
const DELETED_QUEUE: &str = "ui-doomed";

/// The topics a fresh rdkafka client sees, by name, with their partition counts.
fn kafka_topics(bootstrap: &str) -> Vec<(String, usize)> {
    let c: BaseConsumer = client_config(bootstrap, &[]).create().unwrap();
    let metadata: Metadata = c.fetch_metadata(None, PATIENCE).unwrap();
    metadata
        .topics()
        .iter()
        .map(|t| (t.name().to_owned(), t.partitions().len()))
        .collect()
}

/// `topic`'s `retention.ms` as rdkafka's DescribeConfigs reads it.
async fn retention_ms(bootstrap: &str, topic: &str) -> Option<String> {
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap, &[]).create().unwrap();
    let described = admin
        .describe_configs(&[ResourceSpecifier::Topic(topic)], &AdminOptions::new())
        .await
        .unwrap();
    let config = described[0].as_ref().expect("the topic's configs");
    config.get("retention.ms").and_then(|e| e.value.clone())
}

/// The offset `group` has committed on partition 0 of `topic`, as rdkafka's OffsetFetch
/// reads it (without joining the group).
fn committed_offset(bootstrap: &str, group: &str, topic: &str) -> Offset {
    let c: BaseConsumer = client_config(bootstrap, &[("group.id", group)])
        .create()
        .unwrap();
    let mut wanted = TopicPartitionList::new();
    wanted.add_partition(topic, 0);
    let found = c.committed_offsets(wanted, PATIENCE).unwrap();
    found.find_partition(topic, 0).unwrap().offset()
}

/// A route between two exchanges of the AMQP front that refuses a message once (no queue is
/// bound to its destination at first), so the message is dead-lettered.
const ROUTE: &str = "ui-route";
const ROUTE_CONFIG: &str = r#"
[[routes]]
name = "ui-route"
from = { amqp_exchange = "ui-in" }
to = [{ amqp_exchange = "ui-out" }]
max_attempts = 1
retry_initial_ms = 20
retry_max_ms = 200
"#;
/// The dead-lettered message, and the queue bound to the route's destination before the
/// UI replays it.
const DEAD_LETTER: &str = "dead letter 1";
const DELIVERED_QUEUE: &str = "ui-delivered";

/// Makes the route's dead letter: declares its exchanges, waits until the route reads its
/// source, publishes one message no queue takes at the destination, waits until it is
/// dead-lettered, then binds [`DELIVERED_QUEUE`] so a replay delivers it.
async fn dead_letter_a_routed_message(daemon: &Daemon, ch: &Channel) {
    // The route binds its queue to ui-in with `#`: everything, on a topic exchange.
    declare_exchange(ch, "ui-in", ExchangeKind::Topic).await;
    declare_exchange(ch, "ui-out", ExchangeKind::Direct).await;
    daemon.wait_for("the route reading ui-in", WAIT, |d| {
        d.readyz().lines().any(|l| l == "amqp_exchange:/ui-in: up")
    });
    publish_confirmed(ch, "ui-in", "k", &[DEAD_LETTER]).await;
    let route = format!("route=\"{ROUTE}\"");
    daemon.wait_for("the routed message dead-lettered", WAIT, |d| {
        d.metric("ferry_bridge_dead_letters_total", &[&route]) == 1.0
    });
    declare(ch, DELIVERED_QUEUE, FieldTable::default()).await;
    ch.queue_bind(
        DELIVERED_QUEUE.into(),
        "ui-out".into(),
        "k".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
}

/// Where a failed run leaves the browser's screenshot: outside the test's temporary
/// directory, which is deleted when the test ends.
fn artifacts() -> PathBuf {
    std::env::temp_dir().join(format!("ferry-ui-test-{}", std::process::id()))
}

#[test]
fn log_in_see_the_node_manage_queues_topics_and_groups_replay_a_dead_letter_and_close_a_connection()
{
    let dir = tempfile::tempdir().unwrap();
    let daemon = Setup::shipped_with(dir.path(), ROUTE_CONFIG).start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    // The channel stays open until the UI closes the connection: lapin reports the 320
    // as the connection's error only while it is not closing anything itself.
    let (conn, _channel) = runtime.block_on(async {
        let properties = ConnectionProperties::default().with_connection_name(CLIENT_NAME.into());
        let conn = tokio::time::timeout(WAIT, Connection::connect(&daemon.amqp_uri(), properties))
            .await
            .expect("connecting took too long")
            .expect("connect");
        let ch = conn.create_channel().await.unwrap();
        declare(&ch, "ui-orders", FieldTable::default()).await;
        publish_confirmed(&ch, "", "ui-orders", &["order 1", "order 2", "order 3"]).await;
        dead_letter_a_routed_message(&daemon, &ch).await;
        (conn, ch)
    });
    let mut events = conn.events_listener();
    let bootstrap = daemon.kafka_bootstrap();
    runtime.block_on(commit_part_of_a_topic(&bootstrap));
    runtime.block_on(produce_records_to_browse(&bootstrap));
    runtime.block_on(create_topics_for_a_second_page(&bootstrap));
    runtime.block_on(settle_a_share_group(&bootstrap));
    // Connected (it fetches the cluster's metadata at once) until the test ends.
    let kafka_client = producer(&bootstrap, &[("client.id", KAFKA_CLIENT)]);
    kafka_client
        .client()
        .fetch_metadata(None, PATIENCE)
        .expect("the producer's metadata");
    assert_eq!(
        committed_offset(&bootstrap, KAFKA_GROUP, KAFKA_TOPIC),
        Offset::Offset(COMMITTED)
    );
    // A second connection, which the UI leaves open: a consumer on the queue the UI
    // publishes to, and the queue the UI deletes.
    let (worker, mut deliveries) = runtime.block_on(async {
        let conn = Connection::connect(&daemon.amqp_uri(), ConnectionProperties::default())
            .await
            .unwrap();
        let ch = conn.create_channel().await.unwrap();
        declare(&ch, CONSUMED_QUEUE, FieldTable::default()).await;
        declare(&ch, DELETED_QUEUE, FieldTable::default()).await;
        for i in 0..PAGED_QUEUES {
            declare(&ch, &format!("zz-queue-{i:02}"), FieldTable::default()).await;
        }
        let deliveries = ch
            .basic_consume(
                CONSUMED_QUEUE.into(),
                CONSUMER_TAG.into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        (conn, deliveries)
    });

    let browser = Chromedriver::start();
    let artifacts = artifacts();
    let (webdriver, ui) = (browser.url(), format!("{}/", daemon.management_uri()));
    let script = python_script("ui_browser.py");
    let args = [
        script.as_str(),
        "--webdriver",
        &webdriver,
        "--ui",
        &ui,
        "--user",
        "guest",
        "--password",
        "guest",
        "--artifacts",
        artifacts.to_str().unwrap(),
        "check",
        "--queue",
        "ui-orders",
        "--depth",
        "3",
        "--payload",
        "order 1",
        "--connection",
        CLIENT_NAME,
        "--kafka-topic",
        KAFKA_TOPIC,
        "--kafka-group",
        KAFKA_GROUP,
        "--kafka-produced",
        &PRODUCED.to_string(),
        "--kafka-lag",
        &(PRODUCED - COMMITTED).to_string(),
        "--route",
        ROUTE,
        "--dead-letter",
        DEAD_LETTER,
        "--create-topic",
        CREATED_TOPIC,
        "--delete-topic",
        DELETED_TOPIC,
        "--consumed-queue",
        CONSUMED_QUEUE,
        "--consumer",
        CONSUMER_TAG,
        "--publish",
        PUBLISHED,
        "--delete-queue",
        DELETED_QUEUE,
        "--records-topic",
        RECORDS_TOPIC,
        "--record-key",
        RECORD_KEY,
        "--record-value",
        RECORD_VALUE,
        "--first-record-ms",
        &FIRST_RECORD_MS.to_string(),
        "--kafka-client",
        KAFKA_CLIENT,
        "--last-topic",
        &format!("zz-page-{:02}", PAGED_TOPICS - 1),
        "--last-queue",
        &format!("zz-queue-{:02}", PAGED_QUEUES - 1),
        "--share-group",
        SHARE_GROUP,
        "--share-topic",
        SHARE_TOPIC,
        "--share-start",
        &SHARED.to_string(),
        "--share-archived",
        "2",
        "--share-lag",
        &SHARE_LAG.to_string(),
    ];
    // The script saves a screenshot on failure and names it in its error, which `run`
    // puts in the panic message.
    let output = runtime.block_on(clients::run("python3", &args, b""));
    drop(browser);
    drop(kafka_client);
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(said.starts_with("closed "), "{said}");
    // The Kafka connection the UI closed was closed through the API.
    let closed_by_api = daemon.metrics().lines().find_map(|l| {
        l.strip_prefix(r#"ferry_kafka_connections_refused_total{reason="closed_by_api"} "#)
            .map(str::to_owned)
    });
    assert_eq!(closed_by_api.as_deref(), Some("1"));
    // The replayed dead letter reached the queue bound to the route's destination.
    let delivered = runtime.block_on(async {
        let conn = Connection::connect(&daemon.amqp_uri(), ConnectionProperties::default())
            .await
            .unwrap();
        let ch = conn.create_channel().await.unwrap();
        ch.basic_get(DELIVERED_QUEUE.into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
            .map(|m| String::from_utf8_lossy(&m.delivery.data).into_owned())
    });
    assert_eq!(delivered.as_deref(), Some(DEAD_LETTER));

    // The topic the UI created, with the setting it changed; the one it deleted is gone.
    let topics = kafka_topics(&bootstrap);
    assert!(
        topics.contains(&(CREATED_TOPIC.to_owned(), 3)),
        "{topics:?}"
    );
    assert!(
        !topics.iter().any(|(name, _)| name == DELETED_TOPIC),
        "{topics:?}"
    );
    assert_eq!(
        runtime
            .block_on(retention_ms(&bootstrap, CREATED_TOPIC))
            .as_deref(),
        Some("120000")
    );
    // The group the UI reset reads from the start again.
    assert_eq!(
        committed_offset(&bootstrap, KAFKA_GROUP, KAFKA_TOPIC),
        Offset::Offset(0)
    );
    // The message the UI published reached the queue's consumer, with its header.
    let published = runtime.block_on(async {
        tokio::time::timeout(WAIT, deliveries.next())
            .await
            .expect("the published message within the wait")
            .expect("a delivery")
            .expect("no consumer error")
    });
    assert_eq!(String::from_utf8_lossy(&published.data), PUBLISHED);
    let source = published
        .properties
        .headers()
        .as_ref()
        .and_then(|h| h.inner().get("source").cloned());
    assert_eq!(
        source,
        Some(lapin::types::AMQPValue::LongString("ui".into()))
    );
    // The queue the UI deleted is gone.
    let passive = runtime.block_on(async {
        let ch = worker.create_channel().await.unwrap();
        ch.queue_declare(
            DELETED_QUEUE.into(),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
    });
    assert_eq!(
        passive.map(|_| ()).map_err(|e| reply_code(&e)),
        Err(Some(404))
    );

    let mut seen = Vec::new();
    let closed = runtime.block_on(async {
        tokio::time::timeout(WAIT, async {
            while let Some(event) = events.next().await {
                if let Event::Error(e) = &event
                    && let Some(code) = reply_code(e)
                {
                    return Some((code, reply_text(e)));
                }
                seen.push(format!("{event:?}"));
            }
            None
        })
        .await
        .unwrap_or_default()
    });
    let (code, text) = closed.unwrap_or_else(|| {
        panic!(
            "lapin saw no close after the UI closed its connection; events: {seen:?}; screenshots (on failure): {}",
            artifacts.display()
        )
    });
    assert_eq!(code, 320, "{text}");
    assert!(
        text.contains("Closed via the Ferry management UI"),
        "{text}"
    );
}
