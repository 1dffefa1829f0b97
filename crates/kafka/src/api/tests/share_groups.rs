//! Share groups (KIP-932) on the wire: ShareGroupHeartbeat's errors (empty member id,
//! unknown member, stale epoch) and assignment, ShareFetch acquiring records with their
//! delivery counts and not giving one member's to another, acknowledgements (release
//! redelivers with a grown count; a record not acquired by the member, or acknowledged
//! already, is `INVALID_RECORD_STATE`; a malformed batch `INVALID_REQUEST`), the share
//! session's epochs, a share group in ListGroups v5 and ShareGroupDescribe, its offsets
//! described, altered and deleted, its id refused to classic and consumer members, the
//! group deleted by DeleteGroups once empty, and both a changed setting and a deletion
//! applying on a second instance over the same store.

use super::create_topic;
use super::fixture::{Client, Front, PATIENCE, batch, name, text};
use super::produce;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_share_group_offsets_request::{
    AlterShareGroupOffsetsRequestPartition, AlterShareGroupOffsetsRequestTopic,
};
use kafka_protocol::messages::delete_share_group_offsets_request::DeleteShareGroupOffsetsRequestTopic;
use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
use kafka_protocol::messages::incremental_alter_configs_request as incremental;
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch, FetchPartition, FetchTopic,
};
use kafka_protocol::messages::share_fetch_response::PartitionData;
use kafka_protocol::messages::{
    AlterShareGroupOffsetsRequest, ConsumerGroupHeartbeatRequest, DeleteGroupsRequest,
    DeleteShareGroupOffsetsRequest, DescribeShareGroupOffsetsRequest, GroupId,
    IncrementalAlterConfigsRequest, ListGroupsRequest, ShareAcknowledgeRequest, ShareFetchRequest,
    ShareFetchResponse, ShareGroupDescribeRequest, ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse, share_acknowledge_request,
};
use uuid::Uuid;

pub(super) const TOPIC: &str = "jobs";
pub(super) const GROUP: &str = "workers";
pub(super) const ACCEPT: i8 = 1;
pub(super) const RELEASE: i8 = 2;

fn group() -> GroupId {
    GroupId(text(GROUP))
}

/// A ShareGroupHeartbeat of `member` at `epoch` (a join subscribes to [`TOPIC`]).
pub(super) async fn heartbeat(
    c: &mut Client,
    member: &str,
    epoch: i32,
) -> ShareGroupHeartbeatResponse {
    let mut request = ShareGroupHeartbeatRequest::default()
        .with_group_id(group())
        .with_member_id(text(member))
        .with_member_epoch(epoch);
    if epoch == 0 {
        request = request.with_subscribed_topic_names(Some(vec![name(TOPIC)]));
    }
    c.call(1, request).await
}

/// A ShareFetch of `member` at session `epoch` from partition 0 of `topic`, carrying
/// `acks` ((first, last, type) batches), answering at once.
pub(super) async fn fetch(
    c: &mut Client,
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: &[(i64, i64, i8)],
) -> ShareFetchResponse {
    c.call(1, fetch_request(member, epoch, topic, acks)).await
}

/// The request [`fetch`] sends: up to 100 records, 1 MiB, no wait.
fn fetch_request(
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: &[(i64, i64, i8)],
) -> ShareFetchRequest {
    let partition = FetchPartition::default()
        .with_partition_index(0)
        .with_acknowledgement_batches(
            acks.iter()
                .map(|&(first, last, t)| {
                    AcknowledgementBatch::default()
                        .with_first_offset(first)
                        .with_last_offset(last)
                        .with_acknowledge_types(vec![t])
                })
                .collect(),
        );
    ShareFetchRequest::default()
        .with_group_id(Some(group()))
        .with_member_id(Some(text(member)))
        .with_share_session_epoch(epoch)
        .with_max_records(100)
        .with_max_bytes(1 << 20)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic_id(topic)
                .with_partitions(vec![partition]),
        ])
}

