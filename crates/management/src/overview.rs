//! `/api/overview` (the instance at a glance: versions, node, listeners, object and queue
//! totals, message statistics) and `/api/whoami`.

use super::Api;
use super::error::ApiResult;
use super::login::Principal;
use super::queues::{Counts, rates_under, visible_vhosts};
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
/// overview of a user who sees every vhost reads.
pub(crate) const ALL_VHOSTS_KEY: &str = "overview/*";

/// The key of the rates of vhost `name`'s totals, which the sampler records: the overview
/// of a user who sees only some vhosts sums theirs (the rate of a sum is the sum of the
/// rates), so it has rates from its first answer too.
pub(crate) fn vhost_key(name: &str) -> String {
    format!("overview/vhost/{name}")
}

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
    let mut per_vhost = Vec::new();
    let (mut queues, mut exchanges, mut consumers) = (0usize, 0usize, 0usize);
    for vhost in visible_vhosts(&api, &principal) {
        exchanges += vhost.topology().exchanges.len();
        let mut counts = Counts::default();
        for queue in vhost.queues() {
            queues += 1;
            consumers += queue.consumers();
            counts.add(&Counts::of(&queue).await?);
        }
        totals.add(&counts);
        per_vhost.push((vhost_key(&vhost.name), counts));
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
    let every_vhost = rates_under(&api, ALL_VHOSTS_KEY, now);
    let some_vhosts = |name: &str, _total: i64| {
        let sum: f64 = per_vhost
            .iter()
            .map(|(key, counts)| {
                api.rates
                    .rate(&format!("{key}/{name}"), counts.value(name), now)
            })
            .sum();
        (sum * 10.0).round() / 10.0
    };
    let rate: &dyn Fn(&str, i64) -> f64 = if principal.access.is_monitoring() {
        &every_vhost
    } else {
        &some_vhosts
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
        "queue_totals": Value::Object(totals.depth_fields(rate)),
        "message_stats": totals.message_stats(rate),
    })))
}
