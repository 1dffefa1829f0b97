//! Kafka front: bytes a client sends, as size-prefixed request frames.
//!
//! Feeds: `kafka::codec::FrameDecoder` (size prefix, `kafka.max_request_size`), then
//! `kafka::codec::decode_request` with `kafka::api::supported` — the header and body of
//! every API key at every version the ApiVersions table (`kafka::api::SUPPORTED`) lists,
//! and the refusal of every other — and what the handlers parse of a decoded request
//! without the store: each produced partition's records through `batch::validate` (one
//! v2 batch, CRC-32C, size, counts, no control batch) — and first through
//! `legacy::to_batch` (Produce v0–v2's message sets of formats v0/v1) —, what a topic's
//! `compression.type` and `LogAppendTime` make of a valid batch (`append_format::conform`,
//! whose result must validate), and for a valid batch what the
//! sequencer and readers do with it once staged (`staged` encode/decode, the base-offset
//! rewrite, `marker_commits`, `first_record_at_or_after`, the bridge's
//! `decode_committed` and its mapping of each record to a stored AMQP message);
//! CreateTopics and AlterConfigs settings (`TopicConfig::parse`); CreateAcls, DeleteAcls
//! and DescribeAcls codes; SaslHandshake and SaslAuthenticate payloads.
//!
//! The handlers themselves (`kafka::api::*::handle`) need the front's `Context` (the
//! store, topics, groups, sequencers); what they do before touching it is above.
//!
//! Bound: a declared size or count costs nothing until its bytes arrived (the vendored
//! kafka-protocol checks array lengths against the bytes left), so memory stays within a
//! small multiple of the input (`-malloc_limit_mb` catches a length-driven allocation).

use bytes::BytesMut;
use ferry::fuzzing::{kafka_decode_committed, kafka_sasl_handshake, kafka_sasl_plain};
use ferry_auth::scram::exchange::ClientFirst;
use ferry_bridge::mapping::kafka_to_amqp;
use ferry_kafka::fuzzing::append_format;
use ferry_kafka::fuzzing::batch::{self, BatchHeader};
use ferry_kafka::fuzzing::legacy;
use ferry_kafka::fuzzing::staged::{self, Waiter};
use ferry_kafka::fuzzing::supported;
use ferry_kafka::fuzzing::{Acl, AclCodes, AclFilter, FilterCodes};
use ferry_kafka::fuzzing::{CompressionType, TimestampType, TopicConfig};
use ferry_kafka::fuzzing::{FrameDecoder, decode_request};
use kafka_protocol::messages::RequestKind;

/// `kafka.max_request_size`'s default.
const MAX_REQUEST: usize = 100 * 1024 * 1024;
/// The largest batch a topic accepts by default (`max.message.bytes`).
const MAX_MESSAGE_BYTES: usize = 1024 * 1024;

/// The most a batch's records may decompress to in the bridge's reads here. The daemon
/// allows `kafka.max_request_size` (100 MiB by default); 1 MiB keeps decoding within the
/// 64 MB allocation bound, so the bound checks that decoding stays proportional to it.
const MAX_DECOMPRESSED: usize = 1 << 20;

/// Feeds `data` to what this target drives; panics on what the target finds.
pub fn run(data: &[u8]) {
    let decoder = FrameDecoder::new(MAX_REQUEST);
    let mut buf = BytesMut::from(data);
    let _ = decoder.next_api(&buf);
    while let Ok(Some(frame)) = decoder.decode(&mut buf) {
        if let Ok(request) = decode_request(frame, supported) {
            on_request(request.body);
        }
    }
}

