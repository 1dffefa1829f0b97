//! Metadata: the live Ferry instances as brokers (each at the advertised address of the
//! listener the client came in on) and, per partition, the instance holding
//! its sequencer lease as leader. Unknown topics are created when `kafka.auto_create_topics`
//! allows (and, from v4, the client asks).
//!
//! With `include_topic_authorized_operations` (v8+) each topic carries the operations the
//! principal may do to it, with `include_cluster_authorized_operations` (v8–10) the
//! answer those on the cluster (KIP-430).
//!
//! ACLs: a topic the principal may not Describe is left out of an all-topics answer and
//! answered `TOPIC_AUTHORIZATION_FAILED` when named; an unknown topic is auto-created only
//! with Create on the cluster or the topic (else `TOPIC_AUTHORIZATION_FAILED`), as Kafka.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::{Access, Operation};
use crate::metadata::brokers::BrokerAddress;
use crate::metadata::topics::Topic;
use crate::partition::sequencer::Leader;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, MetadataRequest, MetadataResponse, ResponseKind, TopicName,
};
use std::sync::Arc;
use tracing::warn;
use uuid::Uuid;

/// Describes the brokers and the topics asked for (every topic when none are named).
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    version: i16,
    request: MetadataRequest,
) -> ResponseKind {
    let brokers = brokers(ctx, session).await;
    let auto_create =
        ctx.config.auto_create_topics && (version < 4 || request.allow_auto_topic_creation);
    let wanted = match request.topics {
        Some(topics) if !(version == 0 && topics.is_empty()) => Some(topics),
        _ => None,
    };
    let access = session.access(ctx);
    let mut topics = Vec::new();
    match wanted {
        None => {
            for t in ctx.topics.all() {
                if access.topic(Operation::Describe, &t.meta.name) {
                    topics.push(describe(ctx, &t).await);
                }
            }
        }
        Some(wanted) => {
            for w in wanted {
                let answer = match w.name {
                    Some(name) => by_name(ctx, &access, name.0.as_str(), auto_create).await,
                    None => match ctx.topics.by_uuid(*w.topic_id.as_bytes()) {
                        Some(t) if !access.topic(Operation::Describe, &t.meta.name) => {
                            MetadataResponseTopic::default()
                                .with_topic_id(w.topic_id)
                                .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                        }
                        Some(t) => describe(ctx, &t).await,
                        None => MetadataResponseTopic::default()
                            .with_topic_id(w.topic_id)
                            .with_error_code(ResponseError::UnknownTopicId.code()),
                    },
                };
                topics.push(answer);
            }
        }
    }
    if version >= 8 && request.include_topic_authorized_operations {
        for t in &mut topics {
            if let (0, Some(name)) = (t.error_code, &t.name) {
                t.topic_authorized_operations = access.topic_operations(name.0.as_str());
            }
        }
    }
    let mut response = MetadataResponse::default()
        .with_brokers(brokers.iter().map(broker).collect())
        .with_cluster_id(Some(str_bytes(ctx.cluster_id.clone())))
        .with_controller_id(BrokerId(ctx.brokers.me().node))
        .with_topics(topics);
    if (8..=10).contains(&version) && request.include_cluster_authorized_operations {
        response.cluster_authorized_operations = access.cluster_operations();
    }
    ResponseKind::Metadata(response)
}

/// The live brokers, each at the address of the listener `session` came in on (as Kafka
/// answers); this one alone when the registrations cannot be read.
pub(super) async fn brokers(ctx: &Context, session: &Session) -> Vec<BrokerAddress> {
    let registrations = match ctx.brokers.live().await {
        Ok(b) => b,
        Err(e) => {
            warn!(error = %e, "cannot list the brokers; answering with this one");
            vec![ctx.brokers.me().clone()]
        }
    };
    let listener = session.listener.name();
    registrations
        .iter()
        .filter_map(|r| r.address(listener))
        .collect()
}

/// Topic `name` described, created first when it is missing and `auto_create` and the
/// caller's ACLs allow.
async fn by_name(
    ctx: &Arc<Context>,
    access: &Access,
    name: &str,
    auto_create: bool,
) -> MetadataResponseTopic {
    let refused = MetadataResponseTopic::default()
        .with_name(Some(TopicName(str_bytes(name))))
        .with_error_code(ResponseError::TopicAuthorizationFailed.code());
    if !access.topic(Operation::Describe, name) {
        return refused;
    }
    if auto_create && ctx.topics.get(name).is_none() && !access.create_topic(name) {
        return refused;
    }
    let topic = ctx.topic_or_create(name, auto_create).await;
    match topic {
        Ok(t) => describe(ctx, &t).await,
        Err(e) => MetadataResponseTopic::default()
            .with_name(Some(TopicName(str_bytes(name))))
            .with_error_code(e.code()),
    }
}

async fn describe(ctx: &Arc<Context>, topic: &Topic) -> MetadataResponseTopic {
    let leaders = match ctx.sequencers.leaders(&topic.partitions).await {
        Ok(l) => l,
        Err(e) => {
            warn!(topic = %topic.meta.name, error = %e, "cannot read the partition leaders");
            vec![None; topic.partitions.len()]
        }
    };
    let partitions = topic
        .partitions
        .iter()
        .zip(leaders)
        .map(|(p, leader)| {
            let partition = MetadataResponsePartition::default().with_partition_index(p.index);
            match leader {
                Some(Leader { node, epoch }) => partition
                    .with_leader_id(BrokerId(node))
                    .with_leader_epoch(epoch)
                    .with_replica_nodes(vec![BrokerId(node)])
                    .with_isr_nodes(vec![BrokerId(node)]),
                None => partition
                    .with_leader_id(BrokerId(-1))
                    .with_error_code(ResponseError::LeaderNotAvailable.code()),
            }
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(str_bytes(topic.meta.name.clone()))))
        .with_topic_id(Uuid::from_bytes(topic.meta.uuid))
        .with_partitions(partitions)
}

fn broker(b: &BrokerAddress) -> MetadataResponseBroker {
    MetadataResponseBroker::default()
        .with_node_id(BrokerId(b.node))
        .with_host(str_bytes(b.host.clone()))
        .with_port(b.port)
}
