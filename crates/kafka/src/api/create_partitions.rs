//! CreatePartitions: grows topics; this instance takes the new partitions' leases. A
//! replica assignment of the new partitions (one list each) is checked as Kafka checks it
//! ([`crate::metadata::replica_assignment`]) and its placement is not kept. A topic needs
//! Alter (else `TOPIC_AUTHORIZATION_FAILED`).

use super::create_topics::live_nodes;
use super::{Refused, Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::metadata::replica_assignment;
use crate::metadata::topics::TopicError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse, ResponseKind};
use std::sync::Arc;

/// Grows every topic named to its new count.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: CreatePartitionsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut results = Vec::with_capacity(request.topics.len());
    for t in request.topics {
        let name = t.name.0.as_str();
        let grown = async {
            let refused = |e: TopicError| (e.code(), e.to_string());
            if !access.topic(Operation::Alter, name) {
                return Err(refused(TopicError::NotAuthorized(name.to_owned())));
            }
            check_assignment(ctx, &t).await?;
            let grown = ctx
                .topics
                .add_partitions(name, t.count, request.validate_only)
                .await;
            if let Some(topic) = ctx.topics.get(name) {
                for p in &topic.partitions {
                    ctx.sequencers.claim(p).await;
                }
            }
            grown.map_err(refused)
        }
        .await;
        let result = CreatePartitionsTopicResult::default().with_name(t.name);
        results.push(match grown {
            Ok(()) => result,
            Err((code, message)) => result
                .with_error_code(code)
                .with_error_message(Some(str_bytes(message))),
        });
    }
    ResponseKind::CreatePartitions(CreatePartitionsResponse::default().with_results(results))
}

/// Checks `t`'s replica assignment, if it has one, against the partitions it adds to the
/// topic as cached (an unknown topic, or a count that does not grow it, is left to
/// [`crate::metadata::topics::Topics::add_partitions`] to refuse).
///
/// # Errors
/// `INVALID_REPLICA_ASSIGNMENT` for an assignment Kafka refuses.
async fn check_assignment(ctx: &Context, t: &CreatePartitionsTopic) -> Result<(), Refused> {
    let topic = ctx
        .topics
        .get(t.name.0.as_str())
        .filter(|topic| t.count > topic.meta.partitions);
    let (Some(assignments), Some(topic)) = (&t.assignments, topic) else {
        return Ok(());
    };
    let lists: Vec<Vec<i32>> = assignments
        .iter()
        .map(|a| a.broker_ids.iter().map(|b| b.0).collect())
        .collect();
    let live = live_nodes(ctx).await?;
    replica_assignment::check_new_partitions(&lists, t.count - topic.meta.partitions, &live)
        .map_err(|e| (e.code(), e.to_string()))
}
