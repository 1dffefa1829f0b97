//! OffsetFetch: a group's committed offsets, of the partitions asked for or (from v2,
//! with no topics named) of every partition it committed; -1 where it committed none.
//! Needs Describe on the group (else `GROUP_AUTHORIZATION_FAILED`); a topic the principal
//! may not Describe is `TOPIC_AUTHORIZATION_FAILED` when named and left out otherwise,
//! as Kafka.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, ResponseKind, TopicName};
use std::collections::BTreeMap;
use std::sync::Arc;
use tracing::warn;

/// Reads the committed offsets.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    version: i16,
    request: OffsetFetchRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let group = request.group_id.0.as_str();
    if !access.group(Operation::Describe, group) {
        let code = ResponseError::GroupAuthorizationFailed.code();
        return ResponseKind::OffsetFetch(if version >= 2 {
            OffsetFetchResponse::default().with_error_code(code)
        } else {
            // v1 has no top-level error: each partition asked for carries it.
            let topics = request.topics.unwrap_or_default().into_iter().map(|t| {
                OffsetFetchResponseTopic::default()
                    .with_partitions(
                        t.partition_indexes
                            .iter()
                            .map(|&p| {
                                OffsetFetchResponsePartition::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(-1)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
                    .with_name(t.name)
            });
            OffsetFetchResponse::default().with_topics(topics.collect())
        });
    }
    let wanted: Option<Vec<(String, Vec<i32>)>> = request.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes))
            .collect()
    });
    let found = match ctx
        .coordinator
        .store()
        .offsets(group, wanted.as_deref())
        .await
    {
        Ok(found) => found,
        Err(e) => {
            warn!(group, error = %e, "cannot read committed offsets");
            let code = ResponseError::CoordinatorNotAvailable.code();
            return ResponseKind::OffsetFetch(if version >= 2 {
                OffsetFetchResponse::default().with_error_code(code)
            } else {
                OffsetFetchResponse::default()
            });
        }
    };
    let mut by_topic: BTreeMap<String, Vec<OffsetFetchResponsePartition>> = BTreeMap::new();
    for (topic, partition, committed) in found {
        let p = OffsetFetchResponsePartition::default().with_partition_index(partition);
        let named = wanted.is_some();
        let p = match committed {
            _ if !access.topic(Operation::Describe, &topic) => {
                if !named {
                    continue;
                }
                p.with_committed_offset(-1)
                    .with_error_code(ResponseError::TopicAuthorizationFailed.code())
            }
            Some(c) => p
                .with_committed_offset(c.offset)
                .with_committed_leader_epoch(c.leader_epoch)
                .with_metadata(Some(str_bytes(c.metadata.unwrap_or_default()))),
            None => p
                .with_committed_offset(-1)
                .with_metadata(Some(str_bytes(""))),
        };
        by_topic.entry(topic).or_default().push(p);
    }
    let topics = by_topic
        .into_iter()
        .map(|(name, partitions)| {
            OffsetFetchResponseTopic::default()
                .with_name(TopicName(str_bytes(name)))
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::OffsetFetch(OffsetFetchResponse::default().with_topics(topics))
}
