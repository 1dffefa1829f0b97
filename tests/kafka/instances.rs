//! Two Kafka fronts sharing one store, as two Ferry instances sharing a FoundationDB
//! cluster are (here both run in this process on the embedded engine): a consumer group has
//! one coordinator whichever instance its members bootstrap from, and when the instance
//! holding the group and the partitions stops, the other takes both over and the group
//! carries on with its committed offsets; an instance lets go of the groups it does not
//! use; a new instance takes its share of the partitions from a running one, and each lists
//! the partitions it leads in its log dir.

use crate::common::fronts::KafkaServer;
use crate::common::kafka::raw::Raw;
use crate::common::kafka::{PATIENCE, consumer, drive, producer, send_range};
use crate::common::wait;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    ApiKey, DescribeLogDirsRequest, FindCoordinatorRequest, GroupId, HeartbeatRequest, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, Producer};
use rdkafka::util::Timeout;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

const GROUP: &str = "pair";
const TOPIC: &str = "shared";

/// The node FindCoordinator (v4) at `addr` names for [`GROUP`].
async fn coordinator_named_by(addr: SocketAddr) -> i32 {
    coordinator_of(addr, GROUP).await
}

/// The node FindCoordinator (v4) at `addr` names for `group`.
async fn coordinator_of(addr: SocketAddr, group: &str) -> i32 {
    let mut raw = Raw::connect(addr).await;
    let request = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![StrBytes::from_string(group.to_owned())]);
    let ResponseKind::FindCoordinator(r) = raw.request(ApiKey::FindCoordinator, 4, &request).await
    else {
        panic!("not a FindCoordinator answer");
    };
    let c = &r.coordinators[0];
    assert_eq!(c.error_code, 0, "{c:?}");
    c.node_id.0
}

/// Receives until every value of `wanted` was read.
async fn collect(
    rx: &mut mpsc::UnboundedReceiver<(usize, i32, usize)>,
    mut wanted: BTreeSet<usize>,
) {
    while !wanted.is_empty() {
        let (_, _, value) = tokio::time::timeout(PATIENCE, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("still missing {} records", wanted.len()))
            .unwrap();
        wanted.remove(&value);
    }
}

