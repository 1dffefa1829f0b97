//! The management web UI in a real browser: headless Chromium (Debian's chromium and
//! chromedriver), driven by selenium from `tests/python/ui_browser.py`, against a `ferry
//! run` this test starts, with lapin as the AMQP client whose queue and connection the UI
//! shows and closes, and rdkafka as the Kafka client whose topic and group lag it shows.

use crate::common::amqp::{WAIT, declare, publish_confirmed, reply_code, reply_text};
use crate::common::browser::Chromedriver;
use crate::common::clients::{self, python_script};
use crate::common::daemon::Setup;
use crate::common::kafka::{PATIENCE, consumer, producer};
use futures::StreamExt;
use lapin::types::FieldTable;
use lapin::{Connection, ConnectionProperties, Event};
use rdkafka::Message;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;
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

/// Where a failed run leaves the browser's screenshot: outside the test's temporary
/// directory, which is deleted when the test ends.
fn artifacts() -> PathBuf {
    std::env::temp_dir().join(format!("ferry-ui-test-{}", std::process::id()))
}

#[test]
fn log_in_see_a_queue_get_a_message_see_kafka_lag_and_close_a_connection() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Setup::shipped(dir.path()).start();
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
        (conn, ch)
    });
    let mut events = conn.events_listener();
    runtime.block_on(commit_part_of_a_topic(&daemon.kafka_bootstrap()));

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
    ];
    // The script saves a screenshot on failure and names it in its error, which `run`
    // puts in the panic message.
    let output = runtime.block_on(clients::run("python3", &args, b""));
    drop(browser);
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(said.starts_with("closed "), "{said}");

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
