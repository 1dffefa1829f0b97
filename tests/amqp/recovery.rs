//! Recovery at once, through the real `ferry run` process and lapin: deliveries a
//! consumer held unacknowledged when Ferry was killed with SIGKILL are delivered again,
//! marked redelivered, as soon as it is back — with `stage.lease_ttl_ms` at a minute, so
//! they can only come back through the restart's release of its earlier incarnation's
//! holders, never through the lease reaper.

use crate::common::amqp::{channel, declare, publish_confirmed};
use crate::common::daemon::{EXIT, Setup};
use futures::StreamExt;
use lapin::options::{BasicAckOptions, BasicConsumeOptions, BasicQosOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use std::collections::BTreeMap;
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
    let left = ch
        .queue_declare(
            "held".into(),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    assert_eq!(left.message_count(), 0);
    ferry.signal(libc::SIGTERM);
    assert!(ferry.wait_exit(EXIT).status.success());
}
