//! The transaction APIs: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
//! TxnOffsetCommit and EndTxn, the transactional batches Produce accepts or refuses, and
//! what `read_committed` Fetch and ListOffsets see of committed and aborted transactions.

use super::fixture::{Client, Front, batch, name, producer_batch, text, values};
use super::{
    READ_COMMITTED, create_topic, fetch, fetch_request, fetch_until, fetch_with, list_offset,
    produce_to,
};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, EndTxnRequest, GroupId,
    InitProducerIdRequest, OffsetFetchRequest, ProducerId, TransactionalId, TxnOffsetCommitRequest,
};

/// ListOffsets' "latest" timestamp.
const LATEST: i64 = -1;

pub(super) fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(text(id))
}

/// InitProducerId (v4) for transactional id `id` (with `current` as KIP-360's id and
/// epoch): (error code, producer id, epoch).
async fn init(
    c: &mut Client,
    id: &str,
    timeout_ms: i32,
    current: Option<(i64, i16)>,
) -> (i16, i64, i16) {
    let (producer_id, epoch) = current.unwrap_or((-1, -1));
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(id)))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch);
    let r = c.call(4, request).await;
    (r.error_code, r.producer_id.0, r.producer_epoch)
}

/// A transactional producer of `id`: (producer id, epoch).
pub(super) async fn producer(c: &mut Client, id: &str) -> (i64, i16) {
    let (code, producer_id, epoch) = init(c, id, 60_000, None).await;
    assert_eq!(code, 0);
    (producer_id, epoch)
}

/// AddPartitionsToTxn (v3) of `partitions` of `topic`: each partition's error code.
pub(super) async fn add_partitions(
    c: &mut Client,
    id: &str,
    producer: (i64, i16),
    topics: &[(&str, &[i32])],
) -> Vec<(String, i32, i16)> {
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(id))
        .with_v3_and_below_producer_id(ProducerId(producer.0))
        .with_v3_and_below_producer_epoch(producer.1)
        .with_v3_and_below_topics(
            topics
                .iter()
                .map(|(t, ps)| {
                    AddPartitionsToTxnTopic::default()
                        .with_name(name(t))
                        .with_partitions(ps.to_vec())
                })
                .collect(),
        );
    c.call(3, request)
        .await
        .results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition.iter().map(|p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.partition_error_code,
                )
            })
        })
        .collect()
}

/// AddOffsetsToTxn (v3) of group `group`: the error code.
pub(super) async fn add_offsets(
    c: &mut Client,
    id: &str,
    producer: (i64, i16),
    group: &str,
) -> i16 {
    let request = AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_group_id(GroupId(text(group)));
    c.call(3, request).await.error_code
}

