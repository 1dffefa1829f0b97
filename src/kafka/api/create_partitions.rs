//! CreatePartitions: grows topics; this instance takes the new partitions' leases. A
//! topic needs Alter (else `TOPIC_AUTHORIZATION_FAILED`).

use super::{Session, str_bytes};
use crate::kafka::Context;
use crate::kafka::acls::Operation;
use crate::kafka::topics::TopicError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse, ResponseKind};
use std::sync::Arc;

/// Grows every topic named to its new count.
pub async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: CreatePartitionsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut results = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        if !access.topic(Operation::Alter, t.name.0.as_str()) {
            let refused = TopicError::NotAuthorized(t.name.to_string());
            results.push(
                CreatePartitionsTopicResult::default()
                    .with_name(t.name)
                    .with_error_code(refused.code())
                    .with_error_message(Some(str_bytes(refused.to_string()))),
            );
            continue;
        }
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
