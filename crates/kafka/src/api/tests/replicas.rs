//! DescribeLogDirs, AlterReplicaLogDirs, ElectLeaders, ListPartitionReassignments and
//! AlterPartitionReassignments: Kafka's replica administration answered for Ferry's model
//! (one log dir per instance, one replica per partition — its sequencer lease holder), each
//! refusal with Kafka's code.

use super::acls::{client_of, guarded};
use super::fixture::{Client, Front, batch, name, text};
use super::{create_topic, produce};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::alter_replica_log_dirs_request::{
    AlterReplicaLogDir, AlterReplicaLogDirTopic,
};
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::describe_log_dirs_response::DescribeLogDirsResponse;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::elect_leaders_response::ElectLeadersResponse;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterReplicaLogDirsRequest, BrokerId,
    DescribeLogDirsRequest, ElectLeadersRequest, ListPartitionReassignmentsRequest,
};

/// Election types.
const PREFERRED: i8 = 0;
const UNCLEAN: i8 = 1;

/// DescribeLogDirs at `version` of `topics` (`None`: every partition).
async fn log_dirs(
    c: &mut Client,
    version: i16,
    topics: Option<&[(&str, &[i32])]>,
) -> DescribeLogDirsResponse {
    let topics = topics.map(|topics| {
        topics
            .iter()
            .map(|(topic, partitions)| {
                DescribableLogDirTopic::default()
                    .with_topic(name(topic))
                    .with_partitions(partitions.to_vec())
            })
            .collect()
    });
    c.call(
        version,
        DescribeLogDirsRequest::default().with_topics(topics),
    )
    .await
}

/// (topic, partition, size) of every partition `response`'s one log dir lists.
fn sizes(response: &DescribeLogDirsResponse) -> Vec<(String, i32, i64)> {
    assert_eq!(response.results.len(), 1, "one log dir: {response:?}");
    response.results[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                assert_eq!((p.offset_lag, p.is_future_key), (0, false));
                (t.name.0.to_string(), p.partition_index, p.partition_size)
            })
        })
        .collect()
}

#[tokio::test]
async fn describe_log_dirs_lists_the_one_log_dir_with_each_partitions_bytes() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "sized", 2).await;
    let empty = log_dirs(&mut c, 4, None).await;
    let dir = &empty.results[0];
    assert_eq!(
        (dir.error_code, dir.log_dir.as_str()),
        (0, front.ctx.log_dir.path.as_str())
    );
    assert!(
        dir.total_bytes > 0 && (0..=dir.total_bytes).contains(&dir.usable_bytes),
        "{dir:?}"
    );
    assert_eq!(
        sizes(&empty),
        [("sized".into(), 0, 0), ("sized".into(), 1, 0)]
    );

    let first = batch(&["a", "b"]);
    let second = batch(&["c"]);
    let written = (first.len() + second.len()) as i64;
    assert_eq!(produce(&mut c, "sized", 0, first).await.error_code, 0);
    assert_eq!(produce(&mut c, "sized", 0, second).await.error_code, 0);
    let asked: &[(&str, &[i32])] = &[("sized", &[0]), ("missing", &[0])];
    assert_eq!(
        sizes(&log_dirs(&mut c, 4, Some(asked)).await),
        [("sized".into(), 0, written)],
        "the bytes produced; an unknown partition is left out"
    );

    let none = log_dirs(&mut c, 4, Some(&[])).await;
    assert_eq!(
        sizes(&none),
        [],
        "an empty topic list asks for no partition, as Kafka"
    );

    // v1 has neither the error field nor the disk's size.
    let oldest = log_dirs(&mut c, 1, None).await;
    assert_eq!(
        (
            oldest.results[0].total_bytes,
            oldest.results[0].usable_bytes
        ),
        (-1, -1)
    );
    assert_eq!(
        sizes(&oldest),
        [("sized".into(), 0, written), ("sized".into(), 1, 0)]
    );
    front.stop().await;
}

#[tokio::test]
async fn describe_log_dirs_needs_describe_on_the_cluster() {
    let front = guarded().await;
    create_topic(&mut client_of(&front, "admin"), "secret", 1).await;
    let mut alice = client_of(&front, "alice");
    let refused = log_dirs(&mut alice, 4, None).await;
    assert_eq!(
        (refused.error_code, refused.results.len()),
        (ResponseError::ClusterAuthorizationFailed.code(), 0)
    );
    let old = log_dirs(&mut alice, 2, None).await;
    assert_eq!(
        (old.error_code, old.results.len()),
        (0, 0),
        "v2 has no error field"
    );
    let admin = log_dirs(&mut client_of(&front, "admin"), 4, None).await;
    assert_eq!(sizes(&admin), [("secret".into(), 0, 0)]);
    front.stop().await;
}

