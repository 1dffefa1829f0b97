//! In-process tests of the Kafka API handlers, as Tansu tests its broker: each test starts
//! a front's handlers over a fresh store ([`fixture::Front`]), sends typed requests at a
//! stated API version through the codec and the dispatch, and asserts the exact typed
//! responses — no socket. One module per group of APIs; the socket tests under `tests/`
//! remain for what only a wire shows (framing, closes, real clients).
//!
//! Helpers here build the requests most tests need (a topic, a produce, a fetch, an
//! offset lookup) at the newest version Ferry answers.

mod acls;
mod admin;
mod consumer_groups;
pub(crate) use crate::test_fixture as fixture;
mod groups;
mod leader_epochs;
mod metadata;
mod produce_fetch;
mod records;
mod replicas;
mod sasl;
mod scram_credentials;
mod share_figures;
mod share_groups;
mod transaction_admin;
mod transactions;
mod versions;

use fixture::{Client, name, text};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    CreateTopicsRequest, FetchRequest, ListOffsetsRequest, ProduceRequest,
};

/// Kafka's isolation level of `read_committed` consumers.
const READ_COMMITTED: i8 = 1;

/// Creates `topic` with `partitions` and `configs`: the CreateTopics answer for it.
async fn create_topic_with(
    c: &mut Client,
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> CreatableTopicResult {
    let request = create_topics_request(topic, partitions, configs);
    let mut response = c.call(5, request).await;
    assert_eq!(response.topics.len(), 1);
    response.topics.remove(0)
}

/// A CreateTopics request of `topic` with `partitions` (one replica each) and `configs`.
fn create_topics_request(
    topic: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_timeout_ms(5_000)
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(name(topic))
                .with_num_partitions(partitions)
                .with_replication_factor(1)
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(text(k))
                                .with_value(Some(text(v)))
                        })
                        .collect(),
                ),
        ])
}

/// Creates `topic` with `partitions` and default settings.
async fn create_topic(c: &mut Client, topic: &str, partitions: i32) {
    let created = create_topic_with(c, topic, partitions, &[]).await;
    assert_eq!(created.error_code, 0, "{:?}", created.error_message);
}

/// A produce request (acks=all) of `records` to `topic`/`partition`.
fn produce_request(topic: &str, partition: i32, records: bytes::Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(partition)
                        .with_records(Some(records)),
                ]),
        ])
}

/// Produces `records` to `topic`/`partition` and waits for the answer.
async fn produce(
    c: &mut Client,
    topic: &str,
    partition: i32,
    records: bytes::Bytes,
) -> PartitionProduceResponse {
    let mut response = c.call(9, produce_request(topic, partition, records)).await;
    response.responses.remove(0).partition_responses.remove(0)
}

/// (error code, base offset) of a produce to partition 0 of `topic`.
async fn produce_to(c: &mut Client, topic: &str, records: bytes::Bytes) -> (i16, i64) {
    let p = produce(c, topic, 0, records).await;
    (p.error_code, p.base_offset)
}

/// A fetch request of `topic`/`partition` from `offset` that answers at once.
fn fetch_request(topic: &str, partition: i32, offset: i64) -> FetchRequest {
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name(topic))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(partition)
                        .with_fetch_offset(offset)
                        .with_partition_max_bytes(1 << 20),
                ]),
        ])
}

/// The answer for the one partition of a fetch of `request`.
async fn fetch_with(c: &mut Client, request: FetchRequest) -> PartitionData {
    let mut response = c.call(12, request).await;
    assert_eq!(response.error_code, 0);
    response.responses.remove(0).partitions.remove(0)
}

/// Fetches partition 0 of `topic` from `offset`, answering at once.
async fn fetch(c: &mut Client, topic: &str, offset: i64) -> PartitionData {
    fetch_with(c, fetch_request(topic, 0, offset)).await
}

/// Waits (long-polling, without sleeping) until partition 0 of `topic` has a high
/// watermark of at least `end`: its answer then.
async fn fetch_until(c: &mut Client, topic: &str, end: i64) -> PartitionData {
    let mut at = 0;
    for _ in 0..100 {
        let request = fetch_request(topic, 0, at)
            .with_max_wait_ms(5_000)
            .with_min_bytes(1);
        let p = fetch_with(c, request).await;
        assert_eq!(p.error_code, 0);
        if p.high_watermark >= end {
            return p;
        }
        at = p.high_watermark;
    }
    panic!("the high watermark of {topic} never reached {end}");
}

/// The ListOffsets answer for partition `partition` of `topic` at `timestamp`, with
/// `isolation_level`.
async fn list_offset(
    c: &mut Client,
    topic: &str,
    partition: i32,
    timestamp: i64,
    isolation_level: i8,
) -> ListOffsetsPartitionResponse {
    let request = ListOffsetsRequest::default()
        .with_isolation_level(isolation_level)
        .with_topics(vec![
            ListOffsetsTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![
                    ListOffsetsPartition::default()
                        .with_partition_index(partition)
                        .with_timestamp(timestamp),
                ]),
        ]);
    let mut response = c.call(6, request).await;
    response.topics.remove(0).partitions.remove(0)
}
