//! Ferry's fourth patch (vendor/README.md): the share-group versions Apache Kafka 4.2 added,
//! ShareFetch v2, ShareAcknowledge v2 and DescribeShareGroupOffsets v1.
//!
//! Every new field is set at its new version and must decode back equal; the old versions
//! still round-trip and carry none of the new bytes; and the byte layouts are checked against
//! sequences written out by hand from Kafka 4.2's JSON schemas, so a field encoded in the
//! wrong place, with the wrong width or in the wrong versions fails here.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::describe_share_group_offsets_request::{
    DescribeShareGroupOffsetsRequestGroup, DescribeShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    share_acknowledge_request, share_acknowledge_response, share_fetch_request,
    share_fetch_response, ApiKey, BrokerId, DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse, GroupId, ShareAcknowledgeRequest, ShareAcknowledgeResponse,
    ShareFetchRequest, ShareFetchResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Message, StrBytes, VersionRange};
use uuid::Uuid;

fn s(value: &'static str) -> StrBytes {
    StrBytes::from_static_str(value)
}

const TOPIC: [u8; 16] = [
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
];

fn topic_id() -> Uuid {
    Uuid::from_bytes(TOPIC)
}

fn encode<M: Encodable>(message: &M, version: i16) -> Vec<u8> {
    let mut buf = BytesMut::new();
    message.encode(&mut buf, version).unwrap();
    assert_eq!(
        message.compute_size(version).unwrap(),
        buf.len(),
        "compute_size at version {version}"
    );
    buf.to_vec()
}

/// Encodes at `version`, decodes the bytes at `version` (all of them must be read) and
/// returns what came back.
fn round_trip<M: Encodable + Decodable>(message: &M, version: i16) -> M {
    let mut bytes = Bytes::from(encode(message, version));
    let decoded = M::decode(&mut bytes, version).unwrap();
    assert!(
        bytes.is_empty(),
        "{} bytes left at version {version}",
        bytes.len()
    );
    decoded
}

fn renew_fetch() -> ShareFetchRequest {
    ShareFetchRequest::default()
        .with_group_id(Some(GroupId(s("g"))))
        .with_member_id(Some(s("m")))
        .with_share_session_epoch(1)
        .with_max_wait_ms(500)
        .with_min_bytes(1)
        .with_max_records(500)
        .with_batch_size(100)
        .with_share_acquire_mode(1)
        .with_is_renew_ack(true)
        .with_topics(vec![share_fetch_request::FetchTopic::default()
            .with_topic_id(topic_id())
            .with_partitions(vec![
                share_fetch_request::FetchPartition::default()
                    .with_partition_index(3)
                    .with_acknowledgement_batches(vec![
                        share_fetch_request::AcknowledgementBatch::default()
                            .with_first_offset(10)
                            .with_last_offset(11)
                            .with_acknowledge_types(vec![4, 4]),
                    ]),
            ])])
}

/// ShareFetchRequest v2 as `ShareFetchRequest.json` lays it out (all versions flexible):
/// GroupId, MemberId, ShareSessionEpoch, MaxWaitMs, MinBytes, MaxBytes, MaxRecords (1+),
/// BatchSize (1+), ShareAcquireMode (int8, 2+), IsRenewAck (bool, 2+), Topics,
/// ForgottenTopicsData, tagged fields.
fn renew_fetch_v2_bytes() -> Vec<u8> {
    let mut b = vec![
        0x02, b'g', // GroupId: compact nullable string, length + 1
        0x02, b'm', // MemberId
        0x00, 0x00, 0x00, 0x01, // ShareSessionEpoch 1
        0x00, 0x00, 0x01, 0xf4, // MaxWaitMs 500
        0x00, 0x00, 0x00, 0x01, // MinBytes 1
        0x7f, 0xff, 0xff, 0xff, // MaxBytes, the schema's default 0x7fffffff
        0x00, 0x00, 0x01, 0xf4, // MaxRecords 500
        0x00, 0x00, 0x00, 0x64, // BatchSize 100
        0x01, // ShareAcquireMode 1 (record-limit)
        0x01, // IsRenewAck true
        0x02, // Topics: compact array of 1
    ];
    b.extend_from_slice(&TOPIC); // TopicId
    b.extend_from_slice(&[
        0x02, // Partitions: 1
        0x00, 0x00, 0x00, 0x03, // PartitionIndex 3
        0x02, // AcknowledgementBatches: 1
        0, 0, 0, 0, 0, 0, 0, 10, // FirstOffset 10
        0, 0, 0, 0, 0, 0, 0, 11, // LastOffset 11
        0x03, 0x04, 0x04, // AcknowledgeTypes [4 (Renew), 4]
        0x00, // batch tagged fields
        0x00, // partition tagged fields
        0x00, // topic tagged fields
        0x01, // ForgottenTopicsData: empty compact array
        0x00, // request tagged fields
    ]);
    b
}