/// A ShareAcknowledge of `member` at session `epoch` of partition 0 of `topic`.
pub(super) fn acknowledge(
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: &[(i64, i64, i8)],
) -> ShareAcknowledgeRequest {
    let batches = acks
        .iter()
        .map(|&(first, last, t)| {
            share_acknowledge_request::AcknowledgementBatch::default()
                .with_first_offset(first)
                .with_last_offset(last)
                .with_acknowledge_types(vec![t])
        })
        .collect();
    ShareAcknowledgeRequest::default()
        .with_group_id(Some(group()))
        .with_member_id(Some(text(member)))
        .with_share_session_epoch(epoch)
        .with_topics(vec![
            share_acknowledge_request::AcknowledgeTopic::default()
                .with_topic_id(topic)
                .with_partitions(vec![
                    share_acknowledge_request::AcknowledgePartition::default()
                        .with_partition_index(0)
                        .with_acknowledgement_batches(batches),
                ]),
        ])
}

/// The one partition of a ShareFetch answer.
pub(super) fn partition(r: &ShareFetchResponse) -> &PartitionData {
    assert_eq!(r.error_code, 0, "{r:?}");
    &r.responses[0].partitions[0]
}

/// (first, last, delivery count) of each acquired range.
pub(super) fn acquired(p: &PartitionData) -> Vec<(i64, i64, i16)> {
    p.acquired_records
        .iter()
        .map(|a| (a.first_offset, a.last_offset, a.delivery_count))
        .collect()
}

/// Sets `GROUP`'s setting `name` to `value` (IncrementalAlterConfigs, SET).
pub(super) async fn set_setting(c: &mut Client, name: &str, value: &str) {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental::AlterConfigsResource::default()
            .with_resource_type(32)
            .with_resource_name(text(GROUP))
            .with_configs(vec![
                incremental::AlterableConfig::default()
                    .with_name(text(name))
                    .with_config_operation(0)
                    .with_value(Some(text(value))),
            ]),
    ]);
    let response = c.call(1, request).await;
    assert_eq!(response.responses[0].error_code, 0, "{response:?}");
}

/// Sets `GROUP`'s share.auto.offset.reset to earliest.
pub(super) async fn from_earliest(c: &mut Client) {
    set_setting(c, "share.auto.offset.reset", "earliest").await;
}

#[tokio::test]
async fn heartbeats_are_refused_with_kafkas_codes() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, TOPIC, 2).await;
    let code = |r: ShareGroupHeartbeatResponse| ResponseError::try_from_code(r.error_code);
    assert_eq!(
        code(heartbeat(&mut c, "", 0).await),
        Some(ResponseError::InvalidRequest)
    );
    assert_eq!(
        code(heartbeat(&mut c, "ghost", 3).await),
        Some(ResponseError::UnknownMemberId)
    );
    let joined = heartbeat(&mut c, "m1", 0).await;
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let assigned = &joined.assignment.as_ref().unwrap().topic_partitions[0];
    assert_eq!(assigned.partitions, [0, 1]);
    assert_eq!(
        code(heartbeat(&mut c, "m1", joined.member_epoch + 1).await),
        Some(ResponseError::FencedMemberEpoch)
    );
    let again = heartbeat(&mut c, "m1", joined.member_epoch).await;
    assert_eq!((again.error_code, again.assignment), (0, None));
    front.stop().await;
}

