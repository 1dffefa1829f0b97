//! DescribeGroups: each group's state, protocol and members with their assignments; a
//! group that does not exist is `Dead`, as Kafka reports it. A group the principal may
//! not Describe is `GROUP_AUTHORIZATION_FAILED`.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, ResponseKind};
use std::sync::Arc;

/// Describes every group asked for.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: DescribeGroupsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut groups = Vec::with_capacity(request.groups.len());
    for id in request.groups {
        let name = id.0.to_string();
        let described = DescribedGroup::default().with_group_id(id);
        if !access.group(Operation::Describe, &name) {
            groups.push(described.with_error_code(ResponseError::GroupAuthorizationFailed.code()));
            continue;
        }
        let view = match ctx.coordinator.describe(&name).await {
            Ok(view) => view,
            Err(code) => {
                groups.push(described.with_error_code(code));
                continue;
            }
        };
        let exists = !view.members.is_empty()
            || ctx.coordinator.store().exists(&name).await.unwrap_or(false);
        let state = if exists { view.state } else { "Dead" };
        groups.push(
            described
                .with_group_state(str_bytes(state))
                .with_protocol_type(str_bytes(view.protocol_type))
                .with_protocol_data(str_bytes(view.protocol))
                .with_members(
                    view.members
                        .into_iter()
                        .map(|m| {
                            DescribedGroupMember::default()
                                .with_member_id(str_bytes(m.id))
                                .with_group_instance_id(m.instance_id.map(str_bytes))
                                .with_client_id(str_bytes(m.client_id))
                                .with_client_host(str_bytes(m.client_host))
                                .with_member_metadata(m.metadata)
                                .with_member_assignment(m.assignment)
                        })
                        .collect(),
                ),
        );
    }
    ResponseKind::DescribeGroups(DescribeGroupsResponse::default().with_groups(groups))
}
