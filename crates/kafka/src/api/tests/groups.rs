//! The consumer group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
//! OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups, ListGroups and DeleteGroups — a
//! group's life from its first member to its deletion, and each refusal's code.

use super::acls::{client_of, create_acls, creation, guarded};
use super::create_topic;
use super::fixture::{Answer, Client, Front, Pending, name, text};
use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    BrokerId, DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, GroupId,
    HeartbeatRequest, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, ListGroupsRequest,
    OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest, SyncGroupRequest,
};
use std::time::Duration;

/// The session timeout members ask for (the fixture allows 100 ms and more).
const SESSION_MS: i32 = 10_000;

pub(super) fn group(id: &str) -> GroupId {
    GroupId(text(id))
}

/// A JoinGroup (v5) of `member` (empty: a new member) to group `id` with protocol type
/// `consumer` and the `range` assignor, metadata `metadata`.
pub(super) fn join_request(
    id: &str,
    member: &str,
    session_ms: i32,
    metadata: &'static [u8],
) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(group(id))
        .with_member_id(text(member))
        .with_session_timeout_ms(session_ms)
        .with_rebalance_timeout_ms(5_000)
        .with_protocol_type(text("consumer"))
        .with_protocols(vec![
            JoinGroupRequestProtocol::default()
                .with_name(text("range"))
                .with_metadata(Bytes::from_static(metadata)),
        ])
}

/// Sends a join as a v5 client does: a new member (no member id) is first told its id
/// with `MEMBER_ID_REQUIRED` (KIP-394) and joins with it; the answer comes when the
/// rebalance completes.
async fn join(c: &mut Client, request: JoinGroupRequest) -> Pending<JoinGroupResponse> {
    if !request.member_id.is_empty() {
        return send_join(c, request).await;
    }
    let first = send_join(c, request.clone()).await.response().await;
    assert_eq!(
        first.error_code,
        ResponseError::MemberIdRequired.code(),
        "a new member is told its id first"
    );
    send_join(c, request.with_member_id(first.member_id)).await
}

/// Sends one JoinGroup (v5).
async fn send_join(c: &mut Client, request: JoinGroupRequest) -> Pending<JoinGroupResponse> {
    match c.send(5, request).await {
        Answer::Response(pending) => pending,
        _ => panic!("a join is answered"),
    }
}

