//! ShareGroupHeartbeat (KIP-932): a member of a share group joins, keeps its session and
//! receives its assignment (topics by id) in one request ([`crate::share::membership`]).
//! Needs Read on the group (else `GROUP_AUTHORIZATION_FAILED`) and Describe on every topic
//! it subscribes to (else `TOPIC_AUTHORIZATION_FAILED`), as Kafka. Served by the instance
//! holding the group's coordinator lease (else `NOT_COORDINATOR`, and the client asks
//! FindCoordinator again).

use super::consumer_group_heartbeat::membership_refusal;
use super::{Reply, Session, str_bytes};
use crate::Context;
use crate::share::membership::Heartbeat;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ResponseKind, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
};
use std::sync::Arc;
use tracing::debug;
use uuid::Uuid;

/// Answers the heartbeat once what it changed is in place.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: ShareGroupHeartbeatRequest,
) -> Reply {
    let group = request.group_id.0.to_string();
    let access = session.access(ctx);
    let topics = request.subscribed_topic_names.as_deref();
    if let Some((e, why)) = membership_refusal(&access, &group, topics) {
        return Reply::Now(refusal(e, why));
    }
    // Members live in the instance coordinating the group (FindCoordinator's answer).
    match ctx.coordinator.locate(&group).await {
        Ok(node) if node == ctx.config.node_id => {}
        Ok(_) => return Reply::Now(refusal(ResponseError::NotCoordinator, None)),
        Err(_) => return Reply::Now(refusal(ResponseError::CoordinatorNotAvailable, None)),
    }
    let member_id = request.member_id.to_string();
    let heartbeat = Heartbeat {
        member_id: member_id.clone(),
        member_epoch: request.member_epoch,
        subscribed: request
            .subscribed_topic_names
            .map(|names| names.into_iter().map(|n| n.0.to_string()).collect()),
        rack_id: request.rack_id.map(|s| s.to_string()),
        client_id: session.client_id.clone(),
        client_host: format!("/{}", session.peer.addr.ip()),
    };
    let answer = match ctx.share.heartbeat(&group, heartbeat).await {
        Ok(answer) => answer,
        Err((e, message)) => {
            debug!(group, member = %member_id, code = e.code(), message, "ShareGroupHeartbeat refused");
            return Reply::Now(refusal(e, Some(message)));
        }
    };
    let (answer, config) = answer;
    ctx.coordinator
        .keep_until(&group, std::time::Instant::now() + config.session);
    let assignment = answer.assignment.map(|a| {
        Assignment::default().with_topic_partitions(
            a.into_iter()
                .filter_map(|(topic, partitions)| {
                    let uuid = ctx.topics.get(&topic)?.meta.uuid;
                    Some(
                        TopicPartitions::default()
                            .with_topic_id(Uuid::from_bytes(uuid))
                            .with_partitions(partitions.into_iter().collect()),
                    )
                })
                .collect(),
        )
    });
    Reply::Now(ResponseKind::ShareGroupHeartbeat(
        ShareGroupHeartbeatResponse::default()
            .with_member_id(Some(str_bytes(member_id)))
            .with_member_epoch(answer.member_epoch)
            .with_heartbeat_interval_ms(
                i32::try_from(config.heartbeat.as_millis()).unwrap_or(i32::MAX),
            )
            .with_assignment(assignment),
    ))
}

fn refusal(e: ResponseError, message: Option<String>) -> ResponseKind {
    ResponseKind::ShareGroupHeartbeat(
        ShareGroupHeartbeatResponse::default()
            .with_error_code(e.code())
            .with_error_message(message.map(str_bytes)),
    )
}