#[tokio::test]
async fn records_are_acquired_once_released_again_and_acknowledged_once() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, TOPIC, 1).await;
    from_earliest(&mut c).await;
    let produced = produce(&mut c, TOPIC, 0, batch(&["a", "b", "c"])).await;
    assert_eq!(produced.error_code, 0);
    let topic = Uuid::from_bytes(front.ctx.topics.get(TOPIC).unwrap().meta.uuid);

    // Not a member yet (the group's coordinator knows its members): no session.
    assert_eq!(heartbeat(&mut c, "m2", 0).await.error_code, 0);
    let refused = fetch(&mut c, "m1", 0, topic, &[]).await;
    assert_eq!(refused.error_code, ResponseError::UnknownMemberId.code());
    assert_eq!(heartbeat(&mut c, "m1", 0).await.error_code, 0);
    let first = fetch(&mut c, "m1", 0, topic, &[]).await;
    assert_eq!(acquired(partition(&first)), [(0, 2, 1)]);
    assert!(!partition(&first).records.as_ref().unwrap().is_empty());
    let other = fetch(&mut c, "m2", 0, topic, &[]).await;
    assert_eq!(acquired(partition(&other)), [], "acquired records are m1's");
    // m2 may not settle m1's records.
    let stolen = fetch(&mut c, "m2", 1, topic, &[(0, 0, ACCEPT)]).await;
    assert_eq!(
        partition(&stolen).acknowledge_error_code,
        ResponseError::InvalidRecordState.code()
    );
    // m1 accepts 0 and releases 1..2 (a fetch would take them back at once); m2 then gets
    // them, delivered a second time.
    let settled = c
        .call(
            1,
            acknowledge("m1", 1, topic, &[(0, 0, ACCEPT), (1, 2, RELEASE)]),
        )
        .await;
    assert_eq!(
        settled.responses[0].partitions[0].error_code, 0,
        "{settled:?}"
    );
    let redelivered = fetch(&mut c, "m2", 2, topic, &[]).await;
    assert_eq!(acquired(partition(&redelivered)), [(1, 2, 2)]);
    // Accepting what was accepted already, or with an unknown type, is refused.
    let twice = fetch(&mut c, "m1", 2, topic, &[(0, 0, ACCEPT)]).await;
    assert_eq!(
        partition(&twice).acknowledge_error_code,
        ResponseError::InvalidRecordState.code()
    );
    let malformed = fetch(&mut c, "m2", 3, topic, &[(1, 2, 9)]).await;
    assert_eq!(
        partition(&malformed).acknowledge_error_code,
        ResponseError::InvalidRequest.code()
    );
    // The session's epochs: a repeated one, and a member with no session.
    let stale = fetch(&mut c, "m2", 3, topic, &[]).await;
    assert_eq!(
        stale.error_code,
        ResponseError::InvalidShareSessionEpoch.code()
    );
    let unknown = c.call(1, acknowledge("m3", 1, topic, &[])).await;
    assert_eq!(
        unknown.error_code,
        ResponseError::ShareSessionNotFound.code()
    );
    // m2 accepts 1..2 and closes its session: nothing is left to acquire.
    let closed = c
        .call(1, acknowledge("m2", -1, topic, &[(1, 2, ACCEPT)]))
        .await;
    assert_eq!(closed.error_code, 0, "{closed:?}");
    assert_eq!(closed.responses[0].partitions[0].error_code, 0);
    let empty = fetch(&mut c, "m1", 3, topic, &[]).await;
    assert_eq!(acquired(partition(&empty)), []);

    let listed = c
        .call(
            5,
            ListGroupsRequest::default().with_types_filter(vec![text("Share")]),
        )
        .await;
    let groups: Vec<(&str, &str)> = listed
        .groups
        .iter()
        .map(|g| (g.group_id.0.as_str(), g.group_state.as_str()))
        .collect();
    assert_eq!(groups, [(GROUP, "Stable")]);
    let described = c
        .call(
            1,
            ShareGroupDescribeRequest::default().with_group_ids(vec![group()]),
        )
        .await;
    assert_eq!(described.groups[0].members.len(), 2, "{described:?}");
    front.stop().await;
}

/// The start offset and the lag DescribeShareGroupOffsets at `version` gives `GROUP`'s
/// partition 0 of [`TOPIC`] (-1, -1: none; the lag is -1 below v1, which lacks it).
async fn offsets(c: &mut Client, version: i16) -> (i64, i64) {
    let request = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
        DescribeShareGroupOffsetsRequestGroup::default()
            .with_group_id(group())
            .with_topics(None),
    ]);
    let response = c.call(version, request).await;
    let g = &response.groups[0];
    assert_eq!(g.error_code, 0, "{response:?}");
    g.topics.first().map_or((-1, -1), |t| {
        (t.partitions[0].start_offset, t.partitions[0].lag)
    })
}

