//! Leader epochs (KIP-101, KIP-320) through rdkafka and raw requests: a restart of the
//! instance that sequences a partition starts a new leader epoch; Metadata names it, the
//! batches appended carry it, OffsetForLeaderEpoch answers where the old one ended, requests
//! naming another epoch are fenced, and an rdkafka consumer — which validates its position
//! with OffsetForLeaderEpoch when it sees the epoch change — reads on across the restart
//! without resetting its position.

use crate::common::fronts::KafkaServer;
use crate::common::kafka::raw::Raw;
use crate::common::kafka::{PATIENCE, consumer, producer, send_range};
use crate::raw::name;
use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, FetchRequest, MetadataRequest, OffsetForLeaderEpochRequest, ResponseKind,
};
use rdkafka::Message;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};

/// The topic (one partition).
const TOPIC: &str = "epochs";

/// The partition's leader epoch as Metadata names it.
async fn leader_epoch(ferry: &KafkaServer) -> i32 {
    let mut raw = Raw::connect(ferry.addr).await;
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name(TOPIC))),
    ]));
    let ResponseKind::Metadata(r) = raw.request(ApiKey::Metadata, 12, &request).await else {
        panic!("a Metadata answer");
    };
    r.topics[0].partitions[0].leader_epoch
}

/// OffsetForLeaderEpoch for `epoch`, by a client that knows `current` (-1: none): (error
/// code, epoch, end offset).
async fn end_offset(ferry: &KafkaServer, epoch: i32, current: i32) -> (i16, i32, i64) {
    let mut raw = Raw::connect(ferry.addr).await;
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id((-1).into())
        .with_topics(vec![
            OffsetForLeaderTopic::default()
                .with_topic(name(TOPIC))
                .with_partitions(vec![
                    OffsetForLeaderPartition::default()
                        .with_partition(0)
                        .with_current_leader_epoch(current)
                        .with_leader_epoch(epoch),
                ]),
        ]);
    let ResponseKind::OffsetForLeaderEpoch(r) =
        raw.request(ApiKey::OffsetForLeaderEpoch, 4, &request).await
    else {
        panic!("an OffsetForLeaderEpoch answer");
    };
    let p = &r.topics[0].partitions[0];
    (p.error_code, p.leader_epoch, p.end_offset)
}

/// The partition from offset 0, fetched by a client that knows leader epoch `current`.
async fn fetch(ferry: &KafkaServer, current: i32) -> PartitionData {
    let mut raw = Raw::connect(ferry.addr).await;
    let request = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(name(TOPIC))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(1 << 20)
                        .with_current_leader_epoch(current),
                ]),
        ]);
    let ResponseKind::Fetch(r) = raw.request(ApiKey::Fetch, 12, &request).await else {
        panic!("a Fetch answer");
    };
    r.responses[0].partitions[0].clone()
}

/// (base offset, partition leader epoch) of each v2 batch in `records`.
fn batch_epochs(records: &Bytes) -> Vec<(i64, i32)> {
    let mut out = Vec::new();
    let mut rest = &records[..];
    while rest.len() >= 16 {
        let base = i64::from_be_bytes(rest[..8].try_into().unwrap());
        let length = i32::from_be_bytes(rest[8..12].try_into().unwrap()) as usize;
        out.push((base, i32::from_be_bytes(rest[12..16].try_into().unwrap())));
        rest = &rest[(12 + length).min(rest.len())..];
    }
    out
}

/// Reads the records `from..to` with `c`, failing on any other. Errors the client reports
/// while the broker restarts (its connection failing) are passed over.
async fn read_range(c: &StreamConsumer, from: usize, to: usize) {
    let mut expected = from;
    while expected < to {
        let m = match tokio::time::timeout(PATIENCE, c.recv()).await {
            Ok(Ok(m)) => m,
            Ok(Err(KafkaError::MessageConsumption(
                RDKafkaErrorCode::BrokerTransportFailure | RDKafkaErrorCode::AllBrokersDown,
            ))) => continue,
            Ok(Err(e)) => panic!("record {expected}: {e}"),
            Err(_) => panic!("record {expected} within {PATIENCE:?}"),
        };
        let value: usize = std::str::from_utf8(m.payload().unwrap())
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(
            value, expected,
            "records in order, none read again (a position reset would re-read from 0)"
        );
        expected += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_starts_a_leader_epoch_that_clients_see_and_read_across() {
    let mut ferry = KafkaServer::start_with(|c| c.default_partitions = 1).await;
    let p = producer(&ferry.bootstrap(), &[]);
    send_range(&p, TOPIC, 0, 10).await;
    let first = leader_epoch(&ferry).await;
    assert!(
        first >= 1,
        "a sequenced partition has an epoch, not {first}"
    );
    let c = consumer(&ferry.bootstrap(), "epochs", &[]);
    c.subscribe(&[TOPIC]).unwrap();
    read_range(&c, 0, 10).await;

    ferry.restart().await;
    let second = leader_epoch(&ferry).await;
    assert_eq!(
        second,
        first + 1,
        "the restarted sequencer's claim bumps it"
    );
    send_range(&p, TOPIC, 10, 20).await;
    // rdkafka sees the new epoch in Metadata and validates its position (10) with
    // OffsetForLeaderEpoch(first) before it fetches on; an end offset below 10 would make it
    // reset to the earliest offset and read 0.. again.
    read_range(&c, 10, 20).await;

    assert_eq!(end_offset(&ferry, first, second).await, (0, first, 10));
    assert_eq!(end_offset(&ferry, second, -1).await, (0, second, 20));
    assert_eq!(
        end_offset(&ferry, first, first).await.0,
        ResponseError::FencedLeaderEpoch.code(),
        "a client that has not seen the new epoch is fenced"
    );
    assert_eq!(
        end_offset(&ferry, first, second + 1).await.0,
        ResponseError::UnknownLeaderEpoch.code()
    );

    let fetched = fetch(&ferry, second).await;
    assert_eq!(fetched.error_code, 0);
    let epochs = batch_epochs(fetched.records.as_ref().unwrap());
    assert!(!epochs.is_empty());
    for (base, epoch) in epochs {
        let written_in = if base < 10 { first } else { second };
        assert_eq!(
            epoch, written_in,
            "the batch at {base} carries its leader's epoch"
        );
    }
    assert_eq!(
        fetch(&ferry, first).await.error_code,
        ResponseError::FencedLeaderEpoch.code()
    );
    assert_eq!(
        fetch(&ferry, second + 1).await.error_code,
        ResponseError::UnknownLeaderEpoch.code()
    );
    drop(c);
    ferry.stop().await;
}
