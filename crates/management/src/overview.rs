//! `/api/overview` (the instance at a glance: versions, node, listeners, object and queue
//! totals, message statistics) and `/api/whoami`.

use super::Api;
use super::error::ApiResult;
use super::login::Principal;
use super::queues::{Counts, visible_vhosts};
use super::reply::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde_json::{Value, json};
use std::time::Instant;

/// The RabbitMQ version whose management API this one follows, in the version fields
/// tools read (`rabbitmq_version`, `management_version`); `product_name` and
/// `product_version` say it is Ferry.
pub(crate) const COMPATIBLE_RABBITMQ_VERSION: &str = "3.10.8";

/// The key of the rates of the totals over every vhost, which the sampler records and an
/// overview of a user who sees every vhost reads; a user who sees fewer has rates of its
/// own, under its name.
pub(crate) const ALL_VHOSTS_KEY: &str = "overview/*";

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/api/overview", get(overview))
        .route("/api/whoami", get(whoami))
}

/// `GET /api/whoami`.
async fn whoami(principal: Principal) -> Json<Value> {
    Json(json!({ "name": principal.user.name, "tags": principal.user.tags }))
}

/// `GET /api/overview`: totals over the vhosts the user may see.
async fn overview(State(api): State<Api>, principal: Principal) -> ApiResult<Json<Value>> {
    let mut totals = Counts::default();
    let (mut queues, mut exchanges, mut consumers) = (0usize, 0usize, 0usize);
    for vhost in visible_vhosts(&api, &principal) {
        exchanges += vhost.topology().exchanges.len();
        for queue in vhost.queues() {
            queues += 1;
            consumers += queue.consumers();
            totals.add(&Counts::of(&queue).await?);
        }
    }
    let connections: Vec<_> = api
        .amqp
        .connections()
        .list()
        .into_iter()
        .filter(|c| principal.access.sees_connection_of(&c.info.user))
        .collect();
    let channels: usize = connections.iter().map(|c| c.channels().len()).sum();
    let now = Instant::now();
    let key = if principal.access.is_monitoring() {
        ALL_VHOSTS_KEY.to_owned()
    } else {
        format!("overview/{}", principal.user.name)
    };
    let listeners: Vec<Value> = api
        .listeners
        .iter()
        .map(|l| {
            json!({
                "node": api.node,
                "protocol": l.protocol,
                "ip_address": l.addr.ip().to_string(),
                "port": l.addr.port(),
            })
        })
        .collect();
    let exchange_types: Vec<Value> = ["direct", "fanout", "headers", "topic"]
        .iter()
        .map(|t| json!({"name": t, "description": "", "enabled": true}))
        .collect();
    Ok(Json(json!({
        "management_version": COMPATIBLE_RABBITMQ_VERSION,
        "rabbitmq_version": COMPATIBLE_RABBITMQ_VERSION,
        "product_name": "Ferry",
        "product_version": env!("CARGO_PKG_VERSION"),
        "rates_mode": "basic",
        "cluster_name": api.node,
        "node": api.node,
        "exchange_types": exchange_types,
        "listeners": listeners,
        "object_totals": {
            "connections": connections.len(),
            "channels": channels,
            "consumers": consumers,
            "exchanges": exchanges,
            "queues": queues,
        },
        "queue_totals": Value::Object(totals.depth_fields(&api, &key, now)),
        "message_stats": totals.message_stats(&api, &key, now),
    })))
}
