//! `/api/queues`: list, show, declare (PUT) and delete queues, with their depths,
//! consumers and message statistics in RabbitMQ's fields.
//!
//! Depths and message counts are the stage's counters, read from the store (every
//! instance answers the same); `consumers` counts this instance's. `message_stats`:
//! `publish` is every message stored in the queue, `ack` every message removed from it
//! (acknowledged, taken without ack, expired, dead-lettered), `deliver_get` and `deliver`
//! the removed plus the ones delivered and not yet acknowledged; each with its rate.

use super::body::Body;
use super::error::{ApiError, ApiResult};
use super::login::Principal;
use super::reply::Flags;
use super::reply::{Json, put_status};
use super::{Api, tables};
use axum::Router;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::routing::get;
use bytes::Bytes;
use ferry_amqp::admin::Authorize;
use ferry_amqp::admin::NO_CONNECTION;
use ferry_amqp::admin::{Queue, QueueSpec, VHost};
use ferry_amqp::admin::{QueueArgs, QueueType};
use ferry_auth::access::{Resource, VhostAccess};
use ferry_auth::permissions::Access;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use std::time::Instant;

/// The fields a queue declaration takes (`name`, `vhost`, `node` are accepted as
/// `rabbitmqadmin` sends them, and ignored).
const DECLARE_FIELDS: &[&str] = &[
    "durable",
    "auto_delete",
    "arguments",
    "name",
    "vhost",
    "node",
];

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/api/queues", get(list_all))
        .route("/api/queues/{vhost}", get(list_vhost))
        .route(
            "/api/queues/{vhost}/{name}",
            get(show).put(declare).delete(delete),
        )
}

/// The vhost `name` if `principal` may see it; 404 otherwise (as for a missing one).
///
/// # Errors
/// 404.
pub(crate) fn visible_vhost(api: &Api, principal: &Principal, name: &str) -> ApiResult<Arc<VHost>> {
    match api.amqp.vhost(name) {
        Some(v) if principal.access.sees_vhost(name) => Ok(v),
        _ => Err(ApiError::not_found()),
    }
}

/// The vhost `name` with `principal`'s permissions there, to change its objects.
///
/// # Errors
/// 404 for a vhost it cannot see, 401 for one it has no permissions in.
pub(crate) fn changeable_vhost(
    api: &Api,
    principal: &Principal,
    name: &str,
) -> ApiResult<(Arc<VHost>, VhostAccess)> {
    let vhost = visible_vhost(api, principal, name)?;
    let permissions = principal.permissions(name)?.clone();
    Ok((vhost, permissions))
}

/// Whether `permissions` allow `access` to `resource`, as the AMQP front asks.
///
/// # Errors
/// 401 in RabbitMQ's words.
pub(crate) fn check(
    permissions: &VhostAccess,
    access: Access,
    resource: Resource<'_>,
) -> ApiResult<()> {
    Authorize::check(permissions, access, resource).map_err(ApiError::from)
}

/// Every vhost `principal` may see.
pub(crate) fn visible_vhosts(api: &Api, principal: &Principal) -> Vec<Arc<VHost>> {
    api.amqp
        .vhosts()
        .into_iter()
        .filter(|v| principal.access.sees_vhost(&v.name))
        .collect()
}

/// The queue `name` of `vhost`.
///
/// # Errors
/// 404 when it does not exist.
pub(crate) fn find(vhost: &VHost, name: &str) -> ApiResult<Arc<Queue>> {
    vhost
        .topology()
        .queues
        .get(name)
        .cloned()
        .ok_or_else(ApiError::not_found)
}

/// `{"rate": r}`.
pub(crate) fn details(rate: f64) -> Value {
    json!({ "rate": rate })
}

/// A queue's counters as RabbitMQ's API shows them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Counts {
    /// Ready messages.
    pub ready: i64,
    /// Delivered, not yet acknowledged.
    pub unacked: i64,
    /// Ever stored.
    pub publish: i64,
    /// Ever removed.
    pub ack: i64,
}

