//! ConsumerGroupDescribe (KIP-848): a consumer-protocol group's epochs, assignor and
//! members with their assignments and target assignments (topics by id and name). A group
//! that is not one (a classic group, or none) is `GROUP_ID_NOT_FOUND`, on which admin
//! clients fall back to DescribeGroups, as with Kafka. Needs Describe on the group.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::coordinator::groups::assignors::Assignment;
use crate::coordinator::groups::consumer::ConsumerGroupView;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as Described, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ResponseKind, TopicName,
};
use std::sync::Arc;
use uuid::Uuid;

/// Describes every group asked for.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: ConsumerGroupDescribeRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut groups = Vec::with_capacity(request.group_ids.len());
    for id in request.group_ids {
        let name = id.0.to_string();
        let described = DescribedGroup::default().with_group_id(id);
        let refused = |e: ResponseError, message: String| {
            described
                .clone()
                .with_error_code(e.code())
                .with_error_message(Some(str_bytes(message)))
        };
        if !access.group(Operation::Describe, &name) {
            groups.push(refused(
                ResponseError::GroupAuthorizationFailed,
                format!("not authorized to describe group {name}"),
            ));
            continue;
        }
        groups.push(match ctx.coordinator.describe_consumer(&name).await {
            Ok(Some(view)) => describe(ctx, described, view),
            Ok(None) => refused(
                ResponseError::GroupIdNotFound,
                format!("Group {name} is not a consumer group."),
            ),
            Err(code) => described.with_error_code(code),
        });
    }
    ResponseKind::ConsumerGroupDescribe(
        ConsumerGroupDescribeResponse::default().with_groups(groups),
    )
}

fn describe(ctx: &Context, described: DescribedGroup, view: ConsumerGroupView) -> DescribedGroup {
    let members = view
        .members
        .into_iter()
        .map(|v| {
            let m = v.member;
            Member::default()
                .with_member_id(str_bytes(m.id))
                .with_instance_id(m.instance_id.map(str_bytes))
                .with_rack_id(m.rack_id.map(str_bytes))
                .with_member_epoch(m.epoch)
                .with_client_id(str_bytes(m.client_id))
                .with_client_host(str_bytes(m.client_host))
                .with_subscribed_topic_names(
                    m.subscription
                        .names
                        .into_iter()
                        .map(|n| TopicName(str_bytes(n)))
                        .collect(),
                )
                .with_subscribed_topic_regex(m.subscription.regex.map(str_bytes))
                .with_assignment(assignment(ctx, m.assigned))
                .with_target_assignment(assignment(ctx, v.target))
                .with_member_type(1)
        })
        .collect();
    described
        .with_group_state(str_bytes(view.state))
        .with_group_epoch(view.epoch)
        .with_assignment_epoch(view.assignment_epoch)
        .with_assignor_name(str_bytes(view.assignor.name()))
        .with_members(members)
}

/// An assignment with each topic's name (a topic deleted meanwhile is left out).
fn assignment(ctx: &Context, a: Assignment) -> Described {
    Described::default().with_topic_partitions(
        a.into_iter()
            .filter_map(|(topic, partitions)| {
                let t = ctx.topics.by_uuid(topic)?;
                Some(
                    TopicPartitions::default()
                        .with_topic_id(Uuid::from_bytes(topic))
                        .with_topic_name(TopicName(str_bytes(t.meta.name.clone())))
                        .with_partitions(partitions.into_iter().collect()),
                )
            })
            .collect(),
    )
}
