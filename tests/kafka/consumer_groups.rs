//! Consumer groups on the consumer protocol (KIP-848, `group.protocol=consumer`) driven by
//! librdkafka: three members split a topic's partitions as the coordinator assigns them,
//! one leaving hands its partitions to the others, the members carry on across a restart
//! of Ferry and a new member resumes from the committed offsets; a classic group reads the
//! same topic beside them, and a classic consumer cannot join the consumer group. And
//! confluent-kafka (`tests/python/kafka_consumer_protocol.py`): the range assignor, the
//! group described by ConsumerGroupDescribe and listed by type.

use crate::common::clients::{python_script, run};
use crate::common::fronts::KafkaServer;
use crate::common::kafka::{
    PATIENCE, assigned_partitions, client_config, consumer, drive, producer, send_range,
};
use crate::common::wait;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::groups::GroupList;
use rdkafka::util::Timeout;
use rdkafka::{Message, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tokio::sync::mpsc;

/// A consumer of `group` on the consumer protocol (no session or heartbeat settings: the
/// coordinator sets those).
fn member(bootstrap: &str, group: &str) -> StreamConsumer {
    client_config(
        bootstrap,
        &[
            ("group.id", group),
            ("group.protocol", "consumer"),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "false"),
            ("fetch.wait.max.ms", "100"),
        ],
    )
    .create()
    .unwrap()
}

/// Each consumer's assigned partitions.
fn assignments(members: &[Arc<StreamConsumer>]) -> Vec<BTreeSet<i32>> {
    members.iter().map(|c| assigned_partitions(c)).collect()
}

/// Receives until every value of `wanted` has been seen; returns who read each value.
async fn collect(
    rx: &mut mpsc::UnboundedReceiver<(usize, i32, usize)>,
    mut wanted: BTreeSet<usize>,
) -> BTreeMap<usize, usize> {
    let range = wanted.clone();
    let mut readers = BTreeMap::new();
    while !wanted.is_empty() {
        let (member, _, value) = tokio::time::timeout(PATIENCE, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("still missing {} records", wanted.len()))
            .unwrap();
        wanted.remove(&value);
        if range.contains(&value) {
            readers.insert(value, member);
        }
    }
    readers
}

/// Commits `c`'s positions synchronously (the coordinator checks its member epoch).
fn commit_positions(c: &StreamConsumer) {
    let positions = c.position().unwrap();
    c.commit(&positions, CommitMode::Sync).unwrap();
}