/// The SyncGroup (v5) answer of `member` at `generation`: (error code, assignment).
async fn sync(
    c: &mut Client,
    id: &str,
    member: &str,
    generation: i32,
    assignments: &[(&str, &'static [u8])],
) -> (i16, Bytes) {
    let request = sync_request(id, member, generation, assignments);
    let r = c.call(5, request).await;
    (r.error_code, r.assignment)
}

pub(super) fn sync_request(
    id: &str,
    member: &str,
    generation: i32,
    assignments: &[(&str, &'static [u8])],
) -> SyncGroupRequest {
    SyncGroupRequest::default()
        .with_group_id(group(id))
        .with_member_id(text(member))
        .with_generation_id(generation)
        .with_protocol_type(Some(text("consumer")))
        .with_protocol_name(Some(text("range")))
        .with_assignments(
            assignments
                .iter()
                .map(|(m, a)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(text(m))
                        .with_assignment(Bytes::from_static(a))
                })
                .collect(),
        )
}

/// The Heartbeat (v4) error code of `member` at `generation`.
async fn heartbeat(c: &mut Client, id: &str, member: &str, generation: i32) -> i16 {
    let request = HeartbeatRequest::default()
        .with_group_id(group(id))
        .with_member_id(text(member))
        .with_generation_id(generation);
    c.call(4, request).await.error_code
}

/// A one-member group `id`, stable: (member id, generation).
pub(super) async fn stable_member(c: &mut Client, id: &str) -> (String, i32) {
    let joined = join(c, join_request(id, "", SESSION_MS, b"m1"))
        .await
        .response()
        .await;
    assert_eq!(joined.error_code, 0);
    let member = joined.member_id.to_string();
    let (code, assignment) = sync(c, id, &member, joined.generation_id, &[(&member, b"a1")]).await;
    assert_eq!((code, assignment.as_ref()), (0, &b"a1"[..]));
    (member, joined.generation_id)
}

/// DescribeGroups (v5) of `id`: (error code, state, member ids).
async fn describe(c: &mut Client, id: &str) -> (i16, String, Vec<String>) {
    let request = DescribeGroupsRequest::default().with_groups(vec![group(id)]);
    let g = c.call(5, request).await.groups.remove(0);
    (
        g.error_code,
        g.group_state.to_string(),
        g.members.iter().map(|m| m.member_id.to_string()).collect(),
    )
}

/// An OffsetCommit (v8) of `offsets` (topic, partition, offset) by `member` at
/// `generation`: the error code of every partition, in order.
pub(super) async fn commit(
    c: &mut Client,
    id: &str,
    member: &str,
    generation: i32,
    offsets: &[(&str, i32, i64)],
) -> Vec<i16> {
    let request = OffsetCommitRequest::default()
        .with_group_id(group(id))
        .with_member_id(text(member))
        .with_generation_id_or_member_epoch(generation)
        .with_topics(
            offsets
                .iter()
                .map(|&(topic, partition, offset)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(name(topic))
                        .with_partitions(vec![
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(partition)
                                .with_committed_offset(offset)
                                .with_committed_metadata(Some(text("note"))),
                        ])
                })
                .collect(),
        );
    c.call(8, request)
        .await
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// The committed offsets OffsetFetch (v7) reports for `id` (of `partitions` of `topic`, or
/// of everything committed when `None`): (topic, partition, offset, metadata).
async fn fetched(
    c: &mut Client,
    id: &str,
    wanted: Option<(&str, Vec<i32>)>,
) -> Vec<(String, i32, i64, String)> {
    let request = OffsetFetchRequest::default()
        .with_group_id(group(id))
        .with_topics(wanted.map(|(topic, partitions)| {
            vec![
                OffsetFetchRequestTopic::default()
                    .with_name(name(topic))
                    .with_partition_indexes(partitions),
            ]
        }));
    let r = c.call(7, request).await;
    assert_eq!(r.error_code, 0);
    r.topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                (
                    t.name.0.to_string(),
                    p.partition_index,
                    p.committed_offset,
                    p.metadata
                        .as_ref()
                        .map(|m| m.to_string())
                        .unwrap_or_default(),
                )
            })
        })
        .collect()
}

#[tokio::test]
async fn find_coordinator_names_this_instance_for_groups_and_transactions() {
    let front = Front::start_with(|c| c.node_id = 3).await;
    let mut c = front.client();
    let port = front.ctx.brokers.me().listeners[0].port;
    for key_type in [0, 1] {
        let request = FindCoordinatorRequest::default()
            .with_key(text("g"))
            .with_key_type(key_type);
        let r = c.call(3, request).await;
        assert_eq!(
            (r.error_code, r.node_id, r.host.to_string(), r.port),
            (0, BrokerId(3), "127.0.0.1".to_owned(), port),
            "key type {key_type}"
        );
    }
    let batched = FindCoordinatorRequest::default()
        .with_key_type(0)
        .with_coordinator_keys(vec![text("g1"), text("g2")]);
    let r = c.call(4, batched).await;
    let named: Vec<(String, i16, i32)> = r
        .coordinators
        .iter()
        .map(|k| (k.key.to_string(), k.error_code, k.node_id.0))
        .collect();
    assert_eq!(named, [("g1".to_owned(), 0, 3), ("g2".to_owned(), 0, 3)]);
    let unknown_type = FindCoordinatorRequest::default()
        .with_key(text("g"))
        .with_key_type(2);
    let r = c.call(3, unknown_type).await;
    assert_eq!(
        (r.error_code, r.node_id),
        (ResponseError::InvalidRequest.code(), BrokerId(-1))
    );
    front.stop().await;
}