/// TxnOffsetCommit (v3) of `offsets` (topic, partition, offset) for `group`, as group
/// member `member` of `generation` (-1 and empty: unchecked): each partition's code.
async fn txn_commit(
    c: &mut Client,
    id: &str,
    producer: (i64, i16),
    group: &str,
    (member, generation): (&str, i32),
    offsets: &[(&str, i32, i64)],
) -> Vec<i16> {
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_group_id(GroupId(text(group)))
        .with_member_id(text(member))
        .with_generation_id(generation)
        .with_topics(
            offsets
                .iter()
                .map(|&(t, p, o)| {
                    TxnOffsetCommitRequestTopic::default()
                        .with_name(name(t))
                        .with_partitions(vec![
                            TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(p)
                                .with_committed_offset(o),
                        ])
                })
                .collect(),
        );
    c.call(3, request)
        .await
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// EndTxn (v3): the error code.
pub(super) async fn end(c: &mut Client, id: &str, producer: (i64, i16), commit: bool) -> i16 {
    let request = EndTxnRequest::default()
        .with_transactional_id(txn_id(id))
        .with_producer_id(ProducerId(producer.0))
        .with_producer_epoch(producer.1)
        .with_committed(commit);
    c.call(3, request).await.error_code
}

/// The offset `group` committed for partition 0 of `topic` (-1: none).
async fn committed(c: &mut Client, group: &str, topic: &str) -> i64 {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_topics(Some(vec![
            OffsetFetchRequestTopic::default()
                .with_name(name(topic))
                .with_partition_indexes(vec![0]),
        ]));
    c.call(7, request).await.topics[0].partitions[0].committed_offset
}

#[tokio::test]
async fn init_producer_id_gives_new_ids_and_bumps_the_epoch_of_a_known_producer() {
    let front = Front::start().await;
    let mut c = front.client();
    let idempotent = || InitProducerIdRequest::default().with_transactional_id(None);
    let first = c.call(4, idempotent()).await;
    let second = c.call(4, idempotent()).await;
    assert_eq!((first.error_code, first.producer_epoch), (0, 0));
    assert_eq!((second.error_code, second.producer_epoch), (0, 0));
    assert!(first.producer_id.0 >= 0);
    assert_ne!(
        first.producer_id, second.producer_id,
        "every producer its own id"
    );
    let bumped = idempotent()
        .with_producer_id(first.producer_id)
        .with_producer_epoch(0);
    let bumped = c.call(4, bumped).await;
    assert_eq!(
        (bumped.error_code, bumped.producer_id, bumped.producer_epoch),
        (0, first.producer_id, 1),
        "KIP-360: the same id at the next epoch"
    );
    front.stop().await;
}

#[tokio::test]
async fn init_producer_id_for_a_transactional_id_fences_its_older_epochs() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "t", 1).await;
    let old = producer(&mut c, "fenced").await;
    assert_eq!(old.1, 0);
    let new = producer(&mut c, "fenced").await;
    assert_eq!(new, (old.0, 1), "the same producer id at the next epoch");
    assert_eq!(
        add_partitions(&mut c, "fenced", old, &[("t", &[0])]).await,
        [("t".into(), 0, ResponseError::InvalidProducerEpoch.code())]
    );
    assert_eq!(
        end(&mut c, "fenced", old, true).await,
        ResponseError::InvalidProducerEpoch.code()
    );
    assert_eq!(
        init(&mut c, "fenced", 60_000, Some(old)).await.0,
        ResponseError::InvalidProducerEpoch.code(),
        "KIP-360 with a stale epoch"
    );
    assert_eq!(
        init(&mut c, "fenced", 60_000, Some(new)).await,
        (0, old.0, 2),
        "KIP-360 with the current epoch"
    );
    assert_eq!(
        init(&mut c, "other", 0, None).await.0,
        ResponseError::InvalidTransactionTimeout.code()
    );
    assert_eq!(
        init(&mut c, "other", 900_001, None).await.0,
        ResponseError::InvalidTransactionTimeout.code()
    );
    front.stop().await;
}

#[tokio::test]
async fn an_empty_transactional_id_is_an_invalid_request() {
    let front = Front::start().await;
    let mut c = front.client();
    assert_eq!(
        init(&mut c, "", 60_000, None).await,
        (ResponseError::InvalidRequest.code(), -1, -1)
    );
    assert_eq!(
        add_offsets(&mut c, "", (0, 0), "g").await,
        ResponseError::InvalidProducerIdMapping.code(),
        "no producer was made for it"
    );
    front.stop().await;
}

#[tokio::test]
async fn add_partitions_to_txn_refuses_unknown_ids_and_partitions() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "t", 2).await;
    let p = producer(&mut c, "adder").await;
    assert_eq!(
        add_partitions(&mut c, "stranger", p, &[("t", &[0])]).await,
        [(
            "t".into(),
            0,
            ResponseError::InvalidProducerIdMapping.code()
        )]
    );
    assert_eq!(
        add_partitions(&mut c, "adder", p, &[("t", &[0, 5]), ("ghost", &[0])]).await,
        [
            ("t".into(), 0, ResponseError::OperationNotAttempted.code()),
            ("t".into(), 5, ResponseError::UnknownTopicOrPartition.code()),
            (
                "ghost".into(),
                0,
                ResponseError::UnknownTopicOrPartition.code()
            ),
        ],
        "nothing is added when one partition is unknown"
    );
    let batch = producer_batch(&["x"], p, 0, true);
    assert_eq!(
        produce_to(&mut c, "t", batch.clone()).await.0,
        ResponseError::InvalidTxnState.code(),
        "partition 0 was not added"
    );
    assert_eq!(
        add_partitions(&mut c, "adder", p, &[("t", &[0, 1])]).await,
        [("t".into(), 0, 0), ("t".into(), 1, 0)]
    );
    assert_eq!(produce_to(&mut c, "t", batch).await, (0, 0));
    front.stop().await;
}