/// Waits until the members hold two partitions each, together all four; returns them.
async fn balanced(members: &[Arc<StreamConsumer>]) -> Vec<BTreeSet<i32>> {
    let what = "two members sharing four partitions, two each";
    wait::until(what, PATIENCE, async || {
        let shares: Vec<BTreeSet<i32>> = members
            .iter()
            .map(|c| {
                let a = c.assignment().unwrap();
                a.elements().iter().map(|e| e.partition()).collect()
            })
            .collect();
        let all: BTreeSet<i32> = shares.iter().flatten().copied().collect();
        (shares.iter().all(|s| s.len() == 2) && all == (0..4).collect()).then_some(shares)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_has_one_coordinator_across_instances_and_moves_when_it_stops() {
    let a = KafkaServer::start_with(|c| {
        c.default_partitions = 4;
        c.node_id = 0;
    })
    .await;
    let b = a.peer(1).await;

    // The first FindCoordinator (asked of b) makes b the coordinator; a names b too, and
    // refuses the group's requests itself.
    assert_eq!(coordinator_named_by(b.addr).await, 1);
    assert_eq!(coordinator_named_by(a.addr).await, 1);
    let mut raw = Raw::connect(a.addr).await;
    let heartbeat = HeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str(GROUP)))
        .with_member_id(StrBytes::from_static_str("m"))
        .with_generation_id(1);
    let ResponseKind::Heartbeat(h) = raw.request(ApiKey::Heartbeat, 4, &heartbeat).await else {
        panic!("not a Heartbeat answer");
    };
    assert_eq!(h.error_code, ResponseError::NotCoordinator.code());

    // The topic is created through b, so b sequences its partitions too.
    send_range(&producer(&b.bootstrap(), &[]), TOPIC, 0, 200).await;

    // One member bootstraps from each instance; they still form one group.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let members: Vec<Arc<StreamConsumer>> = [a.bootstrap(), b.bootstrap()]
        .iter()
        .map(|bootstrap| Arc::new(consumer(bootstrap, GROUP, &[])))
        .collect();
    let mut tasks = Vec::new();
    for (i, c) in members.iter().enumerate() {
        c.subscribe(&[TOPIC]).unwrap();
        tasks.push(drive(i, c.clone(), true, tx.clone()));
    }
    collect(&mut rx, (0..200).collect()).await;
    balanced(&members).await;

    // b stops and releases its leases: a takes the group and the partitions over.
    b.stop().await;
    send_range(&producer(&a.bootstrap(), &[]), TOPIC, 200, 400).await;
    collect(&mut rx, (200..400).collect()).await;
    balanced(&members).await;
    assert_eq!(coordinator_named_by(a.addr).await, 0);

    // The group's commits reached a: every partition's committed offset is its end.
    let ends: BTreeMap<i32, i64> = (0..4)
        .map(|p| {
            let (_, high) = members[0]
                .fetch_watermarks(TOPIC, p, Timeout::After(PATIENCE))
                .unwrap();
            (p, high)
        })
        .collect();
    assert_eq!(ends.values().sum::<i64>(), 400);
    // Each member commits its position (an asynchronous commit made during the move may
    // have been refused by the rebalance, as Kafka refuses it) and reads it back from a.
    for m in &members {
        let what = "the commits reaching the end of the member's partitions";
        wait::until(what, PATIENCE, async || {
            let _ = m.commit_consumer_state(CommitMode::Sync);
            let got: BTreeMap<i32, i64> = m
                .committed(Timeout::After(PATIENCE))
                .unwrap_or_default()
                .elements()
                .iter()
                .filter_map(|e| Some((e.partition(), e.offset().to_raw()?)))
                .collect();
            let mine = m.assignment().unwrap();
            let at_end = mine
                .elements()
                .iter()
                .all(|e| got.get(&e.partition()) == ends.get(&e.partition()));
            (mine.count() > 0 && at_end).then_some(())
        })
        .await;
    }

    drop(rx);
    for t in tasks {
        let _ = t.await;
    }
    drop(members);
    a.stop().await;
}

/// An instance lets go of the groups it does not use — one only located, one whose last
/// member left — so another instance can coordinate them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_releases_the_leases_of_groups_it_does_not_use() {
    let a = KafkaServer::start_with(|c| {
        c.node_id = 0;
        c.sequencer_lease_ms = 1_000;
    })
    .await;
    let b = a.peer(1).await;
    assert_eq!(coordinator_of(a.addr, "located").await, 0);
    assert_eq!(coordinator_of(b.addr, "located").await, 0, "a holds it");

    send_range(&producer(&a.bootstrap(), &[]), TOPIC, 0, 1).await;
    let member = consumer(&a.bootstrap(), "used", &[]);
    assert_eq!(coordinator_of(a.addr, "used").await, 0);
    member.subscribe(&[TOPIC]).unwrap();
    wait::until("the member joining", PATIENCE, async || {
        // Polling the consumer is what makes it join.
        let _ = tokio::time::timeout(Duration::from_millis(100), member.recv()).await;
        (member.assignment().unwrap().count() > 0).then_some(())
    })
    .await;
    assert_eq!(
        coordinator_of(b.addr, "used").await,
        0,
        "a holds it while in use"
    );
    drop(member); // leaves the group

    for group in ["located", "used"] {
        let what = format!("a letting go of '{group}'");
        wait::until(&what, PATIENCE, async || {
            (coordinator_of(b.addr, group).await == 1).then_some(())
        })
        .await;
    }
    b.stop().await;
    a.stop().await;
}

/// The leader Metadata names for each partition of [`TOPIC`], by index (-1: none).
fn leaders(p: &FutureProducer) -> Vec<i32> {
    let metadata = p
        .client()
        .fetch_metadata(Some(TOPIC), Timeout::After(PATIENCE))
        .unwrap();
    let mut partitions: Vec<(i32, i32)> = metadata.topics()[0]
        .partitions()
        .iter()
        .map(|p| (p.id(), p.leader()))
        .collect();
    partitions.sort_unstable();
    partitions.into_iter().map(|(_, leader)| leader).collect()
}