#[tokio::test]
async fn share_group_offsets_are_described_moved_only_without_members_and_deleted() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, TOPIC, 1).await;
    from_earliest(&mut c).await;
    produce(&mut c, TOPIC, 0, batch(&["a", "b", "c", "d"])).await;
    let topic = Uuid::from_bytes(front.ctx.topics.get(TOPIC).unwrap().meta.uuid);
    let unknown = c
        .call(
            0,
            DescribeShareGroupOffsetsRequest::default().with_groups(vec![
                DescribeShareGroupOffsetsRequestGroup::default()
                    .with_group_id(GroupId(text("nobody"))),
            ]),
        )
        .await;
    assert_eq!(
        unknown.groups[0].error_code,
        ResponseError::GroupIdNotFound.code()
    );
    heartbeat(&mut c, "m1", 0).await;
    assert_eq!(offsets(&mut c, 0).await, (0, -1), "started at the earliest");
    assert_eq!(offsets(&mut c, 1).await, (0, 4), "4 records to deliver");
    let got = fetch(&mut c, "m1", 0, topic, &[]).await;
    assert_eq!(acquired(partition(&got)), [(0, 3, 1)]);
    fetch(&mut c, "m1", 1, topic, &[(0, 1, ACCEPT)]).await;
    assert_eq!(
        offsets(&mut c, 1).await,
        (2, 2),
        "the lowest offset not settled; 2 and 3 in flight"
    );
    let alter = |offset: i64| {
        AlterShareGroupOffsetsRequest::default()
            .with_group_id(group())
            .with_topics(vec![
                AlterShareGroupOffsetsRequestTopic::default()
                    .with_topic_name(name(TOPIC))
                    .with_partitions(vec![
                        AlterShareGroupOffsetsRequestPartition::default()
                            .with_partition_index(0)
                            .with_start_offset(offset),
                    ]),
            ])
    };
    let busy = c.call(0, alter(3)).await;
    assert_eq!(busy.error_code, ResponseError::NonEmptyGroup.code());
    heartbeat(&mut c, "m1", -1).await;
    c.call(1, acknowledge("m1", -1, topic, &[])).await;
    let moved = c.call(0, alter(3)).await;
    assert_eq!(moved.error_code, 0, "{moved:?}");
    assert_eq!(moved.responses[0].partitions[0].error_code, 0);
    assert_eq!(offsets(&mut c, 1).await, (3, 1));
    heartbeat(&mut c, "m2", 0).await;
    let after = fetch(&mut c, "m2", 0, topic, &[]).await;
    assert_eq!(
        acquired(partition(&after)),
        [(3, 3, 1)],
        "records before 3 are skipped"
    );
    heartbeat(&mut c, "m2", -1).await;
    c.call(1, acknowledge("m2", -1, topic, &[])).await;
    let deleted = c
        .call(
            0,
            DeleteShareGroupOffsetsRequest::default()
                .with_group_id(group())
                .with_topics(vec![
                    DeleteShareGroupOffsetsRequestTopic::default().with_topic_name(name(TOPIC)),
                ]),
        )
        .await;
    assert_eq!(deleted.error_code, 0, "{deleted:?}");
    assert_eq!(offsets(&mut c, 1).await, (-1, -1), "forgotten");
    front.stop().await;
}

