//! Recovery at once, through the real `ferry run` process and lapin: deliveries a
//! consumer held unacknowledged when Ferry was killed with SIGKILL are delivered again,
//! marked redelivered, as soon as it is back — with `stage.lease_ttl_ms` at a minute, so
//! they can only come back through the restart's release of its earlier incarnation's
//! holders, never through the lease reaper. The same release frees the spill of a large
//! message whose publish the kill cut short: no message appears, and its chunks are
//! collected.

use crate::common::amqp::{channel, declare, publish_confirmed, ready};
use crate::common::daemon::{EXIT, Setup};
use crate::raw::Raw;
use amq_protocol::frame::{AMQPContentHeader, AMQPFrame};
use amq_protocol::protocol::{AMQPClass, basic};
use ferry_stage::{RootKeys, Stages};
use ferry_store::StoreConfig;
use ferry_store::{Database, RangeOption};
use futures::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// Messages in the queue.
const MESSAGES: usize = 30;
/// The consumer's prefetch: the deliveries unacknowledged at the kill.
const PREFETCH: u16 = 10;
/// The lease TTL: far beyond the test's patience.
const LEASE_TTL_MS: &str = "60000";
/// How long the test waits for the redeliveries (well under the lease TTL).
const PATIENCE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unacknowledged_deliveries_come_back_redelivered_at_once_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = Setup::shipped(dir.path())
        .env("FERRY__STAGE__LEASE_TTL_MS", LEASE_TTL_MS)
        .start();
    let uri = ferry.amqp_uri();
    let bodies: Vec<String> = (0..MESSAGES).map(|i| format!("m{i:02}")).collect();
    let (_publisher, ch) = channel(&uri).await;
    declare(&ch, "held", FieldTable::default()).await;
    let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
    publish_confirmed(&ch, "", "held", &refs).await;

    // A consumer with manual acks takes a prefetch-full and acknowledges none of it.
    let (_conn, consumer_ch) = channel(&uri).await;
    consumer_ch
        .basic_qos(PREFETCH, BasicQosOptions::default())
        .await
        .unwrap();
    let mut consumer = consumer_ch
        .basic_consume(
            "held".into(),
            "before".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let mut held = Vec::new();
    while held.len() < usize::from(PREFETCH) {
        let d = tokio::time::timeout(PATIENCE, consumer.next())
            .await
            .expect("a prefetch-full of deliveries")
            .unwrap()
            .unwrap();
        assert!(!d.redelivered);
        held.push(String::from_utf8(d.data.clone()).unwrap());
    }

    ferry.kill();
    let killed = Instant::now();
    ferry.restart();
    let restarted = killed.elapsed();

    // A new consumer gets every message; those held at the kill come first, redelivered.
    let (_conn, ch) = channel(&uri).await;
    let mut consumer = ch
        .basic_consume(
            "held".into(),
            "after".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let mut received: BTreeMap<String, bool> = BTreeMap::new();
    let mut first_redelivery = None;
    let deadline = Instant::now() + PATIENCE;
    while received.len() < MESSAGES {
        let d = tokio::time::timeout_at(deadline.into(), consumer.next())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{} of {MESSAGES} messages after the restart within {PATIENCE:?}: {received:?}",
                    received.len()
                )
            })
            .unwrap()
            .unwrap();
        if d.redelivered && first_redelivery.is_none() {
            first_redelivery = Some(killed.elapsed());
        }
        let body = String::from_utf8(d.data.clone()).unwrap();
        d.ack(BasicAckOptions::default()).await.unwrap();
        assert!(
            received.insert(body.clone(), d.redelivered).is_none(),
            "{body} delivered twice after the restart"
        );
    }
    println!(
        "kill -9 to healthy again: {restarted:?}; to the first redelivery: {:?}",
        first_redelivery.expect("a redelivery")
    );
    let expected: BTreeMap<String, bool> = bodies
        .iter()
        .map(|b| (b.clone(), held.contains(b)))
        .collect();
    assert_eq!(
        received, expected,
        "every message once, redelivered exactly when it was held at the kill"
    );
    assert_eq!(ready(&ch, "held").await, 0);
    ferry.signal(libc::SIGTERM);
    assert!(ferry.wait_exit(EXIT).status.success());
}

/// The spill chunks in the store of a stopped daemon whose directory is `dir`, and the
/// bytes its spills count.
async fn spill_chunks(dir: &Path) -> (usize, i64) {
    let config = StoreConfig {
        path: dir.join("data"),
        ..StoreConfig::default()
    };
    let db = Database::open(&config).await.unwrap();
    let (b, e) = RootKeys::new(&config.prefix).all_spill_chunks();
    let tx = db.begin().unwrap();
    let chunks = tx
        .get_range(&RangeOption::new(b, e), true)
        .await
        .unwrap()
        .len();
    let bytes = Stages::new(db.clone(), &config.prefix)
        .spills()
        .bytes()
        .await
        .unwrap();
    db.close().await;
    (chunks, bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_publish_cut_by_kill_9_leaves_no_message_and_its_chunks_are_collected() {
    const SIZE: u64 = 16 * 1024 * 1024;
    const SENT: usize = 10 * 1024 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = Setup::shipped(dir.path())
        .env("FERRY__STAGE__LEASE_TTL_MS", LEASE_TTL_MS)
        .start();
    let uri = ferry.amqp_uri();
    let (_publisher, ch) = channel(&uri).await;
    declare(&ch, "big", FieldTable::default()).await;

    // A publisher sends 10 of a 16 MiB body's MiB, then stops: two 4 MB segments are
    // written to the spill, and the message is not stored.
    let mut raw = Raw::connect_to(([127, 0, 0, 1], ferry.ports().amqp).into()).await;
    raw.handshake().await;
    raw.open_channel(1).await;
    raw.method(
        1,
        AMQPClass::Basic(basic::AMQPMethod::Publish(basic::Publish {
            exchange: "".into(),
            routing_key: "big".into(),
            mandatory: false,
            immediate: false,
        })),
    )
    .await;
    raw.send_frame(AMQPFrame::Header(
        1,
        AMQPContentHeader {
            class_id: 60,
            body_size: SIZE,
            properties: Default::default(),
        },
    ))
    .await;
    for _ in 0..SENT / 100_000 {
        raw.send_frame(AMQPFrame::Body(1, vec![7u8; 100_000])).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    ferry.kill();
    let (chunks, bytes) = spill_chunks(dir.path()).await;
    assert!(
        chunks >= 80 && bytes >= 8_000_000,
        "the kill found the spill written in part: {chunks} chunks, {bytes} bytes"
    );

    // After the restart the message is nowhere, and the spill is freed.
    ferry.restart();
    let (_c, ch) = channel(&uri).await;
    assert_eq!(
        ready(&ch, "big").await,
        0,
        "no part of the message is visible"
    );
    ferry.wait_for("the spill collected", PATIENCE, |f| {
        f.metrics()
            .lines()
            .any(|l| l.trim() == "ferry_stage_spill_bytes 0")
    });
    ferry.signal(libc::SIGTERM);
    assert!(ferry.wait_exit(EXIT).status.success());
    assert_eq!(spill_chunks(dir.path()).await, (0, 0), "no chunk is left");
}
