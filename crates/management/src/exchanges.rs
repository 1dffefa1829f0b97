//! `/api/exchanges`: list, show, declare (PUT) and delete exchanges (`if-unused`).

use super::body::Body;
use super::error::{ApiError, ApiResult};
use super::login::Principal;
use super::queues::{changeable_vhost, visible_vhost, visible_vhosts};
use super::reply::Flags;
use super::reply::{Json, put_status};
use super::{Api, tables};
use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::routing::get;
use bytes::Bytes;
use ferry_amqp::admin::{Exchange, ExchangeKind, VHost};
use serde_json::{Value, json};
use std::sync::Arc;

/// The fields an exchange declaration takes (`name`, `vhost` are accepted as
/// `rabbitmqadmin` sends them, and ignored).
const DECLARE_FIELDS: &[&str] = &[
    "type",
    "durable",
    "auto_delete",
    "internal",
    "arguments",
    "name",
    "vhost",
];

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/api/exchanges", get(list_all))
        .route("/api/exchanges/{vhost}", get(list_vhost))
        .route(
            "/api/exchanges/{vhost}/{name}",
            get(show).put(declare).delete(delete),
        )
}

/// The exchange `name` of `vhost` ("amq.default" names the default exchange, as in
/// RabbitMQ's URLs).
///
/// # Errors
/// 404 when it does not exist.
pub(crate) fn find(vhost: &VHost, name: &str) -> ApiResult<Exchange> {
    let name = url_name(name);
    vhost
        .topology()
        .exchanges
        .get(name)
        .cloned()
        .ok_or_else(ApiError::not_found)
}

/// The exchange name a URL segment means: RabbitMQ's URLs call the default exchange
/// `amq.default`.
pub(crate) fn url_name(segment: &str) -> &str {
    if segment == "amq.default" {
        ""
    } else {
        segment
    }
}

/// One exchange as RabbitMQ's API shows it.
pub(crate) fn exchange_json(vhost: &str, x: &Exchange) -> Value {
    json!({
        "name": x.name,
        "vhost": vhost,
        "type": x.type_name(),
        "durable": x.durable,
        "auto_delete": x.auto_delete,
        "internal": x.internal,
        "arguments": tables::to_json(&x.arguments),
        "policy": null,
        "user_who_performed_action": "",
    })
}

fn list(vhosts: Vec<Arc<VHost>>) -> Json<Vec<Value>> {
    let mut out = Vec::new();
    for vhost in vhosts {
        let topology = vhost.topology();
        let mut exchanges: Vec<&Exchange> = topology.exchanges.values().collect();
        exchanges.sort_by(|a, b| a.name.cmp(&b.name));
        out.extend(exchanges.into_iter().map(|x| exchange_json(&vhost.name, x)));
    }
    Json(out)
}

/// `GET /api/exchanges`.
async fn list_all(State(api): State<Api>, principal: Principal) -> Json<Vec<Value>> {
    list(visible_vhosts(&api, &principal))
}

/// `GET /api/exchanges/{vhost}`.
async fn list_vhost(
    State(api): State<Api>,
    principal: Principal,
    Path(vhost): Path<String>,
) -> ApiResult<Json<Vec<Value>>> {
    Ok(list(vec![visible_vhost(&api, &principal, &vhost)?]))
}

/// `GET /api/exchanges/{vhost}/{name}`.
async fn show(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let vhost = visible_vhost(&api, &principal, &vhost)?;
    let x = find(&vhost, &name)?;
    Ok(Json(exchange_json(&vhost.name, &x)))
}

/// `PUT /api/exchanges/{vhost}/{name}`: declares the exchange (201), or finds it declared
/// alike (204).
async fn declare(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, name)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let (vhost, permissions) = changeable_vhost(&api, &principal, &vhost)?;
    let body = Body::parse(&body, DECLARE_FIELDS)?;
    let type_name = body.required_string("type")?;
    let arguments = tables::from_json("arguments", &body.object("arguments")?)?;
    let (kind, delayed) = ExchangeKind::declared(&type_name, &arguments)
        .map_err(|e| ApiError::bad_request(e.text))?;
    let durable = body.bool("durable", false)?;
    let wanted = Exchange {
        name: url_name(&name).to_owned(),
        kind,
        delayed,
        durable,
        auto_delete: body.bool("auto_delete", false)?,
        internal: body.bool("internal", false)?,
        arguments,
        owner: if durable {
            0
        } else {
            api.amqp.transient_owner()
        },
        builtin: false,
    };
    let existed = vhost.topology().exchanges.contains_key(&wanted.name);
    vhost.declare_exchange(wanted, &permissions).await?;
    Ok(put_status(existed))
}

/// `DELETE /api/exchanges/{vhost}/{name}` with `if-unused`.
async fn delete(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, name)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> ApiResult<StatusCode> {
    let (vhost, permissions) = changeable_vhost(&api, &principal, &vhost)?;
    let x = find(&vhost, &name)?;
    let flags = Flags::parse(query.as_deref());
    vhost
        .delete_exchange(&x.name, flags.on("if-unused"), &permissions)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
