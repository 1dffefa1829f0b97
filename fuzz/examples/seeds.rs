//! Writes the seed inputs of every fuzz target into `fuzz/corpus/TARGET/seed-*`: real
//! AMQP frame sequences as clients send them, one Kafka request per API and version Ferry
//! serves (encoded with kafka-protocol, produce requests carrying real record batches in
//! every codec), SASL messages, every stored record kind as Ferry encodes it,
//! `config/ferry.toml` with a few variants, stream protocol sessions both ways, and AMQP 1.0
//! messages and values.
//!
//!     cargo run --manifest-path fuzz/Cargo.toml --example seeds
//!
//! `scripts/fuzz.sh seeds` runs it (and minimizes the corpora after); the seeds are
//! deterministic, so running it again changes nothing.

use amq_protocol::protocol::{AMQPClass, basic, channel, confirm, connection, exchange, queue};
use amq_protocol::types::{AMQPValue, DecimalValue, FieldArray, FieldTable};
use bytes::{Bytes, BytesMut};
use ferry_amqp::Exchange;
use ferry_amqp::StoredMessage;
use ferry_amqp::codec::{encode_content, encode_method, encode_properties};
use ferry_amqp::encode_table;
use ferry_amqp::{QueueRecord, encode_exchange};
use ferry_kafka::fuzzing::Lease;
use ferry_kafka::fuzzing::SUPPORTED;
use ferry_kafka::fuzzing::batch;
use ferry_kafka::fuzzing::staged::{self, Waiter};
use ferry_kafka::fuzzing::{CommittedOffset, encode_offset};
use ferry_kafka::fuzzing::{ProducerState, WrittenBatch};
use ferry_stage::{DeadLetter, DeadLetterReason, Envelope, StageMeta};
use foundationdb_tuple::pack;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use std::path::{Path, PathBuf};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut n = 0;
    for (target, seeds) in [
        ("amqp_frames", amqp_frames()),
        ("kafka_requests", kafka_requests()),
        ("sasl", sasl()),
        ("stored_records", stored_records()),
        ("config", config()),
        ("stream_frames", stream_frames()),
        ("amqp10_messages", amqp10_messages()),
    ] {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("the corpus directory can be made");
        for (name, bytes) in seeds {
            let path: PathBuf = dir.join(format!("seed-{name}"));
            std::fs::write(&path, bytes).expect("a seed can be written");
            n += 1;
        }
    }
    println!("wrote {n} seeds under {}", root.display());
}

// ---- AMQP --------------------------------------------------------------------------

fn method(out: &mut Vec<u8>, channel: u16, m: AMQPClass) {
    encode_method(out, channel, m);
}

fn table(entries: &[(&str, AMQPValue)]) -> FieldTable {
    let mut t = FieldTable::default();
    for (k, v) in entries {
        t.insert((*k).into(), v.clone());
    }
    t
}

fn handshake(out: &mut Vec<u8>, mechanism: &str, response: &[u8]) {
    let capabilities = table(&[
        ("publisher_confirms", AMQPValue::Boolean(true)),
        ("consumer_cancel_notify", AMQPValue::Boolean(true)),
        ("connection.blocked", AMQPValue::Boolean(true)),
    ]);
    let properties = table(&[
        ("product", AMQPValue::LongString("pika".into())),
        ("capabilities", AMQPValue::FieldTable(capabilities)),
    ]);
    method(
        out,
        0,
        AMQPClass::Connection(connection::AMQPMethod::StartOk(connection::StartOk {
            client_properties: properties,
            mechanism: mechanism.into(),
            response: String::from_utf8_lossy(response).into_owned().into(),
            locale: "en_US".into(),
        })),
    );
    method(
        out,
        0,
        AMQPClass::Connection(connection::AMQPMethod::TuneOk(connection::TuneOk {
            channel_max: 2047,
            frame_max: 8192,
            heartbeat: 60,
        })),
    );
    method(
        out,
        0,
        AMQPClass::Connection(connection::AMQPMethod::Open(connection::Open {
            virtual_host: "/".into(),
        })),
    );
    method(
        out,
        1,
        AMQPClass::Channel(channel::AMQPMethod::Open(channel::Open {})),
    );
}

fn publish(out: &mut Vec<u8>, channel: u16, properties: &basic::AMQPProperties, body: &[u8]) {
    method(
        out,
        channel,
        AMQPClass::Basic(basic::AMQPMethod::Publish(basic::Publish {
            exchange: "amq.topic".into(),
            routing_key: "orders.eu".into(),
            mandatory: true,
            immediate: false,
        })),
    );
    encode_content(out, channel, &encode_properties(properties), body, 4096);
}

fn rich_properties() -> basic::AMQPProperties {
    let headers = table(&[
        ("x-delay", AMQPValue::LongLongInt(5_000)),
        ("s", AMQPValue::LongString("text".into())),
        ("f", AMQPValue::Double(1.5)),
        (
            "d",
            AMQPValue::DecimalValue(DecimalValue {
                scale: 2,
                value: 12345,
            }),
        ),
        (
            "a",
            AMQPValue::FieldArray(FieldArray::from(vec![
                AMQPValue::Boolean(true),
                AMQPValue::ShortInt(-3),
            ])),
        ),
        ("t", AMQPValue::Timestamp(1_700_000_000)),
        ("v", AMQPValue::Void),
        ("b", AMQPValue::ByteArray(vec![0, 1, 2].into())),
    ]);
    basic::AMQPProperties::default()
        .with_content_type("application/json".into())
        .with_delivery_mode(2)
        .with_priority(5)
        .with_expiration("60000".into())
        .with_message_id("m-1".into())
        .with_correlation_id("c-1".into())
        .with_reply_to("amq.rabbitmq.reply-to".into())
        .with_timestamp(1_700_000_000)
        .with_headers(headers)
}