#[tokio::test]
async fn a_lower_delivery_count_limit_applies_to_a_started_share_partition() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, TOPIC, 1).await;
    from_earliest(&mut c).await;
    produce(&mut c, TOPIC, 0, batch(&["a"])).await;
    let topic = Uuid::from_bytes(front.ctx.topics.get(TOPIC).unwrap().meta.uuid);
    heartbeat(&mut c, "m1", 0).await;
    let first = fetch(&mut c, "m1", 0, topic, &[]).await;
    assert_eq!(acquired(partition(&first)), [(0, 0, 1)]);
    // The limit falls from 5 to 2 while the share-partition is in use.
    set_setting(&mut c, "share.delivery.count.limit", "2").await;
    // Released after its first delivery, it comes back once more; released after its
    // second, it is archived.
    let second = fetch(&mut c, "m1", 1, topic, &[(0, 0, RELEASE)]).await;
    assert_eq!(acquired(partition(&second)), [(0, 0, 2)]);
    let third = fetch(&mut c, "m1", 2, topic, &[(0, 0, RELEASE)]).await;
    assert_eq!(partition(&third).acknowledge_error_code, 0);
    assert_eq!(acquired(partition(&third)), []);
    front.stop().await;
}

/// The share groups ListGroups v5 lists.
async fn share_groups(c: &mut Client) -> Vec<String> {
    let listed = c
        .call(
            5,
            ListGroupsRequest::default().with_types_filter(vec![text("Share")]),
        )
        .await;
    listed
        .groups
        .iter()
        .map(|g| g.group_id.0.to_string())
        .collect()
}

/// DeleteGroups of `GROUP`: its error code.
async fn delete_group(c: &mut Client) -> i16 {
    let request = DeleteGroupsRequest::default().with_groups_names(vec![group()]);
    c.call(2, request).await.results[0].error_code
}

#[tokio::test]
async fn a_share_groups_id_is_refused_to_other_members_and_the_empty_group_deleted() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, TOPIC, 1).await;
    from_earliest(&mut c).await;
    produce(&mut c, TOPIC, 0, batch(&["a", "b", "c"])).await;
    let topic = Uuid::from_bytes(front.ctx.topics.get(TOPIC).unwrap().meta.uuid);
    let joined = heartbeat(&mut c, "m1", 0).await;
    assert_eq!(joined.error_code, 0, "{joined:?}");
    assert_eq!(
        acquired(partition(&fetch(&mut c, "m1", 0, topic, &[]).await)),
        [(0, 2, 1)]
    );

    // As Kafka: a classic join is INCONSISTENT_GROUP_PROTOCOL, a consumer-protocol one
    // GROUP_ID_NOT_FOUND.
    let classic = super::groups::join_request(GROUP, "", 10_000, b"");
    let refused = c.call(5, classic).await;
    assert_eq!(
        (refused.error_code, refused.member_id.as_str()),
        (ResponseError::InconsistentGroupProtocol.code(), "")
    );
    let consumer = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(group())
        .with_member_id(text("c1"))
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![name(TOPIC)]))
        .with_topic_partitions(Some(Vec::new()));
    let refused = c.call(1, consumer.clone()).await;
    assert_eq!(refused.error_code, ResponseError::GroupIdNotFound.code());
    assert_eq!(
        refused.error_message.as_deref(),
        Some("Group workers is not a consumer group")
    );

    // Deleted only once empty; then gone with its share-partitions: a new group of the
    // same id starts again (from the earliest offset only if told so again).
    assert_eq!(
        delete_group(&mut c).await,
        ResponseError::NonEmptyGroup.code()
    );
    assert_eq!(heartbeat(&mut c, "m1", -1).await.error_code, 0);
    assert_eq!(delete_group(&mut c).await, 0);
    assert_eq!(share_groups(&mut c).await, Vec::<String>::new());
    assert_eq!(
        delete_group(&mut c).await,
        ResponseError::GroupIdNotFound.code()
    );
    assert_eq!(front.ctx.share.started(GROUP).await.unwrap(), []);
    assert_eq!(heartbeat(&mut c, "m2", 0).await.error_code, 0);
    produce(&mut c, TOPIC, 0, batch(&["d"])).await;
    let fresh = fetch(&mut c, "m2", 0, topic, &[]).await;
    // Its released records (0..2, delivered once) went with it, and so did its setting:
    // the new group starts at the latest offset.
    assert_eq!(acquired(partition(&fresh)), [(3, 3, 1)]);

    // Once the share group is deleted again, the id is free for a consumer group.
    assert_eq!(heartbeat(&mut c, "m2", -1).await.error_code, 0);
    assert_eq!(delete_group(&mut c).await, 0);
    assert_eq!(c.call(1, consumer).await.error_code, 0);
    front.stop().await;
}

