//! The consumer group protocol of KIP-848 on the wire: ConsumerGroupHeartbeat (join,
//! heartbeat, leave; v0's given member id), ConsumerGroupDescribe, and how the classic
//! APIs see such a group — ListGroups v5's type, DescribeGroups, a classic JoinGroup
//! refused, OffsetCommit v9 checked against the member epoch.

use super::acls::{
    ALLOW, DESCRIBE, LITERAL, READ, TOPIC, client_of, create_acls, creation, guarded,
};
use super::create_topic;
use super::fixture::{Client, Front, name, text};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse,
    DescribeGroupsRequest, GroupId, ListGroupsRequest, MetadataRequest, OffsetCommitRequest,
};
use uuid::Uuid;

fn group(id: &str) -> GroupId {
    GroupId(text(id))
}

/// A ConsumerGroupHeartbeat (v1) of `member` at `epoch` to group `id`; a join (epoch 0)
/// subscribes to `events` and owns nothing.
async fn heartbeat(
    c: &mut Client,
    id: &str,
    member: &str,
    epoch: i32,
) -> ConsumerGroupHeartbeatResponse {
    let mut request = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(group(id))
        .with_member_id(text(member))
        .with_member_epoch(epoch)
        .with_rebalance_timeout_ms(-1);
    if epoch == 0 {
        request = request
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![name("events")]))
            .with_topic_partitions(Some(Vec::new()));
    }
    c.call(1, request).await
}

/// The id of topic `topic` (Metadata v12).
async fn topic_id(c: &mut Client, topic: &str) -> Uuid {
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(name(topic))),
    ]));
    c.call(12, request).await.topics[0].topic_id
}

/// An OffsetCommit (v9) of offset 1 of `events` partition 0 by `member` at `epoch`.
async fn commit(c: &mut Client, id: &str, member: &str, epoch: i32) -> i16 {
    let request = OffsetCommitRequest::default()
        .with_group_id(group(id))
        .with_member_id(text(member))
        .with_generation_id_or_member_epoch(epoch)
        .with_topics(vec![
            OffsetCommitRequestTopic::default()
                .with_name(name("events"))
                .with_partitions(vec![
                    OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(1),
                ]),
        ]);
    c.call(9, request).await.topics[0].partitions[0].error_code
}

#[tokio::test]
async fn a_member_joins_gets_every_partition_by_topic_id_and_is_described_and_listed() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "events", 3).await;
    let events = topic_id(&mut c, "events").await;

    let joined = heartbeat(&mut c, "g", "member-1", 0).await;
    assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    assert_eq!(joined.member_id.as_deref(), Some("member-1"));
    assert_eq!(joined.member_epoch, 1);
    assert_eq!(joined.heartbeat_interval_ms, 5_000);
    let assignment = joined.assignment.expect("a join is given its assignment");
    assert_eq!(assignment.topic_partitions.len(), 1);
    assert_eq!(assignment.topic_partitions[0].topic_id, events);
    assert_eq!(assignment.topic_partitions[0].partitions, [0, 1, 2]);
    // An ordinary heartbeat: nothing changed, so no assignment.
    let again = heartbeat(&mut c, "g", "member-1", 1).await;
    assert_eq!((again.error_code, again.member_epoch), (0, 1));
    assert!(again.assignment.is_none());

    let described = c
        .call(
            1,
            ConsumerGroupDescribeRequest::default().with_group_ids(vec![group("g"), group("none")]),
        )
        .await;
    let g = &described.groups[0];
    assert_eq!(g.error_code, 0);
    assert_eq!(
        (
            g.group_state.as_str(),
            g.group_epoch,
            g.assignment_epoch,
            g.assignor_name.as_str()
        ),
        ("Stable", 1, 1, "uniform")
    );
    let m = &g.members[0];
    assert_eq!(
        (m.member_id.as_str(), m.member_epoch, m.member_type),
        ("member-1", 1, 1)
    );
    assert_eq!(m.subscribed_topic_names, [name("events")]);
    assert_eq!(m.assignment.topic_partitions[0].topic_name, name("events"));
    assert_eq!(
        m.target_assignment.topic_partitions[0].partitions,
        [0, 1, 2]
    );
    assert_eq!(
        described.groups[1].error_code,
        ResponseError::GroupIdNotFound.code()
    );

    let listed = |types: &[&str]| {
        ListGroupsRequest::default().with_types_filter(types.iter().map(|t| text(t)).collect())
    };
    let consumer = c.call(5, listed(&["consumer"])).await;
    assert_eq!(consumer.groups.len(), 1);
    assert_eq!(
        (
            consumer.groups[0].group_type.as_str(),
            consumer.groups[0].protocol_type.as_str()
        ),
        ("Consumer", "consumer")
    );
    assert!(c.call(5, listed(&["Classic"])).await.groups.is_empty());
    let classic_view = c
        .call(
            5,
            DescribeGroupsRequest::default().with_groups(vec![group("g")]),
        )
        .await;
    let view = &classic_view.groups[0];
    assert_eq!(
        (
            view.group_state.as_str(),
            view.protocol_type.as_str(),
            view.protocol_data.as_str()
        ),
        ("Stable", "consumer", "uniform")
    );
    assert_eq!(view.members[0].member_id.as_str(), "member-1");
    front.stop().await;
}

