//! Kafka ACLs through the API handlers: the principal a connection is authorized as (SASL,
//! certificate, anonymous), CreateAcls/DescribeAcls/DeleteAcls answers, and what APIs
//! without a real-client test refuse or filter — DescribeConfigs of the broker, DeleteTopics,
//! ListGroups, idempotent InitProducerId (KIP-679) — and an ACL created through one
//! instance enforced by another over the same store.

use super::create_topic;
use super::fixture::{Client, Front, name, text};
use super::sasl::with_certificate;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreateAclsRequest, DeleteAclsRequest, DeleteTopicsRequest, DescribeAclsRequest,
    DescribeConfigsRequest, InitProducerIdRequest, MetadataRequest,
};

/// A front where only what ACLs allow is allowed, with `User:admin` a super user.
pub(super) async fn guarded() -> Front {
    Front::start_with(|c| {
        c.super_users = vec!["User:admin".into()];
        c.allow_everyone_if_no_acl_found = false;
    })
    .await
}

/// A client authenticated (as SASL would) as `user`.
pub(super) fn client_of(front: &Front, user: &str) -> Client {
    let mut c = front.client();
    c.session.user = Some(user.into());
    c
}

/// A creation: (resource type, name, pattern type, principal, operation, permission).
pub(super) fn creation(
    rt: i8,
    name: &str,
    pt: i8,
    principal: &str,
    op: i8,
    perm: i8,
) -> AclCreation {
    AclCreation::default()
        .with_resource_type(rt)
        .with_resource_name(text(name))
        .with_resource_pattern_type(pt)
        .with_principal(text(principal))
        .with_host(text("*"))
        .with_operation(op)
        .with_permission_type(perm)
}

/// CreateAcls (v2) of `creations`: each result's error code.
pub(super) async fn create_acls(c: &mut Client, creations: Vec<AclCreation>) -> Vec<i16> {
    let r = c
        .call(2, CreateAclsRequest::default().with_creations(creations))
        .await;
    r.results.iter().map(|r| r.error_code).collect()
}

/// Metadata (v12) of `topic`: its error code.
async fn describe_topic(c: &mut Client, topic: &str) -> i16 {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name(topic))),
        ]))
        .with_allow_auto_topic_creation(false);
    c.call(12, request).await.topics[0].error_code
}

// Kafka's wire codes of resource types, pattern types, operations and permissions.
pub(super) const TOPIC: i8 = 2;
const CLUSTER: i8 = 4;
pub(super) const TRANSACTIONAL_ID: i8 = 5;
pub(super) const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
pub(super) const READ: i8 = 3;
const WRITE: i8 = 4;
pub(super) const DESCRIBE: i8 = 8;
pub(super) const ALLOW: i8 = 3;
const ANY: i8 = 1;

#[tokio::test]
async fn connections_are_authorized_as_their_sasl_user_certificate_or_anonymous() {
    let front = Front::start_with(|c| {
        c.super_users = vec!["User:admin".into()];
        c.allow_everyone_if_no_acl_found = false;
        c.ssl_principal_mapping_rules = "RULE:^CN=([^,]*),.*$/$1/L".into();
    })
    .await;
    let mut admin = client_of(&front, "admin");
    create_topic(&mut admin, "billing-events", 1).await;
    assert_eq!(
        create_acls(
            &mut admin,
            vec![creation(
                TOPIC,
                "billing-",
                PREFIXED,
                "User:billing",
                DESCRIBE,
                ALLOW
            )]
        )
        .await,
        [0]
    );
    let mut by_certificate = front.client_as(with_certificate("CN=Billing,O=Example"));
    assert_eq!(by_certificate.session.caller().principal, "User:billing");
    let mut anonymous = front.client();
    assert_eq!(anonymous.session.caller().principal, "User:ANONYMOUS");
    assert_eq!(anonymous.session.caller().host, "127.0.0.1");
    let mut by_sasl = client_of(&front, "billing");
    assert_eq!(by_sasl.session.caller().principal, "User:billing");
    assert_eq!(
        describe_topic(&mut by_certificate, "billing-events").await,
        0
    );
    assert_eq!(describe_topic(&mut by_sasl, "billing-events").await, 0);
    assert_eq!(
        describe_topic(&mut anonymous, "billing-events").await,
        ResponseError::TopicAuthorizationFailed.code()
    );
}

