//! DeleteTopics: removes topics with their logs, stages and producer state. A topic needs
//! Delete (else `TOPIC_AUTHORIZATION_FAILED`).

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::metadata::topics::TopicError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, ResponseKind};
use std::sync::Arc;

/// Deletes every topic named.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    version: i16,
    request: DeleteTopicsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut responses = Vec::with_capacity(request.topic_names.len());
    for name in request.topic_names {
        let result = DeletableTopicResult::default().with_name(Some(name.clone()));
        let deleted = if access.topic(Operation::Delete, name.0.as_str()) {
            ctx.topics.delete(name.0.as_str()).await
        } else {
            Err(TopicError::NotAuthorized(name.to_string()))
        };
        responses.push(match deleted {
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