fn amqp_frames() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    // [frame_max selector, max_message_size selector, chunk, stream…]
    let mut with = |name: &str, prefix: [u8; 3], stream: Vec<u8>| {
        let mut input = prefix.to_vec();
        input.extend_from_slice(&stream);
        seeds.push((name.to_owned(), input));
    };

    let mut full = Vec::new();
    handshake(&mut full, "PLAIN", b"\0guest\0guest");
    method(
        &mut full,
        1,
        AMQPClass::Confirm(confirm::AMQPMethod::Select(confirm::Select {
            nowait: false,
        })),
    );
    method(
        &mut full,
        1,
        AMQPClass::Queue(queue::AMQPMethod::Declare(queue::Declare {
            queue: "orders".into(),
            durable: true,
            arguments: table(&[
                ("x-max-priority", AMQPValue::ShortShortUInt(10)),
                ("x-message-ttl", AMQPValue::LongInt(60_000)),
                (
                    "x-dead-letter-exchange",
                    AMQPValue::LongString("dlx".into()),
                ),
                (
                    "x-dead-letter-routing-key",
                    AMQPValue::LongString("dead".into()),
                ),
                ("x-max-length", AMQPValue::LongLongInt(1000)),
                ("x-overflow", AMQPValue::LongString("reject-publish".into())),
                ("x-queue-type", AMQPValue::LongString("quorum".into())),
                ("x-delivery-limit", AMQPValue::LongInt(3)),
                ("x-expires", AMQPValue::LongInt(3_600_000)),
                ("x-single-active-consumer", AMQPValue::Boolean(true)),
            ]),
            ..Default::default()
        })),
    );
    method(
        &mut full,
        1,
        AMQPClass::Exchange(exchange::AMQPMethod::Declare(exchange::Declare {
            exchange: "later".into(),
            kind: "x-delayed-message".into(),
            durable: true,
            arguments: table(&[("x-delayed-type", AMQPValue::LongString("topic".into()))]),
            ..Default::default()
        })),
    );
    publish(&mut full, 1, &rich_properties(), &[b'x'; 5000]);
    publish(&mut full, 1, &basic::AMQPProperties::default(), b"");
    full.extend_from_slice(&ferry_amqp::codec::HEARTBEAT);
    method(
        &mut full,
        1,
        AMQPClass::Basic(basic::AMQPMethod::Ack(basic::Ack {
            delivery_tag: 1,
            multiple: true,
        })),
    );
    method(
        &mut full,
        1,
        AMQPClass::Channel(channel::AMQPMethod::Close(channel::Close {
            reply_code: 200,
            reply_text: "bye".into(),
            class_id: 0,
            method_id: 0,
        })),
    );
    method(
        &mut full,
        0,
        AMQPClass::Connection(connection::AMQPMethod::Close(connection::Close {
            reply_code: 200,
            reply_text: "bye".into(),
            class_id: 0,
            method_id: 0,
        })),
    );
    with("session", [2, 2, 0], full.clone());
    with("session-bytewise", [0, 2, 1], full.clone());
    with("session-chunks-7", [1, 1, 7], full);

    let mut amqplain = Vec::new();
    let login = table(&[
        ("LOGIN", AMQPValue::LongString("guest".into())),
        ("PASSWORD", AMQPValue::LongString("guest".into())),
    ]);
    let encoded = encode_table(&login);
    handshake(&mut amqplain, "AMQPLAIN", &encoded[4..]);
    publish(&mut amqplain, 1, &basic::AMQPProperties::default(), b"hi");
    with("amqplain", [2, 2, 0], amqplain);

    let mut too_big = Vec::new();
    handshake(&mut too_big, "PLAIN", b"\0guest\0guest");
    publish(
        &mut too_big,
        1,
        &basic::AMQPProperties::default(),
        &[0; 100],
    );
    with("over-max-message-size", [2, 0, 0], too_big);

    let mut out_of_order = Vec::new();
    encode_content(
        &mut out_of_order,
        3,
        &encode_properties(&Default::default()),
        b"orphan",
        4096,
    );
    method(
        &mut out_of_order,
        3,
        AMQPClass::Basic(basic::AMQPMethod::Publish(basic::Publish::default())),
    );
    method(
        &mut out_of_order,
        3,
        AMQPClass::Basic(basic::AMQPMethod::Qos(basic::Qos {
            prefetch_count: 10,
            ..Default::default()
        })),
    );
    with("content-out-of-order", [2, 2, 0], out_of_order);

    // A frame declaring more than frame_max, and an unknown method.
    with(
        "oversized-frame",
        [0, 2, 0],
        vec![3, 0, 1, 0x7f, 0xff, 0xff, 0xff],
    );
    with(
        "unknown-method",
        [2, 2, 0],
        vec![1, 0, 1, 0, 0, 0, 4, 0, 60, 0, 99, 0xce],
    );
    seeds
}

// ---- Kafka --------------------------------------------------------------------------

