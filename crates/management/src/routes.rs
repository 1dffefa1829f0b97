//! `/api/ferry/routes/…`: Ferry's own endpoints for the bridge's routes (RabbitMQ's API has
//! none; its closest, dynamic shovels, hold no messages of their own).
//!
//! - `GET /api/ferry/routes`, `GET /api/ferry/routes/{name}`: every route with its origin
//!   (`config` or `runtime`), state on this instance, endpoints' connection states, and
//!   per destination the stage depth, dead letters and rates (staged, delivered,
//!   dead-lettered). For `monitoring` and `administrator` users, as RabbitMQ's cluster-wide
//!   views.
//! - `PUT /api/ferry/routes/{name}` (body: the route's `[[routes]]` table as JSON) adds a
//!   route at runtime, kept in the store; `DELETE` (with `?if-empty=true` refusing while
//!   messages wait) removes one; `POST …/pause` and `…/resume` stop and start any route on
//!   every instance. Routes of the config file are changed in the file.
//! - `GET …/destinations/{index}/dead-letters?count=N` shows a destination's dead letters
//!   (RabbitMQ's get-message fields and why each was dead-lettered), `POST …/replay` moves
//!   them back to be delivered again, `DELETE …/dead-letters` purges them.
//!
//! Everything but the two views is for administrators (dead letters are message contents).

use super::Api;
use super::administrator::{administrator, monitor, store_failed};
use super::body;
use super::error::{ApiError, ApiResult};
use super::login::Principal;
use super::messages::message_json;
use super::queues::details;
use super::reply::{Flags, Json, put_status};
use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use bytes::Bytes;
use ferry_amqp::admin::AmqpMessage;
use ferry_bridge::RunState;
use ferry_bridge::admin::{Connection, DestinationView, EndpointView, RouteAdminError, RouteView};
use ferry_config::RouteConfig;
use ferry_stage::{Delivery, Depth};
use serde_json::{Map, Value, json};
use std::time::Instant;

/// Dead letters shown when `count` is not given.
const DEFAULT_COUNT: usize = 100;
/// Most dead letters one request shows.
const MAX_COUNT: usize = 10_000;

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/api/ferry/routes", get(list))
        .route(
            "/api/ferry/routes/{name}",
            get(show).put(add).delete(remove),
        )
        .route("/api/ferry/routes/{name}/{action}", post(pause_or_resume))
        .route(
            "/api/ferry/routes/{name}/destinations/{index}/dead-letters",
            get(dead_letters).delete(purge),
        )
        .route(
            "/api/ferry/routes/{name}/destinations/{index}/dead-letters/replay",
            post(replay),
        )
}

impl From<RouteAdminError> for ApiError {
    fn from(e: RouteAdminError) -> Self {
        match e {
            RouteAdminError::NotFound(_) | RouteAdminError::NoDestination { .. } => {
                ApiError::not_found()
            }
            RouteAdminError::Store(why) => store_failed(why),
            refused => ApiError::bad_request(refused.to_string()),
        }
    }
}

/// `GET /api/ferry/routes`.
async fn list(State(api): State<Api>, principal: Principal) -> ApiResult<Json<Vec<Value>>> {
    monitor(&principal)?;
    let routes = api.routes.routes().await?;
    Ok(Json(routes.iter().map(|r| route_json(&api, r)).collect()))
}

/// `GET /api/ferry/routes/{name}`.
async fn show(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    monitor(&principal)?;
    Ok(Json(route_json(&api, &api.routes.route(&name).await?)))
}

/// `PUT /api/ferry/routes/{name}`: 201 when added, 204 when it was there already with the
/// same definition.
async fn add(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    let route = definition(&name, &body)?;
    let existed = api.routes.add(&route).await?;
    Ok(put_status(existed))
}

/// The route `name` that `body` defines: the `[[routes]]` table as a JSON object, its
/// `name` taken from the URL (a `name` field must repeat it).
fn definition(name: &str, body: &[u8]) -> ApiResult<RouteConfig> {
    let mut fields = body::object(body)?;
    match fields.get("name") {
        None => {}
        Some(Value::String(n)) if n == name => {}
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "field 'name' must repeat the route's name in the URL ('{name}'), not {other}"
            )));
        }
    }
    fields.insert("name".to_owned(), Value::String(name.to_owned()));
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| ApiError::bad_request(format!("the route definition is not valid: {e}")))
}