#[test]
fn share_fetch_v2_carries_the_acquire_mode_and_the_renew_flag_after_batch_size() {
    let request = renew_fetch();
    assert_eq!(encode(&request, 2), renew_fetch_v2_bytes());
    assert_eq!(round_trip(&request, 2), request);

    let decoded = ShareFetchRequest::decode(&mut Bytes::from(renew_fetch_v2_bytes()), 2).unwrap();
    assert_eq!(decoded.share_acquire_mode, 1);
    assert!(decoded.is_renew_ack);
}

#[test]
fn share_fetch_v1_is_unchanged_and_refuses_the_renew_flag() {
    // Version 1 has neither field: its bytes are version 2's without those two.
    let v1 = renew_fetch()
        .with_share_acquire_mode(0)
        .with_is_renew_ack(false);
    let mut expected = renew_fetch_v2_bytes();
    expected.drain(28..30);
    assert_eq!(encode(&v1, 1), expected);
    assert_eq!(round_trip(&v1, 1), v1);

    // IsRenewAck is not ignorable: set, it cannot be sent at version 1.
    let renew = ShareFetchRequest::default().with_is_renew_ack(true);
    assert!(renew.encode(&mut BytesMut::new(), 1).is_err());
    assert!(renew.compute_size(1).is_err());

    // ShareAcquireMode is ignorable: version 1 drops it, and it decodes as its default 0.
    let record_limit = ShareFetchRequest::default().with_share_acquire_mode(1);
    assert_eq!(round_trip(&record_limit, 1).share_acquire_mode, 0);
    assert_eq!(
        encode(&record_limit, 1),
        encode(&ShareFetchRequest::default(), 1)
    );
}

#[test]
fn share_fetch_new_fields_default_as_the_schema_says() {
    let request = ShareFetchRequest::default();
    assert_eq!(request.share_acquire_mode, 0);
    assert!(!request.is_renew_ack);
    assert_eq!(round_trip(&request, 2), request);
}

#[test]
fn share_fetch_response_v2_is_the_v1_layout() {
    let response = ShareFetchResponse::default()
        .with_throttle_time_ms(7)
        .with_acquisition_lock_timeout_ms(30_000)
        .with_responses(vec![
            share_fetch_response::ShareFetchableTopicResponse::default()
                .with_topic_id(topic_id())
                .with_partitions(vec![share_fetch_response::PartitionData::default()
                    .with_partition_index(3)
                    .with_records(Some(Bytes::from_static(b"abc")))
                    .with_acquired_records(vec![
                        share_fetch_response::AcquiredRecords::default()
                            .with_first_offset(10)
                            .with_last_offset(11)
                            .with_delivery_count(2),
                    ])]),
        ])
        .with_node_endpoints(vec![share_fetch_response::NodeEndpoint::default()
            .with_node_id(BrokerId(1))
            .with_host(s("h"))
            .with_port(9092)]);
    assert_eq!(encode(&response, 2), encode(&response, 1));
    assert_eq!(round_trip(&response, 2), response);
    assert_eq!(round_trip(&response, 1), response);
}

fn renew_acknowledge() -> ShareAcknowledgeRequest {
    ShareAcknowledgeRequest::default()
        .with_group_id(Some(GroupId(s("g"))))
        .with_member_id(Some(s("m")))
        .with_share_session_epoch(2)
        .with_is_renew_ack(true)
        .with_topics(vec![share_acknowledge_request::AcknowledgeTopic::default()
            .with_topic_id(topic_id())
            .with_partitions(vec![
                share_acknowledge_request::AcknowledgePartition::default()
                    .with_partition_index(0)
                    .with_acknowledgement_batches(vec![
                        share_acknowledge_request::AcknowledgementBatch::default()
                            .with_first_offset(5)
                            .with_last_offset(5)
                            .with_acknowledge_types(vec![4]),
                    ]),
            ])])
}

