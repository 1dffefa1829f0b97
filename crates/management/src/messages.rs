//! Messages through the API, as RabbitMQ's: `POST /api/queues/{vhost}/{name}/get` (take
//! messages and requeue, acknowledge or reject them per `ackmode`), `DELETE
//! /api/queues/{vhost}/{name}/contents` (purge) and `POST
//! /api/exchanges/{vhost}/{name}/publish` (what `rabbitmqadmin publish` and the aliveness
//! test use). Properties are shown and taken as RabbitMQ's JSON (`headers` a table,
//! `delivery_mode` and `priority` numbers); a message without properties shows `[]`, as
//! RabbitMQ's does.

use super::body::Body;
use super::error::{ApiError, ApiResult};
use super::exchanges::{self, url_name};
use super::login::Principal;
use super::queues::{changeable_vhost, check, find};
use super::reply::Json;
use super::{Api, tables};
use amq_protocol::protocol::BasicProperties;
use amq_protocol::types::ShortString;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, post};
use base64::Engine as _;
use bytes::Bytes;
use ferry_amqp::admin::AmqpMessage;
use ferry_amqp::admin::Authorize;
use ferry_amqp::admin::ExchangeKind;
use ferry_amqp::admin::{GetMode, GotMessage};
use ferry_auth::access::Resource;
use ferry_auth::permissions::Access;
use serde_json::{Map, Value, json};

/// The fields a get takes (`requeue` is the pre-3.7 form of `ackmode`; `name`, `vhost`,
/// `queue` are accepted as `rabbitmqadmin` sends them, and ignored).
const GET_FIELDS: &[&str] = &[
    "count", "ackmode", "encoding", "truncate", "requeue", "name", "vhost", "queue",
];

/// The fields a publish takes (`name`, `vhost`, `exchange` are accepted as
/// `rabbitmqadmin` sends them, and ignored).
const PUBLISH_FIELDS: &[&str] = &[
    "routing_key",
    "payload",
    "payload_encoding",
    "properties",
    "props",
    "name",
    "vhost",
    "exchange",
];

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/api/queues/{vhost}/{name}/get", post(get))
        .route("/api/queues/{vhost}/{name}/contents", delete(purge))
        .route("/api/exchanges/{vhost}/{name}/publish", post(publish))
}

/// RabbitMQ's `ackmode`.
fn get_mode(ackmode: &str) -> ApiResult<GetMode> {
    match ackmode {
        "ack_requeue_true" | "reject_requeue_true" => Ok(GetMode::Requeue),
        "ack_requeue_false" => Ok(GetMode::Ack),
        "reject_requeue_false" => Ok(GetMode::Reject),
        other => Err(ApiError::bad_request(format!(
            "field 'ackmode' must be ack_requeue_true, ack_requeue_false, reject_requeue_true \
             or reject_requeue_false, not '{other}'"
        ))),
    }
}

/// `POST /api/queues/{vhost}/{name}/get`.
async fn get(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, name)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult<Json<Vec<Value>>> {
    let (vhost, permissions) = changeable_vhost(&api, &principal, &vhost)?;
    let body = Body::parse(&body, GET_FIELDS)?;
    let count = body.u64("count", 1)?;
    let mode = match (body.string("ackmode")?, body.has("requeue")) {
        (Some(ackmode), _) => get_mode(&ackmode)?,
        (None, true) if body.bool("requeue", true)? => GetMode::Requeue,
        (None, true) => GetMode::Ack,
        (None, false) => return Err(ApiError::bad_request("field 'ackmode' is missing")),
    };
    let encoding = body
        .string("encoding")?
        .unwrap_or_else(|| "auto".to_owned());
    let base64_only = match encoding.as_str() {
        "auto" => false,
        "base64" => true,
        other => {
            return Err(ApiError::bad_request(format!(
                "field 'encoding' must be auto or base64, not '{other}'"
            )));
        }
    };
    let truncate = body.u64("truncate", u64::MAX)?;
    let queue = find(&vhost, &name)?;
    check(&permissions, Access::Read, Resource::Queue(&queue.name))?;
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let got = api.amqp.get(&queue, count, mode).await?;
    Ok(Json(
        got.iter()
            .map(|m| got_json(m, base64_only, truncate))
            .collect(),
    ))
}

/// One fetched message as RabbitMQ's API shows it.
fn got_json(m: &GotMessage, base64_only: bool, truncate: u64) -> Value {
    let mut fields = message_json(
        &m.exchange,
        &m.routing_key,
        &m.properties,
        &m.body,
        base64_only,
        truncate,
    );
    fields.insert("redelivered".to_owned(), m.redelivered.into());
    fields.insert("message_count".to_owned(), m.message_count.into());
    Value::Object(fields)
}