/// A second instance takes its share of the partitions from the first while an idempotent
/// producer writes to them: every record is acknowledged, and each is in the log once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_instance_takes_its_share_of_the_partitions_while_a_producer_writes() {
    let a = KafkaServer::start_with(|c| {
        c.default_partitions = 4;
        c.node_id = 0;
        c.sequencer_lease_ms = 1_500;
    })
    .await;
    let p = producer(&a.bootstrap(), &[("enable.idempotence", "true")]);
    send_range(&p, TOPIC, 0, 100).await;
    assert_eq!(
        leaders(&p),
        [0, 0, 0, 0],
        "a created the topic and holds it"
    );

    let b = a.peer(1).await;
    let mut sent = 100;
    let split = tokio::time::timeout(PATIENCE, async {
        loop {
            send_range(&p, TOPIC, sent, sent + 50).await;
            sent += 50;
            let now = leaders(&p);
            if now.iter().filter(|&&l| l == 0).count() == 2
                && now.iter().filter(|&&l| l == 1).count() == 2
            {
                return now;
            }
        }
    })
    .await
    .expect("a hands two of its four partitions to b");
    // Both instances now take writes for their own partitions.
    send_range(&p, TOPIC, sent, sent + 200).await;
    sent += 200;
    assert_eq!(leaders(&p), split, "the split stays");

    let ends: i64 = (0..4)
        .map(|partition| {
            p.client()
                .fetch_watermarks(TOPIC, partition, Timeout::After(PATIENCE))
                .unwrap()
                .1
        })
        .sum();
    assert_eq!(ends, sent as i64, "every record is in the log once");
    let reader = Arc::new(consumer(&b.bootstrap(), "reader", &[]));
    reader.subscribe(&[TOPIC]).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let task = drive(0, reader, false, tx);
    collect(&mut rx, (0..sent).collect()).await;
    drop(rx);
    let _ = task.await;
    b.stop().await;
    a.stop().await;
}

/// The partitions of [`TOPIC`] DescribeLogDirs (v4) at `addr` lists in the instance's one
/// log dir, by index.
async fn in_log_dir(addr: SocketAddr) -> BTreeSet<i32> {
    let mut raw = Raw::connect(addr).await;
    let request = DescribeLogDirsRequest::default().with_topics(None);
    let ResponseKind::DescribeLogDirs(r) = raw.request(ApiKey::DescribeLogDirs, 4, &request).await
    else {
        panic!("not a DescribeLogDirs answer");
    };
    assert_eq!(r.results.len(), 1, "one log dir per instance");
    r.results[0]
        .topics
        .iter()
        .filter(|t| t.name.0.as_str() == TOPIC)
        .flat_map(|t| t.partitions.iter().map(|p| p.partition_index))
        .collect()
}

/// Each instance's DescribeLogDirs lists the partitions it leads, as Metadata names it their
/// replica: summed over the brokers, as UIs sum a topic's size, each partition counts once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_instance_lists_the_partitions_it_leads_in_its_log_dir() {
    let a = KafkaServer::start_with(|c| {
        c.default_partitions = 4;
        c.node_id = 0;
        c.sequencer_lease_ms = 1_500;
    })
    .await;
    let p = producer(&a.bootstrap(), &[]);
    send_range(&p, TOPIC, 0, 20).await;
    assert_eq!(in_log_dir(a.addr).await, BTreeSet::from([0, 1, 2, 3]));
    let b = a.peer(1).await;
    let (at_a, at_b) = wait::until("b takes two partitions", PATIENCE, async || {
        let (at_a, at_b) = (in_log_dir(a.addr).await, in_log_dir(b.addr).await);
        (at_a.len() == 2 && at_b.len() == 2).then_some((at_a, at_b))
    })
    .await;
    assert!(at_a.is_disjoint(&at_b), "{at_a:?} {at_b:?}");
    let led_by = |node| -> BTreeSet<i32> {
        (0..)
            .zip(leaders(&p))
            .filter(|&(_, leader)| leader == node)
            .map(|(partition, _)| partition)
            .collect()
    };
    assert_eq!(
        (led_by(0), led_by(1)),
        (at_a, at_b),
        "as Metadata names them"
    );
    b.stop().await;
    a.stop().await;
}
