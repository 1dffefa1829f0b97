//! ListGroups: every group in the store with its protocol type.

use super::str_bytes;
use crate::kafka::Context;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsResponse, ResponseKind};
use std::sync::Arc;
use tracing::warn;

/// Lists the groups.
pub async fn handle(ctx: &Arc<Context>) -> ResponseKind {
    let response = match ctx.coordinator.store().list().await {
        Ok(groups) => ListGroupsResponse::default().with_groups(
            groups
                .into_iter()
                .map(|(id, protocol_type)| {
                    ListedGroup::default()
                        .with_group_id(GroupId(str_bytes(id)))
                        .with_protocol_type(str_bytes(protocol_type.unwrap_or_default()))
                })
                .collect(),
        ),
        Err(e) => {
            warn!(error = %e, "cannot list the groups");
            ListGroupsResponse::default()
                .with_error_code(ResponseError::CoordinatorNotAvailable.code())
        }
    };
    ResponseKind::ListGroups(response)
}
