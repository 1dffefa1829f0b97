//! SyncGroup: the leader hands in the assignment; every member's answer carries its part.
//! Needs Read on the group (else `GROUP_AUTHORIZATION_FAILED`).

use super::{Reply, Session};
use crate::Context;
use crate::acls::Operation;
use crate::coordinator::groups::state::MemberRef;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{ResponseKind, SyncGroupRequest, SyncGroupResponse};
use std::sync::Arc;

/// Queues the sync; followers' replies wait for the leader's.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: SyncGroupRequest,
) -> Reply {
    if !session
        .access(ctx)
        .group(Operation::Read, request.group_id.0.as_str())
    {
        return Reply::Now(ResponseKind::SyncGroup(
            SyncGroupResponse::default()
                .with_error_code(ResponseError::GroupAuthorizationFailed.code()),
        ));
    }
    let assignments = request
        .assignments
        .into_iter()
        .map(|a| (a.member_id.to_string(), a.assignment))
        .collect();
    let pending = ctx
        .coordinator
        .sync(
            request.group_id.0.as_str(),
            MemberRef::new(&request.member_id, request.group_instance_id.as_deref()),
            request.generation_id,
            assignments,
        )
        .await;
    let (protocol_type, protocol_name) = (request.protocol_type, request.protocol_name);
    Reply::Later(Box::pin(async move {
        let response = match pending {
            Ok(synced) => match synced.await {
                Ok(synced) => SyncGroupResponse::default()
                    .with_error_code(synced.error)
                    .with_assignment(synced.assignment),
                Err(_) => SyncGroupResponse::default()
                    .with_error_code(ResponseError::RebalanceInProgress.code()),
            },
            Err(e) => SyncGroupResponse::default().with_error_code(e.code()),
        };
        ResponseKind::SyncGroup(
            response
                .with_protocol_type(protocol_type)
                .with_protocol_name(protocol_name),
        )
    }))
}
