//! RabbitMQ's health checks (`/api/health/checks/...`: 200 `{"status":"ok"}`, or 503
//! `{"status":"failed","reason":...}`) and `/api/aliveness-test/{vhost}` (declare the
//! `aliveness-test` queue, publish a message to it, get it back).
//!
//! Ferry's answers: an alarm is the AMQP front's resource alarm (publishers blocked);
//! listeners are this instance's; every configured vhost is always running; no node is
//! quorum-critical (there is no quorum of nodes to lose: the store is the durability).

use super::Api;
use super::error::{ApiError, ApiResult};
use super::login::Principal;
use super::queues::{changeable_vhost, check};
use super::reply::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use bytes::Bytes;
use ferry_amqp::admin::AmqpMessage;
use ferry_amqp::admin::QueueArgs;
use ferry_amqp::admin::QueueSpec;
use ferry_amqp::admin::{GetMode, NO_CONNECTION};
use ferry_auth::access::Resource;
use ferry_auth::permissions::Access;
use serde_json::{Value, json};

/// The queue the aliveness test uses, as RabbitMQ's.
const ALIVENESS_QUEUE: &str = "aliveness-test";
/// The message it sends through it.
const ALIVENESS_MESSAGE: &[u8] = b"test_message";

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/api/health/checks/alarms", get(alarms))
        .route("/api/health/checks/local-alarms", get(alarms))
        .route(
            "/api/health/checks/port-listener/{port}",
            get(port_listener),
        )
        .route(
            "/api/health/checks/protocol-listener/{protocol}",
            get(protocol_listener),
        )
        .route("/api/health/checks/virtual-hosts", get(ok))
        .route(
            "/api/health/checks/node-is-quorum-critical",
            get(not_quorum_critical),
        )
        .route("/api/aliveness-test/{vhost}", get(aliveness))
}

fn passed(body: Value) -> Response {
    (StatusCode::OK, Json(body)).into_response()
}

fn failed(body: Value) -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
}

/// `GET /api/health/checks/virtual-hosts`.
async fn ok(_: Principal) -> Response {
    passed(json!({"status": "ok"}))
}

/// `GET /api/health/checks/node-is-quorum-critical`.
async fn not_quorum_critical(_: Principal) -> Response {
    passed(json!({"status": "ok", "reason": "no quorum queue depends on this node"}))
}

/// `GET /api/health/checks/alarms` and `local-alarms`.
async fn alarms(State(api): State<Api>, _: Principal) -> Response {
    match api.amqp.alarm() {
        None => passed(json!({"status": "ok"})),
        Some(alarm) => failed(json!({
            "status": "failed",
            "reason": "There are alarms in effect in the cluster",
            "alarms": [{"node": api.node, "resource": alarm}],
        })),
    }
}

/// `GET /api/health/checks/port-listener/{port}`.
async fn port_listener(
    State(api): State<Api>,
    _: Principal,
    Path(port): Path<String>,
) -> ApiResult<Response> {
    let port: u16 = port
        .parse()
        .map_err(|_| ApiError::bad_request(format!("'{port}' is not a port number")))?;
    let ports: Vec<u16> = api.listeners.iter().map(|l| l.addr.port()).collect();
    Ok(if ports.contains(&port) {
        passed(json!({"status": "ok", "port": port}))
    } else {
        failed(json!({
            "status": "failed",
            "reason": "No active listener",
            "missing": port,
            "ports": ports,
        }))
    })
}

/// A protocol as RabbitMQ's check normalizes it (`amqp091`, `amqp0-9-1` → `amqp`).
fn normalized(protocol: &str) -> String {
    let p = protocol.to_ascii_lowercase();
    match p.as_str() {
        "amqp091" | "amqp0.9.1" | "amqp0-9-1" | "amqp-0-9-1" => "amqp".to_owned(),
        _ => p,
    }
}

/// `GET /api/health/checks/protocol-listener/{protocol}`.
async fn protocol_listener(
    State(api): State<Api>,
    _: Principal,
    Path(protocol): Path<String>,
) -> Response {
    let wanted = normalized(&protocol);
    let protocols: Vec<&str> = api.listeners.iter().map(|l| l.protocol.as_str()).collect();
    if protocols.contains(&wanted.as_str()) {
        passed(json!({"status": "ok", "protocol": wanted}))
    } else {
        failed(json!({
            "status": "failed",
            "reason": "No active listener",
            "missing": wanted,
            "protocols": protocols,
        }))
    }
}

/// `GET /api/aliveness-test/{vhost}`.
async fn aliveness(
    State(api): State<Api>,
    principal: Principal,
    Path(vhost): Path<String>,
) -> ApiResult<Response> {
    let (vhost, permissions) = changeable_vhost(&api, &principal, &vhost)?;
    let spec = QueueSpec {
        durable: false,
        exclusive_owner: None,
        auto_delete: false,
        args: QueueArgs::default(),
        owner: api.amqp.transient_owner(),
    };
    let queue = vhost
        .declare_queue(ALIVENESS_QUEUE, spec, false, NO_CONNECTION, &permissions)
        .await?;
    let message = AmqpMessage {
        exchange: String::new(),
        routing_key: ALIVENESS_QUEUE.to_owned(),
        properties: Default::default(),
        body: Bytes::from_static(ALIVENESS_MESSAGE),
    };
    check(&permissions, Access::Write, Resource::Exchange(""))?;
    check(&permissions, Access::Read, Resource::Queue(ALIVENESS_QUEUE))?;
    api.amqp.publish(&vhost.name, &message).await?;
    let got = api.amqp.get(&queue, 1, GetMode::Ack).await?;
    Ok(
        if got.first().is_some_and(|m| m.body == ALIVENESS_MESSAGE) {
            passed(json!({"status": "ok"}))
        } else {
            failed(json!({"status": "failed", "reason": "the test message did not come back"}))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_are_normalized_as_rabbitmq_does() {
        assert_eq!(normalized("AMQP091"), "amqp");
        assert_eq!(normalized("amqp0-9-1"), "amqp");
        assert_eq!(normalized("http"), "http");
    }
}
