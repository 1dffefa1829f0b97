//! Every version of every API Ferry advertises, in one test: for each (API, version) of
//! [`SUPPORTED`], a representative request valid at that version (only the fields the
//! version has) goes through the front's codec and the real handler, on a front with
//! something to answer about — a topic with records, a stable group with a member and
//! committed offsets, a KIP-848 group, an open transaction, an ACL, a SCRAM user — so
//! that the answer carries the fields that differ by version. The answer must encode at
//! that version (the codec refuses a field the version lacks, which a client meets as a
//! closed connection) and say no error.
//!
//! An API advertised without a representative request here fails the test.

use super::acls::{ALLOW, LITERAL, READ, TOPIC, create_acls, creation};
use super::fixture::{Client, FIRST_TIMESTAMP, Front, batch, name, producer_batch, text};
use super::groups::{commit, group, join_request, stable_member, sync_request};
use super::scram_credentials::{SHA_256, upsert};
use super::transactions::{add_offsets, add_partitions, producer, txn_id};
use super::{
    create_topic, create_topics_request, fetch_request, list_offset, produce, produce_request,
};
use crate::api::SUPPORTED;
use crate::api::first_error;
use crate::wire::legacy::tests::{message, set};
use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::consumer_group_heartbeat_request::ConsumerGroupHeartbeatRequest;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::find_coordinator_request::FindCoordinatorRequest;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource as IncrementalResource, AlterableConfig as IncrementalConfig,
};
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AlterConfigsRequest,
    AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest, AlterShareGroupOffsetsRequest,
    AlterUserScramCredentialsRequest, ApiKey, ApiVersionsRequest, BrokerId,
    ConsumerGroupDescribeRequest, CreateAclsRequest, CreatePartitionsRequest, DeleteAclsRequest,
    DeleteGroupsRequest, DeleteRecordsRequest, DeleteShareGroupOffsetsRequest, DeleteTopicsRequest,
    DescribeAclsRequest, DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    DescribeLogDirsRequest, DescribeProducersRequest, DescribeShareGroupOffsetsRequest,
    DescribeTransactionsRequest, DescribeUserScramCredentialsRequest, ElectLeadersRequest,
    EndTxnRequest, HeartbeatRequest, IncrementalAlterConfigsRequest, InitProducerIdRequest,
    LeaveGroupRequest, ListGroupsRequest, ListOffsetsRequest, ListPartitionReassignmentsRequest,
    ListTransactionsRequest, MetadataRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, OffsetForLeaderEpochRequest, ProducerId, RequestKind, ResponseKind,
    SaslAuthenticateRequest, SaslHandshakeRequest, ShareAcknowledgeRequest, ShareFetchRequest,
    ShareGroupDescribeRequest, ShareGroupHeartbeatRequest, TxnOffsetCommitRequest,
    share_fetch_request,
};

/// The topic with records every reading API asks about.
const TOPIC_NAME: &str = "orders";
/// The classic group with a stable member and committed offsets.
const GROUP: &str = "g";
/// The KIP-848 group with one member.
const CONSUMER_GROUP: &str = "cg";
/// The transactional id of the transaction left open on [`TOPIC_NAME`].
const OPEN_TXN: &str = "open-txn";
/// The share group its representative requests join, describe, fetch for and acknowledge.
const SHARE_GROUP: &str = "sg";
/// Its member.
const SHARE_MEMBER: &str = "share-member";
/// A share group whose member left (its offsets may change).
const EMPTY_SHARE_GROUP: &str = "sg-empty";
/// Kafka's wire code of a topic config resource.
const TOPIC_RESOURCE: i8 = 2;
/// Kafka's wire code of ANY in ACL filters (resource, pattern, operation, permission).
const ANY: i8 = 1;
/// Kafka's wire code of MATCH in ACL pattern filters.
const MATCH: i8 = 2;

