//! DescribeLogDirs (KIP-113): this instance's one log dir ([`LogDir`]) with the partitions
//! it holds — those whose sequencer lease it holds, the one replica Metadata names — each
//! with its size in bytes: what the batches its log keeps between the log start offset and
//! the high watermark weigh as produced (the counter every append adds to and every
//! deletion by retention, DeleteRecords or compaction takes from; one snapshot read per
//! partition). The offset lag is 0 and no replica is a future one: the store keeps the one
//! copy. From v4 the log dir carries its file system's size and free space (-1 on
//! FoundationDB, which keeps its own disks).
//!
//! As Kafka: partitions asked for that this instance holds no replica of (unknown, or led
//! by another instance) are left out; a request without topics describes every partition.
//! Needs Describe on the cluster: without it v3+ answers `CLUSTER_AUTHORIZATION_FAILED`,
//! and v1–2, which have no error field, no log dir. A store that cannot be read is the log
//! dir's `KAFKA_STORAGE_ERROR`.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::metadata::topics::Topic;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{
    DescribeLogDirsRequest, DescribeLogDirsResponse, ResponseKind, TopicName,
};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tracing::warn;

/// Describes the log dir.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: DescribeLogDirsRequest,
) -> ResponseKind {
    let response = DescribeLogDirsResponse::default();
    if !session.access(ctx).cluster(Operation::Describe) {
        return ResponseKind::DescribeLogDirs(
            response.with_error_code(ResponseError::ClusterAuthorizationFailed.code()),
        );
    }
    let (total, usable) = ctx.log_dir.space().map_or((-1, -1), |s| {
        (
            i64::try_from(s.total).unwrap_or(i64::MAX),
            i64::try_from(s.available).unwrap_or(i64::MAX),
        )
    });
    let dir = DescribeLogDirsResult::default()
        .with_log_dir(str_bytes(ctx.log_dir.path.clone()))
        .with_total_bytes(total)
        .with_usable_bytes(usable);
    let dir = match held(ctx, request.topics.as_deref()).await {
        Ok(topics) => dir.with_topics(topics),
        Err(e) => {
            warn!(error = %e, "cannot describe the log dir");
            dir.with_error_code(ResponseError::KafkaStorageError.code())
        }
    };
    ResponseKind::DescribeLogDirs(response.with_results(vec![dir]))
}

/// The partitions this instance holds among those `wanted` (`None`: all), by topic name,
/// with their sizes.
///
/// # Errors
/// The store's, as a sentence.
async fn held(
    ctx: &Context,
    wanted: Option<&[DescribableLogDirTopic]>,
) -> Result<Vec<DescribeLogDirsTopic>, String> {
    let wanted: Option<BTreeMap<&str, BTreeSet<i32>>> = wanted.map(|topics| {
        let mut by_name: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
        for t in topics {
            by_name
                .entry(t.topic.0.as_str())
                .or_default()
                .extend(t.partitions.iter().copied());
        }
        by_name
    });
    let mut topics: Vec<Arc<Topic>> = match &wanted {
        None => ctx.topics.all(),
        Some(w) => w.keys().filter_map(|name| ctx.topics.get(name)).collect(),
    };
    topics.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));
    let me = ctx.config.node_id;
    let snapshot = ctx.reads.snapshot().map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(topics.len());
    for topic in topics {
        let asked = wanted
            .as_ref()
            .and_then(|w| w.get(topic.meta.name.as_str()));
        let leaders = ctx
            .sequencers
            .leaders(&topic.partitions)
            .await
            .map_err(|e| e.to_string())?;
        let mine = topic.partitions.iter().zip(leaders).filter(|(p, leader)| {
            leader.is_some_and(|l| l.node == me) && asked.is_none_or(|a| a.contains(&p.index))
        });
        let mut partitions = Vec::new();
        for (p, _) in mine {
            let size = snapshot.size(p).await.map_err(|e| e.to_string())?;
            partitions.push(
                DescribeLogDirsPartition::default()
                    .with_partition_index(p.index)
                    .with_partition_size(size)
                    .with_offset_lag(0)
                    .with_is_future_key(false),
            );
        }
        if !partitions.is_empty() {
            out.push(
                DescribeLogDirsTopic::default()
                    .with_name(TopicName(str_bytes(topic.meta.name.clone())))
                    .with_partitions(partitions),
            );
        }
    }
    Ok(out)
}