fn record_batch(compression: Compression, transactional: bool, headers: bool) -> Bytes {
    let records: Vec<Record> = (0..3)
        .map(|i| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: if transactional { 7 } else { -1 },
            producer_epoch: if transactional { 0 } else { -1 },
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: if transactional { i as i32 } else { -1 },
            timestamp: 1_700_000_000_000 + i,
            key: Some(Bytes::from(format!("k{i}"))),
            value: (i != 2).then(|| Bytes::from(format!("value {i}").repeat(8))),
            headers: if headers {
                vec![
                    (
                        StrBytes::from_static_str("source"),
                        Some(Bytes::from_static(b"kcat")),
                    ),
                    (StrBytes::from_static_str("source"), None),
                    (
                        StrBytes::from_static_str("amqp.routing-key"),
                        Some(Bytes::from_static(b"orders")),
                    ),
                ]
            } else {
                Vec::new()
            },
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("records encode");
    buf.freeze()
}

const CODECS: [(&str, Compression); 5] = [
    ("none", Compression::None),
    ("gzip", Compression::Gzip),
    ("snappy", Compression::Snappy),
    ("lz4", Compression::Lz4),
    ("zstd", Compression::Zstd),
];

fn s(text: &'static str) -> StrBytes {
    StrBytes::from_static_str(text)
}

fn body(api: ApiKey, version: i16, codec: Compression) -> RequestKind {
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let topic = || TopicName(s("orders"));
    match api {
        ApiKey::Produce => RequestKind::Produce(
            ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(30_000)
                .with_topic_data(vec![
                    TopicProduceData::default()
                        .with_name(topic())
                        .with_partition_data(vec![
                            PartitionProduceData::default()
                                .with_index(0)
                                .with_records(Some(record_batch(codec, false, true))),
                        ]),
                ]),
        ),
        ApiKey::Fetch => RequestKind::Fetch(FetchRequest::default().with_max_wait_ms(500)),
        ApiKey::ListOffsets => RequestKind::ListOffsets(ListOffsetsRequest::default()),
        ApiKey::Metadata => {
            RequestKind::Metadata(MetadataRequest::default().with_topics(Some(vec![
                metadata_request::MetadataRequestTopic::default().with_name(Some(topic())),
            ])))
        }
        ApiKey::OffsetCommit => {
            RequestKind::OffsetCommit(OffsetCommitRequest::default().with_group_id(GroupId(s("g"))))
        }
        ApiKey::OffsetFetch => {
            RequestKind::OffsetFetch(OffsetFetchRequest::default().with_group_id(GroupId(s("g"))))
        }
        // Version 4 asks for many keys at once instead of one.
        ApiKey::FindCoordinator if version >= 4 => RequestKind::FindCoordinator(
            FindCoordinatorRequest::default().with_coordinator_keys(vec![s("g")]),
        ),
        ApiKey::FindCoordinator => {
            RequestKind::FindCoordinator(FindCoordinatorRequest::default().with_key(s("g")))
        }
        ApiKey::JoinGroup => RequestKind::JoinGroup(
            JoinGroupRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(30_000)
                .with_protocol_type(s("consumer"))
                .with_protocols(vec![
                    join_group_request::JoinGroupRequestProtocol::default()
                        .with_name(s("range"))
                        .with_metadata(Bytes::from_static(b"\0\0\0\0\0\x01\0\x06orders")),
                ]),
        ),
        ApiKey::Heartbeat => {
            RequestKind::Heartbeat(HeartbeatRequest::default().with_group_id(GroupId(s("g"))))
        }
        ApiKey::LeaveGroup => {
            RequestKind::LeaveGroup(LeaveGroupRequest::default().with_group_id(GroupId(s("g"))))
        }
        ApiKey::SyncGroup => {
            RequestKind::SyncGroup(SyncGroupRequest::default().with_group_id(GroupId(s("g"))))
        }
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(
            DescribeGroupsRequest::default().with_groups(vec![GroupId(s("g"))]),
        ),
        ApiKey::ListGroups => RequestKind::ListGroups(ListGroupsRequest::default()),
        ApiKey::SaslHandshake => RequestKind::SaslHandshake(
            SaslHandshakeRequest::default().with_mechanism(s("SCRAM-SHA-256")),
        ),
        ApiKey::ApiVersions => RequestKind::ApiVersions(
            ApiVersionsRequest::default()
                .with_client_software_name(s("librdkafka"))
                .with_client_software_version(s("2.3.0")),
        ),
        ApiKey::CreateTopics => {
            RequestKind::CreateTopics(CreateTopicsRequest::default().with_topics(
                vec![CreatableTopic::default()
                .with_name(topic())
                .with_num_partitions(3)
                .with_replication_factor(1)
                .with_configs(vec![
                    CreatableTopicConfig::default()
                        .with_name(s("retention.ms"))
                        .with_value(Some(s("86400000"))),
                    CreatableTopicConfig::default()
                        .with_name(s("cleanup.policy"))
                        .with_value(Some(s("delete"))),
                ])],
            ))
        }
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(
            DeleteTopicsRequest::default().with_topic_names(vec![topic()]),
        ),
        ApiKey::InitProducerId => RequestKind::InitProducerId(
            InitProducerIdRequest::default().with_transaction_timeout_ms(60_000),
        ),
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(DescribeConfigsRequest::default()),
        ApiKey::AlterConfigs => {
            RequestKind::AlterConfigs(AlterConfigsRequest::default().with_resources(vec![
                alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("orders"))
                    .with_configs(vec![alter_configs_request::AlterableConfig::default()
                        .with_name(s("max.message.bytes"))
                        .with_value(Some(s("1048576")))]),
            ]))
        }
        ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(
            SaslAuthenticateRequest::default()
                .with_auth_bytes(Bytes::from_static(b"n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL")),
        ),
        ApiKey::CreatePartitions => {
            RequestKind::CreatePartitions(CreatePartitionsRequest::default())
        }
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(
            DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s("g"))]),
        ),
        ApiKey::AddPartitionsToTxn => {
            RequestKind::AddPartitionsToTxn(AddPartitionsToTxnRequest::default())
        }
        ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(AddOffsetsToTxnRequest::default()),
        ApiKey::EndTxn => RequestKind::EndTxn(EndTxnRequest::default().with_committed(true)),
        ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(TxnOffsetCommitRequest::default()),
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(
            DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_pattern_type_filter(1)
                .with_operation(1)
                .with_permission_type(1),
        ),
        ApiKey::CreateAcls => RequestKind::CreateAcls(CreateAclsRequest::default().with_creations(
            vec![AclCreation::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_resource_pattern_type(3)
                .with_principal(s("User:alice"))
                .with_host(s("*"))
                .with_operation(3)
                .with_permission_type(3)],
        )),
        ApiKey::DeleteAcls => {
            RequestKind::DeleteAcls(DeleteAclsRequest::default().with_filters(vec![
                delete_acls_request::DeleteAclsFilter::default()
                    .with_resource_type_filter(1)
                    .with_pattern_type_filter(1)
                    .with_operation(1)
                    .with_permission_type(1),
            ]))
        }
        // The rest with every field at its default: a valid request to start from.
        ApiKey::AlterPartitionReassignments => {
            RequestKind::AlterPartitionReassignments(AlterPartitionReassignmentsRequest::default())
        }
        ApiKey::AlterReplicaLogDirs => {
            RequestKind::AlterReplicaLogDirs(AlterReplicaLogDirsRequest::default())
        }
        ApiKey::AlterShareGroupOffsets => {
            RequestKind::AlterShareGroupOffsets(AlterShareGroupOffsetsRequest::default())
        }
        ApiKey::AlterUserScramCredentials => {
            RequestKind::AlterUserScramCredentials(AlterUserScramCredentialsRequest::default())
        }
        ApiKey::ConsumerGroupDescribe => {
            RequestKind::ConsumerGroupDescribe(ConsumerGroupDescribeRequest::default())
        }
        ApiKey::ConsumerGroupHeartbeat => {
            RequestKind::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest::default())
        }
        ApiKey::DeleteRecords => RequestKind::DeleteRecords(DeleteRecordsRequest::default()),
        ApiKey::DeleteShareGroupOffsets => {
            RequestKind::DeleteShareGroupOffsets(DeleteShareGroupOffsetsRequest::default())
        }
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(DescribeClusterRequest::default()),
        ApiKey::DescribeLogDirs => RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default()),
        ApiKey::DescribeProducers => {
            RequestKind::DescribeProducers(DescribeProducersRequest::default())
        }
        ApiKey::DescribeShareGroupOffsets => {
            RequestKind::DescribeShareGroupOffsets(DescribeShareGroupOffsetsRequest::default())
        }
        ApiKey::DescribeTransactions => {
            RequestKind::DescribeTransactions(DescribeTransactionsRequest::default())
        }
        ApiKey::DescribeUserScramCredentials => {
            RequestKind::DescribeUserScramCredentials(DescribeUserScramCredentialsRequest::default())
        }
        ApiKey::ElectLeaders => RequestKind::ElectLeaders(ElectLeadersRequest::default()),
        ApiKey::IncrementalAlterConfigs => {
            RequestKind::IncrementalAlterConfigs(IncrementalAlterConfigsRequest::default())
        }
        ApiKey::ListPartitionReassignments => {
            RequestKind::ListPartitionReassignments(ListPartitionReassignmentsRequest::default())
        }
        ApiKey::ListTransactions => {
            RequestKind::ListTransactions(ListTransactionsRequest::default())
        }
        ApiKey::OffsetDelete => RequestKind::OffsetDelete(OffsetDeleteRequest::default()),
        ApiKey::OffsetForLeaderEpoch => {
            RequestKind::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest::default())
        }
        ApiKey::ShareAcknowledge => {
            RequestKind::ShareAcknowledge(ShareAcknowledgeRequest::default())
        }
        ApiKey::ShareFetch => RequestKind::ShareFetch(ShareFetchRequest::default()),
        ApiKey::ShareGroupDescribe => {
            RequestKind::ShareGroupDescribe(ShareGroupDescribeRequest::default())
        }
        ApiKey::ShareGroupHeartbeat => {
            RequestKind::ShareGroupHeartbeat(ShareGroupHeartbeatRequest::default())
        }
        other => panic!("no seed body for {other:?}"),
    }
}