/// Waits (at most [`PATIENCE`]) until `done` holds.
async fn until<F: std::future::Future<Output = bool>>(mut done: impl FnMut() -> F) {
    tokio::time::timeout(PATIENCE, async {
        while !done().await {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("in time");
}

#[tokio::test]
async fn a_setting_changed_or_a_group_deleted_on_one_instance_applies_on_another() {
    let a = Front::start().await;
    let b = a.peer(1).await;
    let (mut ca, mut cb) = (a.client(), b.client());
    create_topic(&mut ca, TOPIC, 1).await;
    from_earliest(&mut ca).await;
    produce(&mut ca, TOPIC, 0, batch(&["a"])).await;
    let topic = Uuid::from_bytes(a.ctx.topics.get(TOPIC).unwrap().meta.uuid);
    // The member's coordinator is a; b serves the partition's records (once its topic
    // cache has the topic).
    until(|| async { b.ctx.topics.get(TOPIC).is_some() }).await;
    assert_eq!(heartbeat(&mut ca, "m1", 0).await.error_code, 0);
    let first = fetch(&mut cb, "m1", 0, topic, &[]).await;
    assert_eq!(acquired(partition(&first)), [(0, 0, 1)]);

    // The limit falls from 5 to 2 on a: b, which opened the share-partition with 5,
    // archives the record after its second delivery.
    set_setting(&mut ca, "share.delivery.count.limit", "2").await;
    until(|| async { b.ctx.share.config(GROUP).await.unwrap().delivery_limit == 2 }).await;
    let second = fetch(&mut cb, "m1", 1, topic, &[(0, 0, RELEASE)]).await;
    assert_eq!(acquired(partition(&second)), [(0, 0, 2)]);
    let third = fetch(&mut cb, "m1", 2, topic, &[(0, 0, RELEASE)]).await;
    assert_eq!(partition(&third).acknowledge_error_code, 0);
    assert_eq!(acquired(partition(&third)), [], "archived at the new limit");

    // Deleted on a, the group is forgotten by b too.
    assert_eq!(heartbeat(&mut ca, "m1", -1).await.error_code, 0);
    assert_eq!(delete_group(&mut ca).await, 0);
    until(|| async { !b.ctx.share.exists(GROUP).await.unwrap() }).await;
    let described = cb
        .call(
            1,
            ShareGroupDescribeRequest::default().with_group_ids(vec![group()]),
        )
        .await;
    assert_eq!(
        described.groups[0].error_code,
        ResponseError::GroupIdNotFound.code()
    );
    b.stop().await;
    a.stop().await;
}

/// A ShareFetch v2 request as [`fetch_request`]'s, with `IsRenewAck` `renew`,
/// `ShareAcquireMode` `mode`, at most `max_records`, waiting up to `wait_ms`.
fn fetch_v2(
    member: &str,
    epoch: i32,
    topic: Uuid,
    acks: &[(i64, i64, i8)],
    (renew, mode, max_records, wait_ms): (bool, i8, i32, i32),
) -> ShareFetchRequest {
    fetch_request(member, epoch, topic, acks)
        .with_max_records(max_records)
        .with_max_wait_ms(wait_ms)
        .with_is_renew_ack(renew)
        .with_share_acquire_mode(mode)
}

const RENEW: i8 = 4;

#[tokio::test]
async fn a_renewed_lock_outlasts_the_rest_of_its_acquisition() {
    let front = Front::start().await;
    let (mut c1, mut c2) = (front.client(), front.client());
    create_topic(&mut c1, TOPIC, 1).await;
    from_earliest(&mut c1).await;
    set_setting(&mut c1, "share.record.lock.duration.ms", "2000").await;
    produce(&mut c1, TOPIC, 0, batch(&["a", "b"])).await;
    let topic = Uuid::from_bytes(front.ctx.topics.get(TOPIC).unwrap().meta.uuid);
    assert_eq!(heartbeat(&mut c1, "m1", 0).await.error_code, 0);
    assert_eq!(heartbeat(&mut c2, "m2", 0).await.error_code, 0);
    let got = c1
        .call(2, fetch_v2("m1", 0, topic, &[], (false, 0, 10, 0)))
        .await;
    assert_eq!(acquired(partition(&got)), [(0, 1, 1)]);
    assert_eq!(got.acquisition_lock_timeout_ms, 2_000);

    // RENEW needs IsRenewAck (a v1 request cannot carry it); a record not held is
    // INVALID_RECORD_STATE.
    let plain = c1
        .call(2, acknowledge("m1", 1, topic, &[(0, 0, RENEW)]))
        .await;
    assert_eq!(
        plain.responses[0].partitions[0].error_code,
        ResponseError::InvalidRequest.code()
    );
    let stray = c1
        .call(
            2,
            acknowledge("m1", 2, topic, &[(5, 5, RENEW)]).with_is_renew_ack(true),
        )
        .await;
    assert_eq!(
        stray.responses[0].partitions[0].error_code,
        ResponseError::InvalidRecordState.code()
    );
    assert_eq!(stray.acquisition_lock_timeout_ms, 2_000);

    // A renewing ShareFetch acquires nothing, though a new record waits; m1 then takes
    // that record and accepts it.
    produce(&mut c1, TOPIC, 0, batch(&["c"])).await;
    let renewed = c1
        .call(
            2,
            fetch_v2("m1", 3, topic, &[(0, 0, RENEW)], (true, 0, 10, 0)),
        )
        .await;
    assert_eq!(partition(&renewed).acknowledge_error_code, 0);
    assert_eq!(
        acquired(partition(&renewed)),
        [],
        "a renewing fetch acquires nothing"
    );
    let got = c1
        .call(2, fetch_v2("m1", 4, topic, &[], (false, 0, 10, 0)))
        .await;
    assert_eq!(acquired(partition(&got)), [(2, 2, 1)]);
    let accepted = c1
        .call(2, acknowledge("m1", 5, topic, &[(2, 2, ACCEPT)]))
        .await;
    assert_eq!(accepted.responses[0].partitions[0].error_code, 0);

    // m2 long-polls while m1 keeps renewing record 0: record 1's lock ends and m2 gets it,
    // delivered a second time; record 0 stays m1's.
    let waiting = tokio::spawn(async move {
        c2.call(2, fetch_v2("m2", 0, topic, &[], (false, 1, 1, 8_000)))
            .await
    });
    let mut epoch = 6;
    while !waiting.is_finished() {
        let renewed = c1
            .call(
                2,
                fetch_v2("m1", epoch, topic, &[(0, 0, RENEW)], (true, 0, 10, 0)),
            )
            .await;
        assert_eq!(partition(&renewed).acknowledge_error_code, 0, "{renewed:?}");
        epoch += 1;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let got = waiting.await.unwrap();
    assert_eq!(acquired(partition(&got)), [(1, 1, 2)]);
    let accepted = c1
        .call(2, acknowledge("m1", epoch, topic, &[(0, 0, ACCEPT)]))
        .await;
    assert_eq!(
        accepted.responses[0].partitions[0].error_code, 0,
        "still m1's"
    );

    // An unknown acquire mode is refused.
    let unknown = c1
        .call(2, fetch_v2("m1", epoch + 1, topic, &[], (false, 2, 10, 0)))
        .await;
    assert_eq!(unknown.error_code, ResponseError::InvalidRequest.code());
    front.stop().await;
}