impl Counts {
    /// The queue's counters, read from the store.
    ///
    /// # Errors
    /// 500 when the store fails.
    pub(crate) async fn of(queue: &Queue) -> ApiResult<Self> {
        let depth = queue
            .stage
            .depth()
            .await
            .map_err(|e| ApiError::internal(format!("cannot read a queue's depth: {e}")))?;
        Ok(Self {
            ready: depth.ready.max(0),
            unacked: depth.in_flight.max(0),
            publish: depth.pushed,
            ack: depth.popped,
        })
    }

    /// Adds `other`'s counts (totals over queues).
    pub(crate) fn add(&mut self, other: &Self) {
        self.ready += other.ready;
        self.unacked += other.unacked;
        self.publish += other.publish;
        self.ack += other.ack;
    }

    /// Records every count as a reading of its rate under `key`, answering nothing (the
    /// sampler's reading).
    pub(crate) fn record(&self, api: &Api, key: &str, now: Instant) {
        let rate = rates_under(api, key, now);
        self.depth_fields(&rate);
        self.message_stats(&rate);
    }

    /// Delivered or fetched, first deliveries only.
    pub(crate) fn deliver_get(&self) -> i64 {
        self.ack + self.unacked
    }

    /// The count RabbitMQ's API calls `name` ([`DEPTH`] and [`MESSAGES`]).
    pub(crate) fn value(&self, name: &str) -> i64 {
        match name {
            "messages" => self.ready + self.unacked,
            "messages_ready" => self.ready,
            "messages_unacknowledged" => self.unacked,
            "publish" => self.publish,
            "deliver_get" | "deliver" => self.deliver_get(),
            "ack" => self.ack,
            _ => 0,
        }
    }

    /// `messages`, `messages_ready`, `messages_unacknowledged` with their rates, `rate`
    /// giving each count's from its name and value.
    pub(crate) fn depth_fields(&self, rate: &dyn Fn(&str, i64) -> f64) -> Map<String, Value> {
        let mut out = Map::new();
        self.fields(&DEPTH, rate, &mut out);
        out
    }

    /// `message_stats` with each count's rate, as [`Self::depth_fields`].
    pub(crate) fn message_stats(&self, rate: &dyn Fn(&str, i64) -> f64) -> Value {
        let mut stats = Map::new();
        self.fields(&MESSAGES, rate, &mut stats);
        Value::Object(stats)
    }

    /// Each count of `names` and its `_details` rate into `out`.
    fn fields(
        &self,
        names: &[&str],
        rate: &dyn Fn(&str, i64) -> f64,
        out: &mut Map<String, Value>,
    ) {
        for name in names {
            let value = self.value(name);
            out.insert((*name).to_owned(), value.into());
            out.insert(format!("{name}_details"), details(rate(name, value)));
        }
    }
}

/// The depth counts of a queue or a total, by RabbitMQ's names.
const DEPTH: [&str; 3] = ["messages", "messages_ready", "messages_unacknowledged"];

/// The message counts of `message_stats`, by RabbitMQ's names.
const MESSAGES: [&str; 4] = ["publish", "deliver_get", "deliver", "ack"];

/// The rates of counters read under `key` (`key/NAME` each): each reading is recorded.
pub(crate) fn rates_under<'a>(
    api: &'a Api,
    key: &'a str,
    now: Instant,
) -> impl Fn(&str, i64) -> f64 + 'a {
    move |name, value| api.rates.rate(&format!("{key}/{name}"), value, now)
}

/// The key of `queue`'s rates.
pub(crate) fn queue_key(queue: &Queue) -> String {
    format!("queue/{}", queue.stage.id())
}