fn request_frame(api: ApiKey, version: i16, body: &RequestKind) -> Option<Vec<u8>> {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(s("rdkafka")))
        .encode(&mut buf, api.request_header_version(version))
        .ok()?;
    body.encode(&mut buf, version).ok()?;
    let mut frame = (buf.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&buf);
    Some(frame)
}

fn kafka_requests() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    for &(api, min, max) in SUPPORTED {
        for version in min..=max {
            let codecs: &[(&str, Compression)] = if api == ApiKey::Produce {
                &CODECS
            } else {
                &CODECS[..1]
            };
            for (codec_name, codec) in codecs {
                if let Some(frame) = request_frame(api, version, &body(api, version, *codec)) {
                    let suffix = if api == ApiKey::Produce {
                        format!("-{codec_name}")
                    } else {
                        String::new()
                    };
                    seeds.push((format!("{api:?}-v{version}{suffix}"), frame));
                }
            }
        }
    }
    // Two requests pipelined in one read, and an unsupported version.
    let metadata = body(ApiKey::Metadata, 12, Compression::None);
    let mut two = request_frame(
        ApiKey::ApiVersions,
        3,
        &body(ApiKey::ApiVersions, 3, Compression::None),
    )
    .expect("ApiVersions v3 encodes");
    two.extend(request_frame(ApiKey::Metadata, 12, &metadata).expect("Metadata v12 encodes"));
    seeds.push(("pipelined".into(), two));
    seeds.push((
        "unsupported-version".into(),
        request_frame(ApiKey::Metadata, 13, &metadata).unwrap_or_default(),
    ));
    seeds
}

// ---- SASL ---------------------------------------------------------------------------

