//! DeleteRecords: the log start offset moves, whole batches below it go (their bytes
//! with them), a start inside a batch still reads, and each refusal's code.

use super::acls::{client_of, guarded};
use super::fixture::{Client, Front, batch, name, values};
use super::{create_topic, fetch, list_offset, produce_to};
use crate::partition::log::Log;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::DeleteRecordsRequest;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};

/// Kafka's "earliest" and "latest offset" timestamps in ListOffsets.
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;

/// (error code, low watermark) of DeleteRecords (v2) of `topic`/`partition` before
/// `offset`.
async fn delete_records(c: &mut Client, topic: &str, partition: i32, offset: i64) -> (i16, i64) {
    let request = DeleteRecordsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![
            DeleteRecordsTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![
                    DeleteRecordsPartition::default()
                        .with_partition_index(partition)
                        .with_offset(offset),
                ]),
        ]);
    let p = c
        .call(2, request)
        .await
        .topics
        .remove(0)
        .partitions
        .remove(0);
    (p.error_code, p.low_watermark)
}

/// Bytes the log of partition 0 of `topic` counts.
async fn log_bytes(front: &Front, topic: &str) -> i64 {
    let topic = front.ctx.topics.get(topic).unwrap();
    let tx = front.ctx.db.begin().unwrap();
    Log::new(&topic.partitions[0].keys).size(&tx).await.unwrap()
}

#[tokio::test]
async fn delete_records_moves_the_log_start_and_drops_whole_batches_below_it() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "t", 1).await;
    let first = batch(&["a", "b"]);
    let first_size = first.len() as i64;
    for (records, base) in [(first, 0), (batch(&["c", "d"]), 2), (batch(&["e", "f"]), 4)] {
        assert_eq!(produce_to(&mut c, "t", records).await, (0, base));
    }
    let before = log_bytes(&front, "t").await;

    // Offset 3 is inside the second batch: the first goes, the second stays whole.
    assert_eq!(delete_records(&mut c, "t", 0, 3).await, (0, 3));
    assert_eq!(log_bytes(&front, "t").await, before - first_size);
    assert_eq!(list_offset(&mut c, "t", 0, EARLIEST, 0).await.offset, 3);
    let from_start = fetch(&mut c, "t", 3).await;
    assert_eq!(from_start.error_code, 0);
    assert_eq!(from_start.log_start_offset, 3);
    let read = values(&from_start.records.unwrap());
    assert_eq!(
        read.first(),
        Some(&(2, "c".to_owned())),
        "the batch holding 3, whole"
    );
    assert_eq!(read.last(), Some(&(5, "f".to_owned())));
    assert_eq!(
        fetch(&mut c, "t", 2).await.error_code,
        ResponseError::OffsetOutOfRange.code()
    );

    // An offset below the start changes nothing; -1 is the high watermark.
    assert_eq!(delete_records(&mut c, "t", 0, 1).await, (0, 3));
    assert_eq!(delete_records(&mut c, "t", 0, -1).await, (0, 6));
    assert_eq!(log_bytes(&front, "t").await, 0);
    assert_eq!(list_offset(&mut c, "t", 0, EARLIEST, 0).await.offset, 6);
    assert_eq!(list_offset(&mut c, "t", 0, LATEST, 0).await.offset, 6);
    // The log goes on from there.
    assert_eq!(produce_to(&mut c, "t", batch(&["g"])).await, (0, 6));
    let after = fetch(&mut c, "t", 6).await;
    assert_eq!(values(&after.records.unwrap()), vec![(6, "g".to_owned())]);
    front.stop().await;
}

#[tokio::test]
async fn delete_records_refuses_offsets_outside_the_log_unknown_partitions_and_the_unauthorized() {
    let front = guarded().await;
    let mut admin = client_of(&front, "admin");
    create_topic(&mut admin, "t", 1).await;
    assert_eq!(
        produce_to(&mut admin, "t", batch(&["a", "b"])).await,
        (0, 0)
    );
    let out_of_range = ResponseError::OffsetOutOfRange.code();
    assert_eq!(
        delete_records(&mut admin, "t", 0, 3).await,
        (out_of_range, -1)
    );
    assert_eq!(
        delete_records(&mut admin, "t", 0, -2).await,
        (out_of_range, -1)
    );
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(delete_records(&mut admin, "t", 1, 0).await, (unknown, -1));
    assert_eq!(
        delete_records(&mut admin, "missing", 0, 0).await,
        (unknown, -1)
    );
    let mut alice = client_of(&front, "alice");
    assert_eq!(
        delete_records(&mut alice, "t", 0, 1).await,
        (ResponseError::TopicAuthorizationFailed.code(), -1)
    );
    assert_eq!(list_offset(&mut admin, "t", 0, EARLIEST, 0).await.offset, 0);
    front.stop().await;
}
