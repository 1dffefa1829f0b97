//! ShareGroupDescribe (KIP-932): each share group's epoch, state and members with their
//! subscriptions and assignments (topics by id and name), as this instance holds them. A
//! group that is not a share group here is `GROUP_ID_NOT_FOUND`; one the principal may not
//! Describe `GROUP_AUTHORIZATION_FAILED`, as Kafka.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::share_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ResponseKind, ShareGroupDescribeRequest, ShareGroupDescribeResponse, TopicName,
};
use std::sync::Arc;
use uuid::Uuid;

/// Kafka's "authorized operations not asked for".
const NOT_ASKED: i32 = i32::MIN;

/// Describes every group asked for.
pub(super) fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: ShareGroupDescribeRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let groups = request
        .group_ids
        .into_iter()
        .map(|id| {
            let name = id.0.to_string();
            let described = DescribedGroup::default()
                .with_group_id(id)
                .with_authorized_operations(NOT_ASKED);
            if !access.group(Operation::Describe, &name) {
                return described.with_error_code(ResponseError::GroupAuthorizationFailed.code());
            }
            let Some((epoch, members)) = ctx.share.describe(&name) else {
                return described
                    .with_error_code(ResponseError::GroupIdNotFound.code())
                    .with_error_message(Some(str_bytes(format!("Group {name} not found."))));
            };
            let state = ctx.share.state(&name).unwrap_or("Empty");
            described
                .with_group_state(str_bytes(state))
                .with_group_epoch(epoch)
                .with_assignment_epoch(epoch)
                .with_assignor_name(str_bytes("simple"))
                .with_members(
                    members
                        .into_iter()
                        .map(|(member_id, m)| {
                            let assigned = m
                                .assigned
                                .iter()
                                .filter_map(|(topic, partitions)| {
                                    let uuid = ctx.topics.get(topic)?.meta.uuid;
                                    Some(
                                        TopicPartitions::default()
                                            .with_topic_id(Uuid::from_bytes(uuid))
                                            .with_topic_name(TopicName(str_bytes(topic.clone())))
                                            .with_partitions(partitions.iter().copied().collect()),
                                    )
                                })
                                .collect();
                            Member::default()
                                .with_member_id(str_bytes(member_id))
                                .with_rack_id(m.rack_id.map(str_bytes))
                                .with_member_epoch(m.epoch)
                                .with_client_id(str_bytes(m.client_id))
                                .with_client_host(str_bytes(m.client_host))
                                .with_subscribed_topic_names(
                                    m.subscribed
                                        .into_iter()
                                        .map(|t| TopicName(str_bytes(t)))
                                        .collect(),
                                )
                                .with_assignment(
                                    Assignment::default().with_topic_partitions(assigned),
                                )
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::ShareGroupDescribe(ShareGroupDescribeResponse::default().with_groups(groups))
}
