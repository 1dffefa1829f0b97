//! `/api/bindings`: list bindings (by vhost, by source or destination exchange, by queue),
//! create one (POST, answered with its `Location`), show and delete one by its
//! `properties_key`.
//!
//! As RabbitMQ's, listings include the default exchange's implicit binding to every
//! queue (routing key = the queue's name), which cannot be created or deleted. A
//! binding's `properties_key` is its routing key (`~` when empty), followed, when it has
//! arguments, by `~` and a hash of them.

use super::body::Body;
use super::error::{ApiError, ApiResult};
use super::exchanges::{self, url_name};
use super::login::Principal;
use super::queues::{changeable_vhost, find as find_queue, visible_vhost, visible_vhosts};
use super::reply::Json;
use super::{Api, tables};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use base64::Engine as _;
use bytes::Bytes;
use ferry_amqp::admin::NO_CONNECTION;
use ferry_amqp::admin::encode_table;
use ferry_amqp::admin::{Binding, Destination, VHost};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The fields a binding takes (`source`, `destination`, `destination_type`, `vhost` are
/// accepted as `rabbitmqadmin` sends them, and ignored).
const BIND_FIELDS: &[&str] = &[
    "routing_key",
    "arguments",
    "source",
    "destination",
    "destination_type",
    "vhost",
];

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/api/bindings", get(list_all))
        .route("/api/bindings/{vhost}", get(list_vhost))
        .route(
            "/api/bindings/{vhost}/e/{source}/{kind}/{destination}",
            get(between).post(create),
        )
        .route(
            "/api/bindings/{vhost}/e/{source}/{kind}/{destination}/{props}",
            get(show).delete(delete),
        )
        .route(
            "/api/exchanges/{vhost}/{name}/bindings/{side}",
            get(of_exchange),
        )
        .route("/api/queues/{vhost}/{name}/bindings", get(of_queue))
}

/// A binding's `properties_key`.
pub(crate) fn properties_key(binding: &Binding) -> String {
    let key = if binding.routing_key.is_empty() {
        "~".to_owned()
    } else {
        binding.routing_key.clone()
    };
    if binding.arguments.inner().is_empty() {
        return key;
    }
    let digest = Sha256::digest(encode_table(&binding.arguments));
    let hash = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&digest[..9]);
    if binding.routing_key.is_empty() {
        format!("~{hash}")
    } else {
        format!("{key}~{hash}")
    }
}

fn binding_json(vhost: &str, b: &Binding) -> Value {
    let kind = match b.destination {
        Destination::Queue(_) => "queue",
        Destination::Exchange(_) => "exchange",
    };
    json!({
        "source": b.source,
        "vhost": vhost,
        "destination": b.destination.name(),
        "destination_type": kind,
        "routing_key": b.routing_key,
        "arguments": tables::to_json(&b.arguments),
        "properties_key": properties_key(b),
    })
}

/// Every binding of `vhost`, the default exchange's implicit ones first, in a stable
/// order.
fn all_of(vhost: &VHost) -> Vec<Binding> {
    let topology = vhost.topology();
    let mut queues: Vec<&String> = topology.queues.keys().collect();
    queues.sort();
    let mut out: Vec<Binding> = queues
        .into_iter()
        .map(|q| Binding {
            source: String::new(),
            destination: Destination::Queue(q.clone()),
            routing_key: q.clone(),
            arguments: Default::default(),
        })
        .collect();
    let mut explicit: Vec<Binding> = topology.bindings.values().flatten().cloned().collect();
    explicit.sort_by(|a, b| {
        (&a.source, a.destination.name(), &a.routing_key).cmp(&(
            &b.source,
            b.destination.name(),
            &b.routing_key,
        ))
    });
    out.extend(explicit);
    out
}

fn listed(vhost: &VHost, keep: impl Fn(&Binding) -> bool) -> Vec<Value> {
    all_of(vhost)
        .iter()
        .filter(|b| keep(b))
        .map(|b| binding_json(&vhost.name, b))
        .collect()
}

fn list(vhosts: Vec<Arc<VHost>>) -> Json<Vec<Value>> {
    Json(vhosts.iter().flat_map(|v| listed(v, |_| true)).collect())
}

/// `GET /api/bindings`.
async fn list_all(State(api): State<Api>, principal: Principal) -> Json<Vec<Value>> {
    list(visible_vhosts(&api, &principal))
}

/// `GET /api/bindings/{vhost}`.
async fn list_vhost(
    State(api): State<Api>,
    principal: Principal,
    Path(vhost): Path<String>,
) -> ApiResult<Json<Vec<Value>>> {
    Ok(list(vec![visible_vhost(&api, &principal, &vhost)?]))
}

/// The destination a URL names: `q` a queue, `e` an exchange, each of which must exist,
/// as must the source exchange.
fn endpoints(
    vhost: &VHost,
    source: &str,
    kind: &str,
    destination: &str,
) -> ApiResult<(String, Destination)> {
    let source = exchanges::find(vhost, source)?.name;
    let destination = match kind {
        "q" => Destination::Queue(find_queue(vhost, destination)?.name.clone()),
        "e" => Destination::Exchange(exchanges::find(vhost, destination)?.name),
        _ => return Err(ApiError::not_found()),
    };
    Ok((source, destination))
}