#[tokio::test]
async fn a_lone_member_joins_leads_syncs_and_heartbeats() {
    let front = Front::start().await;
    let mut c = front.client();
    let joined = join(&mut c, join_request("solo", "", SESSION_MS, b"meta"))
        .await
        .response()
        .await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.generation_id, 1);
    let member = joined.member_id.to_string();
    assert!(
        member.starts_with("api-test-"),
        "{member}: client id, then a unique part"
    );
    assert_eq!(joined.leader, joined.member_id, "the only member leads");
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
    let members: Vec<(String, Bytes)> = joined
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.metadata.clone()))
        .collect();
    assert_eq!(members, [(member.clone(), Bytes::from_static(b"meta"))]);
    assert_eq!(
        describe(&mut c, "solo").await,
        (0, "CompletingRebalance".into(), vec![member.clone()])
    );
    let (code, assignment) = sync(&mut c, "solo", &member, 1, &[(&member, b"all of it")]).await;
    assert_eq!((code, assignment.as_ref()), (0, &b"all of it"[..]));
    assert_eq!(heartbeat(&mut c, "solo", &member, 1).await, 0);
    let request = DescribeGroupsRequest::default().with_groups(vec![group("solo")]);
    let g = c.call(5, request).await.groups.remove(0);
    assert_eq!(
        (
            g.error_code,
            g.group_state.to_string(),
            g.protocol_type.to_string(),
            g.protocol_data.to_string()
        ),
        (0, "Stable".into(), "consumer".into(), "range".into())
    );
    let m = &g.members[0];
    assert_eq!(
        (
            m.member_id.to_string(),
            m.client_id.to_string(),
            m.client_host.to_string(),
            m.member_assignment.clone()
        ),
        (
            member,
            "api-test".into(),
            "/127.0.0.1".into(),
            Bytes::from_static(b"all of it")
        )
    );
    front.stop().await;
}

