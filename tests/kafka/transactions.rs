//! Kafka transactions (KIP-98) on Ferry's Kafka front, driven by librdkafka's
//! transactional producer and `read_committed` consumers:
//! - committed transactions are read, aborted ones are not (but `read_uncommitted` sees
//!   them), in order around the markers;
//! - an open transaction holds `read_committed` readers at its first offset (the last
//!   stable offset), also for records produced after it without a transaction;
//! - offsets sent to a transaction are committed with it and dropped with its abort;
//! - a new producer with the same transactional id fences the old one and aborts what it
//!   left open, also across a restart of the front;
//! - offsets committed with a group member's metadata (KIP-447) are checked against the
//!   group: a zombie member or generation is refused;
//! - a transaction open past `transaction.timeout.ms` is aborted and its producer fenced.

use crate::common::fronts::KafkaServer;
use crate::common::kafka::raw::Raw;
use crate::common::kafka::{PATIENCE, client_config, consumer};
use crate::common::wait;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ApiKey, DescribeGroupsRequest, GroupId, ResponseKind, TopicName, TransactionalId,
    TxnOffsetCommitRequest,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::Message;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};

/// A transactional producer with id `id`.
fn transactional(bootstrap: &str, id: &str, timeout_ms: &str) -> FutureProducer {
    let producer: FutureProducer = client_config(
        bootstrap,
        &[
            ("transactional.id", id),
            ("transaction.timeout.ms", timeout_ms),
            ("linger.ms", "5"),
        ],
    )
    .create()
    .unwrap();
    producer.init_transactions(PATIENCE).unwrap();
    producer
}

/// Sends `values` to partition 0 of `topic`, waiting for each acknowledgement.
async fn send(producer: &FutureProducer, topic: &str, values: &[String]) {
    for v in values {
        producer
            .send(
                FutureRecord::<(), _>::to(topic)
                    .partition(0)
                    .payload(v.as_bytes()),
                Timeout::After(PATIENCE),
            )
            .await
            .expect("acknowledged");
    }
}

/// `prefix-0` … `prefix-(n-1)`.
fn values(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

/// A consumer at `isolation` reading partition 0 of `topic` from the beginning.
fn reader(bootstrap: &str, topic: &str, isolation: &str) -> StreamConsumer {
    let c = consumer(
        bootstrap,
        &format!("reader-{isolation}"),
        &[("isolation.level", isolation)],
    );
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    c
}

/// The next `n` values `c` reads.
async fn read(c: &StreamConsumer, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let m = tokio::time::timeout(PATIENCE, c.recv())
            .await
            .expect("a record within the patience")
            .expect("a record");
        out.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
    }
    out
}

/// Partition 0's end offset as a consumer at `isolation` sees it (the last stable offset
/// for `read_committed`, the high watermark otherwise).
fn end_offset(bootstrap: &str, topic: &str, isolation: &str) -> i64 {
    let c: BaseConsumer = client_config(bootstrap, &[("isolation.level", isolation)])
        .create()
        .unwrap();
    c.fetch_watermarks(topic, 0, PATIENCE).unwrap().1
}

