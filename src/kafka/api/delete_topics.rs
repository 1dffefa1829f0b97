//! DeleteTopics: removes topics with their logs, stages and producer state.

use super::str_bytes;
use crate::kafka::Context;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, ResponseKind};
use std::sync::Arc;

/// Deletes every topic named.
pub async fn handle(
    ctx: &Arc<Context>,
    version: i16,
    request: DeleteTopicsRequest,
) -> ResponseKind {
    let mut responses = Vec::with_capacity(request.topic_names.len());
    for name in request.topic_names {
        let result = DeletableTopicResult::default().with_name(Some(name.clone()));
        responses.push(match ctx.topics.delete(name.0.as_str()).await {
            Ok(()) => result,
            Err(e) => {
                let result = result.with_error_code(e.code());
                if version >= 5 {
                    result.with_error_message(Some(str_bytes(e.to_string())))
                } else {
                    result
                }
            }
        });
    }
    ResponseKind::DeleteTopics(DeleteTopicsResponse::default().with_responses(responses))
}