#[tokio::test]
async fn a_second_member_rebalances_the_group_and_the_leader_assigns_both() {
    let front = Front::start().await;
    let (mut a, mut b) = (front.client(), front.client());
    let (first, generation) = stable_member(&mut a, "pair").await;
    let second_join = join(&mut b, join_request("pair", "", SESSION_MS, b"m2")).await;
    assert_eq!(
        heartbeat(&mut a, "pair", &first, generation).await,
        ResponseError::RebalanceInProgress.code(),
        "the first member is told to rejoin"
    );
    assert_eq!(describe(&mut a, "pair").await.1, "PreparingRebalance");
    let rejoined = join(&mut a, join_request("pair", &first, SESSION_MS, b"m1"))
        .await
        .response()
        .await;
    let joined = second_join.response().await;
    let second = joined.member_id.to_string();
    assert_eq!(
        (rejoined.error_code, joined.error_code),
        (0, 0),
        "both joins complete together"
    );
    assert_eq!((rejoined.generation_id, joined.generation_id), (2, 2));
    assert_eq!(rejoined.leader.to_string(), first, "the leader stays");
    assert_eq!(joined.leader.to_string(), first);
    assert_eq!(rejoined.members.len(), 2, "the leader sees every member");
    assert!(joined.members.is_empty(), "a follower sees none");
    // The follower's sync waits for the leader's assignment.
    let Answer::Response(follower_sync) = b.send(5, sync_request("pair", &second, 2, &[])).await
    else {
        panic!("a sync is answered");
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(
        !follower_sync.is_finished(),
        "answered before the leader's sync"
    );
    let assignments: [(&str, &'static [u8]); 2] = [(&first, b"p0"), (&second, b"p1")];
    assert_eq!(
        sync(&mut a, "pair", &first, 2, &assignments).await,
        (0, Bytes::from_static(b"p0"))
    );
    let follower = follower_sync.response().await;
    assert_eq!(
        (follower.error_code, follower.assignment),
        (0, Bytes::from_static(b"p1"))
    );
    assert_eq!(heartbeat(&mut b, "pair", &second, 2).await, 0);
    front.stop().await;
}

#[tokio::test]
async fn group_requests_of_strangers_and_stale_generations_are_refused() {
    let front = Front::start().await;
    let mut c = front.client();
    let (member, generation) = stable_member(&mut c, "strict").await;
    assert_eq!(
        heartbeat(&mut c, "strict", "stranger", generation).await,
        ResponseError::UnknownMemberId.code()
    );
    assert_eq!(
        heartbeat(&mut c, "strict", &member, generation + 1).await,
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(
        sync(&mut c, "strict", &member, generation - 1, &[]).await.0,
        ResponseError::IllegalGeneration.code()
    );
    assert_eq!(
        sync(&mut c, "strict", "stranger", generation, &[]).await.0,
        ResponseError::UnknownMemberId.code()
    );
    let code = |r: JoinGroupResponse| r.error_code;
    let unknown = join(&mut c, join_request("strict", "stranger", SESSION_MS, b"m"))
        .await
        .response()
        .await;
    assert_eq!(code(unknown), ResponseError::UnknownMemberId.code());
    let short = send_join(&mut c, join_request("strict", "", 50, b"m"))
        .await
        .response()
        .await;
    assert_eq!(code(short), ResponseError::InvalidSessionTimeout.code());
    let long = send_join(&mut c, join_request("strict", "", 1_800_001, b"m"))
        .await
        .response()
        .await;
    assert_eq!(code(long), ResponseError::InvalidSessionTimeout.code());
    let other_type =
        join_request("strict", "", SESSION_MS, b"m").with_protocol_type(text("connect"));
    let other_type = send_join(&mut c, other_type).await.response().await;
    assert_eq!(
        code(other_type),
        ResponseError::InconsistentGroupProtocol.code()
    );
    let nameless = send_join(&mut c, join_request("", "", SESSION_MS, b"m"))
        .await
        .response()
        .await;
    assert_eq!(code(nameless), ResponseError::InvalidGroupId.code());
    assert_eq!(
        heartbeat(&mut c, "strict", &member, generation).await,
        0,
        "the member is still in good standing"
    );
    front.stop().await;
}

#[tokio::test]
async fn a_member_that_leaves_empties_the_group_and_an_unknown_leaver_is_refused() {
    let front = Front::start().await;
    let mut c = front.client();
    let (member, _) = stable_member(&mut c, "brief").await;
    let leave = |members: &[&str]| {
        LeaveGroupRequest::default()
            .with_group_id(group("brief"))
            .with_members(
                members
                    .iter()
                    .map(|m| MemberIdentity::default().with_member_id(text(m)))
                    .collect(),
            )
    };
    let r = c.call(4, leave(&[&member, "stranger"])).await;
    let codes: Vec<(String, i16)> = r
        .members
        .iter()
        .map(|m| (m.member_id.to_string(), m.error_code))
        .collect();
    assert_eq!(
        codes,
        [
            (member.clone(), 0),
            ("stranger".into(), ResponseError::UnknownMemberId.code())
        ]
    );
    assert_eq!(
        describe(&mut c, "brief").await,
        (0, "Empty".into(), Vec::new())
    );
    let v0 = LeaveGroupRequest::default()
        .with_group_id(group("brief"))
        .with_member_id(text(&member));
    assert_eq!(
        c.call(0, v0).await.error_code,
        ResponseError::UnknownMemberId.code(),
        "gone already"
    );
    front.stop().await;
}

#[tokio::test]
async fn a_member_that_stops_heartbeating_is_expired() {
    let front = Front::start().await;
    let mut c = front.client();
    let joined = join(&mut c, join_request("lapsing", "", 150, b"m"))
        .await
        .response()
        .await;
    let member = joined.member_id.to_string();
    let generation = joined.generation_id;
    sync(&mut c, "lapsing", &member, generation, &[(&member, b"a")]).await;
    let mut state = String::new();
    for _ in 0..50 {
        state = describe(&mut c, "lapsing").await.1;
        if state == "Empty" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(state, "Empty", "expired after its 150 ms session");
    assert_eq!(
        heartbeat(&mut c, "lapsing", &member, generation).await,
        ResponseError::UnknownMemberId.code()
    );
    front.stop().await;
}

#[tokio::test]
async fn offsets_a_member_commits_are_fetched_back() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "events", 3).await;
    let (member, generation) = stable_member(&mut c, "readers").await;
    let codes = commit(
        &mut c,
        "readers",
        &member,
        generation,
        &[
            ("events", 0, 10),
            ("events", 2, 7),
            ("events", 9, 1),
            ("ghost", 0, 1),
        ],
    )
    .await;
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(codes, [0, 0, unknown, unknown]);
    assert_eq!(
        fetched(&mut c, "readers", Some(("events", vec![0, 1, 2]))).await,
        [
            ("events".into(), 0, 10, "note".into()),
            ("events".into(), 1, -1, String::new()),
            ("events".into(), 2, 7, "note".into()),
        ],
        "-1 where nothing was committed"
    );
    assert_eq!(
        fetched(&mut c, "readers", None).await,
        [
            ("events".into(), 0, 10, "note".into()),
            ("events".into(), 2, 7, "note".into()),
        ],
        "no topics named: everything committed"
    );
    front.stop().await;
}

#[tokio::test]
async fn offset_commits_outside_the_current_generation_are_refused() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "events", 1).await;
    // A group without members takes commits that name no member (a standalone consumer).
    assert_eq!(
        commit(&mut c, "loose", "", -1, &[("events", 0, 4)]).await,
        [0]
    );
    let (member, generation) = stable_member(&mut c, "members").await;
    let offsets = [("events", 0, 5)];
    assert_eq!(
        commit(&mut c, "members", "stranger", generation, &offsets).await,
        [ResponseError::UnknownMemberId.code()]
    );
    assert_eq!(
        commit(&mut c, "members", &member, generation + 1, &offsets).await,
        [ResponseError::IllegalGeneration.code()]
    );
    assert_eq!(
        commit(&mut c, "members", "", -1, &offsets).await,
        [ResponseError::UnknownMemberId.code()],
        "a group with members takes no anonymous commits"
    );
    assert_eq!(
        commit(&mut c, "", "", -1, &offsets).await,
        [ResponseError::InvalidGroupId.code()]
    );
    assert_eq!(
        fetched(&mut c, "members", None).await,
        [],
        "nothing refused was written"
    );
    assert_eq!(
        fetched(&mut c, "loose", None).await,
        [("events".into(), 0, 4, "note".into())]
    );
    front.stop().await;
}

#[tokio::test]
async fn list_groups_names_every_group_with_its_protocol_type() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "events", 1).await;
    stable_member(&mut c, "consumers").await;
    commit(&mut c, "committers", "", -1, &[("events", 0, 1)]).await;
    let r = c.call(3, ListGroupsRequest::default()).await;
    assert_eq!(r.error_code, 0);
    let mut listed: Vec<(String, String)> = r
        .groups
        .iter()
        .map(|g| (g.group_id.0.to_string(), g.protocol_type.to_string()))
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        [
            ("committers".into(), String::new()),
            ("consumers".into(), "consumer".into()),
        ]
    );
    front.stop().await;
}

