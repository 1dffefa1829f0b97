//! A disk failing under the embedded store, as lapin publishers see it: `ENOSPC` on a
//! write or `EIO` on an fsync, injected at the data file's I/O seam. The publish whose
//! commit failed and every later one are nacked (the store accepts nothing more and is
//! never trusted again without a restart); after a restart every confirmed message is in
//! its queue, once.

use crate::common::amqp::{declare, drain};
use crate::common::fronts::AmqpServer;
use ferry::store::embedded::{DiskFault, Faults};
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel};

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
