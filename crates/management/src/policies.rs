//! Policies, operator policies and runtime parameters, which Ferry does not have: the
//! lists are empty (so tools that poll them see nothing to act on), one named object is
//! 404, and setting one is refused with what to do instead — a policy Ferry accepted but
//! did not apply would change nothing while saying it had (docs/management.md).
//!
//! What RabbitMQ users set through policies, Ferry takes as queue arguments (`x-…` at
//! declare); what they set as `shovel` parameters, Ferry's routes do
//! (`/api/ferry/routes`).

use super::Api;
use super::administrator::administrator;
use super::error::{ApiError, ApiResult};
use super::login::Principal;
use super::reply::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use serde_json::Value;

/// Why a policy is refused.
const NO_POLICIES: &str = "Ferry does not apply policies: give a queue its settings as \
    arguments when it is declared (x-message-ttl, x-max-length, x-dead-letter-exchange, …)";
/// Why a runtime parameter is refused.
const NO_PARAMETERS: &str = "Ferry has no runtime parameters: a shovel is a route of \
    Ferry's bridge (/api/ferry/routes, or [[routes]] in the configuration)";

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    Router::new()
        .route("/api/policies", get(no_policies))
        .route("/api/policies/{vhost}", get(no_policies_in))
        .route(
            "/api/policies/{vhost}/{name}",
            get(no_policy).put(refuse_policy).delete(no_policy),
        )
        .route("/api/operator-policies", get(no_operator_policies))
        .route(
            "/api/operator-policies/{vhost}",
            get(no_operator_policies_in),
        )
        .route(
            "/api/operator-policies/{vhost}/{name}",
            get(no_operator_policy)
                .put(refuse_operator_policy)
                .delete(no_operator_policy),
        )
        .route("/api/parameters", get(no_parameters))
        .route("/api/parameters/{component}", get(no_parameters))
        .route("/api/parameters/{component}/{vhost}", get(no_parameters_in))
        .route(
            "/api/parameters/{component}/{vhost}/{name}",
            get(no_parameter).put(refuse_parameter).delete(no_parameter),
        )
}

/// The vhost `name`, which `principal` may use: 404 for a missing one, 401 for one it has
/// no permissions in (administrators may use every vhost).
fn usable_vhost(api: &Api, principal: &Principal, name: &str) -> ApiResult<()> {
    if api.amqp.vhost(name).is_none() {
        return Err(ApiError::not_found());
    }
    if !principal.access.is_administrator() {
        principal.permissions(name)?;
    }
    Ok(())
}

/// Refuses a user who is neither `policymaker` nor `administrator`.
fn policymaker(principal: &Principal) -> ApiResult<()> {
    if principal.access.is_policymaker() {
        Ok(())
    } else {
        Err(ApiError::not_authorised(ApiError::OBJECT_REFUSED))
    }
}

/// `GET /api/policies`.
async fn no_policies(_: Principal) -> Json<Vec<Value>> {
    Json(Vec::new())
}

/// `GET /api/policies/{vhost}`.
async fn no_policies_in(
    State(api): State<Api>,
    principal: Principal,
    Path(vhost): Path<String>,
) -> ApiResult<Json<Vec<Value>>> {
    usable_vhost(&api, &principal, &vhost)?;
    Ok(Json(Vec::new()))
}

/// `GET` or `DELETE /api/policies/{vhost}/{name}`: there is none.
async fn no_policy(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, _)): Path<(String, String)>,
) -> ApiError {
    usable_vhost(&api, &principal, &vhost)
        .err()
        .unwrap_or_else(ApiError::not_found)
}

/// `PUT /api/policies/{vhost}/{name}`.
async fn refuse_policy(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, _)): Path<(String, String)>,
) -> ApiError {
    usable_vhost(&api, &principal, &vhost)
        .and_then(|()| policymaker(&principal))
        .err()
        .unwrap_or_else(|| ApiError::bad_request(NO_POLICIES))
}

/// `GET /api/operator-policies`.
async fn no_operator_policies(principal: Principal) -> ApiResult<Json<Vec<Value>>> {
    administrator(&principal)?;
    Ok(Json(Vec::new()))
}

/// `GET /api/operator-policies/{vhost}`.
async fn no_operator_policies_in(
    State(api): State<Api>,
    principal: Principal,
    Path(vhost): Path<String>,
) -> ApiResult<Json<Vec<Value>>> {
    administrator(&principal)?;
    usable_vhost(&api, &principal, &vhost)?;
    Ok(Json(Vec::new()))
}

/// `GET` or `DELETE /api/operator-policies/{vhost}/{name}`: there is none.
async fn no_operator_policy(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, _)): Path<(String, String)>,
) -> ApiError {
    administrator(&principal)
        .and_then(|()| usable_vhost(&api, &principal, &vhost))
        .err()
        .unwrap_or_else(ApiError::not_found)
}

/// `PUT /api/operator-policies/{vhost}/{name}`.
async fn refuse_operator_policy(
    State(api): State<Api>,
    principal: Principal,
    Path((vhost, _)): Path<(String, String)>,
) -> ApiError {
    administrator(&principal)
        .and_then(|()| usable_vhost(&api, &principal, &vhost))
        .err()
        .unwrap_or_else(|| ApiError::bad_request(NO_POLICIES))
}

/// `GET /api/parameters` and `/api/parameters/{component}`.
async fn no_parameters(principal: Principal) -> ApiResult<Json<Vec<Value>>> {
    policymaker(&principal)?;
    Ok(Json(Vec::new()))
}

/// `GET /api/parameters/{component}/{vhost}`.
async fn no_parameters_in(
    State(api): State<Api>,
    principal: Principal,
    Path((_, vhost)): Path<(String, String)>,
) -> ApiResult<Json<Vec<Value>>> {
    policymaker(&principal)?;
    usable_vhost(&api, &principal, &vhost)?;
    Ok(Json(Vec::new()))
}

/// `GET` or `DELETE /api/parameters/{component}/{vhost}/{name}`: there is none.
async fn no_parameter(
    State(api): State<Api>,
    principal: Principal,
    Path((_, vhost, _)): Path<(String, String, String)>,
) -> ApiError {
    policymaker(&principal)
        .and_then(|()| usable_vhost(&api, &principal, &vhost))
        .err()
        .unwrap_or_else(ApiError::not_found)
}

/// `PUT /api/parameters/{component}/{vhost}/{name}`.
async fn refuse_parameter(
    State(api): State<Api>,
    principal: Principal,
    Path((_, vhost, _)): Path<(String, String, String)>,
) -> ApiError {
    policymaker(&principal)
        .and_then(|()| usable_vhost(&api, &principal, &vhost))
        .err()
        .unwrap_or_else(|| ApiError::bad_request(NO_PARAMETERS))
}