/// One queue as RabbitMQ's API shows it.
///
/// # Errors
/// 500 when the store fails.
pub(crate) async fn queue_json(api: &Api, queue: &Queue) -> ApiResult<Value> {
    let counts = Counts::of(queue).await?;
    let now = Instant::now();
    let key = queue_key(queue);
    let mut arguments = amq_protocol::types::FieldTable::default();
    queue.spec.args.write_into(&mut arguments);
    let kind = match queue.spec.args.queue_type {
        QueueType::Quorum => "quorum",
        _ => "classic",
    };
    let mut out = json!({
        "name": queue.name,
        "vhost": queue.vhost,
        "durable": queue.spec.durable,
        "auto_delete": queue.spec.auto_delete,
        "exclusive": queue.spec.exclusive_owner.is_some(),
        "arguments": tables::to_json(&arguments),
        "type": kind,
        "state": "running",
        "node": api.node,
        "consumers": queue.consumers(),
        "policy": null,
        "exclusive_consumer_tag": null,
        "message_stats": counts.message_stats(&rates_under(api, &key, now)),
    });
    if let Value::Object(fields) = &mut out {
        fields.extend(counts.depth_fields(&rates_under(api, &key, now)));
    }
    Ok(out)
}

async fn list(api: &Api, vhosts: Vec<Arc<VHost>>) -> ApiResult<Json<Vec<Value>>> {
    let mut out = Vec::new();
    for vhost in vhosts {
        let mut queues = vhost.queues();
        queues.sort_by(|a, b| a.name.cmp(&b.name));
        for queue in queues {
            out.push(queue_json(api, &queue).await?);
        }
    }
    Ok(Json(out))
}

/// `GET /api/queues`.
async fn list_all(State(api): State<Api>, principal: Principal) -> ApiResult<Json<Vec<Value>>> {
    let vhosts = visible_vhosts(&api, &principal);
    list(&api, vhosts).await
}

/// `GET /api/queues/{vhost}`.
async fn list_vhost(
    State(api): State<Api>,
    principal: Principal,
    Path(vhost): Path<String>,
) -> ApiResult<Json<Vec<Value>>> {
    let vhost = visible_vhost(&api, &principal, &vhost)?;
    list(&api, vec![vhost]).await
}

/// `GET /api/queues/{vhost}/{name}`.
async fn show(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let vhost = visible_vhost(&api, &principal, &vhost)?;
    let queue = find(&vhost, &name)?;
    Ok(Json(queue_json(&api, &queue).await?))
}

/// `PUT /api/queues/{vhost}/{name}`: declares the queue (201), or finds it declared alike
/// (204); an inequivalent redeclare is a 400 in RabbitMQ's words.
async fn declare(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, name)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let (vhost, permissions) = changeable_vhost(&api, &principal, &vhost)?;
    let body = Body::parse(&body, DECLARE_FIELDS)?;
    let durable = body.bool("durable", false)?;
    let auto_delete = body.bool("auto_delete", false)?;
    let arguments = tables::from_json("arguments", &body.object("arguments")?)?;
    if name.is_empty() {
        return Err(ApiError::bad_request(
            "a queue declared through the API needs a name",
        ));
    }
    let spec = QueueSpec {
        durable,
        exclusive_owner: None,
        auto_delete,
        args: QueueArgs::parse(&arguments)?,
        owner: if durable {
            0
        } else {
            api.amqp.transient_owner()
        },
    };
    let existed = vhost.topology().queues.contains_key(&name);
    vhost
        .declare_queue(&name, spec, false, NO_CONNECTION, &permissions)
        .await?;
    Ok(put_status(existed))
}

/// `DELETE /api/queues/{vhost}/{name}` with `if-empty` and `if-unused`.
async fn delete(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, name)): Path<(String, String)>,
    RawQuery(query): RawQuery,
) -> ApiResult<StatusCode> {
    let (vhost, permissions) = changeable_vhost(&api, &principal, &vhost)?;
    find(&vhost, &name)?;
    check(&permissions, Access::Configure, Resource::Queue(&name))?;
    let flags = Flags::parse(query.as_deref());
    vhost
        .delete_queue(
            &name,
            flags.on("if-unused"),
            flags.on("if-empty"),
            NO_CONNECTION,
        )
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
