//! `/api/connections` (list, show, close with 320 CONNECTION_FORCED and the `X-Reason`
//! header as the reason), `/api/channels` and `/api/consumers`: the live AMQP connections
//! of this instance (each instance lists its own, as a RabbitMQ node its own).

use super::error::{ApiError, ApiResult};
use super::login::Principal;
use super::queues::visible_vhost;
use super::reply::Json;
use super::{Api, tables};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use ferry_amqp::admin::{LiveChannel, LiveConnection};
use serde_json::{Value, json};
use std::sync::Arc;

/// RabbitMQ's reason when a close through the API gives none.
const DEFAULT_REASON: &str = "Closed via management plugin";

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/api/connections", get(list))
        .route("/api/connections/{name}", get(show).delete(close))
        .route("/api/connections/{name}/channels", get(channels_of))
        .route("/api/channels", get(channels))
        .route("/api/consumers", get(consumers))
        .route("/api/consumers/{vhost}", get(consumers_of_vhost))
}

/// The connections `principal` may see.
fn visible(api: &Api, principal: &Principal) -> Vec<Arc<LiveConnection>> {
    api.amqp
        .connections()
        .list()
        .into_iter()
        .filter(|c| principal.access.sees_connection_of(&c.info.user))
        .collect()
}

fn named(api: &Api, principal: &Principal, name: &str) -> ApiResult<Arc<LiveConnection>> {
    api.amqp
        .connections()
        .named(name)
        .filter(|c| principal.access.sees_connection_of(&c.info.user))
        .ok_or_else(ApiError::not_found)
}

fn connection_json(api: &Api, c: &LiveConnection) -> Value {
    let i = &c.info;
    json!({
        "name": c.name,
        "node": api.node,
        "type": "network",
        "protocol": "AMQP 0-9-1",
        "user": i.user,
        "vhost": i.vhost,
        "host": i.local.ip().to_string(),
        "port": i.local.port(),
        "peer_host": i.peer.ip().to_string(),
        "peer_port": i.peer.port(),
        "ssl": i.tls,
        "auth_mechanism": i.mechanism,
        "state": "running",
        "channels": c.channels().len(),
        "channel_max": i.channel_max,
        "frame_max": i.frame_max,
        "timeout": i.heartbeat,
        "connected_at": i.connected_at_ms,
        "client_properties": tables::to_json(&i.client_properties),
    })
}

fn channel_json(api: &Api, c: &LiveConnection, number: u16, ch: &LiveChannel) -> Value {
    json!({
        "name": format!("{} ({number})", c.name),
        "node": api.node,
        "number": number,
        "user": c.info.user,
        "vhost": c.info.vhost,
        "state": "running",
        "consumer_count": ch.consumers.len(),
        "prefetch_count": ch.prefetch,
        "global_prefetch_count": ch.global_prefetch,
        "connection_details": {
            "name": c.name,
            "peer_host": c.info.peer.ip().to_string(),
            "peer_port": c.info.peer.port(),
        },
    })
}

/// `GET /api/connections`.
async fn list(State(api): State<Api>, principal: Principal) -> Json<Vec<Value>> {
    Json(
        visible(&api, &principal)
            .iter()
            .map(|c| connection_json(&api, c))
            .collect(),
    )
}

/// `GET /api/connections/{name}`.
async fn show(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let connection = named(&api, &principal, &name)?;
    Ok(Json(connection_json(&api, &connection)))
}

/// `DELETE /api/connections/{name}`: closes it with 320 CONNECTION_FORCED and the
/// `X-Reason` header as the reason.
async fn close(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    let connection = named(&api, &principal, &name)?;
    if !principal.access.closes_connection_of(&connection.info.user) {
        return Err(ApiError::not_authorised(ApiError::OBJECT_REFUSED));
    }
    let reason = headers
        .get("x-reason")
        .and_then(|v| v.to_str().ok())
        .unwrap_or(DEFAULT_REASON);
    connection.close(reason);
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/connections/{name}/channels`.
async fn channels_of(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<Vec<Value>>> {
    let c = named(&api, &principal, &name)?;
    Ok(Json(
        c.channels()
            .iter()
            .map(|(n, ch)| channel_json(&api, &c, *n, ch))
            .collect(),
    ))
}

/// `GET /api/channels`.
async fn channels(State(api): State<Api>, principal: Principal) -> Json<Vec<Value>> {
    let mut out = Vec::new();
    for c in visible(&api, &principal) {
        for (n, ch) in c.channels() {
            out.push(channel_json(&api, &c, n, &ch));
        }
    }
    Json(out)
}

fn consumers_where(api: &Api, principal: &Principal, vhost: Option<&str>) -> Vec<Value> {
    let mut out = Vec::new();
    for c in visible(api, principal) {
        if vhost.is_some_and(|v| v != c.info.vhost) {
            continue;
        }
        for (n, ch) in c.channels() {
            for consumer in &ch.consumers {
                out.push(json!({
                    "consumer_tag": consumer.tag,
                    "queue": {"name": consumer.queue, "vhost": c.info.vhost},
                    "ack_required": consumer.ack_required,
                    "exclusive": consumer.exclusive,
                    "prefetch_count": consumer.prefetch,
                    "active": true,
                    "activity_status": "up",
                    "arguments": {},
                    "channel_details": {
                        "name": format!("{} ({n})", c.name),
                        "number": n,
                        "connection_name": c.name,
                        "node": api.node,
                        "peer_host": c.info.peer.ip().to_string(),
                        "peer_port": c.info.peer.port(),
                        "user": c.info.user,
                    },
                }));
            }
        }
    }
    out
}

/// `GET /api/consumers`.
async fn consumers(State(api): State<Api>, principal: Principal) -> Json<Vec<Value>> {
    Json(consumers_where(&api, &principal, None))
}

/// `GET /api/consumers/{vhost}`.
async fn consumers_of_vhost(
    State(api): State<Api>,
    principal: Principal,
    Path(vhost): Path<String>,
) -> ApiResult<Json<Vec<Value>>> {
    let vhost = visible_vhost(&api, &principal, &vhost)?;
    Ok(Json(consumers_where(&api, &principal, Some(&vhost.name))))
}