/// What the representative requests need of what [`World::prepare`] made.
struct World {
    /// The stable member of [`GROUP`]: (member id, generation).
    member: (String, i32),
    /// The leader epoch of partition 0 of [`TOPIC_NAME`].
    leader_epoch: i32,
    /// The instance's log dir.
    log_dir: String,
    /// The instance's node id: the one replica of every partition it leads.
    node: i32,
    /// The UUID of [`TOPIC_NAME`] (share requests name topics by id).
    topic_id: uuid::Uuid,
}

impl World {
    /// Fills `front` with what the representative requests ask about.
    async fn prepare(front: &Front) -> Self {
        let c = &mut front.client();
        create_topic(c, TOPIC_NAME, 1).await;
        let produced = produce(c, TOPIC_NAME, 0, batch(&["a", "b", "c"])).await;
        assert_eq!(produced.error_code, 0);
        let member = stable_member(c, GROUP).await;
        let codes = commit(c, GROUP, &member.0, member.1, &[(TOPIC_NAME, 0, 2)]).await;
        assert_eq!(codes, [0]);
        // A transaction left open: DescribeProducers, DescribeTransactions and
        // ListTransactions have it to show.
        let open = producer(c, OPEN_TXN).await;
        let added = add_partitions(c, OPEN_TXN, open, &[(TOPIC_NAME, &[0])]).await;
        assert_eq!(added, [(TOPIC_NAME.to_owned(), 0, 0)]);
        let staged = produce(c, TOPIC_NAME, 0, producer_batch(&["t"], open, 0, true)).await;
        assert_eq!(staged.error_code, 0);
        let joined = c.call(0, consumer_group_join(CONSUMER_GROUP)).await;
        assert_eq!(joined.error_code, 0);
        let acl = creation(TOPIC, "acl-demo", LITERAL, "User:alice", READ, ALLOW);
        assert_eq!(create_acls(c, vec![acl]).await, [0]);
        let upserted = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsert(
            "scram-user",
            SHA_256,
            4096,
            "secret",
        )]);
        let altered = c.call(0, upserted).await;
        assert_eq!(altered.results[0].error_code, 0);
        let leader_epoch = list_offset(c, TOPIC_NAME, 0, -1, 0).await.leader_epoch;
        for epoch in [0, -1] {
            let request = ShareGroupHeartbeatRequest::default()
                .with_group_id(group(EMPTY_SHARE_GROUP))
                .with_member_id(text("gone"))
                .with_member_epoch(epoch)
                .with_subscribed_topic_names(Some(vec![name(TOPIC_NAME)]));
            let answer = c.call(1, request).await;
            assert_eq!(answer.error_code, 0, "{answer:?}");
        }
        Self {
            member,
            leader_epoch,
            log_dir: front.ctx.log_dir.path.clone(),
            node: front.ctx.config.node_id,
            topic_id: uuid::Uuid::from_bytes(
                front.ctx.topics.get(TOPIC_NAME).expect("created").meta.uuid,
            ),
        }
    }
}

#[tokio::test]
async fn every_advertised_version_of_every_api_reads_its_request_and_writes_its_answer() {
    let front = Front::start().await;
    let world = World::prepare(&front).await;
    for &(api, min, max) in SUPPORTED {
        for version in min..=max {
            let mut c = front.client();
            let request = representative(&mut c, &world, api, version).await;
            let response = c
                .exchange(api, version, request)
                .await
                .unwrap_or_else(|| panic!("{api:?} v{version} is answered"));
            assert_eq!(
                first_error(&response),
                0,
                "{api:?} v{version} answers without error: {response:?}"
            );
            assert_substance(api, version, &response);
        }
    }
    front.stop().await;
}

