//! OffsetFetch: a group's committed offsets, of the partitions asked for or (from v2,
//! with no topics named) of every partition it committed; -1 where it committed none.

use super::str_bytes;
use crate::kafka::Context;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, ResponseKind, TopicName};
use std::collections::BTreeMap;
use std::sync::Arc;
use tracing::warn;

/// Reads the committed offsets.
pub async fn handle(ctx: &Arc<Context>, version: i16, request: OffsetFetchRequest) -> ResponseKind {
    let wanted: Option<Vec<(String, Vec<i32>)>> = request.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes))
            .collect()
    });
    let group = request.group_id.0.as_str();
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
        let p = match committed {
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
