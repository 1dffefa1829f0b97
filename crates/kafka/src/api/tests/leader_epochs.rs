//! Leader epochs (KIP-320) in one sequencer's life: Metadata names the epoch of the
//! partition's first claim, ListOffsets the epoch that wrote an offset, OffsetForLeaderEpoch
//! answers as Kafka's leader epoch cache (the end of the current epoch is the log end; an
//! older epoch ends where the first recorded one begins), and requests naming another epoch
//! are fenced. A restart's new epoch is covered through rdkafka in `tests/kafka/`.

use super::fixture::{Front, batch, name};
use super::{create_topic, fetch, fetch_request, fetch_with, list_offset, produce_to};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::MetadataRequest;
use kafka_protocol::messages::OffsetForLeaderEpochRequest;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};

/// ListOffsets' "latest" timestamp.
const LATEST: i64 = -1;

/// (error code, epoch, end offset) answering `epoch` of `topic`'s partition `partition`
/// for a client that knows `current`, at `version`.
async fn end_offset(
    c: &mut super::fixture::Client,
    version: i16,
    (topic, partition): (&str, i32),
    epoch: i32,
    current: i32,
) -> (i16, i32, i64) {
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![
            OffsetForLeaderTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![
                    OffsetForLeaderPartition::default()
                        .with_partition(partition)
                        .with_current_leader_epoch(current)
                        .with_leader_epoch(epoch),
                ]),
        ]);
    let r = c.call(version, request).await;
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.leader_epoch, p.end_offset)
}

#[tokio::test]
async fn one_sequencers_epoch_is_named_stamped_and_answered() {
    let front = Front::start_with(|c| c.max_message_bytes = 8 << 20).await;
    let mut c = front.client();
    create_topic(&mut c, "epochs", 1).await;
    assert_eq!(
        produce_to(&mut c, "epochs", batch(&["a", "b"])).await,
        (0, 0)
    );
    // Above the spill threshold: kept in a spill, its epoch stamped when it is read.
    let large = "x".repeat(crate::partition::large::SPILL_ABOVE + 1);
    assert_eq!(produce_to(&mut c, "epochs", batch(&[&large])).await, (0, 2));
    let spilled = fetch(&mut c, "epochs", 2).await.records.unwrap();
    assert_eq!(
        &spilled[..8],
        &2i64.to_be_bytes(),
        "the spilled batch's base offset"
    );
    assert_eq!(
        &spilled[12..16],
        &1i32.to_be_bytes(),
        "and its leader epoch"
    );
    assert_eq!(produce_to(&mut c, "epochs", batch(&["c"])).await, (0, 3));

    let metadata = c
        .call(
            12,
            MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name("epochs"))),
            ])),
        )
        .await;
    assert_eq!(metadata.topics[0].partitions[0].leader_epoch, 1);

    let mut request = fetch_request("epochs", 0, 0);
    request.topics[0].partitions[0].current_leader_epoch = 1;
    let p = fetch_with(&mut c, request).await;
    assert_eq!(p.error_code, 0);
    let records = p.records.unwrap();
    assert_eq!(
        &records[12..16],
        &1i32.to_be_bytes(),
        "stamped with epoch 1"
    );

    let latest = list_offset(&mut c, "epochs", 0, LATEST, 0).await;
    assert_eq!((latest.offset, latest.leader_epoch), (4, 1));

    for version in [2, 3, 4] {
        let at = ("epochs", 0);
        assert_eq!(
            end_offset(&mut c, version, at, 1, 1).await,
            (0, 1, 4),
            "v{version}"
        );
        assert_eq!(end_offset(&mut c, version, at, 1, -1).await, (0, 1, 4));
        // Older than every record: the epoch asked, ending where the first record begins.
        assert_eq!(end_offset(&mut c, version, at, 0, -1).await, (0, 0, 0));
        // Newer than every record, asked without a current epoch: undefined, no error.
        assert_eq!(end_offset(&mut c, version, at, 5, -1).await, (0, -1, -1));
        assert_eq!(
            end_offset(&mut c, version, at, 1, 0).await.0,
            ResponseError::FencedLeaderEpoch.code()
        );
        assert_eq!(
            end_offset(&mut c, version, at, 1, 2).await.0,
            ResponseError::UnknownLeaderEpoch.code()
        );
        assert_eq!(
            end_offset(&mut c, version, ("epochs", 7), 1, -1).await.0,
            ResponseError::UnknownTopicOrPartition.code()
        );
    }
    front.stop().await;
}
