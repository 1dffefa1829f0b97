//! CreatePartitions: grows topics; this instance takes the new partitions' leases.

use super::str_bytes;
use crate::kafka::Context;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse, ResponseKind};
use std::sync::Arc;

/// Grows every topic named to its new count.
pub async fn handle(ctx: &Arc<Context>, request: CreatePartitionsRequest) -> ResponseKind {
    let mut results = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let grown = ctx
            .topics
            .add_partitions(t.name.0.as_str(), t.count, request.validate_only)
            .await;
        if let Some(topic) = ctx.topics.get(t.name.0.as_str()) {
            for p in &topic.partitions {
                ctx.sequencers.claim(p).await;
            }
        }
        let result = CreatePartitionsTopicResult::default().with_name(t.name);
        results.push(match grown {
            Ok(()) => result,
            Err(e) => result
                .with_error_code(e.code())
                .with_error_message(Some(str_bytes(e.to_string()))),
        });
    }
    ResponseKind::CreatePartitions(CreatePartitionsResponse::default().with_results(results))
}
