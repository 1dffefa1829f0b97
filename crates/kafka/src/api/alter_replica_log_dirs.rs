//! AlterReplicaLogDirs (KIP-113): an instance has one log dir ([`LogDir`]), where every
//! replica it holds already is, so moving a replica to it succeeds and moves nothing. Any
//! other path is `LOG_DIR_NOT_FOUND`, as Kafka answers a path that is not one of its
//! `log.dirs` (checked first, as Kafka). A partition this instance holds no replica of is
//! `REPLICA_NOT_AVAILABLE` (led by another instance) or `UNKNOWN_TOPIC_OR_PARTITION`, as
//! Kafka. Needs Alter on the cluster, else every partition is
//! `CLUSTER_AUTHORIZATION_FAILED`.
//!
//! [`LogDir`]: crate::metadata::log_dir::LogDir

use super::{Session, grouped, str_bytes};
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ResponseKind, TopicName,
};
use std::sync::Arc;
use tracing::warn;

/// Answers each partition's move.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: AlterReplicaLogDirsRequest,
) -> ResponseKind {
    let allowed = session.access(ctx).cluster(Operation::Alter);
    let mut outcomes = Vec::new();
    for dir in &request.dirs {
        for t in &dir.topics {
            for &partition in &t.partitions {
                let code = if !allowed {
                    ResponseError::ClusterAuthorizationFailed.code()
                } else if dir.path.as_str() != ctx.log_dir.path {
                    ResponseError::LogDirNotFound.code()
                } else {
                    held_here(ctx, t.name.0.as_str(), partition).await
                };
                outcomes.push((t.name.0.as_str(), (partition, code)));
            }
        }
    }
    let results = grouped(outcomes)
        .into_iter()
        .map(|(topic, partitions)| {
            AlterReplicaLogDirTopicResult::default()
                .with_topic_name(TopicName(str_bytes(topic)))
                .with_partitions(
                    partitions
                        .into_iter()
                        .map(|(index, code)| {
                            AlterReplicaLogDirPartitionResult::default()
                                .with_partition_index(index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::AlterReplicaLogDirs(AlterReplicaLogDirsResponse::default().with_results(results))
}

/// 0 when this instance holds partition `index` of `topic` (its replica is in the one log
/// dir already), else why not.
async fn held_here(ctx: &Context, topic: &str, index: i32) -> i16 {
    let Some(partition) = ctx
        .topics
        .get(topic)
        .and_then(|t| t.partition(index).cloned())
    else {
        return ResponseError::UnknownTopicOrPartition.code();
    };
    match ctx
        .sequencers
        .leaders(std::slice::from_ref(&partition))
        .await
    {
        Ok(leaders) if leaders[0].is_some_and(|l| l.node == ctx.config.node_id) => 0,
        Ok(_) => ResponseError::ReplicaNotAvailable.code(),
        Err(e) => {
            warn!(topic, partition = index, error = %e, "cannot read the partition's leader");
            ResponseError::KafkaStorageError.code()
        }
    }
}