fn on_request(body: RequestKind) {
    match body {
        RequestKind::Produce(produce) => {
            for topic in produce.topic_data {
                for partition in topic.partition_data {
                    let records = partition.records.unwrap_or_default();
                    if let Ok(converted) = legacy::to_batch(&records, MAX_DECOMPRESSED) {
                        batch::validate(&converted, MAX_REQUEST)
                            .expect("a converted message set is a valid batch");
                        on_records(&converted);
                    }
                    on_records(&records);
                }
            }
        }
        RequestKind::CreateTopics(create) => {
            for topic in &create.topics {
                let _ = TopicConfig::parse(
                    topic
                        .configs
                        .iter()
                        .map(|c| (c.name.as_str(), c.value.as_ref().map(|v| v.as_str()))),
                );
            }
        }
        RequestKind::AlterConfigs(alter) => {
            for resource in &alter.resources {
                let _ = TopicConfig::parse(
                    resource
                        .configs
                        .iter()
                        .map(|c| (c.name.as_str(), c.value.as_ref().map(|v| v.as_str()))),
                );
            }
        }
        RequestKind::CreateAcls(create) => {
            for c in &create.creations {
                let _ = Acl::from_codes(&AclCodes {
                    resource_type: c.resource_type,
                    name: c.resource_name.as_str(),
                    pattern_type: c.resource_pattern_type,
                    principal: c.principal.as_str(),
                    host: c.host.as_str(),
                    operation: c.operation,
                    permission: c.permission_type,
                });
            }
        }
        RequestKind::DeleteAcls(delete) => {
            for f in &delete.filters {
                let _ = AclFilter::from_codes(&FilterCodes {
                    resource_type: f.resource_type_filter,
                    name: f.resource_name_filter.as_ref().map(|s| s.as_str()),
                    pattern_type: f.pattern_type_filter,
                    principal: f.principal_filter.as_ref().map(|s| s.as_str()),
                    host: f.host_filter.as_ref().map(|s| s.as_str()),
                    operation: f.operation,
                    permission: f.permission_type,
                });
            }
        }
        RequestKind::DescribeAcls(r) => {
            let _ = AclFilter::from_codes(&FilterCodes {
                resource_type: r.resource_type_filter,
                name: r.resource_name_filter.as_ref().map(|s| s.as_str()),
                pattern_type: r.pattern_type_filter,
                principal: r.principal_filter.as_ref().map(|s| s.as_str()),
                host: r.host_filter.as_ref().map(|s| s.as_str()),
                operation: r.operation,
                permission: r.permission_type,
            });
        }
        RequestKind::SaslHandshake(handshake) => {
            let _ = kafka_sasl_handshake(handshake);
        }
        RequestKind::SaslAuthenticate(authenticate) => {
            let _ = kafka_sasl_plain(&authenticate.auth_bytes);
            let _ = ClientFirst::parse(&authenticate.auth_bytes);
        }
        _ => {}
    }
}

/// One partition's records of a Produce request, as the produce handler checks them and,
/// when valid, as the sequencer and readers handle the staged batch.
fn on_records(records: &[u8]) {
    let _ = BatchHeader::parse(records);
    let Ok(header) = batch::validate(records, MAX_MESSAGE_BYTES) else {
        return;
    };
    let _ = (header.last_sequence(), header.newest_timestamp());
    let config = TopicConfig {
        message_timestamp_type: Some(TimestampType::LogAppendTime),
        compression_type: Some(CompressionType::Gzip),
        ..TopicConfig::default()
    };
    let bytes = bytes::Bytes::copy_from_slice(records);
    if let Ok((conformed, _)) = append_format::conform(bytes, &config, 1_000, MAX_DECOMPRESSED) {
        batch::validate(&conformed, MAX_REQUEST).expect("a conformed batch is valid");
    }
    let waiter = Waiter {
        incarnation: 1,
        token: 7,
    };
    let mut body = staged::encode(waiter, records);
    assert_eq!(staged::waiter(&body), Some(waiter));
    assert_eq!(staged::batch(&body), records);
    let stored = staged::batch_mut(&mut body);
    batch::set_base_offset(stored, 1_000);
    let _ = batch::marker_commits(stored);
    for at in [i64::MIN, 0, header.base_timestamp, i64::MAX] {
        let _ = batch::first_record_at_or_after(stored, at);
    }
    // A route from the topic to an exchange reads the batch back, maps each record and
    // stores it.
    if let Ok(read) = kafka_decode_committed(stored, 0, &[], MAX_DECOMPRESSED) {
        for record in &read.records {
            let _ = kafka_to_amqp(record, "amq.topic").message.to_stage_body();
        }
    }
}