fn sasl() -> Vec<(String, Vec<u8>)> {
    let with = |selector: u8, bytes: &[u8]| {
        let mut v = vec![selector];
        v.extend_from_slice(bytes);
        v
    };
    let login = table(&[
        ("LOGIN", AMQPValue::LongString("guest".into())),
        ("PASSWORD", AMQPValue::LongString("guest".into())),
    ]);
    let credential =
        ferry_auth::scram::ScramCredential::new(ferry_auth::scram::Mechanism::Sha256, "pw", 4096);
    vec![
        ("amqp-plain".into(), with(0, b"\0guest\0guest")),
        ("amqp-amqplain".into(), with(1, &encode_table(&login)[4..])),
        ("amqp-external".into(), with(2, b"CN=alice,O=Example\0alice\0alice.example.com\0alice@example.com")),
        ("kafka-plain".into(), with(3, b"admin\0alice\0s3cret")),
        ("kafka-handshake".into(), with(4, b"SCRAM-SHA-512")),
        (
            "scram-256".into(),
            with(
                5 | 0x20,
                b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL\xffc=biws,r=%N,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            ),
        ),
        (
            "scram-512-authzid".into(),
            with(5 | 0x10, b"y,a=us=2Cer,n=us=2Cer,r=abc,ext=1\xffc=eSxhPXVzPTJDZXIs,r=%N,p=AAAA"),
        ),
        ("stored-scram".into(), with(6, credential.to_string().as_bytes())),
        (
            "stored-password-hash".into(),
            with(6, ferry_auth::password::PasswordHash::new("guest").to_string().as_bytes()),
        ),
        (
            "principal-rules".into(),
            with(7, b"RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$3/L,DEFAULT\0CN=Alice,OU=eng,O=Example"),
        ),
    ]
}

// ---- Stored records -----------------------------------------------------------------

fn chunked(selector: u8, chunks: &[&[u8]]) -> Vec<u8> {
    let mut out = vec![selector];
    for c in chunks {
        out.extend_from_slice(&(c.len() as u16).to_be_bytes());
        out.extend_from_slice(c);
    }
    out
}

fn stored_records() -> Vec<(String, Vec<u8>)> {
    let mut seeds = Vec::new();
    let envelope = Envelope {
        body_len: 1024,
        priority: 5,
        delivery_count: 2,
        enqueued_ms: 1_700_000_000_000,
        expires_ms: 1_700_000_060_000,
        dead_letter: Some(DeadLetter {
            reason: DeadLetterReason::Expired,
            from_stage: 9,
            at_ms: 1_700_000_001_000,
        }),
        spill: None,
    };
    seeds.push(("envelope".into(), chunked(0, &[&envelope.encode()])));
    let meta = StageMeta {
        name: "orders".into(),
        max_priority: 10,
        max_deliveries: 3,
        dead_letter: Some(4),
    };
    seeds.push(("stage-meta".into(), chunked(0, &[&meta.encode()])));

    let stored = StoredMessage {
        exchange: "amq.topic".into(),
        routing_key: "orders.eu".into(),
        raw_properties: Bytes::from(encode_properties(&rich_properties())),
        body: Bytes::from_static(b"{\"id\":1}"),
    };
    seeds.push(("stored-message".into(), chunked(1, &[&stored.encode()])));

    let mut exchange = Exchange::builtins().remove(3);
    exchange.name = "events".into();
    exchange.builtin = false;
    let queue = QueueRecord {
        durable: true,
        auto_delete: false,
        exclusive_owner: 0,
        owner: 0,
        arguments: encode_table(&table(&[
            ("x-max-priority", AMQPValue::ShortShortUInt(10)),
            (
                "x-dead-letter-exchange",
                AMQPValue::LongString("dlx".into()),
            ),
        ])),
        stage: "q-orders".into(),
        dead_letter_stage: "q-orders-dl".into(),
        stage_id: 12,
    };
    seeds.push((
        "topology".into(),
        chunked(2, &[&encode_exchange(&exchange), &queue.encode()]),
    ));

    let waiter = Waiter {
        incarnation: 3,
        token: 99,
    };
    let producer = ProducerState {
        epoch: 0,
        recent: [WrittenBatch {
            first_sequence: 0,
            last_sequence: 2,
            base_offset: 10,
        }]
        .into(),
    };
    for (name, codec) in CODECS {
        let batch = record_batch(codec, true, true);
        seeds.push((
            format!("staged-{name}"),
            chunked(3, &[&staged::encode(waiter, &batch), &producer.encode()]),
        ));
        let mut log = batch.to_vec();
        batch::set_base_offset(&mut log, 100);
        log.extend_from_slice(&batch::marker(7, 0, false, 1_700_000_000_100));
        let aborted = [7i64, 100, 103].map(i64::to_be_bytes).concat();
        seeds.push((
            format!("log-{name}"),
            chunked(4, &[&0i64.to_be_bytes(), &log, &aborted]),
        ));
    }
    // Batches whose one record of 2 MiB of zeros compresses to a few hundred bytes or
    // less: past the target's bound on decompression.
    for (name, codec) in &CODECS[1..] {
        let record = Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: 0,
            sequence: -1,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Some(Bytes::from(vec![0; 2 << 20])),
            headers: Vec::new(),
        };
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            std::slice::from_ref(&record),
            &RecordEncodeOptions {
                version: 2,
                compression: *codec,
            },
        )
        .expect("records encode");
        if buf.len() <= usize::from(u16::MAX) {
            seeds.push((
                format!("log-2-mib-{name}"),
                chunked(4, &[&0i64.to_be_bytes(), &buf, b""]),
            ));
        }
    }
    // A log whose batch sits at the largest offsets: its end is past i64::MAX.
    let mut last_offsets = record_batch(Compression::None, false, false).to_vec();
    batch::set_base_offset(&mut last_offsets, i64::MAX - 1);
    seeds.push((
        "log-last-offsets".into(),
        chunked(4, &[&0i64.to_be_bytes(), &last_offsets, b""]),
    ));
    let group_meta = pack(&(
        1u16,
        3i64,
        Some("consumer"),
        Some("range"),
        Some("m0"),
        true,
    ));
    let member = |client: &str| {
        pack(&(
            1u16,
            client,
            "/127.0.0.1",
            10_000u64,
            30_000u64,
            vec![("range".to_owned(), b"meta".to_vec())],
            b"assignment".to_vec(),
        ))
    };
    let ops = [
        0u8, 0, 0x13, 1, 0, 1, 2, 1, 1, 4, 0, 200, 3, 0, 0, 0, 0xff, 0x0a, 4, 0xff, 0xff, 5, 1, 1,
    ];
    seeds.push((
        "group".into(),
        chunked(5, &[&group_meta, &member("c0"), &member("c1"), &ops]),
    ));
    // The largest generation a group can be stored with: the next one must wrap.
    let last_generation = pack(&(
        1u16,
        i64::from(i32::MAX),
        Some("consumer"),
        Some("range"),
        Some("m0"),
        true,
    ));
    seeds.push((
        "group-last-generation".into(),
        chunked(5, &[&last_generation, &member("c0"), &ops]),
    ));
    let offset = CommittedOffset {
        offset: 42,
        leader_epoch: 0,
        metadata: Some("m".into()),
    };
    seeds.push((
        "offset".into(),
        chunked(6, &[&encode_offset(&offset, 1_700_000_000_000)]),
    ));
    let lease = Lease {
        node: 1,
        epoch: 4,
        deadline_ms: 1_700_000_000_000,
    };
    seeds.push(("lease".into(), chunked(6, &[&lease.encode()])));
    let user = pack(&(
        2i64,
        Some("hash"),
        None::<String>,
        None::<String>,
        true,
        false,
        vec!["administrator"],
    ));
    seeds.push(("user".into(), chunked(7, &[&user])));
    seeds.push((
        "permissions".into(),
        chunked(7, &[&pack(&(1i64, ".*", ".*", ".*"))]),
    ));
    for kind in 0..12u8 {
        seeds.push((format!("key-{kind}"), chunked(8, &[&[kind, 255], b""])));
    }
    seeds.push(("header-value".into(), chunked(9, &[b"l12345"])));
    seeds.push(("counter".into(), chunked(11, &[&7i64.to_le_bytes()])));
    seeds
}