/// `DELETE /api/ferry/routes/{name}[?if-empty=true]`.
async fn remove(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    let if_empty = Flags::parse(query.as_deref()).on("if-empty");
    api.routes.remove(&name, if_empty).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/ferry/routes/{name}/pause` and `…/resume`.
async fn pause_or_resume(
    State(api): State<Api>,
    principal: Principal,
    Path((name, action)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    let paused = match action.as_str() {
        "pause" => true,
        "resume" => false,
        _ => return Err(ApiError::not_found()),
    };
    api.routes.set_paused(&name, paused).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /api/ferry/routes/{name}/destinations/{index}/dead-letters[?count=N]`.
async fn dead_letters(
    State(api): State<Api>,
    principal: Principal,
    Path((name, index)): Path<(String, usize)>,
    RawQuery(query): RawQuery,
) -> ApiResult<Json<Vec<Value>>> {
    administrator(&principal)?;
    let count = count(query.as_deref())?;
    let letters = api.routes.dead_letters(&name, index, count).await?;
    Ok(Json(
        letters
            .iter()
            .map(|(d, refusal)| dead_letter_json(d, refusal.as_deref()))
            .collect(),
    ))
}

/// The `count` parameter of a query string: 1 to [`MAX_COUNT`], [`DEFAULT_COUNT`] when
/// absent.
fn count(query: Option<&str>) -> ApiResult<usize> {
    let given = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .find(|(k, _)| k == "count")
        .map(|(_, v)| v.into_owned());
    match given {
        None => Ok(DEFAULT_COUNT),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if (1..=MAX_COUNT).contains(&n) => Ok(n),
            _ => Err(ApiError::bad_request(format!(
                "parameter 'count' must be an integer from 1 to {MAX_COUNT}, not '{v}'"
            ))),
        },
    }
}

/// `POST …/dead-letters/replay`: `{"replayed": N}`.
async fn replay(
    State(api): State<Api>,
    principal: Principal,
    Path((name, index)): Path<(String, usize)>,
) -> ApiResult<Json<Value>> {
    administrator(&principal)?;
    let moved = api.routes.replay(&name, index).await?;
    Ok(Json(json!({ "replayed": moved })))
}

/// `DELETE …/dead-letters`: `{"purged": N}`.
async fn purge(
    State(api): State<Api>,
    principal: Principal,
    Path((name, index)): Path<(String, usize)>,
) -> ApiResult<Json<Value>> {
    administrator(&principal)?;
    let removed = api.routes.purge_dead_letters(&name, index).await?;
    Ok(Json(json!({ "purged": removed })))
}

/// One dead letter: RabbitMQ's get-message fields (the message as the route staged it)
/// and why and when it was dead-lettered, with the destination's last refusal of it.
fn dead_letter_json(d: &Delivery, refusal: Option<&str>) -> Value {
    let mut fields = match AmqpMessage::from_stage_body(d.body.clone()) {
        Ok(m) => message_json(
            &m.exchange,
            &m.routing_key,
            &m.properties,
            &m.body,
            false,
            u64::MAX,
        ),
        // Not a bridged message (it could not be decoded, which is why it is here): the
        // raw bytes.
        Err(_) => message_json("", "", &Default::default(), &d.body, true, u64::MAX),
    };
    let dead = d.envelope.dead_letter;
    fields.insert(
        "dead_letter_reason".to_owned(),
        dead.map_or(Value::Null, |x| x.reason.as_str().into()),
    );
    fields.insert(
        "dead_lettered_at".to_owned(),
        dead.map_or(Value::Null, |x| x.at_ms.into()),
    );
    fields.insert("last_refusal".to_owned(), refusal.into());
    fields.insert("priority".to_owned(), d.envelope.priority.into());
    Value::Object(fields)
}