/// ShareAcknowledgeRequest v2: GroupId, MemberId, ShareSessionEpoch, IsRenewAck (bool, 2+),
/// Topics, tagged fields.
fn renew_acknowledge_v2_bytes() -> Vec<u8> {
    let mut b = vec![
        0x02, b'g', // GroupId
        0x02, b'm', // MemberId
        0x00, 0x00, 0x00, 0x02, // ShareSessionEpoch 2
        0x01, // IsRenewAck true
        0x02, // Topics: 1
    ];
    b.extend_from_slice(&TOPIC);
    b.extend_from_slice(&[
        0x02, // Partitions: 1
        0x00, 0x00, 0x00, 0x00, // PartitionIndex 0
        0x02, // AcknowledgementBatches: 1
        0, 0, 0, 0, 0, 0, 0, 5, // FirstOffset 5
        0, 0, 0, 0, 0, 0, 0, 5, // LastOffset 5
        0x02, 0x04, // AcknowledgeTypes [4 (Renew)]
        0x00, 0x00, 0x00, // batch, partition, topic tagged fields
        0x00, // request tagged fields
    ]);
    b
}

#[test]
fn share_acknowledge_v2_carries_the_renew_flag_after_the_epoch() {
    let request = renew_acknowledge();
    assert_eq!(encode(&request, 2), renew_acknowledge_v2_bytes());
    assert_eq!(round_trip(&request, 2), request);

    let v1 = renew_acknowledge().with_is_renew_ack(false);
    let mut expected = renew_acknowledge_v2_bytes();
    expected.remove(8);
    assert_eq!(encode(&v1, 1), expected);
    assert_eq!(round_trip(&v1, 1), v1);

    // Not ignorable: a renew acknowledgement cannot be sent at version 1.
    assert!(renew_acknowledge().encode(&mut BytesMut::new(), 1).is_err());
    assert!(!ShareAcknowledgeRequest::default().is_renew_ack);
}

#[test]
fn share_acknowledge_response_v2_carries_the_lock_timeout_after_the_error_message() {
    let response = ShareAcknowledgeResponse::default()
        .with_throttle_time_ms(1)
        .with_acquisition_lock_timeout_ms(15_000)
        .with_responses(vec![
            share_acknowledge_response::ShareAcknowledgeTopicResponse::default()
                .with_topic_id(topic_id())
                .with_partitions(vec![share_acknowledge_response::PartitionData::default()
                    .with_partition_index(0)
                    .with_current_leader(
                        share_acknowledge_response::LeaderIdAndEpoch::default()
                            .with_leader_id(1)
                            .with_leader_epoch(4),
                    )]),
        ]);
    let mut expected = vec![
        0x00, 0x00, 0x00, 0x01, // ThrottleTimeMs 1
        0x00, 0x00, // ErrorCode 0
        0x00, // ErrorMessage null
        0x00, 0x00, 0x3a, 0x98, // AcquisitionLockTimeoutMs 15000 (2+)
        0x02, // Responses: 1
    ];
    expected.extend_from_slice(&TOPIC);
    expected.extend_from_slice(&[
        0x02, // Partitions: 1
        0x00, 0x00, 0x00, 0x00, // PartitionIndex 0
        0x00, 0x00, // ErrorCode 0
        0x00, // ErrorMessage null
        0x00, 0x00, 0x00, 0x01, // CurrentLeader.LeaderId 1
        0x00, 0x00, 0x00, 0x04, // CurrentLeader.LeaderEpoch 4
        0x00, // CurrentLeader tagged fields
        0x00, // partition tagged fields
        0x00, // topic tagged fields
        0x01, // NodeEndpoints: empty
        0x00, // response tagged fields
    ]);
    assert_eq!(encode(&response, 2), expected);
    assert_eq!(round_trip(&response, 2), response);

    // Ignorable: version 1 leaves it out and it decodes as 0.
    let mut v1_bytes = expected.clone();
    v1_bytes.drain(7..11);
    assert_eq!(encode(&response, 1), v1_bytes);
    let v1 = round_trip(&response, 1);
    assert_eq!(v1.acquisition_lock_timeout_ms, 0);
    assert_eq!(v1, response.clone().with_acquisition_lock_timeout_ms(0));
}

fn offsets_response(lag: i64) -> DescribeShareGroupOffsetsResponse {
    DescribeShareGroupOffsetsResponse::default()
        .with_throttle_time_ms(0)
        .with_groups(vec![DescribeShareGroupOffsetsResponseGroup::default()
            .with_group_id(GroupId(s("g")))
            .with_topics(vec![DescribeShareGroupOffsetsResponseTopic::default(
            )
            .with_topic_name(TopicName(s("t")))
            .with_topic_id(topic_id())
            .with_partitions(vec![
                DescribeShareGroupOffsetsResponsePartition::default()
                    .with_partition_index(1)
                    .with_start_offset(100)
                    .with_leader_epoch(2)
                    .with_lag(lag),
            ])])])
}