// ---- Config -------------------------------------------------------------------------

fn config() -> Vec<(String, Vec<u8>)> {
    let shipped =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/ferry.toml"))
            .expect("config/ferry.toml is readable");
    // The shipped file with its commented bridge example (sources, sinks, a route) turned
    // on, and with a second user whose permissions are patterns.
    let bridge: String = shipped
        .lines()
        .map(|line| match line.strip_prefix("# ") {
            Some(rest)
                if rest.starts_with('[')
                    || rest.split_once(" = ").is_some_and(|(k, _)| {
                        !k.is_empty() && k.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                    }) =>
            {
                rest
            }
            _ => line,
        })
        .map(|line| format!("{line}\n"))
        .collect();
    let users = r#"
[[users]]
name = "alice"
password_hash = "ZASDEfwPLhXM0KUkbGOfccSogyK5KTa288+2WO7UH7q+4kkQ"
tags = ["management"]
[[users.permissions]]
vhost = "/"
configure = "^$"
write = "^orders\\."
read = ".*"
"#;
    vec![
        ("ferry-toml".into(), shipped.clone().into_bytes()),
        ("bridge".into(), bridge.into_bytes()),
        ("users".into(), format!("{shipped}{users}").into_bytes()),
        ("empty".into(), Vec::new()),
    ]
}