/// A message's own fields as RabbitMQ's get shows them: `exchange`, `routing_key`,
/// `properties`, `payload` (text when it is UTF-8 and `base64_only` is off, else base64;
/// its first `truncate` bytes), `payload_encoding` and `payload_bytes`.
pub(crate) fn message_json(
    exchange: &str,
    routing_key: &str,
    properties: &BasicProperties,
    body: &[u8],
    base64_only: bool,
    truncate: u64,
) -> Map<String, Value> {
    let limit = usize::try_from(truncate).unwrap_or(usize::MAX);
    let shown = &body[..body.len().min(limit)];
    let (payload, encoding) = match (base64_only, std::str::from_utf8(shown)) {
        (false, Ok(text)) => (text.to_owned(), "string"),
        _ => (
            base64::engine::general_purpose::STANDARD.encode(shown),
            "base64",
        ),
    };
    Map::from_iter([
        ("payload_bytes".to_owned(), body.len().into()),
        ("exchange".to_owned(), exchange.into()),
        ("routing_key".to_owned(), routing_key.into()),
        ("properties".to_owned(), properties_json(properties)),
        ("payload".to_owned(), payload.into()),
        ("payload_encoding".to_owned(), encoding.into()),
    ])
}

/// Properties as RabbitMQ's API shows them (`[]` when there are none).
pub(crate) fn properties_json(p: &BasicProperties) -> Value {
    let mut out = Map::new();
    let mut text = |name: &str, v: &Option<ShortString>| {
        if let Some(v) = v {
            out.insert(name.to_owned(), Value::String(v.as_str().to_owned()));
        }
    };
    text("content_type", p.content_type());
    text("content_encoding", p.content_encoding());
    text("correlation_id", p.correlation_id());
    text("reply_to", p.reply_to());
    text("expiration", p.expiration());
    text("message_id", p.message_id());
    text("type", p.kind());
    text("user_id", p.user_id());
    text("app_id", p.app_id());
    text("cluster_id", p.cluster_id());
    if let Some(v) = p.delivery_mode() {
        out.insert("delivery_mode".to_owned(), (*v).into());
    }
    if let Some(v) = p.priority() {
        out.insert("priority".to_owned(), (*v).into());
    }
    if let Some(v) = p.timestamp() {
        out.insert("timestamp".to_owned(), (*v).into());
    }
    if let Some(h) = p.headers() {
        out.insert("headers".to_owned(), tables::to_json(h));
    }
    if out.is_empty() {
        Value::Array(Vec::new())
    } else {
        Value::Object(out)
    }
}

/// Properties from RabbitMQ's JSON form.
///
/// # Errors
/// 400 naming `properties.KEY` for an unknown property or a value of the wrong type.
pub(crate) fn properties_from_json(object: &Map<String, Value>) -> ApiResult<BasicProperties> {
    let mut p = BasicProperties::default();
    for (key, value) in object {
        let wrong = |expected: &str| {
            ApiError::bad_request(format!(
                "field 'properties.{key}' must be {expected}, not {value}"
            ))
        };
        let text = || {
            value
                .as_str()
                .map(ShortString::from)
                .ok_or_else(|| wrong("a string"))
        };
        let octet = || {
            value
                .as_u64()
                .and_then(|n| u8::try_from(n).ok())
                .ok_or_else(|| wrong("an integer from 0 to 255"))
        };
        p = match key.as_str() {
            "content_type" => p.with_content_type(text()?),
            "content_encoding" => p.with_content_encoding(text()?),
            "correlation_id" => p.with_correlation_id(text()?),
            "reply_to" => p.with_reply_to(text()?),
            "expiration" => p.with_expiration(text()?),
            "message_id" => p.with_message_id(text()?),
            "type" => p.with_type(text()?),
            "user_id" => p.with_user_id(text()?),
            "app_id" => p.with_app_id(text()?),
            "cluster_id" => p.with_cluster_id(text()?),
            "delivery_mode" => p.with_delivery_mode(octet()?),
            "priority" => p.with_priority(octet()?),
            "timestamp" => p.with_timestamp(value.as_u64().ok_or_else(|| wrong("an integer"))?),
            "headers" => match value {
                Value::Object(o) => p.with_headers(tables::from_json("properties.headers", o)?),
                _ => return Err(wrong("a JSON object")),
            },
            _ => {
                return Err(ApiError::bad_request(format!(
                    "unknown field 'properties.{key}'"
                )));
            }
        };
    }
    Ok(p)
}

/// `DELETE /api/queues/{vhost}/{name}/contents`: purges the queue.
async fn purge(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, name)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let (vhost, permissions) = changeable_vhost(&api, &principal, &vhost)?;
    let queue = find(&vhost, &name)?;
    check(&permissions, Access::Read, Resource::Queue(&queue.name))?;
    api.amqp.purge(&queue).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Request body bytes a publish may send beside its payload (routing key, properties).