#[tokio::test]
async fn transactional_batches_outside_their_transaction_and_control_batches_are_refused() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "t", 1).await;
    let unknown = producer_batch(&["x"], (424_242, 0), 0, true);
    assert_eq!(
        produce_to(&mut c, "t", unknown).await.0,
        ResponseError::InvalidProducerIdMapping.code()
    );
    let p = producer(&mut c, "raw-tx").await;
    let outside = producer_batch(&["x"], p, 0, true);
    assert_eq!(
        produce_to(&mut c, "t", outside).await.0,
        ResponseError::InvalidTxnState.code()
    );
    let stale = producer_batch(&["x"], (p.0, p.1 + 1), 0, true);
    assert_eq!(
        produce_to(&mut c, "t", stale).await.0,
        ResponseError::InvalidProducerEpoch.code()
    );
    let control = bytes::Bytes::from(crate::wire::batch::marker(p.0, p.1, true, 0));
    assert_eq!(
        produce_to(&mut c, "t", control).await.0,
        ResponseError::InvalidRecord.code()
    );
    assert_eq!(
        produce_to(&mut c, "t", batch(&["ok"])).await,
        (0, 0),
        "nothing refused is in the log"
    );
    front.stop().await;
}

#[tokio::test]
async fn read_committed_fetches_skip_an_aborted_transaction_and_wait_for_an_open_one() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "ledger", 1).await;
    let p = producer(&mut c, "writer").await;
    // Offsets 0-1: an aborted transaction's batch; 2: its abort marker.
    add_partitions(&mut c, "writer", p, &[("ledger", &[0])]).await;
    assert_eq!(
        produce_to(
            &mut c,
            "ledger",
            producer_batch(&["no1", "no2"], p, 0, true)
        )
        .await,
        (0, 0)
    );
    assert_eq!(end(&mut c, "writer", p, false).await, 0);
    // 3: a committed transaction's batch; 4: its commit marker.
    add_partitions(&mut c, "writer", p, &[("ledger", &[0])]).await;
    assert_eq!(
        produce_to(&mut c, "ledger", producer_batch(&["yes"], p, 2, true)).await,
        (0, 3)
    );
    assert_eq!(end(&mut c, "writer", p, true).await, 0);
    // 5: a transaction still open.
    add_partitions(&mut c, "writer", p, &[("ledger", &[0])]).await;
    assert_eq!(
        produce_to(&mut c, "ledger", producer_batch(&["maybe"], p, 3, true)).await,
        (0, 5)
    );
    let uncommitted = fetch_until(&mut c, "ledger", 6).await;
    assert_eq!(
        (uncommitted.high_watermark, uncommitted.last_stable_offset),
        (6, 5)
    );
    let committed = fetch_with(
        &mut c,
        fetch_request("ledger", 0, 0).with_isolation_level(READ_COMMITTED),
    )
    .await;
    assert_eq!(
        (
            committed.error_code,
            committed.high_watermark,
            committed.last_stable_offset
        ),
        (0, 6, 5)
    );
    let aborted: Vec<(i64, i64)> = committed
        .aborted_transactions
        .as_ref()
        .unwrap()
        .iter()
        .map(|a| (a.producer_id.0, a.first_offset))
        .collect();
    assert_eq!(
        aborted,
        [(p.0, 0)],
        "the client is told to drop offsets 0-1"
    );
    assert_eq!(
        values(committed.records.as_ref().unwrap()),
        [(0, "no1".into()), (1, "no2".into()), (3, "yes".into())],
        "up to the last stable offset; the open transaction's batch is not returned"
    );
    let plain = fetch(&mut c, "ledger", 0).await;
    assert_eq!(
        values(plain.records.as_ref().unwrap()),
        [
            (0, "no1".into()),
            (1, "no2".into()),
            (3, "yes".into()),
            (5, "maybe".into())
        ],
        "read_uncommitted reads everything"
    );
    assert_eq!(
        list_offset(&mut c, "ledger", 0, LATEST, READ_COMMITTED)
            .await
            .offset,
        5,
        "read_committed's latest offset is the last stable one"
    );
    assert_eq!(list_offset(&mut c, "ledger", 0, LATEST, 0).await.offset, 6);
    front.stop().await;
}