#[tokio::test]
async fn describe_groups_reports_an_unknown_group_dead() {
    let front = Front::start().await;
    let mut c = front.client();
    assert_eq!(
        describe(&mut c, "never").await,
        (0, "Dead".into(), Vec::new())
    );
    front.stop().await;
}

#[tokio::test]
async fn delete_groups_removes_empty_groups_with_their_offsets_and_refuses_the_rest() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "events", 1).await;
    stable_member(&mut c, "busy").await;
    commit(&mut c, "idle", "", -1, &[("events", 0, 3)]).await;
    let request = DeleteGroupsRequest::default().with_groups_names(vec![
        group("busy"),
        group("idle"),
        group("never"),
    ]);
    let r = c.call(2, request).await;
    let results: Vec<(String, i16)> = r
        .results
        .iter()
        .map(|g| (g.group_id.0.to_string(), g.error_code))
        .collect();
    assert_eq!(
        results,
        [
            ("busy".into(), ResponseError::NonEmptyGroup.code()),
            ("idle".into(), 0),
            ("never".into(), ResponseError::GroupIdNotFound.code()),
        ]
    );
    assert_eq!(
        fetched(&mut c, "idle", None).await,
        [],
        "its offsets went with it"
    );
    let listed = c.call(3, ListGroupsRequest::default()).await.groups;
    let names: Vec<String> = listed.iter().map(|g| g.group_id.0.to_string()).collect();
    assert_eq!(names, ["busy"]);
    front.stop().await;
}

/// A consumer protocol subscription (v1) to the topic `events`, as a member's metadata.
const SUBSCRIBED_TO_EVENTS: &[u8] = &[
    0, 1, 0, 0, 0, 1, 0, 6, b'e', b'v', b'e', b'n', b't', b's', 255, 255, 255, 255, 0, 0, 0, 0,
];

/// OffsetDelete (v0) of `partitions` (topic, partition) in group `id`: the group's error
/// code and each partition's, in order.
async fn delete_offsets(c: &mut Client, id: &str, partitions: &[(&str, i32)]) -> (i16, Vec<i16>) {
    let request = OffsetDeleteRequest::default()
        .with_group_id(group(id))
        .with_topics(
            partitions
                .iter()
                .map(|&(topic, partition)| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(name(topic))
                        .with_partitions(vec![
                            OffsetDeleteRequestPartition::default().with_partition_index(partition),
                        ])
                })
                .collect(),
        );
    let r = c.call(0, request).await;
    let codes = r
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect();
    (r.error_code, codes)
}

