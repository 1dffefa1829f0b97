//! The Kafka front on raw sockets, sending what real clients rarely do. Bad input — an
//! oversized declared size, a truncated request, an unknown API key, an array longer than
//! its frame, a corrupt record batch, a produce to a missing topic, wrong SASL credentials —
//! gets Kafka's error code or a clean close of that one connection; so does a transactional
//! batch outside its producer's transaction, and a control batch; other connections
//! carry on and every acknowledged record stays intact. Also: every advertised version is
//! answered decodably, a request larger than one transaction is staged whole, a fetch's
//! byte limits hold as Kafka's broker applies them (KIP-74), and JoinGroup v4+ gives a
//! new member its id first (KIP-394).

use crate::common::fronts::KafkaServer;
use crate::common::kafka::raw::{Raw, batch, encoded, frame, transactional_batch};
use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, CreateTopicsRequest, FetchRequest, GroupId, InitProducerIdRequest,
    JoinGroupRequest, MetadataRequest, ProduceRequest, ResponseKind, SaslAuthenticateRequest,
    SaslHandshakeRequest, TopicName, TransactionalId,
};
use kafka_protocol::messages::{ApiVersionsResponse, ResponseHeader};
use kafka_protocol::protocol::{Decodable, StrBytes};

pub(crate) fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

pub(crate) async fn create_topic(raw: &mut Raw, topic: &str) {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(name(topic))
                .with_num_partitions(1)
                .with_replication_factor(1),
        ])
        .with_timeout_ms(5000);
    let ResponseKind::CreateTopics(r) = raw.request(ApiKey::CreateTopics, 5, &request).await else {
        panic!("not a CreateTopics answer");
    };
    assert_eq!(r.topics[0].error_code, 0);
}

/// Produces `records` (acks=all) to partition 0 of `topic`: (error code, base offset).
async fn produce(raw: &mut Raw, topic: &str, records: Bytes) -> (i16, i64) {
    let r = produce_answer(raw, topic, records).await;
    let p = &r.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

/// Produces `records` (acks=all) to partition 0 of `topic`; the whole answer.
pub(crate) async fn produce_answer(
    raw: &mut Raw,
    topic: &str,
    records: Bytes,
) -> kafka_protocol::messages::ProduceResponse {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name(topic))
                .with_partition_data(vec![
                    PartitionProduceData::default()
                        .with_index(0)
                        .with_records(Some(records)),
                ]),
        ]);
    let ResponseKind::Produce(r) = raw.request(ApiKey::Produce, 9, &request).await else {
        panic!("not a Produce answer");
    };
    r
}

/// Fetches partition 0 of `topic` from `offset`: (error code, high watermark, records).
pub(crate) async fn fetch(raw: &mut Raw, topic: &str, offset: i64) -> (i16, i64, Bytes) {
    fetch_each(raw, &[(topic, offset)], 1 << 20, 1 << 20)
        .await
        .remove(0)
}

/// Fetches partition 0 of each topic from its offset, in the order given, in one request
/// of `max_bytes` with `partition_max_bytes` each: (error code, high watermark, records)
/// of each.
async fn fetch_each(
    raw: &mut Raw,
    from: &[(&str, i64)],
    max_bytes: i32,
    partition_max_bytes: i32,
) -> Vec<(i16, i64, Bytes)> {
    let request = fetch_request(from, max_bytes, partition_max_bytes);
    let ResponseKind::Fetch(r) = raw.request(ApiKey::Fetch, 12, &request).await else {
        panic!("not a Fetch answer");
    };
    r.responses
        .iter()
        .map(|t| {
            let p = &t.partitions[0];
            (
                p.error_code,
                p.high_watermark,
                p.records.clone().unwrap_or_default(),
            )
        })
        .collect()
}

/// A fetch (v12, no wait, no session) of partition 0 of each topic from its offset, of
/// `max_bytes` with `partition_max_bytes` each.
pub(crate) fn fetch_request(
    from: &[(&str, i64)],
    max_bytes: i32,
    partition_max_bytes: i32,
) -> FetchRequest {
    let topics = from.iter().map(|(topic, offset)| {
        FetchTopic::default()
            .with_topic(name(topic))
            .with_partitions(vec![
                FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(*offset)
                    .with_partition_max_bytes(partition_max_bytes),
            ])
    });
    FetchRequest::default()
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(max_bytes)
        .with_session_epoch(-1)
        .with_topics(topics.collect())
}