/// Stream protocol frames back to back: a client's session (the handshake, a stream, a
/// publisher, publishes with and without filter values, a subscription, offsets), each
/// other client command alone, and what a server sends.
fn stream_frames() -> Vec<(String, Vec<u8>)> {
    use ferry_streams::{
        Answer, OffsetSpec, Published, Request, ServerFrame, StreamMetadata, code, framed, key,
    };
    let frames = |requests: &[Request]| -> Vec<u8> {
        requests
            .iter()
            .flat_map(|r| framed(|out| r.encode(out)).to_vec())
            .collect()
    };
    let pairs = |kv: &[(&str, &str)]| {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<Vec<_>>()
    };
    let message = |body: &[u8], filter: Option<&str>, id| Published {
        publishing_id: id,
        filter_value: filter.map(str::to_owned),
        message: Bytes::from([&[0x00, 0x53, 0x75, 0xa0, body.len() as u8][..], body].concat()),
    };
    let session = frames(&[
        Request::PeerProperties {
            correlation_id: 1,
            properties: pairs(&[("product", "RabbitMQ Stream"), ("version", "0.4")]),
        },
        Request::SaslHandshake { correlation_id: 2 },
        Request::SaslAuthenticate {
            correlation_id: 3,
            mechanism: "PLAIN".into(),
            response: Some(Bytes::from_static(b"\0guest\0guest")),
        },
        Request::Tune {
            frame_max: 1_048_576,
            heartbeat: 60,
        },
        Request::Open {
            correlation_id: 4,
            vhost: "/".into(),
        },
        Request::Create {
            correlation_id: 5,
            stream: "orders".into(),
            arguments: pairs(&[("max-age", "1h"), ("max-length-bytes", "1000000")]),
        },
        Request::DeclarePublisher {
            correlation_id: 6,
            publisher_id: 1,
            reference: "app-1".into(),
            stream: "orders".into(),
        },
        Request::Publish {
            publisher_id: 1,
            messages: vec![message(b"one", None, 1), message(b"two", None, 2)],
        },
        Request::Publish {
            publisher_id: 1,
            messages: vec![message(b"eu", Some("eu"), 3), message(b"us", Some("us"), 4)],
        },
        Request::Subscribe {
            correlation_id: 7,
            subscription_id: 0,
            stream: "orders".into(),
            offset: OffsetSpec::First,
            credit: 10,
            properties: pairs(&[("filter.0", "eu"), ("match-unfiltered", "true")]),
        },
        Request::Credit {
            subscription_id: 0,
            credit: 1,
        },
        Request::StoreOffset {
            reference: "reader".into(),
            stream: "orders".into(),
            offset: 1,
        },
        Request::QueryOffset {
            correlation_id: 8,
            reference: "reader".into(),
            stream: "orders".into(),
        },
        Request::Heartbeat,
        Request::Close {
            correlation_id: 9,
            code: code::OK,
            reason: "bye".into(),
        },
    ]);
    let mut seeds = vec![("client-session".to_owned(), session)];
    let alone = [
        (
            "query-publisher-sequence",
            Request::QueryPublisherSequence {
                correlation_id: 1,
                reference: "app-1".into(),
                stream: "orders".into(),
            },
        ),
        (
            "delete-publisher",
            Request::DeletePublisher {
                correlation_id: 1,
                publisher_id: 1,
            },
        ),
        (
            "subscribe-timestamp",
            Request::Subscribe {
                correlation_id: 1,
                subscription_id: 2,
                stream: "orders".into(),
                offset: OffsetSpec::Timestamp(1_700_000_000_000),
                credit: 1,
                properties: vec![],
            },
        ),
        (
            "subscribe-offset",
            Request::Subscribe {
                correlation_id: 1,
                subscription_id: 3,
                stream: "orders".into(),
                offset: OffsetSpec::Offset(42),
                credit: 1,
                properties: pairs(&[("single-active-consumer", "true"), ("name", "app")]),
            },
        ),
        (
            "unsubscribe",
            Request::Unsubscribe {
                correlation_id: 1,
                subscription_id: 2,
            },
        ),
        (
            "delete",
            Request::Delete {
                correlation_id: 1,
                stream: "orders".into(),
            },
        ),
        (
            "metadata",
            Request::Metadata {
                correlation_id: 1,
                streams: vec!["orders".into(), "invoices".into()],
            },
        ),
        (
            "route",
            Request::Route {
                correlation_id: 1,
                routing_key: "eu".into(),
                super_stream: "invoices".into(),
            },
        ),
        (
            "partitions",
            Request::Partitions {
                correlation_id: 1,
                super_stream: "invoices".into(),
            },
        ),
        (
            "consumer-update-ok",
            Request::ConsumerUpdateOk {
                correlation_id: 1,
                code: code::OK,
                offset: OffsetSpec::Next,
            },
        ),
        (
            "command-versions",
            Request::ExchangeCommandVersions {
                correlation_id: 1,
                versions: vec![(key::PUBLISH, 1, 2), (key::DELIVER, 1, 2)],
            },
        ),
        (
            "stream-stats",
            Request::StreamStats {
                correlation_id: 1,
                stream: "orders".into(),
            },
        ),
        (
            "create-super-stream",
            Request::CreateSuperStream {
                correlation_id: 1,
                name: "invoices".into(),
                partitions: vec!["invoices-0".into(), "invoices-1".into()],
                binding_keys: vec!["0".into(), "1".into()],
                arguments: vec![],
            },
        ),
        (
            "delete-super-stream",
            Request::DeleteSuperStream {
                correlation_id: 1,
                name: "invoices".into(),
            },
        ),
        (
            "resolve-offset-spec",
            Request::ResolveOffsetSpec {
                correlation_id: 1,
                stream: "orders".into(),
                offset: OffsetSpec::Last,
                properties: vec![],
            },
        ),
        (
            "close-ok",
            Request::CloseOk {
                correlation_id: 1,
                code: code::OK,
            },
        ),
    ];
    seeds.extend(
        alone
            .into_iter()
            .map(|(name, r)| (format!("request-{name}"), frames(&[r]))),
    );
    let server = [
        ServerFrame::Response {
            key: key::PEER_PROPERTIES,
            correlation_id: 1,
            code: code::OK,
            answer: Answer::Properties(pairs(&[("product", "RabbitMQ")])),
        },
        ServerFrame::Response {
            key: key::SASL_HANDSHAKE,
            correlation_id: 2,
            code: code::OK,
            answer: Answer::Mechanisms(vec!["PLAIN".into(), "AMQPLAIN".into()]),
        },
        ServerFrame::Tune {
            frame_max: 1_048_576,
            heartbeat: 60,
        },
        ServerFrame::PublishConfirm {
            publisher_id: 1,
            publishing_ids: vec![1, 2],
        },
        ServerFrame::PublishError {
            publisher_id: 1,
            errors: vec![(3, code::STREAM_DOES_NOT_EXIST)],
        },
        ServerFrame::Deliver {
            subscription_id: 0,
            committed_chunk_id: Some(0),
            chunk: Bytes::from_static(&[0x50, 0, 0, 1, 0, 0, 0, 1]),
        },
        ServerFrame::MetadataUpdate {
            code: code::STREAM_NOT_AVAILABLE,
            stream: "orders".into(),
        },
        ServerFrame::Metadata {
            correlation_id: 1,
            brokers: vec![(0, "localhost".into(), 5552)],
            streams: vec![StreamMetadata {
                stream: "orders".into(),
                code: code::OK,
                leader: 0,
                replicas: vec![],
            }],
        },
    ];
    let server: Vec<u8> = server
        .iter()
        .flat_map(|f| framed(|out| f.encode(out)).to_vec())
        .collect();
    seeds.push(("server-frames".to_owned(), server));
    seeds
}

