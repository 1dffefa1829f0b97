//! ElectLeaders (KIP-460): a partition's leader is the instance holding its sequencer
//! lease, and that instance is also its one replica (as Metadata names them), so a led
//! partition is led by its preferred replica already: a PREFERRED or UNCLEAN election of it
//! is `ELECTION_NOT_NEEDED`, as Kafka answers for a partition its preferred replica leads
//! (or, unclean, that has a leader). A partition whose lease no live instance holds is
//! elected here: this instance claims the lease (as its balancing would on its next round);
//! the answer is success once an instance leads it, else `PREFERRED_LEADER_NOT_AVAILABLE`
//! (PREFERRED) or `ELIGIBLE_LEADERS_NOT_AVAILABLE` (UNCLEAN).
//!
//! As Kafka: no partitions named means every partition, and then only those an election
//! was tried for are answered; an unknown topic or partition is
//! `UNKNOWN_TOPIC_OR_PARTITION`; an election type other than PREFERRED (0) and UNCLEAN (1)
//! is `INVALID_REQUEST`. Needs Alter on the cluster, else `CLUSTER_AUTHORIZATION_FAILED`
//! on the answer (v1+) and on every partition named.

use super::{Refused, Session, grouped, str_bytes};
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{
    ElectLeadersRequest, ElectLeadersResponse, ResponseKind, TopicName,
};
use std::sync::Arc;
use tracing::warn;

/// The election type that makes the preferred replica leader.
const PREFERRED: i8 = 0;
/// The election type that makes any live replica leader of a partition without one.
const UNCLEAN: i8 = 1;

/// Answers the election of every partition asked for.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: ElectLeadersRequest,
) -> ResponseKind {
    let every = request.topic_partitions.is_none();
    let refused: Option<Refused> = if !session.access(ctx).cluster(Operation::Alter) {
        Some((
            ResponseError::ClusterAuthorizationFailed.code(),
            "Authorization failed.".to_owned(),
        ))
    } else if !matches!(request.election_type, PREFERRED | UNCLEAN) {
        Some((
            ResponseError::InvalidRequest.code(),
            format!(
                "election type {} is neither PREFERRED (0) nor UNCLEAN (1)",
                request.election_type
            ),
        ))
    } else {
        None
    };
    let asked: Vec<(String, i32)> = match &request.topic_partitions {
        Some(topics) => topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|&p| (t.topic.0.to_string(), p)))
            .collect(),
        // Refused, an election of every partition names none to answer.
        None if refused.is_some() => Vec::new(),
        None => ctx
            .topics
            .all()
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.meta.name.clone(), p.index)))
            .collect(),
    };
    let mut outcomes = Vec::with_capacity(asked.len());
    for (topic, index) in &asked {
        let outcome = match &refused {
            Some((code, message)) => (*code, Some(message.clone())),
            None => elect(ctx, topic, *index, request.election_type).await,
        };
        if every && outcome.0 == ResponseError::ElectionNotNeeded.code() {
            continue;
        }
        outcomes.push((topic.as_str(), (*index, outcome)));
    }
    let results = grouped(outcomes)
        .into_iter()
        .map(|(topic, partitions)| {
            ReplicaElectionResult::default()
                .with_topic(TopicName(str_bytes(topic)))
                .with_partition_result(
                    partitions
                        .into_iter()
                        .map(|(index, (code, message))| {
                            PartitionResult::default()
                                .with_partition_id(index)
                                .with_error_code(code)
                                .with_error_message(message.map(str_bytes))
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::ElectLeaders(
        ElectLeadersResponse::default()
            .with_error_code(refused.map_or(0, |(code, _)| code))
            .with_replica_election_results(results),
    )
}

/// The election of partition `index` of `topic`: its error code and message.
async fn elect(ctx: &Context, topic: &str, index: i32, election_type: i8) -> (i16, Option<String>) {
    let Some(partition) = ctx
        .topics
        .get(topic)
        .and_then(|t| t.partition(index).cloned())
    else {
        return (
            ResponseError::UnknownTopicOrPartition.code(),
            Some(format!("No such topic partition as {topic}-{index}")),
        );
    };
    let leader = async || {
        ctx.sequencers
            .leaders(std::slice::from_ref(&partition))
            .await
            .map(|l| l[0])
    };
    let led = match leader().await {
        Ok(Some(_)) => {
            let e = ResponseError::ElectionNotNeeded;
            return (e.code(), Some(e.to_string()));
        }
        // No live instance holds the lease: take it.
        Ok(None) => {
            ctx.sequencers.claim(&partition).await;
            leader().await
        }
        Err(e) => Err(e),
    };
    match led {
        Ok(Some(_)) => (0, None),
        Ok(None) => {
            let e = if election_type == PREFERRED {
                ResponseError::PreferredLeaderNotAvailable
            } else {
                ResponseError::EligibleLeadersNotAvailable
            };
            (
                e.code(),
                Some(format!(
                    "no instance could take the sequencer lease of {topic}-{index}"
                )),
            )
        }
        Err(e) => {
            warn!(topic, partition = index, error = %e, "cannot read the partition's leader");
            (
                ResponseError::KafkaStorageError.code(),
                Some(format!("cannot read the leader of {topic}-{index}: {e}")),
            )
        }
    }
}