/// Creates `topic` with one partition by producing nothing transactional to it.
async fn create_topic(bootstrap: &str, topic: &str) {
    let p: FutureProducer = client_config(bootstrap, &[]).create().unwrap();
    send(&p, topic, &["first".to_owned()]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_transactions_are_read_and_aborted_ones_are_not() {
    let broker = KafkaServer::start().await;
    let b = broker.bootstrap();
    create_topic(&b, "t").await;
    let p = transactional(&b, "tx-read", "60000");
    for (prefix, commit) in [("a", true), ("b", false), ("c", true)] {
        p.begin_transaction().unwrap();
        send(&p, "t", &values(prefix, 10)).await;
        if commit {
            p.commit_transaction(PATIENCE).unwrap();
        } else {
            p.abort_transaction(PATIENCE).unwrap();
        }
    }
    let committed = reader(&b, "t", "read_committed");
    let expected: Vec<String> = std::iter::once("first".to_owned())
        .chain(values("a", 10))
        .chain(values("c", 10))
        .collect();
    assert_eq!(read(&committed, 21).await, expected);
    let uncommitted = reader(&b, "t", "read_uncommitted");
    let everything: Vec<String> = std::iter::once("first".to_owned())
        .chain(values("a", 10))
        .chain(values("b", 10))
        .chain(values("c", 10))
        .collect();
    assert_eq!(read(&uncommitted, 31).await, everything);
    // 31 records and three markers.
    assert_eq!(end_offset(&b, "t", "read_committed"), 34);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_transaction_holds_read_committed_readers_at_its_first_offset() {
    let broker = KafkaServer::start().await;
    let b = broker.bootstrap();
    create_topic(&b, "t").await;
    let p = transactional(&b, "tx-open", "60000");
    p.begin_transaction().unwrap();
    send(&p, "t", &values("open", 3)).await;
    let plain: FutureProducer = client_config(&b, &[]).create().unwrap();
    send(&plain, "t", &values("after", 2)).await;
    assert_eq!(end_offset(&b, "t", "read_uncommitted"), 6);
    assert_eq!(
        end_offset(&b, "t", "read_committed"),
        1,
        "held at the open transaction"
    );
    let committed = reader(&b, "t", "read_committed");
    assert_eq!(read(&committed, 1).await, vec!["first".to_owned()]);
    p.commit_transaction(PATIENCE).unwrap();
    let rest: Vec<String> = values("open", 3)
        .into_iter()
        .chain(values("after", 2))
        .collect();
    assert_eq!(read(&committed, 5).await, rest);
    assert_eq!(end_offset(&b, "t", "read_committed"), 7);
    broker.stop().await;
}

/// Group `group`'s committed offset of partition 0 of `topic`.
fn committed_offset(bootstrap: &str, group: &str, topic: &str) -> Offset {
    let c: BaseConsumer = client_config(bootstrap, &[("group.id", group)])
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition(topic, 0);
    let committed = c.committed_offsets(tpl, PATIENCE).unwrap();
    committed.elements()[0].offset()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_sent_to_a_transaction_are_committed_with_it_and_dropped_with_its_abort() {
    let broker = KafkaServer::start().await;
    let b = broker.bootstrap();
    create_topic(&b, "in").await;
    create_topic(&b, "out").await;
    let group: BaseConsumer = client_config(&b, &[("group.id", "processor")])
        .create()
        .unwrap();
    let metadata = group.group_metadata().unwrap();
    let p = transactional(&b, "tx-offsets", "60000");
    let offsets = |at: i64| {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("in", 0, Offset::Offset(at))
            .unwrap();
        tpl
    };

    p.begin_transaction().unwrap();
    send(&p, "out", &values("x", 2)).await;
    p.send_offsets_to_transaction(&offsets(5), &metadata, PATIENCE)
        .unwrap();
    assert_eq!(
        committed_offset(&b, "processor", "in"),
        Offset::Invalid,
        "pending until the commit"
    );
    p.abort_transaction(PATIENCE).unwrap();
    assert_eq!(committed_offset(&b, "processor", "in"), Offset::Invalid);

    p.begin_transaction().unwrap();
    send(&p, "out", &values("y", 2)).await;
    p.send_offsets_to_transaction(&offsets(7), &metadata, PATIENCE)
        .unwrap();
    p.commit_transaction(PATIENCE).unwrap();
    assert_eq!(committed_offset(&b, "processor", "in"), Offset::Offset(7));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_producer_with_the_same_id_fences_the_old_and_aborts_what_it_left_open() {
    let mut broker = KafkaServer::start().await;
    let b = broker.bootstrap();
    create_topic(&b, "t").await;
    let old = transactional(&b, "tx-fence", "60000");
    old.begin_transaction().unwrap();
    send(&old, "t", &values("old", 3)).await;
    assert_eq!(end_offset(&b, "t", "read_committed"), 1);

    // A restart keeps the open transaction; the new producer's init aborts it.
    broker.restart().await;
    let b = broker.bootstrap();
    let new = transactional(&b, "tx-fence", "60000");
    new.begin_transaction().unwrap();
    send(&new, "t", &values("new", 2)).await;
    new.commit_transaction(PATIENCE).unwrap();

    let committed = reader(&b, "t", "read_committed");
    let expected: Vec<String> = std::iter::once("first".to_owned())
        .chain(values("new", 2))
        .collect();
    assert_eq!(read(&committed, 3).await, expected);
    let fenced = old.commit_transaction(PATIENCE).unwrap_err();
    assert!(
        fenced.to_string().to_lowercase().contains("fenced")
            || fenced.to_string().contains("epoch"),
        "the old producer is fenced: {fenced}"
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced() {
    let broker = KafkaServer::start().await;
    let b = broker.bootstrap();
    create_topic(&b, "t").await;
    let p = transactional(&b, "tx-timeout", "2000");
    p.begin_transaction().unwrap();
    send(&p, "t", &values("late", 3)).await;
    // The abort marker (offset 4) moves the last stable offset past the transaction.
    wait::until("the transaction's abort", PATIENCE, async || {
        (end_offset(&b, "t", "read_committed") >= 5).then_some(())
    })
    .await;
    assert!(
        p.commit_transaction(PATIENCE).is_err(),
        "its producer is fenced"
    );
    let committed = reader(&b, "t", "read_committed");
    let plain: FutureProducer = client_config(&b, &[]).create().unwrap();
    send(&plain, "t", &["after".to_owned()]).await;
    assert_eq!(
        read(&committed, 2).await,
        vec!["first".to_owned(), "after".to_owned()]
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_from_a_group_member_are_checked_against_its_generation() {
    let broker = KafkaServer::start().await;
    let b = broker.bootstrap();
    create_topic(&b, "in").await;
    create_topic(&b, "out").await;
    // A member of group "eos" that has joined and read the first record.
    let member = consumer(&b, "eos", &[]);
    member.subscribe(&["in"]).unwrap();
    tokio::time::timeout(PATIENCE, member.recv())
        .await
        .expect("the member reads within the patience")
        .unwrap();
    let p = transactional(&b, "tx-eos", "60000");
    p.begin_transaction().unwrap();
    send(&p, "out", &values("z", 1)).await;
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("in", 0, Offset::Offset(1))
        .unwrap();
    p.send_offsets_to_transaction(&tpl, &member.group_metadata().unwrap(), PATIENCE)
        .unwrap();
    p.commit_transaction(PATIENCE).unwrap();
    assert_eq!(committed_offset(&b, "eos", "in"), Offset::Offset(1));

    // A zombie naming another member, or the member at another generation, is refused.
    let mut raw = Raw::connect(broker.addr).await;
    let describe = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(StrBytes::from_static_str("eos"))]);
    let ResponseKind::DescribeGroups(groups) =
        raw.request(ApiKey::DescribeGroups, 5, &describe).await
    else {
        panic!("not a DescribeGroups answer");
    };
    let member_id = groups.groups[0].members[0].member_id.clone();
    let commit = |member: StrBytes, generation: i32| {
        TxnOffsetCommitRequest::default()
            .with_transactional_id(TransactionalId(StrBytes::from_static_str("tx-eos")))
            .with_group_id(GroupId(StrBytes::from_static_str("eos")))
            .with_generation_id(generation)
            .with_member_id(member)
            .with_topics(vec![
                TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(StrBytes::from_static_str("in")))
                    .with_partitions(vec![
                        TxnOffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(0),
                    ]),
            ])
    };
    for (request, expected) in [
        (
            commit(StrBytes::from_static_str("zombie"), 1),
            ResponseError::UnknownMemberId,
        ),
        (commit(member_id, 1_000), ResponseError::IllegalGeneration),
    ] {
        let ResponseKind::TxnOffsetCommit(r) =
            raw.request(ApiKey::TxnOffsetCommit, 3, &request).await
        else {
            panic!("not a TxnOffsetCommit answer");
        };
        assert_eq!(r.topics[0].partitions[0].error_code, expected.code());
    }
    assert_eq!(committed_offset(&b, "eos", "in"), Offset::Offset(1));
    broker.stop().await;
}