#[test]
fn describe_share_group_offsets_v1_carries_the_lag_after_the_leader_epoch() {
    let response = offsets_response(42);
    let mut expected = vec![
        0x00, 0x00, 0x00, 0x00, // ThrottleTimeMs 0
        0x02, // Groups: 1
        0x02, b'g', // GroupId
        0x02, // Topics: 1
        0x02, b't', // TopicName
    ];
    expected.extend_from_slice(&TOPIC); // TopicId
    expected.extend_from_slice(&[
        0x02, // Partitions: 1
        0x00, 0x00, 0x00, 0x01, // PartitionIndex 1
        0, 0, 0, 0, 0, 0, 0, 100, // StartOffset 100
        0x00, 0x00, 0x00, 0x02, // LeaderEpoch 2
        0, 0, 0, 0, 0, 0, 0, 42, // Lag 42 (int64, 1+)
        0x00, 0x00, // partition ErrorCode 0
        0x00, // partition ErrorMessage null
        0x00, // partition tagged fields
        0x00, // topic tagged fields
        0x00, 0x00, // group ErrorCode 0
        0x00, // group ErrorMessage null
        0x00, // group tagged fields
        0x00, // response tagged fields
    ]);
    assert_eq!(encode(&response, 1), expected);
    assert_eq!(round_trip(&response, 1), response);

    // Version 0 has no Lag (ignorable): its bytes are version 1's without it, and it decodes
    // as the schema's default -1.
    let mut v0_bytes = expected.clone();
    v0_bytes.drain(43..51);
    assert_eq!(encode(&response, 0), v0_bytes);
    assert_eq!(round_trip(&response, 0), offsets_response(-1));
    assert_eq!(
        DescribeShareGroupOffsetsResponsePartition::default().lag,
        -1
    );
}

#[test]
fn describe_share_group_offsets_request_v1_is_the_v0_layout() {
    let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(s("g")))
            .with_topics(Some(vec![DescribeShareGroupOffsetsRequestTopic::default()
                .with_topic_name(TopicName(s("t")))
                .with_partitions(vec![0, 1])])),
        DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(GroupId(s("all")))
            .with_topics(None),
    ]);
    assert_eq!(encode(&request, 1), encode(&request, 0));
    assert_eq!(round_trip(&request, 1), request);
    assert_eq!(round_trip(&request, 0), request);
}

#[test]
fn the_version_ranges_are_kafka_4_2s() {
    let share = VersionRange { min: 1, max: 2 };
    let offsets = VersionRange { min: 0, max: 1 };
    assert_eq!(ApiKey::ShareFetch.valid_versions(), share);
    assert_eq!(ApiKey::ShareAcknowledge.valid_versions(), share);
    assert_eq!(ApiKey::DescribeShareGroupOffsets.valid_versions(), offsets);
    assert_eq!(ShareFetchRequest::VERSIONS, share);
    assert_eq!(ShareFetchResponse::VERSIONS, share);
    assert_eq!(share_fetch_request::FetchTopic::VERSIONS, share);
    assert_eq!(ShareAcknowledgeRequest::VERSIONS, share);
    assert_eq!(ShareAcknowledgeResponse::VERSIONS, share);
    assert_eq!(DescribeShareGroupOffsetsRequest::VERSIONS, offsets);
    assert_eq!(DescribeShareGroupOffsetsResponse::VERSIONS, offsets);
    assert_eq!(
        DescribeShareGroupOffsetsResponsePartition::VERSIONS,
        offsets
    );
    // Unchanged in Kafka 4.2.
    assert_eq!(
        ApiKey::ShareGroupHeartbeat.valid_versions(),
        VersionRange { min: 1, max: 1 }
    );
    assert_eq!(
        ApiKey::ShareGroupDescribe.valid_versions(),
        VersionRange { min: 1, max: 1 }
    );
    assert_eq!(
        ApiKey::AlterShareGroupOffsets.valid_versions(),
        VersionRange { min: 0, max: 0 }
    );
    assert_eq!(
        ApiKey::DeleteShareGroupOffsets.valid_versions(),
        VersionRange { min: 0, max: 0 }
    );

    // Versions beyond them are still refused both ways.
    assert!(renew_fetch().encode(&mut BytesMut::new(), 3).is_err());
    assert!(ShareFetchRequest::decode(&mut Bytes::from(renew_fetch_v2_bytes()), 3).is_err());
    assert!(ShareFetchRequest::decode(&mut Bytes::from(renew_fetch_v2_bytes()), 0).is_err());
    assert!(renew_acknowledge().encode(&mut BytesMut::new(), 3).is_err());
    assert!(offsets_response(1).encode(&mut BytesMut::new(), 2).is_err());
}
