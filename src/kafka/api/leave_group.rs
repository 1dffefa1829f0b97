//! LeaveGroup: the members go at once and the rest rebalance.

use super::Reply;
use crate::kafka::Context;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse, ResponseKind};
use std::sync::Arc;

/// Queues the leave in request order.
pub async fn handle(ctx: &Arc<Context>, version: i16, request: LeaveGroupRequest) -> Reply {
    let members: Vec<String> = if version >= 3 {
        request
            .members
            .iter()
            .map(|m| m.member_id.to_string())
            .collect()
    } else {
        vec![request.member_id.to_string()]
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
