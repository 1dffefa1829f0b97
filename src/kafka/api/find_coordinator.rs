//! FindCoordinator: this instance coordinates every consumer group. Transaction
//! coordinators (key type 1) are not available: transactions are not supported yet.

use super::str_bytes;
use crate::kafka::Context;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, ResponseKind,
};
use std::sync::Arc;

/// Kafka's key type for consumer groups.
const GROUP: i8 = 0;

/// Names this instance for every group key asked for.
pub fn handle(ctx: &Arc<Context>, version: i16, request: FindCoordinatorRequest) -> ResponseKind {
    let me = ctx.brokers.me();
    let error = (request.key_type != GROUP).then_some(ResponseError::CoordinatorNotAvailable);
    let response = if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let c = Coordinator::default().with_key(key);
                match error {
                    Some(e) => c
                        .with_node_id(BrokerId(-1))
                        .with_error_code(e.code())
                        .with_error_message(Some(str_bytes("transactions are not supported"))),
                    None => c
                        .with_node_id(BrokerId(me.node))
                        .with_host(str_bytes(me.host.clone()))
                        .with_port(me.port),
                }
            })
            .collect();
        FindCoordinatorResponse::default().with_coordinators(coordinators)
    } else {
        match error {
            Some(e) => FindCoordinatorResponse::default()
                .with_node_id(BrokerId(-1))
                .with_error_code(e.code())
                .with_error_message(
                    (version >= 1).then(|| str_bytes("transactions are not supported")),
                ),
            None => FindCoordinatorResponse::default()
                .with_node_id(BrokerId(me.node))
                .with_host(str_bytes(me.host.clone()))
                .with_port(me.port),
        }
    };
    ResponseKind::FindCoordinator(response)
}
