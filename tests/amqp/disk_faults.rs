//! A disk failing or filling under the embedded store, as lapin publishers see it:
//! `ENOSPC` on a write or `EIO` on an fsync, injected at the data file's I/O seam — the
//! publish whose commit failed and every later one are nacked (the store accepts nothing
//! more and is never trusted again without a restart); after a restart every confirmed
//! message is in its queue, once. And free space below `store.min_free_disk_mb` (a
//! pretended reading): publishers are blocked with `connection.blocked` naming the key,
//! consumers go on, and the held publish is confirmed once space returns.

use crate::common::amqp::{WAIT, blocked, declare, drain, unblocked};
use crate::common::fronts::AmqpServer;
use ferry_store::embedded::{DiskFault, Faults};
use lapin::options::{BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Publishes `body` to queue `queue` and returns whether it was confirmed (acked).
async fn confirmed(ch: &Channel, queue: &str, body: &str) -> bool {
    let confirm = ch
        .basic_publish(
            "".into(),
            queue.into(),
            BasicPublishOptions::default(),
            body.as_bytes(),
            BasicProperties::default().with_delivery_mode(2),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    confirm.is_ack()
}

/// Confirms 20 messages, injects `fault`, checks that the next publishes are nacked,
/// restarts and checks the confirmed messages.
async fn publishers_are_nacked_and_nothing_confirmed_is_lost(fault: impl Fn(&Faults)) {
    let mut server = AmqpServer::start().await;
    let (_conn, ch) = server.channel().await;
    declare(&ch, "safe", FieldTable::default()).await;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let mut acked = Vec::new();
    for i in 0..20 {
        let body = format!("before-{i:02}");
        assert!(confirmed(&ch, "safe", &body).await, "{body} was nacked");
        acked.push(body);
    }
    fault(
        server
            .db
            .faults()
            .expect("the embedded engine injects faults"),
    );
    for i in 0..5 {
        let body = format!("after-{i}");
        assert!(
            !confirmed(&ch, "safe", &body).await,
            "{body} was confirmed by a store that failed"
        );
    }
    server.restart().await;
    let (_conn, ch) = server.channel().await;
    let got = drain(&ch, "safe").await;
    // The publish whose fsync failed may have reached the disk anyway; nothing else may.
    let kept: Vec<&String> = got.iter().filter(|b| b.starts_with("before-")).collect();
    assert_eq!(kept, acked.iter().collect::<Vec<_>>(), "{got:?}");
    assert!(got.len() <= acked.len() + 1, "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_nacks_publishes_and_loses_nothing_confirmed() {
    publishers_are_nacked_and_nothing_confirmed_is_lost(|f| {
        f.fail_next_write(DiskFault::NoSpace);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fsync_nacks_publishes_and_loses_nothing_confirmed() {
    publishers_are_nacked_and_nothing_confirmed_is_lost(|f| f.fail_next_sync(DiskFault::Io)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_free_disk_alarm_blocks_publishers_until_space_returns_and_consumers_go_on() {
    let server = AmqpServer::start_with(|c| c.resource_check_ms = 20).await;
    let faults = server
        .db
        .faults()
        .expect("the embedded engine injects faults");
    let conn = server.connect().await;
    let mut events = Box::pin(conn.events_listener());
    let ch = conn.create_channel().await.unwrap();
    declare(&ch, "space", FieldTable::default()).await;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    assert!(confirmed(&ch, "space", "before").await);

    // 1 MiB free, under the default store.min_free_disk_mb of 50. A publisher goes on
    // publishing one message at a time; the alarm blocks its connection at a publish.
    faults.pretend_free_bytes(Some(1 << 20));
    let stop = Arc::new(AtomicBool::new(false));
    let (publishing, stopping) = (ch.clone(), stop.clone());
    let publisher = tokio::spawn(async move {
        let mut acked = Vec::new();
        for i in 0..10_000 {
            if stopping.load(Ordering::SeqCst) {
                break;
            }
            let body = format!("during-{i}");
            assert!(confirmed(&publishing, "space", &body).await);
            acked.push(body);
        }
        acked
    });
    let reason = blocked(&mut events).await;
    stop.store(true, Ordering::SeqCst);
    assert!(
        reason.contains("MiB free on the file system of")
            && reason.ends_with("is below store.min_free_disk_mb (50)"),
        "{reason}"
    );
    // Consumers go on: they are what frees space.
    let (_consumer, consumer_ch) = server.channel().await;
    let got = consumer_ch
        .basic_get("space".into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
        .expect("a message for the consumer");
    assert_eq!(got.delivery.data, b"before");
    assert!(
        !publisher.is_finished(),
        "a publish was taken during the alarm"
    );

    faults.pretend_free_bytes(None);
    unblocked(&mut events).await;
    let acked = tokio::time::timeout(WAIT, publisher)
        .await
        .expect("the held publish completes once space returns")
        .unwrap();
    assert_eq!(drain(&consumer_ch, "space").await, acked);
}