fn route_json(api: &Api, r: &RouteView) -> Value {
    let now = Instant::now();
    let name = &r.route.name;
    let mut totals = Depth::default();
    let destinations: Vec<Value> = r
        .destinations
        .iter()
        .map(|d| {
            let stage = d.stage.unwrap_or_default();
            let dead = d.dead.unwrap_or_default();
            totals.ready += stage.ready;
            totals.in_flight += stage.in_flight;
            totals.dead_lettered += dead.ready;
            destination_json(api, name, d, &stage, &dead, now)
        })
        .collect();
    let mut out = Map::new();
    out.insert("name".to_owned(), name.as_str().into());
    out.insert("origin".to_owned(), r.origin.as_str().into());
    let (state, reason) = match &r.state {
        Some(RunState::Failed(why)) => ("failed", Some(why.clone())),
        Some(s) => (s.as_str(), None),
        None if r.paused_ms.is_some() => ("paused", None),
        None => ("starting", None),
    };
    out.insert("state".to_owned(), state.into());
    out.insert("reason".to_owned(), reason.into());
    out.insert("paused".to_owned(), r.paused_ms.is_some().into());
    out.insert("paused_at".to_owned(), r.paused_ms.into());
    out.insert("node".to_owned(), api.node.as_str().into());
    out.insert(
        "definition".to_owned(),
        serde_json::to_value(&r.route).unwrap_or(Value::Null),
    );
    out.insert("source".to_owned(), endpoint_json(&r.source));
    out.insert("messages_ready".to_owned(), totals.ready.into());
    out.insert(
        "messages_unacknowledged".to_owned(),
        totals.in_flight.into(),
    );
    out.insert(
        "messages".to_owned(),
        (totals.ready + totals.in_flight).into(),
    );
    out.insert("dead_letters".to_owned(), totals.dead_lettered.into());
    out.insert("destinations".to_owned(), destinations.into());
    Value::Object(out)
}

fn destination_json(
    api: &Api,
    route: &str,
    d: &DestinationView,
    stage: &Depth,
    dead: &Depth,
    now: Instant,
) -> Value {
    let rate = |what: &str, value: i64| {
        api.rates
            .rate(&format!("route:{route}:{}:{what}", d.index), value, now)
    };
    let delivered = stage.popped - stage.dead_lettered;
    let mut out = match endpoint_json(&d.endpoint) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    out.insert("index".to_owned(), d.index.into());
    out.insert("messages_ready".to_owned(), stage.ready.into());
    out.insert("messages_unacknowledged".to_owned(), stage.in_flight.into());
    out.insert(
        "messages".to_owned(),
        (stage.ready + stage.in_flight).into(),
    );
    out.insert("dead_letters".to_owned(), dead.ready.into());
    out.insert(
        "message_stats".to_owned(),
        json!({
            "staged": stage.pushed,
            "staged_details": details(rate("staged", stage.pushed)),
            "delivered": delivered,
            "delivered_details": details(rate("delivered", delivered)),
            "dead_lettered": stage.dead_lettered,
            "dead_lettered_details": details(rate("dead_lettered", stage.dead_lettered)),
        }),
    );
    Value::Object(out)
}

fn endpoint_json(e: &EndpointView) -> Value {
    let (connection, reason) = match &e.connection {
        Connection::InProcess => ("in_process", None),
        Connection::Up => ("up", None),
        Connection::Down(why) => ("down", Some(why.as_str())),
        Connection::Unknown => ("unknown", None),
    };
    json!({ "endpoint": e.label, "connection": connection, "reason": reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_definition_takes_its_name_from_the_url_and_names_what_is_wrong() {
        let r = definition(
            "r1",
            br#"{"from": {"amqp_exchange": "in"}, "to": [{"kafka_topic": "t"}]}"#,
        )
        .unwrap();
        assert_eq!(r.name, "r1");
        assert_eq!(r.max_attempts, ferry_config::bridge::DEFAULT_MAX_ATTEMPTS);
        let unknown = definition(
            "r1",
            br#"{"from": {"amqp_exchange": "in"}, "to": [], "tx": 1}"#,
        )
        .unwrap_err();
        assert!(
            unknown.reason.contains("unknown field `tx`"),
            "{}",
            unknown.reason
        );
        let other = definition("r1", br#"{"name": "r2"}"#).unwrap_err();
        assert!(other.reason.contains("field 'name'"), "{}", other.reason);
        assert!(
            definition("r1", b"[1]")
                .unwrap_err()
                .reason
                .contains("JSON object")
        );
        assert!(
            definition("r1", b"{")
                .unwrap_err()
                .reason
                .contains("not valid JSON")
        );
    }

    #[test]
    fn count_is_bounded() {
        assert_eq!(count(None).unwrap(), DEFAULT_COUNT);
        assert_eq!(count(Some("count=5")).unwrap(), 5);
        assert!(count(Some("count=0")).is_err());
        assert!(
            count(Some("count=x"))
                .unwrap_err()
                .reason
                .contains("'count'")
        );
    }
}
