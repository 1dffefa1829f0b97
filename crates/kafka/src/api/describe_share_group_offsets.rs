//! DescribeShareGroupOffsets (KIP-932): each share-partition's start offset — the lowest
//! offset of the partition the share group has not settled yet, or where it will go on —
//! and (v1, KIP-1226) its lag, the records not settled yet
//! ([`crate::share::figures`]), for the partitions asked for (null: every partition the
//! group has started); -1 for a partition the group was never assigned. A group that is not a share group is
//! `GROUP_ID_NOT_FOUND`. Needs Describe on the group (else `GROUP_AUTHORIZATION_FAILED`)
//! and on each topic (else `TOPIC_AUTHORIZATION_FAILED` for its partitions), as Kafka.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_share_group_offsets_response::{
    DescribeShareGroupOffsetsResponseGroup, DescribeShareGroupOffsetsResponsePartition,
    DescribeShareGroupOffsetsResponseTopic,
};
use kafka_protocol::messages::{
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, ResponseKind, TopicName,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use uuid::Uuid;

/// Describes every group asked for.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: DescribeShareGroupOffsetsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut groups = Vec::with_capacity(request.groups.len());
    for g in request.groups {
        let name = g.group_id.0.to_string();
        let answer = DescribeShareGroupOffsetsResponseGroup::default().with_group_id(g.group_id);
        if !access.group(Operation::Describe, &name) {
            groups.push(answer.with_error_code(ResponseError::GroupAuthorizationFailed.code()));
            continue;
        }
        match ctx.share.exists(&name).await {
            Ok(true) => {}
            Ok(false) => {
                groups.push(
                    answer
                        .with_error_code(ResponseError::GroupIdNotFound.code())
                        .with_error_message(Some(str_bytes(format!(
                            "Group {name} is not a share group."
                        )))),
                );
                continue;
            }
            Err(e) => {
                groups.push(
                    answer
                        .with_error_code(ResponseError::CoordinatorNotAvailable.code())
                        .with_error_message(Some(str_bytes(e.to_string()))),
                );
                continue;
            }
        }
        let asked: Vec<(String, i32)> = match g.topics {
            Some(topics) => topics
                .into_iter()
                .flat_map(|t| {
                    let topic = t.topic_name.0.to_string();
                    t.partitions.into_iter().map(move |p| (topic.clone(), p))
                })
                .collect(),
            None => ctx.share.started(&name).await.unwrap_or_default(),
        };
        let mut topics: BTreeMap<String, Vec<DescribeShareGroupOffsetsResponsePartition>> =
            BTreeMap::new();
        for (topic, partition) in asked {
            let line = DescribeShareGroupOffsetsResponsePartition::default()
                .with_partition_index(partition)
                .with_leader_epoch(-1);
            let line = if !access.topic(Operation::Describe, &topic) {
                line.with_start_offset(-1)
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
            } else if ctx
                .topics
                .get(&topic)
                .and_then(|t| t.partition(partition).cloned())
                .is_none()
            {
                line.with_start_offset(-1)
                    .with_error_code(ResponseError::UnknownTopicOrPartition.code())
            } else {
                match ctx.share.partition_figures(&name, &topic, partition).await {
                    Ok(Some(f)) => line.with_start_offset(f.start_offset).with_lag(f.lag),
                    Ok(None) => line.with_start_offset(-1),
                    Err(e) => line
                        .with_start_offset(-1)
                        .with_error_code(ResponseError::UnknownServerError.code())
                        .with_error_message(Some(str_bytes(e.to_string()))),
                }
            };
            topics.entry(topic).or_default().push(line);
        }
        groups.push(
            answer.with_topics(
                topics
                    .into_iter()
                    .map(|(topic, partitions)| {
                        let id = ctx.topics.get(&topic).map_or([0; 16], |t| t.meta.uuid);
                        DescribeShareGroupOffsetsResponseTopic::default()
                            .with_topic_id(Uuid::from_bytes(id))
                            .with_topic_name(TopicName(str_bytes(topic)))
                            .with_partitions(partitions)
                    })
                    .collect(),
            ),
        );
    }
    ResponseKind::DescribeShareGroupOffsets(
        DescribeShareGroupOffsetsResponse::default().with_groups(groups),
    )
}
