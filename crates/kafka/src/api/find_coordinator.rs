//! FindCoordinator: names the instance holding each group's coordinator lease (at the
//! address of the listener the client came in on), taking the
//! lease here when no live instance holds it. The coordinator of a transactional id (key
//! type 1) is the instance asked: every transaction step is one store transaction, so
//! any instance coordinates any id. A key needs Describe on its group
//! (`GROUP_AUTHORIZATION_FAILED`) or transactional id
//! (`TRANSACTIONAL_ID_AUTHORIZATION_FAILED`).

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::metadata::brokers::{BrokerAddress, Registration};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, ResponseKind,
};
use std::sync::Arc;
use tracing::warn;

/// Kafka's key type for consumer groups.
const GROUP: i8 = 0;
/// Kafka's key type for transactional ids.
const TRANSACTION: i8 = 1;

/// Where one key's coordinator is, or why it cannot be named.
type Located = Result<BrokerAddress, (ResponseError, &'static str)>;

/// Names the coordinator of every key asked for.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    version: i16,
    request: FindCoordinatorRequest,
) -> ResponseKind {
    let listener = session.listener.name();
    let keys = if version >= 4 {
        request
            .coordinator_keys
            .iter()
            .map(|k| k.to_string())
            .collect()
    } else {
        vec![request.key.to_string()]
    };
    let access = session.access(ctx);
    let mut located = Vec::with_capacity(keys.len());
    for key in &keys {
        located.push(match request.key_type {
            GROUP if !access.group(Operation::Describe, key) => Err((
                ResponseError::GroupAuthorizationFailed,
                "not authorized to describe the group",
            )),
            TRANSACTION if !access.transactional_id(Operation::Describe, key) => Err((
                ResponseError::TransactionalIdAuthorizationFailed,
                "not authorized to describe the transactional id",
            )),
            GROUP => locate(ctx, listener, key).await,
            TRANSACTION => at_listener(ctx.brokers.me(), listener),
            _ => Err((
                ResponseError::InvalidRequest,
                "unknown coordinator key type",
            )),
        });
    }
    let response = if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .zip(located)
            .map(|(key, found)| {
                let c = Coordinator::default().with_key(key);
                match found {
                    Ok(b) => c
                        .with_node_id(BrokerId(b.node))
                        .with_host(str_bytes(b.host))
                        .with_port(b.port),
                    Err((e, why)) => c
                        .with_node_id(BrokerId(-1))
                        .with_error_code(e.code())
                        .with_error_message(Some(str_bytes(why))),
                }
            })
            .collect();
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        // Before v4 there is exactly one key.
        match located
            .pop()
            .unwrap_or(Err((ResponseError::InvalidRequest, "no key")))
        {
            Ok(b) => FindCoordinatorResponse::default()
                .with_node_id(BrokerId(b.node))
                .with_host(str_bytes(b.host))
                .with_port(b.port),
            Err((e, why)) => FindCoordinatorResponse::default()
                .with_node_id(BrokerId(-1))
                .with_error_code(e.code())
                .with_error_message((version >= 1).then(|| str_bytes(why))),
        }
    };
    ResponseKind::FindCoordinator(response)
}

/// The live broker coordinating `group`, at the address of `listener`.
async fn locate(ctx: &Context, listener: &str, group: &str) -> Located {
    let unavailable = |why| Err((ResponseError::CoordinatorNotAvailable, why));
    let node = match ctx.coordinator.locate(group).await {
        Ok(node) => node,
        Err(e) => {
            warn!(group, error = %e, "cannot locate the group's coordinator");
            return unavailable("the store cannot be read");
        }
    };
    if node == ctx.brokers.me().node {
        return at_listener(ctx.brokers.me(), listener);
    }
    match ctx.brokers.live().await {
        Ok(live) => live.iter().find(|b| b.node == node).map_or_else(
            || unavailable("the coordinating instance is not registered"),
            |b| at_listener(b, listener),
        ),
        Err(_) => unavailable("the store cannot be read"),
    }
}

/// `broker` at the address of `listener`.
fn at_listener(broker: &Registration, listener: &str) -> Located {
    broker.address(listener).ok_or((
        ResponseError::CoordinatorNotAvailable,
        "the coordinating instance has no listener of this client's security protocol",
    ))
}