/// `GET /api/bindings/{vhost}/e/{source}/{q|e}/{destination}`.
async fn between(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, source, kind, destination)): Path<(String, String, String, String)>,
) -> ApiResult<Json<Vec<Value>>> {
    let vhost = visible_vhost(&api, &principal, &vhost)?;
    let (source, destination) = endpoints(&vhost, &source, &kind, &destination)?;
    Ok(Json(listed(&vhost, |b| {
        b.source == source && b.destination == destination
    })))
}

/// `POST /api/bindings/{vhost}/e/{source}/{q|e}/{destination}`: 201 with the new
/// binding's `Location` (its properties key, relative to the destination).
async fn create(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, source, kind, destination)): Path<(String, String, String, String)>,
    body: Bytes,
) -> ApiResult<impl IntoResponse> {
    let (vhost, permissions) = changeable_vhost(&api, &principal, &vhost)?;
    let body = Body::parse(&body, BIND_FIELDS)?;
    let routing_key = body.string("routing_key")?.unwrap_or_default();
    let arguments = tables::from_json("arguments", &body.object("arguments")?)?;
    let (source, destination) = endpoints(&vhost, &source, &kind, &destination)?;
    let binding = Binding {
        source,
        destination,
        routing_key,
        arguments,
    };
    vhost
        .bind(binding.clone(), NO_CONNECTION, &permissions)
        .await?;
    let location = format!(
        "{}/{}",
        urlencoding(binding.destination.name()),
        urlencoding(&properties_key(&binding))
    );
    Ok((StatusCode::CREATED, [(header::LOCATION, location)]))
}

/// The binding a URL names by its properties key.
fn named(
    vhost: &VHost,
    source: &str,
    kind: &str,
    destination: &str,
    props: &str,
) -> ApiResult<Binding> {
    let (source, destination) = endpoints(vhost, source, kind, destination)?;
    all_of(vhost)
        .into_iter()
        .find(|b| b.source == source && b.destination == destination && properties_key(b) == props)
        .ok_or_else(ApiError::not_found)
}

/// `GET /api/bindings/{vhost}/e/{source}/{q|e}/{destination}/{props}`.
async fn show(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, source, kind, destination, props)): Path<(String, String, String, String, String)>,
) -> ApiResult<Json<Value>> {
    let vhost = visible_vhost(&api, &principal, &vhost)?;
    let binding = named(&vhost, &source, &kind, &destination, &props)?;
    Ok(Json(binding_json(&vhost.name, &binding)))
}

/// `DELETE /api/bindings/{vhost}/e/{source}/{q|e}/{destination}/{props}`.
async fn delete(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, source, kind, destination, props)): Path<(String, String, String, String, String)>,
) -> ApiResult<StatusCode> {
    let (vhost, permissions) = changeable_vhost(&api, &principal, &vhost)?;
    let binding = named(&vhost, &source, &kind, &destination, &props)?;
    vhost.unbind(binding, NO_CONNECTION, &permissions).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/exchanges/{vhost}/{name}/bindings/{source|destination}`.
async fn of_exchange(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, name, side)): Path<(String, String, String)>,
) -> ApiResult<Json<Vec<Value>>> {
    let vhost = visible_vhost(&api, &principal, &vhost)?;
    let x = exchanges::find(&vhost, url_name(&name))?;
    let as_destination = Destination::Exchange(x.name.clone());
    match side.as_str() {
        "source" => Ok(Json(listed(&vhost, |b| b.source == x.name))),
        "destination" => Ok(Json(listed(&vhost, |b| b.destination == as_destination))),
        _ => Err(ApiError::not_found()),
    }
}

/// `GET /api/queues/{vhost}/{name}/bindings`.
async fn of_queue(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, name)): Path<(String, String)>,
) -> ApiResult<Json<Vec<Value>>> {
    let vhost = visible_vhost(&api, &principal, &vhost)?;
    let queue = find_queue(&vhost, &name)?;
    let destination = Destination::Queue(queue.name.clone());
    Ok(Json(listed(&vhost, |b| b.destination == destination)))
}

/// `text` percent-encoded for one URL path segment.
fn urlencoding(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use amq_protocol::types::{AMQPValue, FieldTable};

    fn binding(routing_key: &str, arguments: FieldTable) -> Binding {
        Binding {
            source: "x".into(),
            destination: Destination::Queue("q".into()),
            routing_key: routing_key.into(),
            arguments,
        }
    }

    #[test]
    fn properties_keys_are_rabbitmqs_form() {
        assert_eq!(properties_key(&binding("rk", FieldTable::default())), "rk");
        assert_eq!(properties_key(&binding("", FieldTable::default())), "~");
        let mut args = FieldTable::default();
        args.insert("x-match".into(), AMQPValue::LongString("all".into()));
        let with_args = properties_key(&binding("rk", args.clone()));
        assert!(with_args.starts_with("rk~") && with_args.len() == "rk~".len() + 12);
        assert_ne!(
            with_args,
            properties_key(&binding("rk", FieldTable::default()))
        );
        assert!(properties_key(&binding("", args)).starts_with('~'));
    }

    #[test]
    fn locations_are_percent_encoded() {
        assert_eq!(urlencoding("a b/c~d"), "a%20b%2Fc~d");
    }
}