/// AlterReplicaLogDirs (v2) moving partitions of `topic` to `path`: each partition's code.
async fn move_to(c: &mut Client, path: &str, topic: &str, partitions: &[i32]) -> Vec<(i32, i16)> {
    let request = AlterReplicaLogDirsRequest::default().with_dirs(vec![
        AlterReplicaLogDir::default()
            .with_path(text(path))
            .with_topics(vec![
                AlterReplicaLogDirTopic::default()
                    .with_name(name(topic))
                    .with_partitions(partitions.to_vec()),
            ]),
    ]);
    let response = c.call(2, request).await;
    response
        .results
        .iter()
        .flat_map(|t| {
            assert_eq!(t.topic_name.0.as_str(), topic);
            t.partitions
                .iter()
                .map(|p| (p.partition_index, p.error_code))
        })
        .collect()
}

#[tokio::test]
async fn alter_replica_log_dirs_takes_the_one_log_dir_and_refuses_any_other() {
    let front = guarded().await;
    let mut admin = client_of(&front, "admin");
    create_topic(&mut admin, "moved", 2).await;
    let here = front.ctx.log_dir.path.clone();
    assert_eq!(
        move_to(&mut admin, &here, "moved", &[0, 1]).await,
        [(0, 0), (1, 0)]
    );
    assert_eq!(
        move_to(&mut admin, "/var/lib/kafka/elsewhere", "moved", &[0]).await,
        [(0, ResponseError::LogDirNotFound.code())]
    );
    assert_eq!(
        move_to(&mut admin, &here, "moved", &[7]).await,
        [(7, ResponseError::UnknownTopicOrPartition.code())]
    );
    assert_eq!(
        move_to(&mut client_of(&front, "alice"), &here, "moved", &[0]).await,
        [(0, ResponseError::ClusterAuthorizationFailed.code())]
    );
    front.stop().await;
}

/// ElectLeaders at `version` of `election_type` for `partitions` of `topic` (`None`:
/// every partition).
async fn elect(
    c: &mut Client,
    version: i16,
    election_type: i8,
    partitions: Option<(&str, &[i32])>,
) -> ElectLeadersResponse {
    let request = ElectLeadersRequest::default()
        .with_election_type(election_type)
        .with_timeout_ms(5_000)
        .with_topic_partitions(partitions.map(|(topic, partitions)| {
            vec![
                TopicPartitions::default()
                    .with_topic(name(topic))
                    .with_partitions(partitions.to_vec()),
            ]
        }));
    c.call(version, request).await
}

/// (topic, partition, code) of every partition an ElectLeaders answer names.
fn elected(response: &ElectLeadersResponse) -> Vec<(String, i32, i16)> {
    response
        .replica_election_results
        .iter()
        .flat_map(|t| {
            t.partition_result
                .iter()
                .map(|p| (t.topic.0.to_string(), p.partition_id, p.error_code))
        })
        .collect()
}

#[tokio::test]
async fn elect_leaders_finds_every_led_partition_led_by_its_preferred_replica() {
    let front = guarded().await;
    let mut admin = client_of(&front, "admin");
    create_topic(&mut admin, "led", 2).await;
    let not_needed = ResponseError::ElectionNotNeeded.code();
    for (version, election_type) in [(0, PREFERRED), (2, PREFERRED), (2, UNCLEAN)] {
        let answer = elect(&mut admin, version, election_type, Some(("led", &[0, 1]))).await;
        assert_eq!(
            (answer.error_code, elected(&answer)),
            (
                0,
                vec![("led".into(), 0, not_needed), ("led".into(), 1, not_needed)]
            ),
            "v{version} type {election_type}"
        );
    }
    let every = elect(&mut admin, 2, PREFERRED, None).await;
    assert_eq!(
        (every.error_code, elected(&every)),
        (0, vec![]),
        "every partition: those needing no election are left out, as Kafka"
    );
    let unknown = elect(&mut admin, 2, PREFERRED, Some(("led", &[5]))).await;
    assert_eq!(
        elected(&unknown),
        [(
            "led".into(),
            5,
            ResponseError::UnknownTopicOrPartition.code()
        )]
    );
    let odd = elect(&mut admin, 2, 2, Some(("led", &[0]))).await;
    assert_eq!(odd.error_code, ResponseError::InvalidRequest.code());
    let denied = elect(
        &mut client_of(&front, "alice"),
        2,
        PREFERRED,
        Some(("led", &[0])),
    )
    .await;
    let code = ResponseError::ClusterAuthorizationFailed.code();
    assert_eq!(
        (denied.error_code, elected(&denied)),
        (code, vec![("led".into(), 0, code)])
    );
    front.stop().await;
}

