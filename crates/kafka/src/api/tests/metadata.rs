//! ApiVersions, Metadata and DescribeCluster: the versions Ferry answers, this instance as
//! the one broker and every partition's leader, topics created on demand only when
//! allowed, and the operations a principal may do (KIP-430).

use super::acls::{client_of, create_acls, creation, guarded};
use super::create_topic;
use super::fixture::{Client, Front, name};
use crate::api::SUPPORTED;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiVersionsRequest, BrokerId, DescribeClusterRequest, DescribeClusterResponse, MetadataRequest,
};

/// A Metadata request naming `topics`, allowing their creation when `create`.
fn metadata_of(topics: &[&str], create: bool) -> MetadataRequest {
    MetadataRequest::default()
        .with_allow_auto_topic_creation(create)
        .with_topics(Some(
            topics
                .iter()
                .map(|t| MetadataRequestTopic::default().with_name(Some(name(t))))
                .collect(),
        ))
}

#[tokio::test]
async fn api_versions_lists_every_supported_api_with_its_versions() {
    let front = Front::start().await;
    let mut c = front.client();
    for version in [0, 3, 4] {
        let r = c.call(version, ApiVersionsRequest::default()).await;
        assert_eq!(r.error_code, 0);
        let listed: Vec<(i16, i16, i16)> = r
            .api_keys
            .iter()
            .map(|k| (k.api_key, k.min_version, k.max_version))
            .collect();
        let supported: Vec<(i16, i16, i16)> = SUPPORTED
            .iter()
            .map(|&(api, min, max)| (api as i16, min, max))
            .collect();
        assert_eq!(listed, supported, "v{version}");
    }
    front.stop().await;
}

#[tokio::test]
async fn metadata_names_this_instance_as_broker_controller_and_every_leader() {
    let front = Front::start_with(|c| c.node_id = 7).await;
    let mut c = front.client();
    create_topic(&mut c, "pair", 2).await;
    let r = c
        .call(12, MetadataRequest::default().with_topics(None))
        .await;
    let brokers: Vec<(i32, String)> = r
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.host.to_string()))
        .collect();
    assert_eq!(brokers, [(7, "127.0.0.1".to_owned())]);
    assert!(r.brokers[0].port > 0, "the bound port is advertised");
    assert_eq!(r.controller_id, BrokerId(7));
    assert_eq!(r.cluster_id.as_deref(), Some("ferry-ferry"));
    assert_eq!(r.topics.len(), 1);
    let topic = &r.topics[0];
    assert_eq!(
        (
            topic.error_code,
            topic.name.as_ref().map(|n| n.0.to_string())
        ),
        (0, Some("pair".to_owned()))
    );
    let uuid = front.ctx.topics.get("pair").unwrap().meta.uuid;
    assert_eq!(topic.topic_id, uuid::Uuid::from_bytes(uuid));
    let partitions: Vec<(i32, i16, i32, Vec<BrokerId>)> = topic
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                p.error_code,
                p.leader_id.0,
                p.replica_nodes.clone(),
            )
        })
        .collect();
    assert_eq!(
        partitions,
        [(0, 0, 7, vec![BrokerId(7)]), (1, 0, 7, vec![BrokerId(7)])]
    );
    front.stop().await;
}

#[tokio::test]
async fn metadata_creates_a_missing_topic_when_auto_create_allows() {
    let front = Front::start_with(|c| c.default_partitions = 3).await;
    let mut c = front.client();
    let r = c.call(9, metadata_of(&["fresh"], true)).await;
    assert_eq!(r.topics[0].error_code, 0);
    assert_eq!(r.topics[0].partitions.len(), 3, "kafka.default_partitions");
    assert_eq!(front.ctx.topics.get("fresh").unwrap().partitions.len(), 3);
    // From v4 the client decides too.
    let r = c.call(9, metadata_of(&["declined"], false)).await;
    assert_eq!(
        r.topics[0].error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert!(front.ctx.topics.get("declined").is_none());
    front.stop().await;
}

#[tokio::test]
async fn a_missing_topic_is_unknown_when_auto_create_is_off() {
    let front = Front::start_with(|c| c.auto_create_topics = false).await;
    let mut c = front.client();
    for version in [0, 9, 12] {
        let r = c.call(version, metadata_of(&["nowhere"], true)).await;
        assert_eq!(
            r.topics[0].error_code,
            ResponseError::UnknownTopicOrPartition.code(),
            "v{version}"
        );
    }
    assert!(front.ctx.topics.get("nowhere").is_none(), "not created");
    front.stop().await;
}

#[tokio::test]
async fn metadata_by_topic_id_describes_the_topic_or_says_the_id_is_unknown() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "by-id", 1).await;
    let id = uuid::Uuid::from_bytes(front.ctx.topics.get("by-id").unwrap().meta.uuid);
    let unknown = uuid::Uuid::from_u128(42);
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default()
            .with_name(None)
            .with_topic_id(id),
        MetadataRequestTopic::default()
            .with_name(None)
            .with_topic_id(unknown),
    ]));
    let r = c.call(12, request).await;
    let answered: Vec<(uuid::Uuid, Option<String>, i16)> = r
        .topics
        .iter()
        .map(|t| {
            (
                t.topic_id,
                t.name.as_ref().map(|n| n.0.to_string()),
                t.error_code,
            )
        })
        .collect();
    assert_eq!(answered[0], (id, Some("by-id".to_owned()), 0));
    assert_eq!(
        (answered[1].0, answered[1].2),
        (unknown, ResponseError::UnknownTopicId.code())
    );
    front.stop().await;
}