#[tokio::test]
async fn offset_delete_keeps_the_offsets_of_topics_members_subscribe_to() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "events", 1).await;
    create_topic(&mut c, "other", 1).await;
    let joined = join(
        &mut c,
        join_request("readers", "", SESSION_MS, SUBSCRIBED_TO_EVENTS),
    )
    .await
    .response()
    .await;
    let (member, generation) = (joined.member_id.to_string(), joined.generation_id);
    let synced = sync(&mut c, "readers", &member, generation, &[(&member, b"a1")]).await;
    assert_eq!(synced.0, 0);
    let offsets = [("events", 0, 4), ("other", 0, 7)];
    assert_eq!(
        commit(&mut c, "readers", &member, generation, &offsets).await,
        [0, 0]
    );
    let asked = [("events", 0), ("other", 0), ("events", 5), ("missing", 0)];
    let unknown = ResponseError::UnknownTopicOrPartition.code();
    assert_eq!(
        delete_offsets(&mut c, "readers", &asked).await,
        (
            0,
            vec![
                ResponseError::GroupSubscribedToTopic.code(),
                0,
                unknown,
                unknown
            ]
        )
    );
    assert_eq!(
        fetched(&mut c, "readers", None).await,
        [("events".into(), 0, 4, "note".into())]
    );
    // Once the group is empty, every offset may go.
    commit(&mut c, "idle", "", -1, &[("events", 0, 3)]).await;
    assert_eq!(
        delete_offsets(&mut c, "idle", &[("events", 0)]).await,
        (0, vec![0])
    );
    assert_eq!(fetched(&mut c, "idle", None).await, []);
    front.stop().await;
}

#[tokio::test]
async fn offset_delete_refuses_unknown_non_consumer_and_unauthorized_groups() {
    let front = guarded().await;
    let mut admin = client_of(&front, "admin");
    create_topic(&mut admin, "events", 1).await;
    assert_eq!(
        delete_offsets(&mut admin, "never", &[("events", 0)]).await,
        (ResponseError::GroupIdNotFound.code(), vec![])
    );
    let connect = join_request("workers", "", SESSION_MS, b"w").with_protocol_type(text("connect"));
    let joined = join(&mut admin, connect).await.response().await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(
        delete_offsets(&mut admin, "workers", &[("events", 0)]).await,
        (ResponseError::NonEmptyGroup.code(), vec![])
    );
    commit(&mut admin, "idle", "", -1, &[("events", 0, 3)]).await;
    let mut alice = client_of(&front, "alice");
    assert_eq!(
        delete_offsets(&mut alice, "idle", &[("events", 0)]).await,
        (ResponseError::GroupAuthorizationFailed.code(), vec![])
    );
    // Delete on the group, but no Read on the topic.
    const GROUP: i8 = 3;
    const LITERAL: i8 = 3;
    const DELETE: i8 = 6;
    const ALLOW: i8 = 3;
    let acl = creation(GROUP, "idle", LITERAL, "User:alice", DELETE, ALLOW);
    assert_eq!(create_acls(&mut admin, vec![acl]).await, [0]);
    assert_eq!(
        delete_offsets(&mut alice, "idle", &[("events", 0)]).await,
        (0, vec![ResponseError::TopicAuthorizationFailed.code()])
    );
    assert_eq!(fetched(&mut admin, "idle", None).await.len(), 1);
    front.stop().await;
}

#[tokio::test]
async fn list_groups_v4_reports_states_and_keeps_those_asked_for() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "events", 1).await;
    stable_member(&mut c, "consumers").await;
    commit(&mut c, "committers", "", -1, &[("events", 0, 1)]).await;
    let list = |states: &[&str]| {
        ListGroupsRequest::default().with_states_filter(states.iter().map(|s| text(s)).collect())
    };
    let listed = |r: kafka_protocol::messages::ListGroupsResponse| {
        let mut groups: Vec<(String, String)> = r
            .groups
            .iter()
            .map(|g| (g.group_id.0.to_string(), g.group_state.to_string()))
            .collect();
        groups.sort();
        groups
    };
    assert_eq!(
        listed(c.call(4, list(&[])).await),
        [
            ("committers".into(), "Empty".into()),
            ("consumers".into(), "Stable".into())
        ]
    );
    assert_eq!(
        listed(c.call(4, list(&["empty"])).await),
        [("committers".into(), "Empty".into())],
        "states match whatever their case"
    );
    assert_eq!(listed(c.call(4, list(&["Dead"])).await), []);
    front.stop().await;
}
