//! AlterPartitionReassignments (KIP-455): Kafka's replicas are not Ferry's. The store
//! replicates (FoundationDB's copies, or the embedded engine's one disk), and a partition's
//! one replica as Metadata names it is the instance holding its sequencer lease, which
//! Ferry's balancing places. So a reassignment to that very replica set (`[leader]`) is
//! accepted and changes nothing; cancelling a reassignment (no replicas) is
//! `NO_REASSIGNMENT_IN_PROGRESS`, as Kafka answers when none is; any other set is refused:
//! Kafka's `INVALID_REPLICA_ASSIGNMENT` for an empty list, a broker named twice or any
//! other placement (with a message saying why), and, when the request forbids changing the
//! replication factor (v1), `INVALID_REPLICATION_FACTOR` for a list of another length. An
//! unknown topic or partition is `UNKNOWN_TOPIC_OR_PARTITION`. Needs Alter on the cluster,
//! else `CLUSTER_AUTHORIZATION_FAILED` on the answer and every partition.

use super::{Refused, Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId, ResponseKind,
};
use std::collections::HashSet;
use std::sync::Arc;
use tracing::warn;

/// Answers each partition's reassignment.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: AlterPartitionReassignmentsRequest,
) -> ResponseKind {
    let allowed = session.access(ctx).cluster(Operation::Alter);
    let denied = || {
        (
            ResponseError::ClusterAuthorizationFailed.code(),
            "Authorization failed.".to_owned(),
        )
    };
    let mut responses = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let outcome = if allowed {
                reassign(
                    ctx,
                    t.name.0.as_str(),
                    p.partition_index,
                    p.replicas.as_deref(),
                    request.allow_replication_factor_change,
                )
                .await
            } else {
                Err(denied())
            };
            let answer =
                ReassignablePartitionResponse::default().with_partition_index(p.partition_index);
            partitions.push(match outcome {
                Ok(()) => answer,
                Err((code, message)) => answer
                    .with_error_code(code)
                    .with_error_message(Some(str_bytes(message))),
            });
        }
        responses.push(
            ReassignableTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions),
        );
    }
    let response = AlterPartitionReassignmentsResponse::default()
        .with_allow_replication_factor_change(request.allow_replication_factor_change)
        .with_responses(responses);
    ResponseKind::AlterPartitionReassignments(if allowed {
        response
    } else {
        let (code, message) = denied();
        response
            .with_error_code(code)
            .with_error_message(Some(str_bytes(message)))
    })
}

/// Partition `index` of `topic` reassigned to `replicas` (`None`: a cancellation).
///
/// # Errors
/// Why it is refused, as Kafka's code and a message.
async fn reassign(
    ctx: &Context,
    topic: &str,
    index: i32,
    replicas: Option<&[BrokerId]>,
    allow_replication_factor_change: bool,
) -> Result<(), Refused> {
    let Some(partition) = ctx
        .topics
        .get(topic)
        .and_then(|t| t.partition(index).cloned())
    else {
        return Err((
            ResponseError::UnknownTopicOrPartition.code(),
            format!("No such topic partition as {topic}-{index}"),
        ));
    };
    let Some(replicas) = replicas else {
        return Err((
            ResponseError::NoReassignmentInProgress.code(),
            format!("No ongoing reassignment for {topic}-{index}: Ferry never moves replicas"),
        ));
    };
    let invalid = |message: String| Err((ResponseError::InvalidReplicaAssignment.code(), message));
    if replicas.is_empty() {
        return invalid(
            "The manual partition assignment includes an empty replica list.".to_owned(),
        );
    }
    let mut seen = HashSet::with_capacity(replicas.len());
    if let Some(twice) = replicas.iter().find(|b| !seen.insert(b.0)) {
        return invalid(format!(
            "The manual partition assignment includes the broker {} more than once.",
            twice.0
        ));
    }
    let leader = match ctx
        .sequencers
        .leaders(std::slice::from_ref(&partition))
        .await
    {
        Ok(leaders) => leaders[0],
        Err(e) => {
            warn!(topic, partition = index, error = %e, "cannot read the partition's leader");
            return Err((
                ResponseError::KafkaStorageError.code(),
                format!("cannot read the leader of {topic}-{index}: {e}"),
            ));
        }
    };
    let named: Vec<i32> = replicas.iter().map(|b| b.0).collect();
    if leader.is_some_and(|l| named == [l.node]) {
        return Ok(());
    }
    if !allow_replication_factor_change && named.len() != 1 {
        return Err((
            ResponseError::InvalidReplicationFactor.code(),
            format!(
                "The replication factor is changed from 1 to {} but allowReplicationFactorChange is false",
                named.len()
            ),
        ));
    }
    let current = match leader {
        Some(l) => format!("broker {} (the holder of its sequencer lease)", l.node),
        None => "no broker now (no live instance holds its sequencer lease)".to_owned(),
    };
    invalid(format!(
        "Ferry keeps one copy of {topic}-{index}, in its store; its one replica is {current}, \
         placed by Ferry's balancing: a reassignment to {named:?} is not made"
    ))
}
