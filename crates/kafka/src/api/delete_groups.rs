//! DeleteGroups: removes empty groups with their committed offsets, and empty share groups
//! with their share-partitions and settings; a group with members is `NON_EMPTY_GROUP`, an unknown one `GROUP_ID_NOT_FOUND`, one the principal may not
//! Delete `GROUP_AUTHORIZATION_FAILED`.

use super::Session;
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::{DeleteGroupsRequest, DeleteGroupsResponse, ResponseKind};
use std::sync::Arc;

/// Deletes every group asked for that may be deleted.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: DeleteGroupsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut results = Vec::with_capacity(request.groups_names.len());
    for id in request.groups_names {
        let name = id.0.to_string();
        let code = if access.group(Operation::Delete, &name) {
            delete(ctx, &name).await
        } else {
            ResponseError::GroupAuthorizationFailed.code()
        };
        results.push(
            DeletableGroupResult::default()
                .with_group_id(id)
                .with_error_code(code),
        );
    }
    ResponseKind::DeleteGroups(DeleteGroupsResponse::default().with_results(results))
}

/// Deletes group `name`, a share group or a classic/consumer one; the error code.
async fn delete(ctx: &Context, name: &str) -> i16 {
    match ctx.share.exists(name).await {
        Ok(true) if ctx.share.has_members(name) => ResponseError::NonEmptyGroup.code(),
        Ok(true) => match ctx.share.delete(name).await {
            Ok(()) => 0,
            Err(_) => ResponseError::CoordinatorNotAvailable.code(),
        },
        Ok(false) => match ctx.coordinator.store().exists(name).await {
            Ok(true) => ctx.coordinator.delete(name).await,
            Ok(false) => ResponseError::GroupIdNotFound.code(),
            Err(_) => ResponseError::CoordinatorNotAvailable.code(),
        },
        Err(_) => ResponseError::CoordinatorNotAvailable.code(),
    }
}