/// The group as ListGroups and DescribeGroups show it: (state, protocol type, members).
fn described(c: &StreamConsumer, group: &str) -> (String, String, usize) {
    let list: GroupList = c
        .fetch_group_list(Some(group), Timeout::After(PATIENCE))
        .unwrap();
    let g = &list.groups()[0];
    (
        g.state().to_owned(),
        g.protocol_type().to_owned(),
        g.members().len(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_split_by_the_coordinator_rebalance_on_leave_and_resume_after_a_restart() {
    let mut broker = KafkaServer::start_with(|c| {
        c.default_partitions = 6;
        c.group_consumer_heartbeat_interval_ms = 300;
        c.group_consumer_session_timeout_ms = 6_000;
    })
    .await;
    let p = producer(&broker.bootstrap(), &[]);
    send_range(&p, "orders", 0, 300).await;

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut members: Vec<Arc<StreamConsumer>> = (0..3)
        .map(|_| Arc::new(member(&broker.bootstrap(), "kip848")))
        .collect();
    let mut tasks = Vec::new();
    for (i, c) in members.iter().enumerate() {
        c.subscribe(&["orders"]).unwrap();
        tasks.push(drive(i, c.clone(), true, tx.clone()));
    }
    collect(&mut rx, (0..300).collect()).await;
    // A classic group reads the same topic beside it.
    let classic = Arc::new(consumer(&broker.bootstrap(), "classic-beside", &[]));
    classic.subscribe(&["orders"]).unwrap();
    let (classic_tx, mut classic_rx) = mpsc::unbounded_channel();
    let classic_task = drive(9, classic.clone(), false, classic_tx);
    collect(&mut classic_rx, (0..300).collect()).await;

    let split = wait::until("two partitions each, none shared", PATIENCE, async || {
        let a = assignments(&members);
        a.iter().all(|s| s.len() == 2).then_some(a)
    })
    .await;
    let all: BTreeSet<i32> = split.iter().flatten().copied().collect();
    assert_eq!(all, (0..6).collect());
    let (state, protocol_type, count) = described(&members[0], "kip848");
    assert_eq!(
        (state.as_str(), protocol_type.as_str(), count),
        ("Stable", "consumer", 3)
    );

    // A classic consumer cannot join a group whose members speak the consumer protocol.
    let intruder = consumer(&broker.bootstrap(), "kip848", &[]);
    intruder.subscribe(&["orders"]).unwrap();
    match tokio::time::timeout(PATIENCE, intruder.recv()).await {
        Ok(Err(KafkaError::MessageConsumption(code))) => {
            assert_eq!(
                code,
                rdkafka::types::RDKafkaErrorCode::InconsistentGroupProtocol
            )
        }
        other => panic!("the classic consumer was not refused: {other:?}"),
    }
    drop(intruder);

    // Member 2 leaves (its close sends the leave); the others take its partitions.
    tasks.pop().unwrap().abort();
    let leaver = members.pop().unwrap();
    leaver.unsubscribe();
    drop(leaver);
    wait::until(
        "the two left sharing all six partitions",
        PATIENCE,
        async || {
            let a = assignments(&members);
            let union: BTreeSet<i32> = a.iter().flatten().copied().collect();
            (a.iter().all(|s| s.len() == 3) && union.len() == 6).then_some(())
        },
    )
    .await;
    send_range(&p, "orders", 300, 600).await;
    let readers = collect(&mut rx, (300..600).collect()).await;
    assert!(
        readers.values().all(|&m| m < 2),
        "the member that left reads nothing"
    );

    // Commit where each member is.
    for c in &members {
        commit_positions(c);
    }

    // Ferry restarts: the group, its epoch and its members come back from the store, and
    // the members carry on with their partitions.
    broker.restart().await;
    let p = producer(&broker.bootstrap(), &[]);
    send_range(&p, "orders", 600, 700).await;
    collect(&mut rx, (600..700).collect()).await;
    let (state, _, count) = described(&members[0], "kip848");
    assert_eq!((state.as_str(), count), ("Stable", 2));
    for c in &members {
        commit_positions(c);
    }

    // Everyone leaves; a new member starts where the group committed, not at the start.
    for t in tasks {
        t.abort();
    }
    for c in members.drain(..) {
        c.unsubscribe();
    }
    drop(rx);
    let late = member(&broker.bootstrap(), "kip848");
    late.subscribe(&["orders"]).unwrap();
    send_range(&p, "orders", 700, 710).await;
    let mut values = BTreeSet::new();
    while values.len() < 10 {
        let m = tokio::time::timeout(PATIENCE, late.recv())
            .await
            .expect("the new member reads")
            .unwrap();
        let value: usize = std::str::from_utf8(m.payload().unwrap())
            .unwrap()
            .parse()
            .unwrap();
        assert!(value >= 700, "read {value}, committed before the restart");
        values.insert(value);
    }
    let mut wanted = TopicPartitionList::new();
    for partition in 0..6 {
        wanted.add_partition("orders", partition);
    }
    let committed = late
        .committed_offsets(wanted, Timeout::After(PATIENCE))
        .unwrap();
    assert_eq!(committed.count(), 6);
    classic_task.abort();
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_consumes_with_the_range_assignor_and_describes_the_group() {
    let broker = KafkaServer::start_with(|c| c.group_consumer_heartbeat_interval_ms = 300).await;
    let out = run(
        "python3",
        &[
            &python_script("kafka_consumer_protocol.py"),
            &broker.bootstrap(),
            "cp",
            "cpg",
        ],
        b"",
    )
    .await;
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "read 40 records\n\
         describe type=CONSUMER state=STABLE assignor=range members=2\n\
         member cp:0,cp:1 target=cp:0,cp:1\n\
         member cp:2,cp:3 target=cp:2,cp:3\n\
         listed consumer=cpg classic=\n\
         after close state=EMPTY members=0\n"
    );
    broker.stop().await;
}
