//! ListGroups: every group in the store with its protocol type and (v4+, KIP-518) its
//! state — as its task holds it when this instance coordinates the group, else as last
//! stored — only those in the states asked for when a v4+ request names some
//! (case-insensitive, as Kafka), and (v5+, KIP-848) its type — `Classic`, `Consumer` or
//! `Share` (KIP-932, its state as this instance's share groups hold it) —
//! only those of the types asked for; with Describe on the cluster every group, else only
//! those the principal may Describe, as Kafka.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::coordinator::groups::store::GroupKind;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse, ResponseKind};
use std::sync::Arc;
use tracing::warn;

/// Lists the groups.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: ListGroupsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let every = access.cluster(Operation::Describe);
    let asked = |filter: &[kafka_protocol::protocol::StrBytes], value: &str| {
        filter.is_empty()
            || filter
                .iter()
                .any(|s| s.as_str().eq_ignore_ascii_case(value))
    };
    let response = match ctx.coordinator.store().list().await {
        Ok(groups) => {
            let mut listed = Vec::with_capacity(groups.len());
            for g in groups {
                if !every && !access.group(Operation::Describe, &g.id) {
                    continue;
                }
                let local = match g.kind {
                    GroupKind::Share => ctx.share.state(&g.id),
                    _ => ctx.coordinator.local_state(&g.id).await,
                };
                let state = local.unwrap_or(g.state);
                let kind = g.kind.as_str();
                if asked(&request.states_filter, state) && asked(&request.types_filter, kind) {
                    listed.push(
                        ListedGroup::default()
                            .with_group_id(GroupId(str_bytes(g.id)))
                            .with_protocol_type(str_bytes(g.protocol_type.unwrap_or_default()))
                            .with_group_state(str_bytes(state))
                            .with_group_type(str_bytes(kind)),
                    );
                }
            }
            ListGroupsResponse::default().with_groups(listed)
        }
        Err(e) => {
            warn!(error = %e, "cannot list the groups");
            ListGroupsResponse::default()
                .with_error_code(ResponseError::CoordinatorNotAvailable.code())
        }
    };
    ResponseKind::ListGroups(response)
}