/// AMQP 1.0 messages with every section and body kind, and one value of each type.
fn amqp10_messages() -> Vec<(String, Vec<u8>)> {
    use ferry_amqp10::{Array, Body, Header, Message, Properties, Value};
    let full = Message {
        header: Some(Header {
            durable: Some(true),
            priority: Some(5),
            ttl: Some(60_000),
            first_acquirer: Some(false),
            delivery_count: Some(2),
        }),
        delivery_annotations: Some(vec![(Value::Symbol("x-opt-d".into()), Value::Int(1))]),
        message_annotations: Some(vec![
            (
                Value::Symbol("x-opt-routing-key".into()),
                Value::String("orders.eu".into()),
            ),
            (
                Value::Symbol("x-opt-exchange".into()),
                Value::String("amq.topic".into()),
            ),
        ]),
        properties: Some(Properties {
            message_id: Some(Value::Uuid([7; 16])),
            user_id: Some(Bytes::from_static(b"guest")),
            to: Some("/queues/orders".into()),
            subject: Some("order".into()),
            reply_to: Some("/queues/replies".into()),
            correlation_id: Some(Value::Ulong(42)),
            content_type: Some("application/json".into()),
            content_encoding: Some("gzip".into()),
            absolute_expiry_time: Some(1_700_000_060_000),
            creation_time: Some(1_700_000_000_000),
            group_id: Some("g".into()),
            group_sequence: Some(3),
            reply_to_group_id: Some("rg".into()),
        }),
        application_properties: Some(vec![
            ("region".into(), Value::String("eu".into())),
            ("count".into(), Value::Long(12)),
        ]),
        body: Some(Body::Data(vec![Bytes::from_static(b"{\"order\":7}")])),
        footer: Some(vec![(Value::Symbol("x-opt-f".into()), Value::Null)]),
    };
    let value_body = Message {
        body: Some(Body::Value(Value::Map(vec![(
            Value::String("k".into()),
            Value::Double(1.5),
        )]))),
        ..Message::data(Bytes::new())
    };
    let sequence_body = Message {
        body: Some(Body::Sequence(vec![
            vec![Value::Int(1), Value::String("two".into())],
            vec![],
        ])),
        ..Message::data(Bytes::new())
    };
    let values = Value::List(vec![
        Value::Null,
        Value::Bool(true),
        Value::Ubyte(1),
        Value::Ushort(2),
        Value::Uint(3),
        Value::Uint(70_000),
        Value::Ulong(0),
        Value::Ulong(1 << 40),
        Value::Byte(-1),
        Value::Short(-2),
        Value::Int(-3),
        Value::Int(1 << 20),
        Value::Long(-4),
        Value::Long(1 << 40),
        Value::Float(0.5),
        Value::Double(-0.25),
        Value::Decimal32([1; 4]),
        Value::Decimal64([2; 8]),
        Value::Decimal128([3; 16]),
        Value::Char('€'),
        Value::Timestamp(1_700_000_000_000),
        Value::Uuid([4; 16]),
        Value::Binary(Bytes::from(vec![5; 300])),
        Value::String("text".into()),
        Value::Symbol("sym".into()),
        Value::Array(Array {
            descriptor: None,
            code: 0x71,
            elements: vec![Value::Int(1), Value::Int(2)],
        }),
        Value::Described(Box::new(Value::Symbol("d".into())), Box::new(Value::Null)),
    ]);
    let mut seeds = vec![
        ("message-full".to_owned(), full.to_bytes().to_vec()),
        (
            "message-data".to_owned(),
            Message::data(Bytes::from_static(b"hello"))
                .to_bytes()
                .to_vec(),
        ),
        ("message-value".to_owned(), value_body.to_bytes().to_vec()),
        (
            "message-sequence".to_owned(),
            sequence_body.to_bytes().to_vec(),
        ),
        ("values".to_owned(), values.to_bytes().to_vec()),
    ];
    // Transport frames as a client sends them: SASL, then a connection that transfers.
    use ferry_amqp10::{Frame, FrameType, Performative, encode_frame, performative as p};
    let frame = |frame_type, code, fields: Vec<Value>, payload: Bytes| Frame {
        frame_type,
        channel: 0,
        performative: Some(Performative { code, fields }),
        payload,
    };
    let text = |s: &str| Value::String(s.into());
    let session = [
        frame(
            FrameType::Sasl,
            p::SASL_INIT,
            vec![
                Value::Symbol("PLAIN".into()),
                Value::Binary(Bytes::from_static(b"\0guest\0guest")),
                text("vhost:/"),
            ],
            Bytes::new(),
        ),
        frame(
            FrameType::Amqp,
            p::OPEN,
            vec![
                text("client"),
                text("vhost:/"),
                Value::Uint(65_536),
                Value::Ushort(255),
            ],
            Bytes::new(),
        ),
        frame(
            FrameType::Amqp,
            p::BEGIN,
            vec![
                Value::Null,
                Value::Uint(0),
                Value::Uint(2_048),
                Value::Uint(2_048),
            ],
            Bytes::new(),
        ),
        frame(
            FrameType::Amqp,
            p::ATTACH,
            vec![
                text("sender"),
                Value::Uint(0),
                Value::Bool(false),
                Value::Null,
                Value::Null,
                Value::Described(Box::new(Value::Ulong(0x28)), Box::new(Value::List(vec![]))),
                Value::Described(
                    Box::new(Value::Ulong(0x29)),
                    Box::new(Value::List(vec![text("/queues/q")])),
                ),
            ],
            Bytes::new(),
        ),
        frame(
            FrameType::Amqp,
            p::FLOW,
            vec![
                Value::Uint(0),
                Value::Uint(100),
                Value::Uint(0),
                Value::Uint(100),
                Value::Uint(0),
                Value::Uint(0),
                Value::Uint(10),
            ],
            Bytes::new(),
        ),
        frame(
            FrameType::Amqp,
            p::TRANSFER,
            vec![
                Value::Uint(0),
                Value::Uint(0),
                Value::Binary(Bytes::from_static(b"tag1")),
                Value::Uint(0),
                Value::Bool(false),
            ],
            full.to_bytes(),
        ),
        frame(
            FrameType::Amqp,
            p::DISPOSITION,
            vec![
                Value::Bool(true),
                Value::Uint(0),
                Value::Null,
                Value::Bool(true),
                Value::Described(Box::new(Value::Ulong(0x24)), Box::new(Value::List(vec![]))),
            ],
            Bytes::new(),
        ),
        frame(FrameType::Amqp, p::CLOSE, vec![], Bytes::new()),
    ];
    let mut frames = BytesMut::new();
    for f in &session {
        encode_frame(f, &mut frames);
    }
    seeds.push(("frames-client-session".to_owned(), frames.to_vec()));
    if let Value::List(each) = values {
        seeds.extend(
            each.iter()
                .enumerate()
                .map(|(i, v)| (format!("value-{i:02}"), v.to_bytes().to_vec())),
        );
    }
    seeds
}