#[tokio::test]
async fn offsets_committed_in_a_transaction_are_visible_only_once_it_commits() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "input", 1).await;
    let p = producer(&mut c, "processor").await;
    assert_eq!(
        txn_commit(
            &mut c,
            "processor",
            p,
            "readers",
            ("", -1),
            &[("input", 0, 1)]
        )
        .await,
        [ResponseError::InvalidTxnState.code()],
        "the group was not added to the transaction"
    );
    assert_eq!(add_offsets(&mut c, "processor", p, "readers").await, 0);
    assert_eq!(
        txn_commit(
            &mut c,
            "processor",
            p,
            "readers",
            ("", -1),
            &[("input", 0, 42), ("ghost", 0, 1)]
        )
        .await,
        [0, ResponseError::UnknownTopicOrPartition.code()]
    );
    assert_eq!(committed(&mut c, "readers", "input").await, -1, "pending");
    assert_eq!(end(&mut c, "processor", p, true).await, 0);
    assert_eq!(committed(&mut c, "readers", "input").await, 42);
    // An aborted transaction's offsets are dropped.
    add_offsets(&mut c, "processor", p, "readers").await;
    txn_commit(
        &mut c,
        "processor",
        p,
        "readers",
        ("", -1),
        &[("input", 0, 99)],
    )
    .await;
    assert_eq!(end(&mut c, "processor", p, false).await, 0);
    assert_eq!(committed(&mut c, "readers", "input").await, 42);
    assert_eq!(
        add_offsets(&mut c, "processor", (p.0, p.1 + 1), "readers").await,
        ResponseError::InvalidProducerEpoch.code()
    );
    assert_eq!(
        add_offsets(&mut c, "nobody", p, "readers").await,
        ResponseError::InvalidProducerIdMapping.code()
    );
    front.stop().await;
}

#[tokio::test]
async fn a_txn_offset_commit_naming_a_stale_group_member_is_refused() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "input", 1).await;
    let p = producer(&mut c, "zombie").await;
    add_offsets(&mut c, "zombie", p, "busy").await;
    // A group whose one member is at generation 1.
    let join = kafka_protocol::messages::JoinGroupRequest::default()
        .with_group_id(GroupId(text("busy")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(5_000)
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![
            kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                .with_name(text("range")),
        ]);
    // v3: joined at once, without being told a member id first (KIP-394 is v4+).
    let joined = c.call(3, join).await;
    let member = joined.member_id.to_string();
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    let offsets = [("input", 0, 5)];
    assert_eq!(
        txn_commit(&mut c, "zombie", p, "busy", (&member, 0), &offsets).await,
        [ResponseError::IllegalGeneration.code()]
    );
    assert_eq!(
        txn_commit(&mut c, "zombie", p, "busy", ("stranger", 1), &offsets).await,
        [ResponseError::UnknownMemberId.code()]
    );
    end(&mut c, "zombie", p, true).await;
    assert_eq!(
        committed(&mut c, "busy", "input").await,
        -1,
        "nothing was written"
    );
    front.stop().await;
}

#[tokio::test]
async fn ending_a_transaction_that_is_not_open_succeeds_as_a_retry_would() {
    let front = Front::start().await;
    let mut c = front.client();
    let p = producer(&mut c, "idle").await;
    assert_eq!(end(&mut c, "idle", p, true).await, 0);
    assert_eq!(end(&mut c, "idle", p, false).await, 0);
    assert_eq!(
        end(&mut c, "unknown", p, true).await,
        ResponseError::InvalidProducerIdMapping.code()
    );
    front.stop().await;
}