const PUBLISH_FIELDS_BYTES: usize = 1024 * 1024;

/// The largest request body a publish of a payload up to `max_message_size` bytes takes:
/// the payload base64-encoded, and its other fields.
fn publish_body_limit(max_message_size: u32) -> usize {
    (max_message_size as usize).div_ceil(3) * 4 + PUBLISH_FIELDS_BYTES
}

/// `POST /api/exchanges/{vhost}/{name}/publish`: `{"routed": bool}`. Its body is read up
/// to [`publish_body_limit`] (not axum's default 2 MB), so a payload up to
/// `amqp.max_message_size` can be published; a larger one is refused naming the limit.
async fn publish(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, name)): Path<(String, String)>,
    body: axum::body::Body,
) -> ApiResult<Json<Value>> {
    let (vhost, permissions) = changeable_vhost(&api, &principal, &vhost)?;
    let max = api.amqp.max_message_size();
    let limit = publish_body_limit(max);
    let body = axum::body::to_bytes(body, limit).await.map_err(|e| {
        ApiError::bad_request(format!(
            "cannot read the request body ({e}): a publish takes at most {limit} bytes, a \
             payload of amqp.max_message_size ({max} bytes) base64-encoded and its fields"
        ))
    })?;
    let body = Body::parse(&body, PUBLISH_FIELDS)?;
    let routing_key = body.required_string("routing_key")?;
    let payload = body.required_string("payload")?;
    let encoding = body
        .string("payload_encoding")?
        .unwrap_or_else(|| "string".to_owned());
    let payload = match encoding.as_str() {
        "string" => Bytes::from(payload.into_bytes()),
        "base64" => Bytes::from(
            base64::engine::general_purpose::STANDARD
                .decode(payload.as_bytes())
                .map_err(|e| {
                    ApiError::bad_request(format!("field 'payload' is not base64: {e}"))
                })?,
        ),
        other => {
            return Err(ApiError::bad_request(format!(
                "field 'payload_encoding' must be string or base64, not '{other}'"
            )));
        }
    };
    let properties = properties_from_json(&body.object("properties")?)?;
    let exchange = exchanges::find(&vhost, url_name(&name))?;
    check(
        &permissions,
        Access::Write,
        Resource::Exchange(&exchange.name),
    )?;
    if exchange.kind == ExchangeKind::Topic {
        Authorize::check_topic(&permissions, Access::Write, &exchange.name, &routing_key)?;
    }
    let message = AmqpMessage {
        exchange: exchange.name,
        routing_key,
        properties,
        body: payload,
    };
    let routed = api.amqp.publish(&vhost.name, &message).await?;
    Ok(Json(json!({ "routed": routed })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_round_trip_through_json() {
        let json = json!({
            "content_type": "text/plain",
            "delivery_mode": 2,
            "priority": 5,
            "headers": {"k": "v", "n": 1},
            "message_id": "m1",
            "timestamp": 1700000000
        });
        let p = properties_from_json(json.as_object().unwrap()).unwrap();
        assert_eq!(properties_json(&p), json);
        assert_eq!(properties_json(&BasicProperties::default()), json!([]));
    }

    #[test]
    fn bad_properties_are_named() {
        let bad = |j: Value| {
            properties_from_json(j.as_object().unwrap())
                .unwrap_err()
                .reason
        };
        assert_eq!(
            bad(json!({"priority": 300})),
            "field 'properties.priority' must be an integer from 0 to 255, not 300"
        );
        assert_eq!(
            bad(json!({"colour": "red"})),
            "unknown field 'properties.colour'"
        );
    }

    #[test]
    fn ackmodes_are_rabbitmqs() {
        assert_eq!(get_mode("ack_requeue_true").unwrap(), GetMode::Requeue);
        assert_eq!(get_mode("reject_requeue_false").unwrap(), GetMode::Reject);
        assert!(
            get_mode("bogus")
                .unwrap_err()
                .reason
                .contains("field 'ackmode'")
        );
    }

    #[test]
    fn payloads_are_shown_as_text_or_base64_and_truncated() {
        let m = GotMessage {
            exchange: String::new(),
            routing_key: "q".into(),
            redelivered: false,
            message_count: 0,
            properties: BasicProperties::default(),
            body: Bytes::from_static(b"hello"),
        };
        let shown = got_json(&m, false, 3);
        assert_eq!(
            (shown["payload"].as_str(), shown["payload_bytes"].as_u64()),
            (Some("hel"), Some(5))
        );
        assert_eq!(got_json(&m, true, u64::MAX)["payload"], "aGVsbG8=");
        let binary = GotMessage {
            body: Bytes::from_static(&[0xff]),
            ..m
        };
        assert_eq!(
            got_json(&binary, false, u64::MAX)["payload_encoding"],
            "base64"
        );
    }
}