#[tokio::test]
async fn broker_configs_topic_deletion_and_idempotent_producers_need_their_acls() {
    let front = guarded().await;
    let mut admin = client_of(&front, "admin");
    create_topic(&mut admin, "kept", 1).await;
    let mut alice = client_of(&front, "alice");

    let broker_configs = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(CLUSTER)
            .with_resource_name(text("0")),
    ]);
    let r = alice.call(4, broker_configs.clone()).await;
    assert_eq!(
        r.results[0].error_code,
        ResponseError::ClusterAuthorizationFailed.code()
    );
    assert_eq!(admin.call(4, broker_configs).await.results[0].error_code, 0);

    let delete = DeleteTopicsRequest::default().with_topic_names(vec![name("kept")]);
    let r = alice.call(5, delete).await;
    assert_eq!(
        r.responses[0].error_code,
        ResponseError::TopicAuthorizationFailed.code()
    );

    // KIP-679: Write on some topic is enough for an idempotent producer id.
    let idempotent = InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(60_000);
    let r = alice.call(4, idempotent.clone()).await;
    assert_eq!(
        r.error_code,
        ResponseError::ClusterAuthorizationFailed.code()
    );
    assert_eq!(
        create_acls(
            &mut admin,
            vec![creation(TOPIC, "kept", LITERAL, "User:alice", WRITE, ALLOW)]
        )
        .await,
        [0]
    );
    let r = alice.call(4, idempotent).await;
    assert_eq!((r.error_code, r.producer_epoch), (0, 0));
}

#[tokio::test]
async fn acl_requests_answer_as_kafka_and_need_the_cluster() {
    let front = guarded().await;
    let mut admin = client_of(&front, "admin");
    let mut alice = client_of(&front, "alice");
    assert_eq!(
        create_acls(
            &mut alice,
            vec![creation(TOPIC, "t", LITERAL, "User:alice", WRITE, ALLOW)]
        )
        .await,
        [ResponseError::ClusterAuthorizationFailed.code()]
    );
    let codes = create_acls(
        &mut admin,
        vec![
            creation(TOPIC, "t", LITERAL, "User:alice", WRITE, ALLOW),
            creation(TOPIC, "t", ANY, "User:alice", WRITE, ALLOW),
            creation(TOPIC, "t", LITERAL, "alice", WRITE, ALLOW),
        ],
    )
    .await;
    let invalid = ResponseError::InvalidRequest.code();
    assert_eq!(codes, [0, invalid, invalid]);

    let every = DescribeAclsRequest::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(ANY)
        .with_pattern_type_filter(ANY)
        .with_operation(ANY)
        .with_permission_type(ANY);
    let r = alice.call(2, every.clone()).await;
    assert_eq!(
        r.error_code,
        ResponseError::ClusterAuthorizationFailed.code()
    );
    let r = admin.call(2, every.clone()).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(r.resources.len(), 1);
    assert_eq!(r.resources[0].resource_name.as_str(), "t");
    assert_eq!(r.resources[0].acls[0].principal.as_str(), "User:alice");
    let r = admin
        .call(2, every.clone().with_pattern_type_filter(0))
        .await;
    assert_eq!(r.error_code, invalid);
    assert_eq!(
        r.error_message.map(|m| m.to_string()).as_deref(),
        Some("Invalid patternType filter 0")
    );

    let delete = DeleteAclsRequest::default().with_filters(vec![
        DeleteAclsFilter::default()
            .with_resource_type_filter(TOPIC)
            .with_pattern_type_filter(2)
            .with_resource_name_filter(Some(text("t")))
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(ANY)
            .with_permission_type(ANY),
    ]);
    let r = admin.call(2, delete).await;
    assert_eq!(r.filter_results[0].error_code, 0);
    assert_eq!(r.filter_results[0].matching_acls.len(), 1);
    assert!(admin.call(2, every).await.resources.is_empty());
}

/// A fetch session holds positions, not permissions: another user naming its id reads
/// nothing of what that user may not read.
#[tokio::test]
async fn a_fetch_session_of_one_user_reads_nothing_for_another() {
    let front = guarded().await;
    let mut admin = client_of(&front, "admin");
    super::create_topic(&mut admin, "secret", 1).await;
    super::produce_to(&mut admin, "secret", super::fixture::batch(&["s"])).await;
    let opened = super::fetch_request("secret", 0, 0).with_session_epoch(0);
    let session = admin.call(12, opened).await.session_id;
    assert!(session > 0);
    let mut alice = client_of(&front, "alice");
    let incremental = kafka_protocol::messages::FetchRequest::default()
        .with_max_bytes(1 << 20)
        .with_session_id(session)
        .with_session_epoch(1);
    let stolen = alice.call(12, incremental).await;
    let p = &stolen.responses[0].partitions[0];
    assert_eq!(p.error_code, ResponseError::TopicAuthorizationFailed.code());
    assert!(p.records.as_ref().is_none_or(|r| r.is_empty()));
    front.stop().await;
}
