//! `/api/vhosts`: the virtual hosts — those of `amqp.vhosts` in the config and those
//! created here at runtime (kept in the store, served by every instance over it).
//!
//! `PUT` creates a vhost (201; the creating user gets full permissions on it, as
//! RabbitMQ's API gives them) or replaces an existing one's metadata (204): `description`,
//! `tags`, `default_queue_type`. `DELETE` removes a runtime vhost with its queues and their
//! messages, exchanges, bindings and permissions; its connections are closed (320). A
//! vhost of `amqp.vhosts` is removed from the config instead (docs/management.md).

use super::Api;
use super::administrator::{administrator, store_failed};
use super::body::Body;
use super::error::{ApiError, ApiResult};
use super::login::Principal;
use super::queues::{visible_vhost, visible_vhosts};
use super::reply::{Json, put_status};
use super::users::tags_in;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use bytes::Bytes;
use ferry_amqp::admin::{VhostError, VhostMeta};
use ferry_auth::permissions::{Permissions, VhostPermissions};
use serde_json::{Value, json};

/// The fields a `PUT` takes (`name` and `vhost` are accepted as `rabbitmqadmin` sends
/// them, and ignored).
const PUT_FIELDS: &[&str] = &[
    "description",
    "tags",
    "default_queue_type",
    "tracing",
    "name",
    "vhost",
];

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/api/vhosts", get(list))
        .route("/api/vhosts/{name}", get(show).put(put).delete(delete))
}

fn vhost_json(api: &Api, name: &str) -> Value {
    let meta = api.amqp.vhost_registry().meta(name).unwrap_or_default();
    json!({
        "name": name,
        "description": meta.description,
        "tags": meta.tags,
        "default_queue_type": meta.default_queue_type.as_deref().unwrap_or("undefined"),
        "metadata": {"description": meta.description, "tags": meta.tags},
        "tracing": false,
        "cluster_state": { api.node.clone(): "running" },
    })
}

/// `GET /api/vhosts`.
async fn list(State(api): State<Api>, principal: Principal) -> Json<Vec<Value>> {
    Json(
        visible_vhosts(&api, &principal)
            .iter()
            .map(|v| vhost_json(&api, &v.name))
            .collect(),
    )
}

/// `GET /api/vhosts/{name}`.
async fn show(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let vhost = visible_vhost(&api, &principal, &name)?;
    Ok(Json(vhost_json(&api, &vhost.name)))
}

/// The metadata a `PUT` body gives.
fn meta_of(body: &Body) -> ApiResult<VhostMeta> {
    if body.bool("tracing", false)? {
        return Err(ApiError::bad_request(
            "field 'tracing': Ferry has no message tracing (firehose); leave it false",
        ));
    }
    Ok(VhostMeta {
        description: body.string("description")?.unwrap_or_default(),
        tags: tags_in(body.value("tags"))?,
        default_queue_type: body.string("default_queue_type")?,
    })
}

/// `PUT /api/vhosts/{name}`: 201 when created, 204 when its metadata was replaced.
async fn put(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    let meta = meta_of(&Body::parse(&body, PUT_FIELDS)?)?;
    if name.is_empty() {
        return Err(ApiError::bad_request("a vhost needs a name"));
    }
    let existed = api.amqp.vhost_registry().put(&name, &meta).await?;
    if !existed {
        let grant = VhostPermissions {
            vhost: name.clone(),
            user: principal.user.name.clone(),
            permissions: Permissions::full(),
        };
        api.users
            .store()
            .set_permissions(&grant)
            .await
            .map_err(store_failed)?;
    }
    Ok(put_status(existed))
}

/// `DELETE /api/vhosts/{name}`.
async fn delete(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    match api.amqp.vhost_registry().delete(&name).await {
        Ok(true) => {}
        Ok(false) => return Err(ApiError::not_found()),
        Err(VhostError::Configured(_)) => {
            return Err(ApiError::bad_request(format!(
                "vhost '{name}' is in amqp.vhosts of the config; remove it there"
            )));
        }
        Err(VhostError::Amqp(e)) => return Err(e.into()),
    }
    api.users
        .store()
        .clear_vhost(&name)
        .await
        .map_err(store_failed)?;
    Ok(StatusCode::NO_CONTENT)
}
