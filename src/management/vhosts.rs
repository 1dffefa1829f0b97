//! `/api/vhosts`: the virtual hosts, which are `amqp.vhosts` of the config.
//!
//! They are configuration, not runtime objects: `PUT` of a configured vhost succeeds
//! (204, nothing changes), `PUT` of another and `DELETE` are refused with a 400 that says
//! to change `amqp.vhosts` instead (docs/management.md).

use super::Api;
use super::administrator::administrator;
use super::error::{ApiError, ApiResult};
use super::login::Principal;
use super::queues::{visible_vhost, visible_vhosts};
use super::reply::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use serde_json::{Value, json};

/// The routes of this family.
pub fn routes() -> Router<Api> {
    Router::new()
        .route("/api/vhosts", get(list))
        .route("/api/vhosts/{name}", get(show).put(put).delete(delete))
}

fn vhost_json(api: &Api, name: &str) -> Value {
    json!({
        "name": name,
        "description": "",
        "tags": [],
        "metadata": {"description": "", "tags": []},
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

/// `PUT /api/vhosts/{name}`.
async fn put(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    match api.amqp.vhost(&name) {
        Some(_) => Ok(StatusCode::NO_CONTENT),
        None => Err(ApiError::bad_request(format!(
            "vhost '{name}' cannot be created here: Ferry's vhosts are amqp.vhosts in the config"
        ))),
    }
}

/// `DELETE /api/vhosts/{name}`.
async fn delete(
    State(api): State<Api>,
    principal: Principal,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    administrator(&principal)?;
    api.amqp.vhost(&name).ok_or_else(ApiError::not_found)?;
    Err(ApiError::bad_request(format!(
        "vhost '{name}' cannot be deleted here: Ferry's vhosts are amqp.vhosts in the config"
    )))
}
