//! Consumer groups driven by librdkafka: three members split a topic's partitions and
//! rebalance when one leaves; committed offsets and the group itself survive a restart of
//! the Kafka front and its store; a static member (`group.instance.id`) restarted within
//! its session gets its partitions back with no rebalance, and a duplicate instance id
//! fences the older consumer — and on the consumer protocol (KIP-848) the same return
//! without a rebalance, a duplicate there refused (`UNRELEASED_INSTANCE_ID`).

use crate::common::fronts::KafkaServer;
use crate::common::kafka::{
    PATIENCE, assigned_partitions, client_config, consumer, drive, producer, send_range,
};
use crate::common::wait;
use rdkafka::client::ClientContext;
use rdkafka::consumer::{
    BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance, StreamConsumer,
};
use rdkafka::error::KafkaError;
use rdkafka::util::Timeout;
use rdkafka::{Message, Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Receives until every value in `wanted` has been seen; returns who saw which partitions
/// among the records of `wanted`.
async fn collect(
    rx: &mut mpsc::UnboundedReceiver<(usize, i32, usize)>,
    mut wanted: BTreeSet<usize>,
) -> BTreeMap<usize, BTreeSet<i32>> {
    let mut seen_by: BTreeMap<usize, BTreeSet<i32>> = BTreeMap::new();
    // Records read earlier (re-read after a rebalance, still queued) are not counted.
    let range = wanted.clone();
    while !wanted.is_empty() {
        let (member, partition, value) = tokio::time::timeout(PATIENCE, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("still missing {} records", wanted.len()))
            .unwrap();
        wanted.remove(&value);
        if range.contains(&value) {
            seen_by.entry(member).or_default().insert(partition);
        }
    }
    seen_by
}

/// Waits until `c` has partitions assigned (it joined a stable group).
async fn until_assigned(c: &StreamConsumer) -> TopicPartitionList {
    wait::until("an assignment", PATIENCE, async || {
        let a = c.assignment().unwrap();
        (a.count() > 0).then_some(a)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_split_the_partitions_and_rebalance_when_one_leaves() {
    let broker = KafkaServer::start_with(|c| c.default_partitions = 6).await;
    let p = producer(&broker.bootstrap(), &[]);
    send_range(&p, "events", 0, 300).await;

    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut members: Vec<Arc<StreamConsumer>> = (0..3)
        .map(|_| Arc::new(consumer(&broker.bootstrap(), "trio", &[])))
        .collect();
    let mut tasks = Vec::new();
    for (i, c) in members.iter().enumerate() {
        c.subscribe(&["events"]).unwrap();
        tasks.push(drive(i, c.clone(), false, tx.clone()));
    }
    collect(&mut rx, (0..300).collect()).await;

    // Once all three are in, each owns two of the six partitions, none shared.
    let assignments = wait::until("three balanced assignments", PATIENCE, async || {
        let a: Vec<BTreeSet<i32>> = members.iter().map(|c| assigned_partitions(c)).collect();
        a.iter().all(|s| s.len() == 2).then_some(a)
    })
    .await;
    let all: BTreeSet<i32> = assignments.iter().flatten().copied().collect();
    assert_eq!(all, (0..6).collect());

    // Member 2 leaves; the other two take over its partitions and read what follows.
    let task = tasks.pop().unwrap();
    task.abort();
    let _ = task.await;
    let leaver = members.pop().unwrap();
    leaver.unsubscribe();
    drop(leaver);
    let survivors = &members;
    wait::until(
        "the survivors sharing all six partitions",
        PATIENCE,
        async || {
            let total: usize = survivors
                .iter()
                .map(|c| c.assignment().unwrap().count())
                .sum();
            (total == 6).then_some(())
        },
    )
    .await;
    send_range(&p, "events", 300, 600).await;
    let seen_by = collect(&mut rx, (300..600).collect()).await;
    assert!(
        !seen_by.contains_key(&2),
        "the member that left reads nothing"
    );
    drop(rx);
    for t in tasks {
        t.abort();
    }
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_offsets_resume_after_a_restart() {
    let mut broker = KafkaServer::start().await;
    let p = producer(&broker.bootstrap(), &[]);
    send_range(&p, "resume", 0, 100).await;

    let c = consumer(&broker.bootstrap(), "resumer", &[]);
    c.subscribe(&["resume"]).unwrap();
    let mut read = 0;
    while read < 60 {
        tokio::time::timeout(PATIENCE, c.recv())
            .await
            .unwrap()
            .unwrap();
        read += 1;
    }
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset("resume", 0, Offset::Offset(60))
        .unwrap();
    c.commit(&offsets, CommitMode::Sync).unwrap();
    drop(c);

    broker.restart().await;

    let c = consumer(&broker.bootstrap(), "resumer", &[]);
    c.subscribe(&["resume"]).unwrap();
    let first = tokio::time::timeout(PATIENCE, c.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.offset(), 60);
    assert_eq!(first.payload(), Some(&b"60"[..]));
    let committed = c
        .committed_offsets(
            {
                let mut t = TopicPartitionList::new();
                t.add_partition("resume", 0);
                t
            },
            Timeout::After(PATIENCE),
        )
        .unwrap();
    assert_eq!(
        committed.find_partition("resume", 0).unwrap().offset(),
        Offset::Offset(60)
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stable_group_survives_a_restart_with_its_member_and_generation() {
    let mut broker = KafkaServer::start().await;
    let p = producer(&broker.bootstrap(), &[]);
    send_range(&p, "steady", 0, 10).await;
    let c = Arc::new(consumer(&broker.bootstrap(), "steady-group", &[]));
    c.subscribe(&["steady"]).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let task = drive(0, c.clone(), false, tx);
    collect(&mut rx, (0..10).collect()).await;
    until_assigned(&c).await;
    let before = group_members(&c, "steady-group");

    broker.restart().await;

    // The member keeps heartbeating into the restored generation and keeps consuming.
    let p = producer(&broker.bootstrap(), &[]);
    send_range(&p, "steady", 10, 20).await;
    collect(&mut rx, (10..20).collect()).await;
    assert_eq!(group_members(&c, "steady-group"), before);
    task.abort();
    broker.stop().await;
}

/// The group's state and member ids, as ListGroups/DescribeGroups report them.
fn group_members(c: &StreamConsumer, group: &str) -> (String, Vec<String>) {
    let list = c
        .fetch_group_list(Some(group), Timeout::After(PATIENCE))
        .unwrap();
    let g = &list.groups()[0];
    (
        g.state().to_owned(),
        g.members().iter().map(|m| m.id().to_owned()).collect(),
    )
}

/// Counts a consumer's assignments and revocations and keeps its errors.
#[derive(Default)]
struct Watched {
    rebalances: AtomicUsize,
    errors: parking_lot::Mutex<Vec<String>>,
}

/// A consumer context reporting to a [`Watched`].
struct Watching(Arc<Watched>);

impl ClientContext for Watching {
    fn error(&self, error: KafkaError, reason: &str) {
        self.0.errors.lock().push(format!("{error}: {reason}"));
    }
}

impl ConsumerContext for Watching {
    fn pre_rebalance(&self, _: &BaseConsumer<Self>, _: &Rebalance<'_>) {
        self.0.rebalances.fetch_add(1, Ordering::SeqCst);
    }
}

/// A static member of group "statics" subscribed to "statics", polled by its own task.
struct StaticMember {
    consumer: Arc<StreamConsumer<Watching>>,
    watched: Arc<Watched>,
    stop: CancellationToken,
    polling: tokio::task::JoinHandle<()>,
}

/// The group protocol static members speak.
#[derive(Clone, Copy)]
enum Protocol {
    /// JoinGroup/SyncGroup, the session set by the member.
    Classic,
    /// KIP-848's ConsumerGroupHeartbeat, the session set by the coordinator.
    Consumer,
}

impl StaticMember {
    /// Starts member `instance` on `protocol`.
    fn start(bootstrap: &str, instance: &str, protocol: Protocol) -> Self {
        let watched = Arc::new(Watched::default());
        let mut settings = vec![
            ("group.id", "statics"),
            ("group.instance.id", instance),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "false"),
        ];
        settings.extend_from_slice(match protocol {
            Protocol::Classic => &[
                ("session.timeout.ms", "30000"),
                ("heartbeat.interval.ms", "300"),
            ],
            Protocol::Consumer => &[("group.protocol", "consumer")],
        });
        let consumer: StreamConsumer<Watching> = client_config(bootstrap, &settings)
            .create_with_context(Watching(watched.clone()))
            .unwrap();
        consumer.subscribe(&["statics"]).unwrap();
        let consumer = Arc::new(consumer);
        let (polled, stop) = (consumer.clone(), CancellationToken::new());
        let stopping = stop.clone();
        let polling = tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = stopping.cancelled() => return,
                    received = polled.recv() => {
                        // A fenced consumer's receive fails at once: pause, or the loop
                        // would spin.
                        if received.is_err() {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                        }
                    }
                }
            }
        });
        Self {
            consumer,
            watched,
            stop,
            polling,
        }
    }

    /// Closes the consumer as a stopping process does (a static member sends no
    /// LeaveGroup); off the runtime's workers, which serve the broker it talks to.
    async fn close(self) {
        self.stop.cancel();
        self.polling.await.unwrap();
        tokio::task::spawn_blocking(move || drop(self.consumer))
            .await
            .unwrap();
    }
}

/// The partitions `c` owns once it owns `count`.
async fn owned(member: &StaticMember, count: usize) -> BTreeSet<i32> {
    let c = &member.consumer;
    wait::until("the assignment", PATIENCE, async || {
        let owned = assigned_partitions(c.as_ref());
        (owned.len() == count).then_some(owned)
    })
    .await
}

/// Starts static members a and b of group "statics" on `protocol`, then restarts b: it
/// closes (a classic static member sends no LeaveGroup, a consumer-protocol one leaves for
/// a while with epoch -2), stays away a second — during which a, heartbeating every 300 ms,
/// is given none of b's partitions — and comes back with its instance id within its
/// session timeout. Checks b gets its partitions back and a is neither revoked nor assigned
/// anything; returns a, the restarted b and a's partitions.
async fn restart_keeps_partitions(
    bootstrap: &str,
    protocol: Protocol,
) -> (StaticMember, StaticMember, BTreeSet<i32>) {
    let a = StaticMember::start(bootstrap, "a", protocol);
    let b = StaticMember::start(bootstrap, "b", protocol);
    let (a_owns, b_owns) = (owned(&a, 2).await, owned(&b, 2).await);
    assert!(a_owns.is_disjoint(&b_owns));
    let a_rebalances = a.watched.rebalances.load(Ordering::SeqCst);
    b.close().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(assigned_partitions(a.consumer.as_ref()), a_owns);
    let b_again = StaticMember::start(bootstrap, "b", protocol);
    assert_eq!(
        owned(&b_again, 2).await,
        b_owns,
        "b got other partitions back"
    );
    // Had the group rebalanced, a would have been revoked or assigned meanwhile.
    assert_eq!(
        a.watched.rebalances.load(Ordering::SeqCst),
        a_rebalances,
        "the group rebalanced for a static member's return"
    );
    assert_eq!(owned(&a, 2).await, a_owns);
    (a, b_again, a_owns)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_member_back_within_its_session_keeps_its_partitions_and_a_duplicate_is_fenced() {
    let broker = KafkaServer::start_with(|c| c.default_partitions = 4).await;
    let bootstrap = broker.bootstrap();
    send_range(&producer(&bootstrap, &[]), "statics", 0, 40).await;
    let (a, b_again, a_owns) = restart_keeps_partitions(&bootstrap, Protocol::Classic).await;

    // A second consumer with a's instance id takes a's place; a is fenced.
    let a_twin = StaticMember::start(&bootstrap, "a", Protocol::Classic);
    assert_eq!(owned(&a_twin, 2).await, a_owns);
    let fenced = wait::until("a fenced", PATIENCE, async || {
        a.watched
            .errors
            .lock()
            .iter()
            .find(|e| e.contains("fenced"))
            .cloned()
    })
    .await;
    assert!(fenced.contains("group.instance.id"), "{fenced}");
    for member in [a, b_again, a_twin] {
        member.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_consumer_protocol_member_back_in_its_session_keeps_its_partitions_and_a_duplicate_is_refused()
 {
    let broker = KafkaServer::start_with(|c| {
        c.default_partitions = 4;
        c.group_consumer_heartbeat_interval_ms = 300;
    })
    .await;
    let bootstrap = broker.bootstrap();
    send_range(&producer(&bootstrap, &[]), "statics", 0, 40).await;
    let (a, b_again, a_owns) = restart_keeps_partitions(&bootstrap, Protocol::Consumer).await;

    // A second consumer with a's instance id while a is in the group is refused; a stays.
    let a_twin = StaticMember::start(&bootstrap, "a", Protocol::Consumer);
    let refused = wait::until("the twin refused", PATIENCE, async || {
        a_twin.watched.errors.lock().first().cloned()
    })
    .await;
    assert!(refused.contains("instance ID is still used"), "{refused}");
    assert_eq!(owned(&a, 2).await, a_owns);
    for member in [a, b_again, a_twin] {
        member.close().await;
    }
    broker.stop().await;
}
