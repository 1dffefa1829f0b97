//! LeaveGroup: the members go at once and the rest rebalance. Needs Read on the group
//! (else `GROUP_AUTHORIZATION_FAILED`).

use super::{Reply, Session};
use crate::Context;
use crate::acls::Operation;
use crate::coordinator::groups::state::MemberRef;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse, ResponseKind};
use std::sync::Arc;

/// Queues the leave in request order.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    version: i16,
    request: LeaveGroupRequest,
) -> Reply {
    if !session
        .access(ctx)
        .group(Operation::Read, request.group_id.0.as_str())
    {
        return Reply::Now(ResponseKind::LeaveGroup(
            LeaveGroupResponse::default()
                .with_error_code(ResponseError::GroupAuthorizationFailed.code()),
        ));
    }
    let members: Vec<MemberRef> = if version >= 3 {
        request
            .members
            .iter()
            .map(|m| MemberRef::new(&m.member_id, m.group_instance_id.as_deref()))
            .collect()
    } else {
        vec![MemberRef::new(&request.member_id, None)]
    };
    let pending = ctx
        .coordinator
        .leave(request.group_id.0.as_str(), members.clone())
        .await;
    Reply::Later(Box::pin(async move {
        let codes = match pending {
            Ok(codes) => codes.await.unwrap_or_else(|_| {
                vec![ResponseError::CoordinatorNotAvailable.code(); members.len()]
            }),
            Err(e) => vec![e.code(); members.len()],
        };
        let response = if version >= 3 {
            LeaveGroupResponse::default().with_members(
                request
                    .members
                    .into_iter()
                    .zip(codes)
                    .map(|(m, code)| {
                        MemberResponse::default()
                            .with_member_id(m.member_id)
                            .with_group_instance_id(m.group_instance_id)
                            .with_error_code(code)
                    })
                    .collect(),
            )
        } else {
            LeaveGroupResponse::default().with_error_code(codes.first().copied().unwrap_or(0))
        };
        ResponseKind::LeaveGroup(response)
    }))
}