/// Values of the records in `batches`, by offset.
fn values(mut batches: Bytes) -> Vec<(i64, String)> {
    let sets = kafka_protocol::records::RecordBatchDecoder::decode_all(&mut batches).unwrap();
    sets.into_iter()
        .flat_map(|s| s.records)
        .map(|r| {
            (
                r.offset,
                String::from_utf8(r.value.unwrap().to_vec()).unwrap(),
            )
        })
        .collect()
}

async fn api_versions_answer(raw: &mut Raw) -> i16 {
    let ResponseKind::ApiVersions(r) = raw
        .request(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await
    else {
        panic!("not an ApiVersions answer");
    };
    r.error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_declaration_closes_only_its_connection() {
    let broker = KafkaServer::start_with(|c| c.max_request_size = 1 << 20).await;
    let mut bystander = Raw::connect(broker.addr).await;
    let mut raw = Raw::connect(broker.addr).await;
    raw.send_bytes(&i32::MAX.to_be_bytes()).await;
    assert!(raw.is_closed().await);
    let mut raw = Raw::connect(broker.addr).await;
    raw.send_bytes(&(2i32 << 20).to_be_bytes()).await;
    raw.send_bytes(&[0u8; 1024]).await;
    assert!(raw.is_closed().await, "one byte over the limit is refused");
    assert_eq!(api_versions_answer(&mut bystander).await, 0);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_and_undecodable_requests_close_their_connection() {
    let broker = KafkaServer::start().await;
    // A frame that ends before its header does.
    let mut raw = Raw::connect(broker.addr).await;
    raw.send_bytes(&[0, 0, 0, 3, 0, 3, 0]).await;
    assert!(raw.is_closed().await);
    // A Metadata request cut short inside its topic list.
    let whole = frame(
        ApiKey::Metadata,
        9,
        1,
        &encoded(
            &MetadataRequest::default().with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(name("abc"))),
            ])),
            9,
        ),
    );
    let mut cut = whole[..whole.len() - 3].to_vec();
    let size = (cut.len() - 4) as i32;
    cut[..4].copy_from_slice(&size.to_be_bytes());
    let mut raw = Raw::connect(broker.addr).await;
    raw.send_bytes(&cut).await;
    assert!(raw.is_closed().await);
    // Half a frame, then the client hangs up.
    let mut raw = Raw::connect(broker.addr).await;
    raw.send_bytes(&whole[..whole.len() / 2]).await;
    raw.shutdown_write().await;
    assert!(raw.is_closed().await);
    let mut fresh = Raw::connect(broker.addr).await;
    assert_eq!(api_versions_answer(&mut fresh).await, 0);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_api_key_closes_the_connection_and_unknown_api_versions_get_the_list() {
    let broker = KafkaServer::start().await;
    let mut raw = Raw::connect(broker.addr).await;
    raw.send_bytes(&[0, 0, 0, 10, 0x03, 0xe7, 0, 0, 0, 0, 0, 1, 0xff, 0xff])
        .await;
    assert!(raw.is_closed().await);

    // ApiVersions at a version Ferry does not know (a v3 request with its version raised to
    // 99, as a newer client would send it): UNSUPPORTED_VERSION and the table, in v0.
    let mut raw = Raw::connect(broker.addr).await;
    raw.send_bytes(
        &frame(
            ApiKey::ApiVersions,
            3,
            1,
            &encoded(&ApiVersionsRequest::default(), 3),
        )
        .into_iter()
        .enumerate()
        .map(|(i, b)| if i == 7 { 99 } else { b })
        .collect::<Vec<u8>>(),
    )
    .await;
    let mut answer = raw.read_frame().await.expect("an answer");
    ResponseHeader::decode(&mut answer, 0).unwrap();
    let r = ApiVersionsResponse::decode(&mut answer, 0).unwrap();
    assert_eq!(r.error_code, ResponseError::UnsupportedVersion.code());
    assert!(
        r.api_keys
            .iter()
            .any(|k| k.api_key == ApiKey::Produce as i16)
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_batch_is_refused_and_acknowledged_records_stay_intact() {
    let broker = KafkaServer::start().await;
    let mut raw = Raw::connect(broker.addr).await;
    create_topic(&mut raw, "crc").await;
    assert_eq!(
        produce(&mut raw, "crc", batch(&["one", "two"])).await,
        (0, 0)
    );
    let mut corrupt = batch(&["evil"]).to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x55;
    assert_eq!(
        produce(&mut raw, "crc", Bytes::from(corrupt)).await.0,
        ResponseError::CorruptMessage.code()
    );
    assert_eq!(produce(&mut raw, "crc", batch(&["three"])).await, (0, 2));
    let (code, hw, records) = fetch(&mut raw, "crc", 0).await;
    assert_eq!((code, hw), (0, 3));
    assert_eq!(
        values(records),
        [(0, "one".into()), (1, "two".into()), (2, "three".into())]
    );
    broker.stop().await;
}

/// KIP-74, as Kafka's broker reads (librdkafka's test 0082 relies on it): only the first
/// partition of a fetch to return data may go beyond the fetch's `max_bytes` or its own
/// `partition_max_bytes`, by one batch; every later one stays within what is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_first_partition_with_data_may_exceed_the_fetch_limits() {
    let broker = KafkaServer::start().await;
    let mut raw = Raw::connect(broker.addr).await;
    let big = "x".repeat(2000);
    for topic in ["kip74-a", "kip74-b"] {
        create_topic(&mut raw, topic).await;
        assert_eq!(produce(&mut raw, topic, batch(&[&big])).await, (0, 0));
    }
    let one_batch = fetch(&mut raw, "kip74-a", 0).await.2.len();
    assert!(one_batch > 2000);
    let sizes = |answer: Vec<(i16, i64, Bytes)>| -> Vec<usize> {
        answer
            .iter()
            .map(|(code, _, records)| {
                assert_eq!(*code, 0);
                records.len()
            })
            .collect()
    };
    // Over the fetch's limit: the first partition's batch, nothing of the second.
    let both = [("kip74-a", 0), ("kip74-b", 0)];
    assert_eq!(
        sizes(fetch_each(&mut raw, &both, 100, 1 << 20).await),
        [one_batch, 0]
    );
    // Over each partition's limit: the same.
    assert_eq!(
        sizes(fetch_each(&mut raw, &both, 1 << 20, 100).await),
        [one_batch, 0]
    );
    // The first partition has nothing new: the second one is the first with data.
    let from_end = [("kip74-a", 1), ("kip74-b", 0)];
    assert_eq!(
        sizes(fetch_each(&mut raw, &from_end, 100, 100).await),
        [0, one_batch]
    );
    // Within the limits: both.
    let roomy = 2 * one_batch as i32;
    assert_eq!(
        sizes(fetch_each(&mut raw, &both, roomy, one_batch as i32).await),
        [one_batch, one_batch]
    );
    broker.stop().await;
}

/// JoinGroup v4+ gives a new member its id before it joins (KIP-394), v3 joins at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_member_of_join_group_v4_is_told_its_member_id_first() {
    let broker = KafkaServer::start().await;
    let mut raw = Raw::connect(broker.addr).await;
    let join = |group: &'static str, member_id: &str| {
        JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str(group)))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_member_id(StrBytes::from_string(member_id.to_owned()))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(vec![
                JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str("range"))
                    .with_metadata(Bytes::from_static(b"m")),
            ])
    };
    let answer = |kind| match kind {
        ResponseKind::JoinGroup(r) => (r.error_code, r.member_id.to_string(), r.generation_id),
        other => panic!("not a JoinGroup answer: {other:?}"),
    };
    let first = raw.request(ApiKey::JoinGroup, 7, &join("kip394", "")).await;
    let (code, id, generation) = answer(first);
    assert_eq!(
        (code, generation),
        (ResponseError::MemberIdRequired.code(), -1)
    );
    assert!(id.len() > 10, "{id}");
    let second = raw
        .request(ApiKey::JoinGroup, 7, &join("kip394", &id))
        .await;
    let (code, joined_as, generation) = answer(second);
    assert_eq!((code, joined_as.as_str(), generation), (0, id.as_str(), 1));
    // JoinGroup v3 knows nothing of it: a new member joins at once.
    let old = raw
        .request(ApiKey::JoinGroup, 3, &join("kip394-v3", ""))
        .await;
    let (code, id, generation) = answer(old);
    assert_eq!((code, generation), (0, 1));
    assert!(id.len() > 10, "{id}");
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_topic_is_unknown_when_auto_create_is_off() {
    let broker = KafkaServer::start_with(|c| c.auto_create_topics = false).await;
    let mut raw = Raw::connect(broker.addr).await;
    assert_eq!(
        produce(&mut raw, "nowhere", batch(&["x"])).await.0,
        ResponseError::UnknownTopicOrPartition.code()
    );
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name("nowhere"))),
        ]))
        .with_allow_auto_topic_creation(true);
    let ResponseKind::Metadata(m) = raw.request(ApiKey::Metadata, 9, &request).await else {
        panic!("not a Metadata answer");
    };
    assert_eq!(
        m.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    let again = raw.request(ApiKey::Metadata, 9, &request).await;
    let ResponseKind::Metadata(m) = again else {
        panic!()
    };
    assert_eq!(
        m.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code(),
        "not created"
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetching_outside_the_log_is_offset_out_of_range() {
    let broker = KafkaServer::start().await;
    let mut raw = Raw::connect(broker.addr).await;
    create_topic(&mut raw, "bounds").await;
    produce(&mut raw, "bounds", batch(&["a", "b"])).await;
    assert_eq!(
        fetch(&mut raw, "bounds", 3).await.0,
        ResponseError::OffsetOutOfRange.code()
    );
    assert_eq!(
        fetch(&mut raw, "bounds", -1).await.0,
        ResponseError::OffsetOutOfRange.code()
    );
    let (code, hw, records) = fetch(&mut raw, "bounds", 2).await;
    assert_eq!(
        (code, hw, records.len()),
        (0, 2, 0),
        "the end of the log is empty, not an error"
    );
    broker.stop().await;
}

async fn sasl(raw: &mut Raw, user: &str, password: &str) -> ResponseKind {
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN"));
    let ResponseKind::SaslHandshake(h) = raw.request(ApiKey::SaslHandshake, 1, &handshake).await
    else {
        panic!("not a SaslHandshake answer");
    };
    assert_eq!(h.error_code, 0);
    let token = format!("\0{user}\0{password}");
    let auth = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    raw.request(ApiKey::SaslAuthenticate, 2, &auth).await
}

/// Whether a Metadata request on `raw` is answered (else the connection closed).
async fn answers_metadata(raw: &mut Raw) -> bool {
    raw.send(ApiKey::Metadata, 9, &MetadataRequest::default())
        .await;
    raw.read_frame().await.is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sasl_login_lasts_connections_max_reauth_ms_unless_renewed_by_the_same_user() {
    let lifetime = std::time::Duration::from_millis(3000);
    let broker = KafkaServer::start_with(|c| {
        c.require_sasl = true;
        c.connections_max_reauth_ms = 3000;
    })
    .await;
    let mut raw = Raw::connect(broker.addr).await;
    let ResponseKind::SaslAuthenticate(first) = sasl(&mut raw, "guest", "guest").await else {
        panic!()
    };
    assert_eq!((first.error_code, first.session_lifetime_ms), (0, 3000));
    assert!(answers_metadata(&mut raw).await);
    // Two thirds into the login, the client authenticates again: a new lifetime, so the
    // connection outlives the first login.
    tokio::time::sleep(lifetime * 2 / 3).await;
    let ResponseKind::SaslAuthenticate(again) = sasl(&mut raw, "guest", "guest").await else {
        panic!()
    };
    assert_eq!((again.error_code, again.session_lifetime_ms), (0, 3000));
    tokio::time::sleep(lifetime * 2 / 3).await;
    assert!(answers_metadata(&mut raw).await, "within the renewed login");
    // Past it, any request but a re-authentication closes the connection.
    tokio::time::sleep(lifetime / 2).await;
    assert!(!answers_metadata(&mut raw).await, "the login expired");

    // Re-authenticating as another user fails, and closes that connection.
    let mut other = Raw::connect(broker.addr).await;
    let ResponseKind::SaslAuthenticate(ok) = sasl(&mut other, "guest", "guest").await else {
        panic!()
    };
    assert_eq!(ok.error_code, 0);
    let (user, password) = crate::common::fronts::OTHER_USER;
    let ResponseKind::SaslAuthenticate(changed) = sasl(&mut other, user, password).await else {
        panic!()
    };
    assert_eq!(
        changed.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    assert_eq!(
        changed.error_message.as_deref(),
        Some("cannot change the user from guest to other-user when re-authenticating")
    );
    assert!(other.is_closed().await);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_sasl_credentials_fail_and_close_only_that_connection() {
    let broker = KafkaServer::start_with(|c| c.require_sasl = true).await;
    let mut good = Raw::connect(broker.addr).await;
    let ResponseKind::SaslAuthenticate(ok) = sasl(&mut good, "guest", "guest").await else {
        panic!()
    };
    assert_eq!(ok.error_code, 0);
    create_topic(&mut good, "secured").await;
    assert_eq!(
        produce(&mut good, "secured", batch(&["kept"])).await,
        (0, 0)
    );

    let mut bad = Raw::connect(broker.addr).await;
    let ResponseKind::SaslAuthenticate(no) = sasl(&mut bad, "guest", "wrong").await else {
        panic!()
    };
    assert_eq!(
        no.error_code,
        ResponseError::SaslAuthenticationFailed.code()
    );
    assert_eq!(
        no.error_message.as_deref(),
        Some("login refused for user 'guest': invalid credentials")
    );
    assert!(bad.is_closed().await);

    let mut anonymous = Raw::connect(broker.addr).await;
    anonymous
        .send(ApiKey::Metadata, 9, &MetadataRequest::default())
        .await;
    assert!(
        anonymous.is_closed().await,
        "no requests before authentication"
    );

    let (code, hw, records) = fetch(&mut good, "secured", 0).await;
    assert_eq!((code, hw), (0, 1));
    assert_eq!(values(records), [(0, "kept".into())]);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_array_length_beyond_the_frame_closes_only_its_connection() {
    let broker = KafkaServer::start().await;
    let mut bystander = Raw::connect(broker.addr).await;
    // Metadata v0 declaring i32::MAX topics in a 4-byte body, and Metadata v9 declaring
    // u32::MAX - 1 in a compact array: decoded naively, each asks for over 100 GB.
    let mut classic = vec![0, 3, 0, 0, 0, 0, 0, 1, 0, 1, b'x'];
    classic.extend_from_slice(&i32::MAX.to_be_bytes());
    let mut compact = vec![0, 3, 0, 9, 0, 0, 0, 1, 0, 1, b'x', 0];
    compact.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    for body in [classic, compact] {
        let mut raw = Raw::connect(broker.addr).await;
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        raw.send_bytes(&frame).await;
        assert!(raw.is_closed().await);
    }
    assert_eq!(
        api_versions_answer(&mut bystander).await,
        0,
        "the process lives on"
    );
    broker.stop().await;
}

/// A request of `api` at `version` with default contents (a group where one is needed).
fn default_request(api: ApiKey, version: i16) -> Option<kafka_protocol::messages::RequestKind> {
    use kafka_protocol::messages::*;
    Some(match api {
        ApiKey::Metadata => RequestKind::Metadata(MetadataRequest::default()),
        ApiKey::FindCoordinator if version >= 4 => RequestKind::FindCoordinator(
            FindCoordinatorRequest::default()
                .with_coordinator_keys(vec![StrBytes::from_static_str("g")]),
        ),
        ApiKey::FindCoordinator => RequestKind::FindCoordinator(
            FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("g")),
        ),
        ApiKey::ListOffsets => RequestKind::ListOffsets(ListOffsetsRequest::default()),
        ApiKey::Heartbeat => RequestKind::Heartbeat(HeartbeatRequest::default()),
        ApiKey::LeaveGroup => RequestKind::LeaveGroup(LeaveGroupRequest::default()),
        ApiKey::OffsetCommit => RequestKind::OffsetCommit(OffsetCommitRequest::default()),
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(OffsetFetchRequest::default()),
        ApiKey::DescribeGroups => RequestKind::DescribeGroups(DescribeGroupsRequest::default()),
        ApiKey::ListGroups => RequestKind::ListGroups(ListGroupsRequest::default()),
        ApiKey::DeleteGroups => RequestKind::DeleteGroups(DeleteGroupsRequest::default()),
        // An empty group id: INVALID_REQUEST at once; no group asked: an empty answer.
        ApiKey::ConsumerGroupHeartbeat => {
            RequestKind::ConsumerGroupHeartbeat(ConsumerGroupHeartbeatRequest::default())
        }
        ApiKey::ConsumerGroupDescribe => {
            RequestKind::ConsumerGroupDescribe(ConsumerGroupDescribeRequest::default())
        }
        ApiKey::ShareGroupHeartbeat => {
            RequestKind::ShareGroupHeartbeat(ShareGroupHeartbeatRequest::default())
        }
        ApiKey::ShareGroupDescribe => {
            RequestKind::ShareGroupDescribe(ShareGroupDescribeRequest::default())
        }
        ApiKey::ShareFetch => RequestKind::ShareFetch(ShareFetchRequest::default()),
        ApiKey::DescribeShareGroupOffsets => {
            RequestKind::DescribeShareGroupOffsets(DescribeShareGroupOffsetsRequest::default())
        }
        ApiKey::AlterShareGroupOffsets => {
            RequestKind::AlterShareGroupOffsets(AlterShareGroupOffsetsRequest::default())
        }
        ApiKey::DeleteShareGroupOffsets => {
            RequestKind::DeleteShareGroupOffsets(DeleteShareGroupOffsetsRequest::default())
        }
        ApiKey::ShareAcknowledge => {
            RequestKind::ShareAcknowledge(ShareAcknowledgeRequest::default())
        }
        ApiKey::CreateTopics => RequestKind::CreateTopics(CreateTopicsRequest::default()),
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(DeleteTopicsRequest::default()),
        ApiKey::CreatePartitions => {
            RequestKind::CreatePartitions(CreatePartitionsRequest::default())
        }
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(DescribeConfigsRequest::default()),
        ApiKey::AlterConfigs => RequestKind::AlterConfigs(AlterConfigsRequest::default()),
        ApiKey::IncrementalAlterConfigs => {
            RequestKind::IncrementalAlterConfigs(IncrementalAlterConfigsRequest::default())
        }
        ApiKey::DeleteRecords => RequestKind::DeleteRecords(DeleteRecordsRequest::default()),
        // Nothing asked (ElectLeaders: every partition, none needing an election): no
        // error.
        ApiKey::DescribeLogDirs => RequestKind::DescribeLogDirs(DescribeLogDirsRequest::default()),
        ApiKey::AlterReplicaLogDirs => {
            RequestKind::AlterReplicaLogDirs(AlterReplicaLogDirsRequest::default())
        }
        ApiKey::ElectLeaders => RequestKind::ElectLeaders(ElectLeadersRequest::default()),
        ApiKey::ListPartitionReassignments => {
            RequestKind::ListPartitionReassignments(ListPartitionReassignmentsRequest::default())
        }
        ApiKey::AlterPartitionReassignments => {
            RequestKind::AlterPartitionReassignments(AlterPartitionReassignmentsRequest::default())
        }
        // Nothing asked: an empty answer.
        ApiKey::OffsetForLeaderEpoch => {
            RequestKind::OffsetForLeaderEpoch(OffsetForLeaderEpochRequest::default())
        }
        ApiKey::DescribeCluster => {
            RequestKind::DescribeCluster(DescribeClusterRequest::default().with_endpoint_type(1))
        }
        // An unknown group: GROUP_ID_NOT_FOUND.
        ApiKey::OffsetDelete => RequestKind::OffsetDelete(
            OffsetDeleteRequest::default().with_group_id(GroupId(StrBytes::from_static_str("g"))),
        ),
        ApiKey::InitProducerId => RequestKind::InitProducerId(InitProducerIdRequest::default()),
        // Unknown transactional ids: refused with INVALID_PRODUCER_ID_MAPPING.
        ApiKey::AddPartitionsToTxn => {
            RequestKind::AddPartitionsToTxn(AddPartitionsToTxnRequest::default())
        }
        ApiKey::AddOffsetsToTxn => RequestKind::AddOffsetsToTxn(AddOffsetsToTxnRequest::default()),
        ApiKey::TxnOffsetCommit => RequestKind::TxnOffsetCommit(TxnOffsetCommitRequest::default()),
        ApiKey::EndTxn => RequestKind::EndTxn(EndTxnRequest::default()),
        // No creations and no filters change nothing; the default describe filter (codes
        // 0) is answered INVALID_REQUEST.
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(DescribeAclsRequest::default()),
        ApiKey::CreateAcls => RequestKind::CreateAcls(CreateAclsRequest::default()),
        ApiKey::DeleteAcls => RequestKind::DeleteAcls(DeleteAclsRequest::default()),
        // Nothing asked: empty answers; the default pattern (v2) is "", matching no id.
        ApiKey::DescribeProducers => {
            RequestKind::DescribeProducers(DescribeProducersRequest::default())
        }
        ApiKey::DescribeTransactions => {
            RequestKind::DescribeTransactions(DescribeTransactionsRequest::default())
        }
        ApiKey::ListTransactions => {
            RequestKind::ListTransactions(ListTransactionsRequest::default())
        }
        // Every user's credentials (the test users': configured ones); nothing altered.
        ApiKey::DescribeUserScramCredentials => {
            RequestKind::DescribeUserScramCredentials(DescribeUserScramCredentialsRequest::default())
        }
        ApiKey::AlterUserScramCredentials => {
            RequestKind::AlterUserScramCredentials(AlterUserScramCredentialsRequest::default())
        }
        ApiKey::ApiVersions => RequestKind::ApiVersions(ApiVersionsRequest::default()),
        ApiKey::Fetch => RequestKind::Fetch(FetchRequest::default().with_session_epoch(-1)),
        ApiKey::Produce => RequestKind::Produce(ProduceRequest::default().with_acks(-1)),
        // An empty group id is refused at once, so the join does not wait for a rebalance.
        ApiKey::JoinGroup => RequestKind::JoinGroup(JoinGroupRequest::default()),
        ApiKey::SyncGroup => RequestKind::SyncGroup(SyncGroupRequest::default()),
        ApiKey::SaslHandshake => RequestKind::SaslHandshake(SaslHandshakeRequest::default()),
        ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(
            SaslAuthenticateRequest::default()
                .with_auth_bytes(Bytes::from_static(b"\0guest\0guest")),
        ),
        _ => return None,
    })
}

/// The replica administration APIs at the oldest and newest versions Ferry advertises
/// (clients send the newest): one log dir with the partition's bytes, no move elsewhere,
/// no election needed, no reassignment in progress nor made elsewhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_admin_apis_answer_their_oldest_and_newest_versions() {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::alter_replica_log_dirs_request::{
        AlterReplicaLogDir, AlterReplicaLogDirTopic,
    };
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use kafka_protocol::messages::{
        AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest, BrokerId,
        DescribeLogDirsRequest, ElectLeadersRequest, ListPartitionReassignmentsRequest,
    };
    let broker = KafkaServer::start().await;
    let mut raw = Raw::connect(broker.addr).await;
    create_topic(&mut raw, "ends").await;
    let records = batch(&["a", "b"]);
    let size = records.len() as i64;
    assert_eq!(produce(&mut raw, "ends", records).await, (0, 0));

    for version in [1, 4] {
        let ResponseKind::DescribeLogDirs(r) = raw
            .request(
                ApiKey::DescribeLogDirs,
                version,
                &DescribeLogDirsRequest::default().with_topics(None),
            )
            .await
        else {
            panic!("not a DescribeLogDirs answer");
        };
        let dir = &r.results[0];
        let partition = &dir.topics[0].partitions[0];
        assert_eq!(
            (
                r.results.len(),
                dir.topics[0].name.0.as_str(),
                partition.partition_size
            ),
            (1, "ends", size),
            "v{version}"
        );
        assert_eq!(dir.total_bytes > 0, version >= 4, "v{version}: {dir:?}");
    }
    for version in [1, 2] {
        let request = AlterReplicaLogDirsRequest::default().with_dirs(vec![
            AlterReplicaLogDir::default()
                .with_path(StrBytes::from_static_str("/var/lib/kafka/data"))
                .with_topics(vec![
                    AlterReplicaLogDirTopic::default()
                        .with_name(name("ends"))
                        .with_partitions(vec![0]),
                ]),
        ]);
        let ResponseKind::AlterReplicaLogDirs(r) = raw
            .request(ApiKey::AlterReplicaLogDirs, version, &request)
            .await
        else {
            panic!("not an AlterReplicaLogDirs answer");
        };
        assert_eq!(
            r.results[0].partitions[0].error_code,
            ResponseError::LogDirNotFound.code(),
            "v{version}"
        );
    }
    for version in [0, 2] {
        let request = ElectLeadersRequest::default()
            .with_topic_partitions(Some(vec![
                TopicPartitions::default()
                    .with_topic(name("ends"))
                    .with_partitions(vec![0]),
            ]))
            .with_timeout_ms(5000);
        let ResponseKind::ElectLeaders(r) =
            raw.request(ApiKey::ElectLeaders, version, &request).await
        else {
            panic!("not an ElectLeaders answer");
        };
        assert_eq!(
            r.replica_election_results[0].partition_result[0].error_code,
            ResponseError::ElectionNotNeeded.code(),
            "v{version}"
        );
    }
    let ResponseKind::ListPartitionReassignments(r) = raw
        .request(
            ApiKey::ListPartitionReassignments,
            0,
            &ListPartitionReassignmentsRequest::default(),
        )
        .await
    else {
        panic!("not a ListPartitionReassignments answer");
    };
    assert_eq!((r.error_code, r.topics.len()), (0, 0));
    for version in [0, 1] {
        let request = AlterPartitionReassignmentsRequest::default().with_topics(vec![
            ReassignableTopic::default()
                .with_name(name("ends"))
                .with_partitions(vec![
                    ReassignablePartition::default()
                        .with_partition_index(0)
                        .with_replicas(Some(vec![BrokerId(7)])),
                ]),
        ]);
        let ResponseKind::AlterPartitionReassignments(r) = raw
            .request(ApiKey::AlterPartitionReassignments, version, &request)
            .await
        else {
            panic!("not an AlterPartitionReassignments answer");
        };
        assert_eq!(
            r.responses[0].partitions[0].error_code,
            ResponseError::InvalidReplicaAssignment.code(),
            "v{version}"
        );
    }
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_advertised_version_is_answered_in_a_form_it_decodes() {
    let broker = KafkaServer::start().await;
    let mut raw = Raw::connect(broker.addr).await;
    let mut checked = 0;
    for &(api, min, max) in ferry_kafka::SUPPORTED {
        for version in min..=max {
            if api == ApiKey::Produce && version < 3 {
                // kafka-protocol encodes Produce v3+ only: v0–v2 are Ferry's own, checked
                // with kafka-python in formats.rs and by the codec's unit test.
                continue;
            }
            let request = default_request(api, version)
                .unwrap_or_else(|| panic!("{api:?} has no request in this test"));
            if api == ApiKey::SaslAuthenticate {
                // Authentication follows a handshake choosing PLAIN.
                let handshake = SaslHandshakeRequest::default()
                    .with_mechanism(StrBytes::from_static_str("PLAIN"));
                raw.request(ApiKey::SaslHandshake, 1, &handshake).await;
            }
            let mut body = bytes::BytesMut::new();
            request.encode(&mut body, version).unwrap();
            // The answer decodes as `api` at `version` (Raw::answer panics otherwise).
            raw.request_encoded(api, version, &body).await;
            checked += 1;
        }
    }
    assert!(checked > 100, "{checked} versions checked");
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_larger_than_a_transaction_is_staged_whole() {
    let broker = KafkaServer::start_with(|c| c.max_message_bytes = 4 << 20).await;
    let mut raw = Raw::connect(broker.addr).await;
    let create = CreateTopicsRequest::default()
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(name("big"))
                .with_num_partitions(4)
                .with_replication_factor(1),
        ])
        .with_timeout_ms(5000);
    raw.request(ApiKey::CreateTopics, 5, &create).await;
    // Four 3 MB batches: 12 MB in one request, over FoundationDB's 10 MB transaction limit.
    let value = "x".repeat(3 << 20);
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![
            TopicProduceData::default()
                .with_name(name("big"))
                .with_partition_data(
                    (0..4)
                        .map(|p| {
                            PartitionProduceData::default()
                                .with_index(p)
                                .with_records(Some(batch(&[&value])))
                        })
                        .collect(),
                ),
        ]);
    let ResponseKind::Produce(r) = raw.request(ApiKey::Produce, 9, &request).await else {
        panic!("not a Produce answer");
    };
    let codes: Vec<(i16, i64)> = r.responses[0]
        .partition_responses
        .iter()
        .map(|p| (p.error_code, p.base_offset))
        .collect();
    assert_eq!(codes, vec![(0, 0); 4]);
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactional_batches_outside_their_transaction_and_control_batches_are_refused() {
    let broker = KafkaServer::start().await;
    let mut raw = Raw::connect(broker.addr).await;
    create_topic(&mut raw, "t").await;
    let unknown = transactional_batch(&["x"], (424_242, 0), false);
    assert_eq!(
        produce(&mut raw, "t", unknown).await.0,
        ResponseError::InvalidProducerIdMapping.code()
    );
    let init = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("raw-tx"))))
        .with_transaction_timeout_ms(60_000);
    let ResponseKind::InitProducerId(r) = raw.request(ApiKey::InitProducerId, 1, &init).await
    else {
        panic!("not an InitProducerId answer");
    };
    assert_eq!(r.error_code, 0);
    let producer = (r.producer_id.0, r.producer_epoch);
    // The partition was never added to a transaction.
    let outside = transactional_batch(&["x"], producer, false);
    assert_eq!(
        produce(&mut raw, "t", outside).await.0,
        ResponseError::InvalidTxnState.code()
    );
    let stale = transactional_batch(&["x"], (producer.0, producer.1 + 1), false);
    assert_eq!(
        produce(&mut raw, "t", stale).await.0,
        ResponseError::InvalidProducerEpoch.code()
    );
    let marker = transactional_batch(&["x"], producer, true);
    assert_eq!(
        produce(&mut raw, "t", marker).await.0,
        ResponseError::InvalidRecord.code()
    );
    // Nothing of them is in the log; a plain batch still goes in at offset 0.
    assert_eq!(produce(&mut raw, "t", batch(&["ok"])).await, (0, 0));
    broker.stop().await;
}
