//! Share groups (KIP-932) with confluent-kafka's `ShareConsumer` (librdkafka's share
//! consumer, `tests/python/kafka_share_groups.py`) against the real `ferry` process: members
//! of one group split a topic with every record delivered and accepted once, in implicit
//! and explicit acknowledgement; a released record comes back with its delivery count
//! grown and a rejected one never; a lock that ends returns its records to another member;
//! the delivery count limit archives a record, and archived records go to the group's
//! dead-letter topic with their headers; `read_committed` never delivers aborted records;
//! and after a kill -9 no accepted record is
//! delivered again while the ones acquired and not accepted are; two instances over one
//! store deliver each record once.

use crate::common::clients::python_script;
use crate::common::daemon::{Daemon, Setup};
use crate::common::fronts::KafkaServer;
use std::path::Path;
use tokio::process::Command;

/// `ferry run` with its store in `dir`.
fn start(dir: &Path) -> Daemon {
    Setup::shipped(dir).start()
}

/// Runs `kafka_share_groups.py BOOTSTRAP ARGS...`; its output lines.
async fn scenario(bootstrap: &str, args: &[&str]) -> Vec<String> {
    let output = Command::new("python3")
        .arg(python_script("kafka_share_groups.py"))
        .arg(bootstrap)
        .args(args)
        .output()
        .await
        .unwrap();
    assert!(
        output.status.success(),
        "kafka_share_groups.py {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_share_consumers_split_a_topic_each_record_accepted_once() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = start(dir.path());
    let b = ferry.kafka_bootstrap();
    for (mode, group) in [
        ("implicit", "split-implicit"),
        ("explicit", "split-explicit"),
    ] {
        let topic = format!("share-{mode}");
        let out = scenario(&b, &["split", &topic, group, mode, "600", "3"]).await;
        assert_eq!(
            out,
            ["seen 600 distinct 600 members-with-records 3", "left 0"],
            "{mode}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_redelivers_reject_archives_to_the_dead_letter_topic_and_locks_expire() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = start(dir.path());
    let b = ferry.kafka_bootstrap();
    assert_eq!(
        scenario(&b, &["redeliver", "share-re", "re"]).await,
        ["released again 2", "rejected again False"]
    );
    assert_eq!(
        scenario(&b, &["limit", "share-limit", "limit"]).await,
        ["deliveries 2", "after limit none"]
    );
    // Archived records go to the group's dead-letter topic with why, how often and from
    // where; the accepted one does not.
    assert_eq!(
        scenario(&b, &["dead-letters", "share-dl", "dl"]).await,
        [
            "dl-0 reason rejected count 1 from share-dl/0@0 group dl",
            "dl-1 reason delivery_limit count 2 from share-dl/0@1 group dl",
        ]
    );
    // read_committed: the aborted transaction's records are never delivered.
    assert_eq!(
        scenario(&b, &["transactions", "share-txn", "txn"]).await,
        ["committed 5 aborted 0 deliveries 5"]
    );
    let expired = scenario(&b, &["expire", "share-expire", "expire", "2000"]).await;
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert!(
        expired[0].starts_with("redelivered ") && expired[0].ends_with(" count 2"),
        "{expired:?}"
    );
    let words: Vec<&str> = expired[0].split(' ').collect();
    assert_eq!(
        words[1], words[3],
        "every held record came back: {expired:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_keeps_acceptances_and_returns_acquired_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = start(dir.path());
    let b = ferry.kafka_bootstrap();
    // A member accepts half of what it acquired and vanishes holding the rest.
    let held = scenario(&b, &["hold", "share-crash", "crash"]).await;
    let keys = |prefix: &str| {
        held.iter()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in {held:?}"))
            .to_owned()
    };
    let (accepted, holding) = (keys("accepted "), keys("held "));
    let held_count = holding.split(',').count();
    assert!(!accepted.is_empty() && held_count > 0, "{held:?}");
    ferry.kill_and_restart();
    // The restart returns the held records at once (well before their 30 s lock ends),
    // with their delivery counted; no accepted record comes back.
    let drained = scenario(&b, &["drain", "share-crash", "crash", &accepted, &holding]).await;
    let rest = 60 - accepted.split(',').count();
    assert_eq!(
        drained,
        [
            "accepted again 0".to_owned(),
            format!("held again {held_count} of {held_count} counts [2]"),
            format!("total {rest} of {rest}"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_over_one_store_deliver_each_record_once() {
    // Two fronts share one store, as two Ferry instances share a FoundationDB cluster: the
    // group's members live at its coordinator, the partitions' records are fetched from
    // whichever instance leads them, and each is acquired once through the store.
    let a = KafkaServer::start_with(|c| c.node_id = 0).await;
    let b = a.peer(1).await;
    let both = format!("{},{}", a.bootstrap(), b.bootstrap());
    let out = scenario(
        &both,
        &["split", "share-pair", "pair", "explicit", "600", "3"],
    )
    .await;
    assert_eq!(
        out,
        ["seen 600 distinct 600 members-with-records 3", "left 0"]
    );
    b.stop().await;
    a.stop().await;
}
