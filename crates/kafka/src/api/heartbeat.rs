//! Heartbeat: keeps a member's session alive and tells it when to rejoin. Needs Read on
//! the group (else `GROUP_AUTHORIZATION_FAILED`).

use super::{Reply, Session};
use crate::Context;
use crate::acls::Operation;
use crate::coordinator::groups::state::MemberRef;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse, ResponseKind};
use std::sync::Arc;

/// Queues the heartbeat in request order.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: HeartbeatRequest,
) -> Reply {
    if !session
        .access(ctx)
        .group(Operation::Read, request.group_id.0.as_str())
    {
        return Reply::Now(ResponseKind::Heartbeat(
            HeartbeatResponse::default()
                .with_error_code(ResponseError::GroupAuthorizationFailed.code()),
        ));
    }
    let pending = ctx
        .coordinator
        .heartbeat(
            request.group_id.0.as_str(),
            MemberRef::new(&request.member_id, request.group_instance_id.as_deref()),
            request.generation_id,
        )
        .await;
    Reply::Later(Box::pin(async move {
        let code = match pending {
            Ok(code) => code
                .await
                .unwrap_or(ResponseError::CoordinatorNotAvailable.code()),
            Err(e) => e.code(),
        };
        ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code))
    }))
}
