//! ConsumerGroupHeartbeat (KIP-848): a member of a consumer-protocol group joins, keeps its
//! session, reports the partitions it owns and receives its assignment (topics by id), all
//! in one request; the group task answers once what the heartbeat changed is stored. Needs
//! Read on the group (else `GROUP_AUTHORIZATION_FAILED`) and Describe on every topic it
//! subscribes to by name (else `TOPIC_AUTHORIZATION_FAILED`), as Kafka. Version 1 clients name
//! their member ids (KIP-1082); a version 0 client joining without one is given one. A share
//! group's id is `GROUP_ID_NOT_FOUND` ("not a consumer group"), as Kafka answers.

use super::{Reply, Session, str_bytes};
use crate::Context;
use crate::acls::{Access, Operation};
use crate::coordinator::groups::assignors::Assignment;
use crate::coordinator::groups::consumer::{ConsumerHeartbeat, HeartbeatAnswer};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment as Assigned, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, ResponseKind, TopicName,
};
use std::sync::Arc;
use tracing::debug;
use uuid::Uuid;

/// Queues the heartbeat in request order.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    version: i16,
    request: ConsumerGroupHeartbeatRequest,
) -> Reply {
    let group = request.group_id.0.to_string();
    let access = session.access(ctx);
    let topics = request.subscribed_topic_names.as_deref();
    if let Some((e, why)) = membership_refusal(&access, &group, topics) {
        return Reply::Now(refusal(e, why));
    }
    // As Kafka: a share group's id is not a consumer group's (checked as a member joins;
    // a share group cannot take the id of a consumer group afterwards).
    if request.member_epoch == 0 {
        match ctx.share.exists(&group).await {
            Ok(false) => {}
            Ok(true) => {
                let why = format!("Group {group} is not a consumer group");
                return Reply::Now(refusal(ResponseError::GroupIdNotFound, Some(why)));
            }
            Err(_) => return Reply::Now(refusal(ResponseError::CoordinatorNotAvailable, None)),
        }
    }
    let member_id = if version == 0 && request.member_id.is_empty() {
        Uuid::from_u128(fastrand::u128(..)).to_string()
    } else {
        request.member_id.to_string()
    };
    let heartbeat = ConsumerHeartbeat {
        member_id,
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.map(|s| s.to_string()),
        rack_id: request.rack_id.map(|s| s.to_string()),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: request
            .subscribed_topic_names
            .map(|names| names.into_iter().map(|n| n.0.to_string()).collect()),
        subscribed_topic_regex: request.subscribed_topic_regex.map(|s| s.to_string()),
        server_assignor: request.server_assignor.map(|s| s.to_string()),
        owned: request.topic_partitions.map(|topics| {
            let mut owned = Assignment::new();
            for t in topics {
                owned
                    .entry(*t.topic_id.as_bytes())
                    .or_default()
                    .extend(t.partitions);
            }
            owned
        }),
        client_id: session.client_id.clone(),
        client_host: format!("/{}", session.peer.addr.ip()),
    };
    let pending = ctx.coordinator.consumer_heartbeat(&group, heartbeat).await;
    Reply::Later(Box::pin(async move {
        let answer = match pending {
            Ok(rx) => match rx.await {
                Ok(answer) => answer,
                Err(_) => return refusal(ResponseError::CoordinatorNotAvailable, None),
            },
            Err(_) => return refusal(ResponseError::NotCoordinator, None),
        };
        if answer.error != 0 {
            debug!(
                group,
                member = %answer.member_id,
                epoch = answer.member_epoch,
                code = answer.error,
                message = answer.message.as_deref().unwrap_or_default(),
                "ConsumerGroupHeartbeat refused"
            );
        }
        ResponseKind::ConsumerGroupHeartbeat(response(answer))
    }))
}

/// Why a heartbeat of a member of `group` subscribing to `topics` is refused before the
/// group sees it, if it is (ConsumerGroupHeartbeat's and ShareGroupHeartbeat's checks, as
/// Kafka's): Read on the group, Describe on every topic it names, a group id.
pub(super) fn membership_refusal(
    access: &Access,
    group: &str,
    topics: Option<&[TopicName]>,
) -> Option<(ResponseError, Option<String>)> {
    if !access.group(Operation::Read, group) {
        return Some((ResponseError::GroupAuthorizationFailed, None));
    }
    // As Kafka: a member may subscribe only to topics it may Describe.
    let hidden: Vec<&str> = topics
        .unwrap_or_default()
        .iter()
        .map(|t| t.0.as_str())
        .filter(|t| !access.topic(Operation::Describe, t))
        .collect();
    if !hidden.is_empty() {
        let why = format!("not authorized to describe topics {}", hidden.join(", "));
        return Some((ResponseError::TopicAuthorizationFailed, Some(why)));
    }
    group.is_empty().then(|| {
        (
            ResponseError::InvalidRequest,
            Some("GroupId can't be empty.".to_owned()),
        )
    })
}

fn response(answer: HeartbeatAnswer) -> ConsumerGroupHeartbeatResponse {
    let assignment = answer.assignment.map(|a| {
        Assigned::default().with_topic_partitions(
            a.into_iter()
                .map(|(topic, partitions)| {
                    TopicPartitions::default()
                        .with_topic_id(Uuid::from_bytes(topic))
                        .with_partitions(partitions.into_iter().collect())
                })
                .collect(),
        )
    });
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(answer.error)
        .with_error_message(answer.message.map(str_bytes))
        .with_member_id(Some(str_bytes(answer.member_id)))
        .with_member_epoch(answer.member_epoch)
        .with_heartbeat_interval_ms(
            i32::try_from(answer.heartbeat_interval.as_millis()).unwrap_or(i32::MAX),
        )
        .with_assignment(assignment)
}

fn refusal(e: ResponseError, message: Option<String>) -> ResponseKind {
    ResponseKind::ConsumerGroupHeartbeat(
        ConsumerGroupHeartbeatResponse::default()
            .with_error_code(e.code())
            .with_error_message(message.map(str_bytes)),
    )
}
