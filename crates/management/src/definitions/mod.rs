//! Definitions: RabbitMQ's JSON of users, virtual hosts, permissions and topology, and
//! `/api/definitions` and `/api/definitions/{vhost}` that export (GET) and import (POST)
//! it — administrators only, as in RabbitMQ. An import applies completely or not at all
//! (one store transaction); a refused one is a 400 naming the field and reason, with
//! nothing changed (`docs/management.md`).
//!
//! - [`model`]: the JSON's serde types, exactly RabbitMQ 3.x's fields;
//! - [`import`]: checking a document, then writing it all in one transaction;
//! - [`export`]: the document of what the store holds;
//! - [`ferry`]: the document's `ferry` section (Kafka topics, ACLs, committed offsets,
//!   runtime routes), exported and imported through the fronts' own operations;
//! - this module: the routes.
//!
//! Declaration arguments go between JSON and field tables as the rest of the API's do
//! ([`super::tables`]).

pub mod export;
mod ferry;
pub mod import;
pub mod model;

pub use export::{export_all, export_vhost, user_definition};
pub use import::{ImportError, Imported, Target};
pub use model::Definitions;

use crate::Api;
use crate::administrator::{administrator, store_failed};
use crate::error::{ApiError, ApiResult};
use crate::login::Principal;
use crate::overview::COMPATIBLE_RABBITMQ_VERSION;
use crate::reply::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::get;
use bytes::Bytes;

/// The routes of this family.
pub fn routes() -> Router<Api> {
    Router::new()
        .route("/api/definitions", get(export).post(import))
        .route("/api/definitions/{vhost}", get(export_one).post(import_one))
}

/// `GET /api/definitions`.
async fn export(State(api): State<Api>, principal: Principal) -> ApiResult<Json<Definitions>> {
    administrator(&principal)?;
    let mut all = export_all(
        api.users.store(),
        api.amqp.vhost_registry(),
        COMPATIBLE_RABBITMQ_VERSION,
    )
    .await
    .map_err(store_failed)?;
    all.ferry = Some(ferry::export(&api).await?);
    Ok(Json(all))
}

/// `GET /api/definitions/{vhost}`.
async fn export_one(
    State(api): State<Api>,
    principal: Principal,
    Path(vhost): Path<String>,
) -> ApiResult<Json<Definitions>> {
    administrator(&principal)?;
    let vhost = api.amqp.vhost(&vhost).ok_or_else(ApiError::not_found)?;
    Ok(Json(export_vhost(&vhost, COMPATIBLE_RABBITMQ_VERSION)))
}

/// `POST /api/definitions`: 204 when imported.
async fn import(
    State(api): State<Api>,
    principal: Principal,
    body: Bytes,
) -> ApiResult<StatusCode> {
    imported(&api, &principal, &body, None).await
}

/// `POST /api/definitions/{vhost}`: the topology of the document into `vhost`.
async fn import_one(
    State(api): State<Api>,
    principal: Principal,
    Path(vhost): Path<String>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    imported(&api, &principal, &body, Some(&vhost)).await
}

async fn imported(
    api: &Api,
    principal: &Principal,
    body: &[u8],
    only_vhost: Option<&str>,
) -> ApiResult<StatusCode> {
    administrator(principal)?;
    let mut definitions: Definitions = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(if e.is_data() {
            format!("the definitions are not RabbitMQ's definitions JSON: {e}")
        } else {
            format!("the body is not valid JSON: {e}")
        })
    })?;
    let ferry = match (definitions.ferry.take(), only_vhost) {
        (Some(_), Some(vhost)) => {
            return Err(ApiError::bad_request(format!(
                "ferry: Kafka topics, ACLs, offsets and routes belong to no virtual host; \
                 import them with POST /api/definitions, not into '{vhost}'"
            )));
        }
        (Some(section), None) => Some(ferry::check(api, section).await?),
        (None, _) => None,
    };
    let target = Target {
        users: api.users.store(),
        vhosts: api.amqp.vhost_registry(),
        transient_owner: api.amqp.transient_owner(),
    };
    match target.import(definitions, only_vhost).await {
        Ok(_) => {}
        Err(ImportError::Refused(reason)) => return Err(ApiError::bad_request(reason)),
        Err(e @ ImportError::Failed(_)) => return Err(ApiError::internal(e.to_string())),
    }
    if let Some(checked) = ferry {
        ferry::apply(api, checked).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}
