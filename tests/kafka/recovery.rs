//! Recovery at once, through the real `ferry run` process and rdkafka: after a kill -9 and
//! a restart on the same data, a produce to a partition and a consumer group join are
//! served at once — with `kafka.sequencer_lease_ms` at a minute, so they can only be served
//! because the restart freed its earlier incarnation's sequencer and coordinator leases,
//! never because those lapsed. The second restart also changes `kafka.node_id`: with the
//! embedded engine the store has one instance, so the leases and broker registration the
//! old node id left behind are freed too.

use crate::common::daemon::{Daemon, EXIT, Setup};
use crate::common::kafka::{PATIENCE, consumer, producer, send_range};
use rdkafka::Message;
use rdkafka::consumer::{CommitMode, Consumer};
use std::collections::BTreeSet;
use std::time::Instant;

/// Records produced before the first kill and after each restart.
const RECORDS: usize = 10;
/// The topic.
const TOPIC: &str = "restarts";
/// The consumer group.
const GROUP: &str = "restarting";

/// Produces records `from..from + RECORDS` with a new producer, then reads them with a new
/// member of [`GROUP`] from the group's committed offsets and commits; returns how long
/// each took.
async fn produce_and_consume(
    ferry: &Daemon,
    from: usize,
) -> (std::time::Duration, std::time::Duration) {
    let bootstrap = ferry.kafka_bootstrap();
    let start = Instant::now();
    let p = producer(&bootstrap, &[("message.timeout.ms", "30000")]);
    send_range(&p, TOPIC, from, from + RECORDS).await;
    let produced = start.elapsed();

    let start = Instant::now();
    let c = consumer(&bootstrap, GROUP, &[]);
    c.subscribe(&[TOPIC]).unwrap();
    let mut values = BTreeSet::new();
    while values.len() < RECORDS {
        let m = tokio::time::timeout(PATIENCE, c.recv())
            .await
            .unwrap_or_else(|_| panic!("records {values:?} of {from}.. within {PATIENCE:?}"))
            .expect("a record");
        let value: usize = std::str::from_utf8(m.payload().unwrap())
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            (from..from + RECORDS).contains(&value),
            "record {value} read again: the group's committed offsets were lost"
        );
        values.insert(value);
    }
    let consumed = start.elapsed();
    c.commit_consumer_state(CommitMode::Sync).unwrap();
    c.unsubscribe();
    (produced, consumed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_and_groups_are_served_at_once_after_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = Setup::shipped(dir.path())
        .env("FERRY__KAFKA__SEQUENCER_LEASE_MS", "60000")
        .env("FERRY__KAFKA__GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
        .start();
    produce_and_consume(&ferry, 0).await;

    ferry.kill_and_restart();
    let (produced, joined) = produce_and_consume(&ferry, RECORDS).await;
    println!("same node id: produce served in {produced:?}, group joined and read in {joined:?}");

    ferry.kill();
    ferry.set_env("FERRY__KAFKA__NODE_ID", "5");
    ferry.restart();
    let (produced, joined) = produce_and_consume(&ferry, 2 * RECORDS).await;
    println!("new node id: produce served in {produced:?}, group joined and read in {joined:?}");

    ferry.signal(libc::SIGTERM);
    assert!(ferry.wait_exit(EXIT).status.success());
}
