//! ListGroups: every group in the store with its protocol type; with Describe on the
//! cluster every group, else only those the principal may Describe, as Kafka.

use super::{Session, str_bytes};
use crate::kafka::Context;
use crate::kafka::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsResponse, ResponseKind};
use std::sync::Arc;
use tracing::warn;

/// Lists the groups.
pub async fn handle(ctx: &Arc<Context>, session: &Session) -> ResponseKind {
    let access = session.access(ctx);
    let every = access.cluster(Operation::Describe);
    let response = match ctx.coordinator.store().list().await {
        Ok(groups) => ListGroupsResponse::default().with_groups(
            groups
                .into_iter()
                .filter(|(id, _)| every || access.group(Operation::Describe, id))
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
