//! JoinGroup: queued to the group's task in request order; the answer comes when the
//! rebalance completes (every member rejoined, or the rebalance timeout passed), or at once
//! for a static member (`group_instance_id`, v5+) back in a stable group and for a new
//! dynamic member at v4+, told `MEMBER_ID_REQUIRED` with its id (KIP-394). Needs Read on
//! the group (else `GROUP_AUTHORIZATION_FAILED`); a share group's id is
//! `INCONSISTENT_GROUP_PROTOCOL`, as Kafka answers.

use super::{Reply, Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::coordinator::groups::state::{JoinRequest, Joined};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse, ResponseKind};
use std::sync::Arc;
use std::time::Duration;

/// Queues the join; the reply waits for the rebalance.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    version: i16,
    request: JoinGroupRequest,
) -> Reply {
    let group = request.group_id.0.to_string();
    if group.is_empty() {
        return Reply::Now(response(Joined {
            error: ResponseError::InvalidGroupId.code(),
            generation: -1,
            protocol: None,
            protocol_type: None,
            leader: String::new(),
            member_id: request.member_id.to_string(),
            members: Vec::new(),
        }));
    }
    if !session.access(ctx).group(Operation::Read, &group) {
        return Reply::Now(response(Joined::error(
            request.member_id.as_str(),
            ResponseError::GroupAuthorizationFailed,
        )));
    }
    // As Kafka: a share group's id is not a classic group's.
    match ctx.share.exists(&group).await {
        Ok(false) => {}
        Ok(true) => {
            return Reply::Now(response(Joined::error(
                "",
                ResponseError::InconsistentGroupProtocol,
            )));
        }
        Err(_) => {
            return Reply::Now(response(Joined::error(
                request.member_id.as_str(),
                ResponseError::CoordinatorNotAvailable,
            )));
        }
    }
    let millis = |ms: i32| Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    let rebalance_timeout = if version >= 1 {
        request.rebalance_timeout_ms
    } else {
        request.session_timeout_ms
    };
    let join = JoinRequest {
        member_id: request.member_id.to_string(),
        instance_id: request.group_instance_id.as_ref().map(|i| i.to_string()),
        client_id: session.client_id.clone(),
        client_host: format!("/{}", session.peer.addr.ip()),
        session_timeout: millis(request.session_timeout_ms),
        rebalance_timeout: millis(rebalance_timeout),
        protocol_type: request.protocol_type.to_string(),
        protocols: request
            .protocols
            .into_iter()
            .map(|p| (p.name.to_string(), p.metadata))
            .collect(),
        requires_known_member_id: version >= 4,
    };
    let member_id = join.member_id.clone();
    let pending = ctx.coordinator.join(&group, join).await;
    Reply::Later(Box::pin(async move {
        response(match pending {
            // A dropped answer: the member left or expired while it waited.
            Ok(joined) => joined
                .await
                .unwrap_or_else(|_| Joined::error(&member_id, ResponseError::UnknownMemberId)),
            Err(_) => Joined::error(&member_id, ResponseError::NotCoordinator),
        })
    }))
}

fn response(joined: Joined) -> ResponseKind {
    ResponseKind::JoinGroup(
        JoinGroupResponse::default()
            .with_error_code(joined.error)
            .with_generation_id(joined.generation)
            .with_protocol_type(joined.protocol_type.map(str_bytes))
            .with_protocol_name(Some(str_bytes(joined.protocol.unwrap_or_default())))
            .with_leader(str_bytes(joined.leader))
            .with_member_id(str_bytes(joined.member_id))
            .with_members(
                joined
                    .members
                    .into_iter()
                    .map(|(id, metadata)| {
                        JoinGroupResponseMember::default()
                            .with_member_id(str_bytes(id))
                            .with_metadata(metadata)
                    })
                    .collect(),
            ),
    )
}