/// A request of `api` a client at `version` might send, valid at that version; what it
/// needs of its own (a group to leave, a topic to delete, a transaction to end, a SASL
/// mechanism chosen) is made first, by `c`.
async fn representative(c: &mut Client, world: &World, api: ApiKey, version: i16) -> RequestKind {
    let (member, generation) = (world.member.0.as_str(), world.member.1);
    match api {
        ApiKey::Produce if version < 3 => {
            // Produce v0–v2 carry message sets: format v0, from v2 format v1 (timestamps).
            let magic = if version < 2 { 0 } else { 1 };
            let records = set(&[message(magic, 0, FIRST_TIMESTAMP, None, Some(b"old"))]);
            produce_request(TOPIC_NAME, 0, Bytes::from(records)).into()
        }
        ApiKey::Produce => produce_request(TOPIC_NAME, 0, batch(&["new"])).into(),
        ApiKey::Fetch => fetch_request(TOPIC_NAME, 0, 0).into(),
        ApiKey::ListOffsets => {
            let request = ListOffsetsRequest::default().with_topics(vec![
                ListOffsetsTopic::default()
                    .with_name(name(TOPIC_NAME))
                    .with_partitions(vec![
                        ListOffsetsPartition::default()
                            .with_partition_index(0)
                            .with_timestamp(FIRST_TIMESTAMP),
                    ]),
            ]);
            request.into()
        }
        ApiKey::Metadata => {
            let topics = MetadataRequestTopic::default().with_name(Some(name(TOPIC_NAME)));
            // v0 has no null topics: its empty list asks for all of them.
            let mut request = MetadataRequest::default().with_topics(Some(if version == 0 {
                Vec::new()
            } else {
                vec![topics]
            }));
            if version >= 8 {
                request = request.with_include_topic_authorized_operations(true);
            }
            if (8..=10).contains(&version) {
                request = request.with_include_cluster_authorized_operations(true);
            }
            request.into()
        }
        ApiKey::OffsetCommit => OffsetCommitRequest::default()
            .with_group_id(group(GROUP))
            .with_member_id(text(member))
            .with_generation_id_or_member_epoch(generation)
            .with_topics(vec![
                OffsetCommitRequestTopic::default()
                    .with_name(name(TOPIC_NAME))
                    .with_partitions(vec![
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(0)
                            .with_committed_offset(2)
                            .with_committed_metadata(Some(text("note"))),
                    ]),
            ])
            .into(),
        ApiKey::OffsetFetch => OffsetFetchRequest::default()
            .with_group_id(group(GROUP))
            .with_topics(Some(vec![
                OffsetFetchRequestTopic::default()
                    .with_name(name(TOPIC_NAME))
                    .with_partition_indexes(vec![0]),
            ]))
            .into(),
        ApiKey::FindCoordinator => {
            let request = if version >= 4 {
                FindCoordinatorRequest::default().with_coordinator_keys(vec![text(GROUP)])
            } else {
                FindCoordinatorRequest::default().with_key(text(GROUP))
            };
            request.into()
        }
        ApiKey::JoinGroup => {
            let id = format!("join-v{version}");
            let request = join_request(&id, "", 10_000, b"m");
            if version < 4 {
                return request.into();
            }
            // KIP-394: from v4 a new member is first given its id, then joins with it.
            let first = c.call(version, request.clone()).await;
            request.with_member_id(first.member_id).into()
        }
        ApiKey::Heartbeat => HeartbeatRequest::default()
            .with_group_id(group(GROUP))
            .with_member_id(text(member))
            .with_generation_id(generation)
            .into(),
        ApiKey::LeaveGroup => {
            let id = format!("leave-v{version}");
            let (leaver, _) = stable_member(c, &id).await;
            let request = LeaveGroupRequest::default().with_group_id(group(&id));
            if version >= 3 {
                request
                    .with_members(vec![
                        MemberIdentity::default().with_member_id(text(&leaver)),
                    ])
                    .into()
            } else {
                request.with_member_id(text(&leaver)).into()
            }
        }
        ApiKey::SyncGroup => {
            let request = sync_request(GROUP, member, generation, &[(member, b"a1")]);
            if version >= 5 {
                request.into()
            } else {
                request
                    .with_protocol_type(None)
                    .with_protocol_name(None)
                    .into()
            }
        }
        ApiKey::DescribeGroups => {
            let request = DescribeGroupsRequest::default().with_groups(vec![group(GROUP)]);
            request
                .with_include_authorized_operations(version >= 3)
                .into()
        }
        ApiKey::ListGroups => {
            let request = ListGroupsRequest::default();
            let request = if version >= 4 {
                request.with_states_filter(vec![text("Stable")])
            } else {
                request
            };
            let request = if version >= 5 {
                request.with_types_filter(vec![text("classic")])
            } else {
                request
            };
            request.into()
        }
        ApiKey::SaslHandshake => SaslHandshakeRequest::default()
            .with_mechanism(text("PLAIN"))
            .into(),
        ApiKey::ApiVersions => {
            let request = ApiVersionsRequest::default();
            if version >= 3 {
                request
                    .with_client_software_name(text("ferry-tests"))
                    .with_client_software_version(text("1"))
                    .into()
            } else {
                request.into()
            }
        }
        ApiKey::CreateTopics => create_topics_request(
            &format!("created-v{version}"),
            1,
            &[("cleanup.policy", "delete")],
        )
        .into(),
        ApiKey::DeleteTopics => {
            let doomed = format!("doomed-v{version}");
            create_topic(c, &doomed, 1).await;
            DeleteTopicsRequest::default()
                .with_topic_names(vec![name(&doomed)])
                .with_timeout_ms(5_000)
                .into()
        }
        ApiKey::InitProducerId => InitProducerIdRequest::default()
            .with_transactional_id(Some(txn_id(&format!("init-v{version}"))))
            .with_transaction_timeout_ms(60_000)
            .into(),
        ApiKey::DescribeConfigs => {
            let request = DescribeConfigsRequest::default()
                .with_resources(vec![
                    DescribeConfigsResource::default()
                        .with_resource_type(TOPIC_RESOURCE)
                        .with_resource_name(text(TOPIC_NAME))
                        .with_configuration_keys(None),
                ])
                .with_include_synonyms(true);
            request.with_include_documentation(version >= 3).into()
        }
        ApiKey::AlterConfigs => AlterConfigsRequest::default()
            .with_resources(vec![
                AlterConfigsResource::default()
                    .with_resource_type(TOPIC_RESOURCE)
                    .with_resource_name(text(&altered(c, api, version).await))
                    .with_configs(vec![
                        AlterableConfig::default()
                            .with_name(text("retention.ms"))
                            .with_value(Some(text("86400000"))),
                    ]),
            ])
            .into(),
        ApiKey::IncrementalAlterConfigs => IncrementalAlterConfigsRequest::default()
            .with_resources(vec![
                IncrementalResource::default()
                    .with_resource_type(TOPIC_RESOURCE)
                    .with_resource_name(text(&altered(c, api, version).await))
                    .with_configs(vec![
                        IncrementalConfig::default()
                            .with_name(text("retention.ms"))
                            .with_config_operation(0)
                            .with_value(Some(text("86400000"))),
                    ]),
            ])
            .into(),
        ApiKey::SaslAuthenticate => {
            let chosen = c
                .call(
                    1,
                    SaslHandshakeRequest::default().with_mechanism(text("PLAIN")),
                )
                .await;
            assert_eq!(chosen.error_code, 0);
            SaslAuthenticateRequest::default()
                .with_auth_bytes(Bytes::from_static(b"\0guest\0guest"))
                .into()
        }
        ApiKey::CreatePartitions => {
            let grown = format!("grown-v{version}");
            create_topic(c, &grown, 1).await;
            CreatePartitionsRequest::default()
                .with_topics(vec![
                    CreatePartitionsTopic::default()
                        .with_name(name(&grown))
                        .with_count(2)
                        .with_assignments(None),
                ])
                .with_timeout_ms(5_000)
                .into()
        }
        ApiKey::DeleteGroups => {
            let id = format!("emptied-v{version}");
            assert_eq!(commit(c, &id, "", -1, &[(TOPIC_NAME, 0, 1)]).await, [0]);
            DeleteGroupsRequest::default()
                .with_groups_names(vec![group(&id)])
                .into()
        }
        ApiKey::AddPartitionsToTxn => {
            let id = format!("add-partitions-v{version}");
            let (producer_id, epoch) = producer(c, &id).await;
            AddPartitionsToTxnRequest::default()
                .with_v3_and_below_transactional_id(txn_id(&id))
                .with_v3_and_below_producer_id(ProducerId(producer_id))
                .with_v3_and_below_producer_epoch(epoch)
                .with_v3_and_below_topics(vec![
                    AddPartitionsToTxnTopic::default()
                        .with_name(name(TOPIC_NAME))
                        .with_partitions(vec![0]),
                ])
                .into()
        }
        ApiKey::AddOffsetsToTxn => {
            let id = format!("add-offsets-v{version}");
            let (producer_id, epoch) = producer(c, &id).await;
            AddOffsetsToTxnRequest::default()
                .with_transactional_id(txn_id(&id))
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(epoch)
                .with_group_id(group(&format!("txn-group-v{version}")))
                .into()
        }
        ApiKey::EndTxn => {
            let id = format!("end-v{version}");
            let open = producer(c, &id).await;
            let added = add_partitions(c, &id, open, &[(TOPIC_NAME, &[0])]).await;
            assert_eq!(added, [(TOPIC_NAME.to_owned(), 0, 0)]);
            EndTxnRequest::default()
                .with_transactional_id(txn_id(&id))
                .with_producer_id(ProducerId(open.0))
                .with_producer_epoch(open.1)
                .with_committed(true)
                .into()
        }
        ApiKey::TxnOffsetCommit => {
            let id = format!("txn-commit-v{version}");
            let txn_group = format!("txn-group-commit-v{version}");
            let open = producer(c, &id).await;
            assert_eq!(add_offsets(c, &id, open, &txn_group).await, 0);
            TxnOffsetCommitRequest::default()
                .with_transactional_id(txn_id(&id))
                .with_producer_id(ProducerId(open.0))
                .with_producer_epoch(open.1)
                .with_group_id(group(&txn_group))
                .with_topics(vec![
                    TxnOffsetCommitRequestTopic::default()
                        .with_name(name(TOPIC_NAME))
                        .with_partitions(vec![
                            TxnOffsetCommitRequestPartition::default()
                                .with_partition_index(0)
                                .with_committed_offset(1),
                        ]),
                ])
                .into()
        }
        ApiKey::DescribeAcls => DescribeAclsRequest::default()
            .with_resource_type_filter(ANY)
            .with_resource_name_filter(None)
            .with_pattern_type_filter(MATCH)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(ANY)
            .with_permission_type(ANY)
            .into(),
        ApiKey::CreateAcls => CreateAclsRequest::default()
            .with_creations(vec![creation(
                TOPIC,
                &format!("created-acl-v{version}"),
                LITERAL,
                "User:alice",
                READ,
                ALLOW,
            )])
            .into(),
        ApiKey::DeleteAcls => {
            let doomed = format!("deleted-acl-v{version}");
            let acl = creation(TOPIC, &doomed, LITERAL, "User:alice", READ, ALLOW);
            assert_eq!(create_acls(c, vec![acl]).await, [0]);
            DeleteAclsRequest::default()
                .with_filters(vec![
                    DeleteAclsFilter::default()
                        .with_resource_type_filter(TOPIC)
                        .with_resource_name_filter(Some(text(&doomed)))
                        .with_pattern_type_filter(LITERAL)
                        .with_principal_filter(None)
                        .with_host_filter(None)
                        .with_operation(ANY)
                        .with_permission_type(ANY),
                ])
                .into()
        }
        ApiKey::DeleteRecords => {
            let trimmed = format!("trimmed-v{version}");
            create_topic(c, &trimmed, 1).await;
            let produced = produce(c, &trimmed, 0, batch(&["a", "b"])).await;
            assert_eq!(produced.error_code, 0);
            DeleteRecordsRequest::default()
                .with_timeout_ms(5_000)
                .with_topics(vec![
                    DeleteRecordsTopic::default()
                        .with_name(name(&trimmed))
                        .with_partitions(vec![
                            DeleteRecordsPartition::default()
                                .with_partition_index(0)
                                .with_offset(1),
                        ]),
                ])
                .into()
        }
        ApiKey::OffsetDelete => {
            let id = format!("offsets-deleted-v{version}");
            assert_eq!(commit(c, &id, "", -1, &[(TOPIC_NAME, 0, 1)]).await, [0]);
            OffsetDeleteRequest::default()
                .with_group_id(group(&id))
                .with_topics(vec![
                    OffsetDeleteRequestTopic::default()
                        .with_name(name(TOPIC_NAME))
                        .with_partitions(vec![
                            OffsetDeleteRequestPartition::default().with_partition_index(0),
                        ]),
                ])
                .into()
        }
        ApiKey::DescribeUserScramCredentials => {
            DescribeUserScramCredentialsRequest::default().into()
        }
        ApiKey::AlterUserScramCredentials => AlterUserScramCredentialsRequest::default()
            .with_upsertions(vec![upsert(
                &format!("scram-v{version}"),
                SHA_256,
                4096,
                "secret",
            )])
            .into(),
        ApiKey::DescribeCluster => DescribeClusterRequest::default()
            .with_include_cluster_authorized_operations(true)
            .into(),
        ApiKey::DescribeProducers => DescribeProducersRequest::default()
            .with_topics(vec![
                kafka_protocol::messages::describe_producers_request::TopicRequest::default()
                    .with_name(name(TOPIC_NAME))
                    .with_partition_indexes(vec![0]),
            ])
            .into(),
        ApiKey::DescribeTransactions => DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![txn_id(OPEN_TXN)])
            .into(),
        ApiKey::ListTransactions => {
            let request = ListTransactionsRequest::default();
            let request = if version >= 1 {
                request.with_duration_filter(0)
            } else {
                request
            };
            if version >= 2 {
                request
                    .with_transactional_id_pattern(Some(text("open-.*")))
                    .into()
            } else {
                request.into()
            }
        }
        ApiKey::OffsetForLeaderEpoch => OffsetForLeaderEpochRequest::default()
            .with_topics(vec![
                OffsetForLeaderTopic::default()
                    .with_topic(name(TOPIC_NAME))
                    .with_partitions(vec![
                        OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_leader_epoch(world.leader_epoch),
                    ]),
            ])
            .into(),
        ApiKey::ConsumerGroupHeartbeat => {
            let request = consumer_group_join(&format!("cg-v{version}"));
            if version >= 1 {
                // From v1 the member names itself.
                request.with_member_id(text("member-v1")).into()
            } else {
                request.into()
            }
        }
        ApiKey::ConsumerGroupDescribe => ConsumerGroupDescribeRequest::default()
            .with_group_ids(vec![group(CONSUMER_GROUP)])
            .with_include_authorized_operations(true)
            .into(),
        // The share APIs in the order SUPPORTED lists them: a member joins, is described,
        // opens a share session and acknowledges on it.
        ApiKey::ShareGroupHeartbeat => ShareGroupHeartbeatRequest::default()
            .with_group_id(group(SHARE_GROUP))
            .with_member_id(text(SHARE_MEMBER))
            .with_subscribed_topic_names(Some(vec![name(TOPIC_NAME)]))
            .into(),
        ApiKey::ShareGroupDescribe => ShareGroupDescribeRequest::default()
            .with_group_ids(vec![group(SHARE_GROUP)])
            .into(),
        ApiKey::ShareFetch => ShareFetchRequest::default()
            .with_group_id(Some(group(SHARE_GROUP)))
            .with_member_id(Some(text(SHARE_MEMBER)))
            .with_max_records(10)
            .with_max_bytes(1 << 20)
            // v2: KIP-1206's record_limit.
            .with_share_acquire_mode(i8::from(version >= 2))
            .with_topics(vec![
                share_fetch_request::FetchTopic::default()
                    .with_topic_id(world.topic_id)
                    .with_partitions(vec![
                        share_fetch_request::FetchPartition::default().with_partition_index(0),
                    ]),
            ])
            .into(),
        ApiKey::ShareAcknowledge => ShareAcknowledgeRequest::default()
            .with_group_id(Some(group(SHARE_GROUP)))
            .with_member_id(Some(text(SHARE_MEMBER)))
            // The session ShareFetch's last version opened (epoch 1), moved on by each
            // earlier version of this request.
            .with_share_session_epoch(i32::from(version))
            .with_is_renew_ack(version >= 2)
            .into(),
        ApiKey::DescribeShareGroupOffsets => DescribeShareGroupOffsetsRequest::default()
            .with_groups(vec![
                DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(group(SHARE_GROUP))
                    .with_topics(None),
            ])
            .into(),
        // The offsets of a share group without members may change.
        ApiKey::AlterShareGroupOffsets => AlterShareGroupOffsetsRequest::default()
            .with_group_id(group(EMPTY_SHARE_GROUP))
            .with_topics(vec![
                AlterShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(name(TOPIC_NAME))
                    .with_partitions(vec![
                        AlterShareGroupOffsetsRequestPartition::default()
                            .with_partition_index(0)
                            .with_start_offset(0),
                    ]),
            ])
            .into(),
        ApiKey::DeleteShareGroupOffsets => DeleteShareGroupOffsetsRequest::default()
            .with_group_id(group(EMPTY_SHARE_GROUP))
            .with_topics(vec![
                DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(name(TOPIC_NAME)),
            ])
            .into(),
        ApiKey::DescribeLogDirs => DescribeLogDirsRequest::default()
            .with_topics(Some(vec![
                DescribableLogDirTopic::default()
                    .with_topic(name(TOPIC_NAME))
                    .with_partitions(vec![0]),
            ]))
            .into(),
        ApiKey::AlterReplicaLogDirs => AlterReplicaLogDirsRequest::default()
            .with_dirs(vec![
                AlterReplicaLogDir::default()
                    .with_path(text(&world.log_dir))
                    .with_topics(vec![
                        AlterReplicaLogDirTopic::default()
                            .with_name(name(TOPIC_NAME))
                            .with_partitions(vec![0]),
                    ]),
            ])
            .into(),
        // Every partition: those that need no election are left out, so no error.
        ApiKey::ElectLeaders => ElectLeadersRequest::default()
            .with_topic_partitions(None)
            .into(),
        ApiKey::ListPartitionReassignments => ListPartitionReassignmentsRequest::default()
            .with_topics(None)
            .into(),
        ApiKey::AlterPartitionReassignments => AlterPartitionReassignmentsRequest::default()
            .with_topics(vec![
                ReassignableTopic::default()
                    .with_name(name(TOPIC_NAME))
                    .with_partitions(vec![
                        ReassignablePartition::default()
                            .with_partition_index(0)
                            .with_replicas(Some(vec![BrokerId(world.node)])),
                    ]),
            ])
            .into(),
        other => panic!("{other:?} v{version} is advertised but has no representative request"),
    }
}