#[tokio::test]
async fn elect_leaders_claims_a_partition_whose_leader_stopped() {
    // Balancing rounds 200 s apart (a third of the lease): only the election can claim the
    // partition within the test.
    let front = Front::start_with(|c| c.sequencer_lease_ms = 600_000).await;
    let peer = front.peer(2).await;
    create_topic(&mut peer.client(), "orphaned", 1).await;
    // Its leader stops (releasing its lease, as a stopping instance does).
    peer.stop().await;
    let deadline = tokio::time::Instant::now() + super::fixture::PATIENCE;
    let partition = loop {
        if let Some(p) = front
            .ctx
            .topics
            .get("orphaned")
            .and_then(|t| t.partition(0).cloned())
        {
            break p;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the topic never reached the front"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let leader = async || {
        front
            .ctx
            .sequencers
            .leaders(std::slice::from_ref(&partition))
            .await
            .unwrap()[0]
    };
    assert_eq!(leader().await, None, "unled before the election");
    let mut c = front.client();
    for election_type in [PREFERRED, UNCLEAN] {
        let answer = elect(&mut c, 2, election_type, Some(("orphaned", &[0]))).await;
        let code = if election_type == PREFERRED {
            0
        } else {
            // Elected by the first: led now.
            ResponseError::ElectionNotNeeded.code()
        };
        assert_eq!(
            (answer.error_code, elected(&answer)),
            (0, vec![("orphaned".into(), 0, code)]),
            "type {election_type}"
        );
    }
    assert_eq!(
        leader().await.map(|l| l.node),
        Some(front.ctx.config.node_id)
    );
    // The new leader takes records.
    let produced = produce(&mut c, "orphaned", 0, batch(&["after the election"])).await;
    assert_eq!(produced.error_code, 0, "{produced:?}");
    front.stop().await;
}

/// AlterPartitionReassignments (v1, `allow_rf_change`) of partition `index` of `topic` to
/// `replicas`: the answer's code and the partition's code.
async fn reassign(
    c: &mut Client,
    topic: &str,
    index: i32,
    replicas: Option<&[i32]>,
    allow_rf_change: bool,
) -> (i16, i16) {
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(5_000)
        .with_allow_replication_factor_change(allow_rf_change)
        .with_topics(vec![
            ReassignableTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![
                    ReassignablePartition::default()
                        .with_partition_index(index)
                        .with_replicas(replicas.map(|r| r.iter().map(|&b| BrokerId(b)).collect())),
                ]),
        ]);
    let response = c.call(1, request).await;
    let partition = &response.responses[0].partitions[0];
    (response.error_code, partition.error_code)
}

#[tokio::test]
async fn reassignments_none_in_progress_and_only_the_current_replica_is_taken() {
    let front = guarded().await;
    let mut admin = client_of(&front, "admin");
    create_topic(&mut admin, "placed", 1).await;
    let listed = admin
        .call(0, ListPartitionReassignmentsRequest::default())
        .await;
    assert_eq!((listed.error_code, listed.topics.len()), (0, 0));

    let invalid = ResponseError::InvalidReplicaAssignment.code();
    assert_eq!(
        reassign(&mut admin, "placed", 0, Some(&[0]), true).await,
        (0, 0)
    );
    assert_eq!(
        reassign(&mut admin, "placed", 0, Some(&[1]), true).await,
        (0, invalid)
    );
    assert_eq!(
        reassign(&mut admin, "placed", 0, Some(&[0, 0]), true).await,
        (0, invalid)
    );
    assert_eq!(
        reassign(&mut admin, "placed", 0, Some(&[]), true).await,
        (0, invalid)
    );
    assert_eq!(
        reassign(&mut admin, "placed", 0, Some(&[0, 1]), true).await,
        (0, invalid)
    );
    assert_eq!(
        reassign(&mut admin, "placed", 0, Some(&[0, 1]), false).await,
        (0, ResponseError::InvalidReplicationFactor.code())
    );
    assert_eq!(
        reassign(&mut admin, "placed", 0, None, true).await,
        (0, ResponseError::NoReassignmentInProgress.code())
    );
    assert_eq!(
        reassign(&mut admin, "placed", 3, Some(&[0]), true).await,
        (0, ResponseError::UnknownTopicOrPartition.code())
    );

    let mut alice = client_of(&front, "alice");
    let code = ResponseError::ClusterAuthorizationFailed.code();
    assert_eq!(
        reassign(&mut alice, "placed", 0, Some(&[0]), true).await,
        (code, code)
    );
    let listed = alice
        .call(0, ListPartitionReassignmentsRequest::default())
        .await;
    assert_eq!(listed.error_code, code);
    front.stop().await;
}