#[tokio::test]
async fn epochs_commits_classic_joins_and_leaves_are_checked() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "events", 2).await;
    assert_eq!(heartbeat(&mut c, "g", "m1", 0).await.member_epoch, 1);

    assert_eq!(commit(&mut c, "g", "m1", 1).await, 0);
    assert_eq!(
        commit(&mut c, "g", "m1", 0).await,
        ResponseError::StaleMemberEpoch.code()
    );
    assert_eq!(
        commit(&mut c, "g", "zz", 1).await,
        ResponseError::UnknownMemberId.code()
    );
    let fenced = heartbeat(&mut c, "g", "m1", 7).await;
    assert_eq!(fenced.error_code, ResponseError::FencedMemberEpoch.code());
    assert_eq!(fenced.heartbeat_interval_ms, 5_000);

    let classic = super::groups::join_request("g", "", 10_000, b"");
    let refused = c
        .call(5, classic.clone().with_group_instance_id(Some(text("i"))))
        .await;
    assert_eq!(
        refused.error_code,
        ResponseError::InconsistentGroupProtocol.code()
    );

    let left = heartbeat(&mut c, "g", "m1", -1).await;
    assert_eq!((left.error_code, left.member_epoch), (0, -1));
    // Empty, the group takes a classic member.
    let joined = c
        .call(5, classic.with_group_instance_id(Some(text("i"))))
        .await;
    assert_eq!(joined.error_code, 0);
    let refused = heartbeat(&mut c, "g", "m2", 0).await;
    assert_eq!(refused.error_code, ResponseError::GroupIdNotFound.code());
    front.stop().await;
}

#[tokio::test]
async fn a_v0_member_joining_without_an_id_is_given_one_and_bad_joins_are_refused() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "events", 1).await;
    let v0 = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(group("g0"))
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![name("events")]))
        .with_topic_partitions(Some(Vec::new()));
    let joined = c.call(0, v0.clone()).await;
    assert_eq!(joined.error_code, 0);
    assert!(joined.member_id.is_some_and(|id| !id.is_empty()));

    let no_id = c.call(1, v0.clone()).await;
    assert_eq!(no_id.error_code, ResponseError::InvalidRequest.code());
    assert_eq!(
        no_id.error_message.as_deref(),
        Some("MemberId can't be empty.")
    );
    let assignor = c
        .call(
            1,
            v0.with_member_id(text("m"))
                .with_server_assignor(Some(text("sticky"))),
        )
        .await;
    assert_eq!(
        assignor.error_code,
        ResponseError::UnsupportedAssignor.code()
    );
    front.stop().await;
}

#[tokio::test]
async fn a_member_needs_read_on_the_group_and_describe_on_the_topics_it_names() {
    const GROUP: i8 = 3;
    let front = guarded().await;
    let mut admin = client_of(&front, "admin");
    create_topic(&mut admin, "events", 1).await;
    let mut alice = client_of(&front, "alice");
    let refused = heartbeat(&mut alice, "g", "m1", 0).await;
    assert_eq!(
        refused.error_code,
        ResponseError::GroupAuthorizationFailed.code()
    );
    let acl = creation(GROUP, "g", LITERAL, "User:alice", READ, ALLOW);
    assert_eq!(create_acls(&mut admin, vec![acl]).await, [0]);
    let refused = heartbeat(&mut alice, "g", "m1", 0).await;
    assert_eq!(
        refused.error_code,
        ResponseError::TopicAuthorizationFailed.code()
    );
    assert_eq!(
        refused.error_message.as_deref(),
        Some("not authorized to describe topics events")
    );
    let acl = creation(TOPIC, "events", LITERAL, "User:alice", DESCRIBE, ALLOW);
    assert_eq!(create_acls(&mut admin, vec![acl]).await, [0]);
    let joined = heartbeat(&mut alice, "g", "m1", 0).await;
    assert_eq!((joined.error_code, joined.member_epoch), (0, 1));
    front.stop().await;
}