/// A KIP-848 join (ConsumerGroupHeartbeat at epoch 0, the member id left to v0's
/// coordinator) of group `id`, subscribing to [`TOPIC_NAME`].
fn consumer_group_join(id: &str) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(group(id))
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![name(TOPIC_NAME)]))
        .with_topic_partitions(Some(Vec::new()))
}

/// A topic of its own for an alteration of `api` at `version`.
async fn altered(c: &mut Client, api: ApiKey, version: i16) -> String {
    let topic = format!("altered-{api:?}-v{version}").to_lowercase();
    create_topic(c, &topic, 1).await;
    topic
}

/// Checks that `response` of `api` at `version` has what its request asked about, so the
/// fields that differ by version were filled in.
fn assert_substance(api: ApiKey, version: i16, response: &ResponseKind) {
    let what = format!("{api:?} v{version}");
    match response {
        ResponseKind::Produce(r) => {
            assert!(
                r.responses[0].partition_responses[0].base_offset >= 0,
                "{what}"
            );
        }
        ResponseKind::Fetch(r) => {
            let p = &r.responses[0].partitions[0];
            assert!(p.high_watermark > 0 && p.records.is_some(), "{what}: {p:?}");
        }
        ResponseKind::ListOffsets(r) => {
            let p = &r.topics[0].partitions[0];
            assert_eq!((p.offset, p.timestamp), (0, FIRST_TIMESTAMP), "{what}");
        }
        ResponseKind::Metadata(r) => {
            assert!(
                r.topics
                    .iter()
                    .any(|t| t.name.as_ref().is_some_and(|n| n.0.as_str() == TOPIC_NAME)),
                "{what}: {r:?}"
            );
        }
        ResponseKind::OffsetFetch(r) => {
            assert_eq!(r.topics[0].partitions[0].committed_offset, 2, "{what}");
        }
        ResponseKind::FindCoordinator(r) => {
            let port = r.coordinators.first().map_or(r.port, |c| c.port);
            assert!(port > 0, "{what}: {r:?}");
        }
        ResponseKind::JoinGroup(r) => assert!(!r.member_id.is_empty(), "{what}"),
        ResponseKind::SyncGroup(r) => assert_eq!(r.assignment.as_ref(), b"a1", "{what}"),
        ResponseKind::DescribeGroups(r) => {
            assert_eq!(r.groups[0].members.len(), 1, "{what}: {r:?}");
        }
        ResponseKind::ListGroups(r) => assert!(!r.groups.is_empty(), "{what}"),
        ResponseKind::DescribeConfigs(r) => {
            assert!(!r.results[0].configs.is_empty(), "{what}: {r:?}");
        }
        ResponseKind::DescribeAcls(r) => assert!(!r.resources.is_empty(), "{what}"),
        ResponseKind::DeleteAcls(r) => {
            assert_eq!(r.filter_results[0].matching_acls.len(), 1, "{what}: {r:?}");
        }
        ResponseKind::DescribeProducers(r) => {
            assert!(
                !r.topics[0].partitions[0].active_producers.is_empty(),
                "{what}"
            );
        }
        ResponseKind::DescribeTransactions(r) => {
            assert!(!r.transaction_states[0].topics.is_empty(), "{what}: {r:?}");
        }
        ResponseKind::ListTransactions(r) => {
            assert!(!r.transaction_states.is_empty(), "{what}");
        }
        ResponseKind::OffsetForLeaderEpoch(r) => {
            assert!(r.topics[0].partitions[0].end_offset > 0, "{what}: {r:?}");
        }
        ResponseKind::ConsumerGroupDescribe(r) => {
            assert_eq!(r.groups[0].members.len(), 1, "{what}: {r:?}");
        }
        ResponseKind::ShareGroupHeartbeat(r) => {
            let assigned = r.assignment.as_ref().map(|a| a.topic_partitions.len());
            assert_eq!(assigned, Some(1), "{what}: {r:?}");
        }
        ResponseKind::ShareGroupDescribe(r) => {
            assert_eq!(r.groups[0].members.len(), 1, "{what}: {r:?}");
        }
        ResponseKind::ShareFetch(r) => assert_eq!(r.responses.len(), 1, "{what}: {r:?}"),
        ResponseKind::DescribeShareGroupOffsets(r) => {
            let partition = &r.groups[0].topics[0].partitions[0];
            assert!(partition.start_offset >= 0, "{what}: {r:?}");
            if version >= 1 {
                assert!(partition.lag >= 0, "{what}: {r:?}");
            }
        }
        ResponseKind::DescribeUserScramCredentials(r) => {
            assert!(!r.results.is_empty(), "{what}");
        }
        ResponseKind::DescribeCluster(r) => assert_eq!(r.brokers.len(), 1, "{what}"),
        ResponseKind::DescribeLogDirs(r) => {
            let partition = &r.results[0].topics[0].partitions[0];
            assert!(partition.partition_size > 0, "{what}: {r:?}");
        }
        ResponseKind::AlterReplicaLogDirs(r) => {
            assert_eq!(r.results[0].partitions.len(), 1, "{what}: {r:?}");
        }
        ResponseKind::AlterPartitionReassignments(r) => {
            assert_eq!(r.responses[0].partitions.len(), 1, "{what}: {r:?}");
        }
        _ => {}
    }
}