#[tokio::test]
async fn metadata_v0_with_no_topics_describes_every_topic() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "a", 1).await;
    create_topic(&mut c, "b", 1).await;
    let r = c
        .call(0, MetadataRequest::default().with_topics(Some(Vec::new())))
        .await;
    let mut names: Vec<String> = r
        .topics
        .iter()
        .map(|t| t.name.as_ref().unwrap().0.to_string())
        .collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
    front.stop().await;
}

/// KIP-430's bit field of every operation Kafka reports on a topic (Read 3, Write 4,
/// Create 5, Delete 6, Alter 7, Describe 8, DescribeConfigs 10, AlterConfigs 11) and on
/// the cluster (Create 5, Alter 7, Describe 8, ClusterAction 9, DescribeConfigs 10,
/// AlterConfigs 11, IdempotentWrite 12).
const ALL_TOPIC_OPERATIONS: i32 = 0b1101_1111_1000;
const ALL_CLUSTER_OPERATIONS: i32 = 0b1_1111_1010_0000;
/// The schema's default: not asked.
const NOT_ASKED: i32 = i32::MIN;

/// DescribeCluster (v1) of brokers, with the cluster's operations when `operations`.
async fn describe_cluster(c: &mut Client, operations: bool) -> DescribeClusterResponse {
    let request = DescribeClusterRequest::default()
        .with_endpoint_type(1)
        .with_include_cluster_authorized_operations(operations);
    c.call(1, request).await
}

/// Metadata (v10) of `topic` with the topic's and the cluster's operations: (topic's
/// error code, topic's operations, cluster's operations).
async fn operations(c: &mut Client, topic: &str) -> (i16, i32, i32) {
    let request = metadata_of(&[topic], false)
        .with_include_topic_authorized_operations(true)
        .with_include_cluster_authorized_operations(true);
    let r = c.call(10, request).await;
    let t = &r.topics[0];
    (
        t.error_code,
        t.topic_authorized_operations,
        r.cluster_authorized_operations,
    )
}

#[tokio::test]
async fn describe_cluster_lists_this_broker_as_controller_with_the_cluster_id() {
    let front = Front::start().await;
    let mut c = front.client();
    let r = describe_cluster(&mut c, true).await;
    let me = front.ctx.brokers.me().node;
    assert_eq!(
        (
            r.error_code,
            r.cluster_id.to_string(),
            r.controller_id,
            r.endpoint_type
        ),
        (0, front.ctx.cluster_id.clone(), BrokerId(me), 1)
    );
    let brokers: Vec<(BrokerId, bool)> = r
        .brokers
        .iter()
        .map(|b| (b.broker_id, b.port > 0))
        .collect();
    assert_eq!(brokers, [(BrokerId(me), true)]);
    assert_eq!(r.cluster_authorized_operations, ALL_CLUSTER_OPERATIONS);
    let r = describe_cluster(&mut c, false).await;
    assert_eq!(r.cluster_authorized_operations, NOT_ASKED);
    let controllers = DescribeClusterRequest::default().with_endpoint_type(2);
    assert_eq!(
        c.call(1, controllers).await.error_code,
        ResponseError::UnsupportedEndpointType.code()
    );
    front.stop().await;
}

#[tokio::test]
async fn authorized_operations_are_every_operation_without_acls_and_what_acls_allow() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "t", 1).await;
    assert_eq!(
        operations(&mut c, "t").await,
        (0, ALL_TOPIC_OPERATIONS, ALL_CLUSTER_OPERATIONS)
    );
    let plain = c.call(10, metadata_of(&["t"], false)).await;
    assert_eq!(
        (
            plain.topics[0].topic_authorized_operations,
            plain.cluster_authorized_operations
        ),
        (NOT_ASKED, NOT_ASKED),
        "not asked, not computed"
    );
    front.stop().await;

    let front = guarded().await;
    let mut admin = client_of(&front, "admin");
    create_topic(&mut admin, "t", 1).await;
    assert_eq!(
        operations(&mut admin, "t").await,
        (0, ALL_TOPIC_OPERATIONS, ALL_CLUSTER_OPERATIONS),
        "a super user"
    );
    const TOPIC: i8 = 2;
    const LITERAL: i8 = 3;
    const READ: i8 = 3;
    const ALLOW: i8 = 3;
    let acl = creation(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW);
    assert_eq!(create_acls(&mut admin, vec![acl]).await, [0]);
    let mut alice = client_of(&front, "alice");
    // Read implies Describe; no Describe on the cluster: 0.
    assert_eq!(operations(&mut alice, "t").await, (0, 1 << 3 | 1 << 8, 0));
    assert_eq!(
        describe_cluster(&mut alice, true)
            .await
            .cluster_authorized_operations,
        0
    );
    front.stop().await;
}
