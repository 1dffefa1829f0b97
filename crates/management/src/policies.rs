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
use axum::extract::{RawPathParams, State};
use axum::routing::{MethodRouter, get};
use serde_json::Value;

/// Why a policy is refused.
const NO_POLICIES: &str = "Ferry does not apply policies: give a queue its settings as \
    arguments when it is declared (x-message-ttl, x-max-length, x-dead-letter-exchange, …)";
/// Why a runtime parameter is refused.
const NO_PARAMETERS: &str = "Ferry has no runtime parameters: a shovel is a route of \
    Ferry's bridge (/api/ferry/routes, or [[routes]] in the configuration)";

/// The three families, which differ only in who may see them and why setting one is
/// refused.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// `/api/policies`: any management user sees them; `policymaker` sets them.
    Policies,
    /// `/api/operator-policies`: administrators only.
    OperatorPolicies,
    /// `/api/parameters`: `policymaker` (or administrator).
    Parameters,
}

impl Kind {
    /// Refuses a user who may not see this family.
    fn may_see(self, principal: &Principal) -> ApiResult<()> {
        match self {
            Self::Policies => Ok(()),
            Self::OperatorPolicies => administrator(principal),
            Self::Parameters => policymaker(principal),
        }
    }

    /// Refuses a user who may not set one of this family.
    fn may_set(self, principal: &Principal) -> ApiResult<()> {
        match self {
            Self::Policies | Self::Parameters => policymaker(principal),
            Self::OperatorPolicies => administrator(principal),
        }
    }

    /// Why setting one is refused.
    fn refusal(self) -> &'static str {
        match self {
            Self::Policies | Self::OperatorPolicies => NO_POLICIES,
            Self::Parameters => NO_PARAMETERS,
        }
    }

    /// `GET` of a list (of every vhost's, a component's or one vhost's): empty.
    fn list(self) -> MethodRouter<Api> {
        get(
            move |State(api): State<Api>, principal: Principal, params: RawPathParams| async move {
                self.may_see(&principal)?;
                if let Some(vhost) = vhost(&params) {
                    usable_vhost(&api, &principal, &vhost)?;
                }
                Ok::<_, ApiError>(Json(Vec::<Value>::new()))
            },
        )
    }

    /// One named object: `GET` and `DELETE` find none (404), `PUT` is refused (400).
    fn one(self) -> MethodRouter<Api> {
        let missing = move |State(api): State<Api>, principal: Principal, params: RawPathParams| async move {
            self.may_see(&principal)
                .and_then(|()| usable_vhost(&api, &principal, &vhost(&params).unwrap_or_default()))
                .err()
                .unwrap_or_else(ApiError::not_found)
        };
        let set = move |State(api): State<Api>, principal: Principal, params: RawPathParams| async move {
            self.may_see(&principal)
                .and_then(|()| usable_vhost(&api, &principal, &vhost(&params).unwrap_or_default()))
                .and_then(|()| self.may_set(&principal))
                .err()
                .unwrap_or_else(|| ApiError::bad_request(self.refusal()))
        };
        get(missing).delete(missing).put(set)
    }
}

/// The routes of this family.
pub(crate) fn routes() -> Router<Api> {
    use Kind::{OperatorPolicies, Parameters, Policies};
    Router::new()
        .route("/api/policies", Policies.list())
        .route("/api/policies/{vhost}", Policies.list())
        .route("/api/policies/{vhost}/{name}", Policies.one())
        .route("/api/operator-policies", OperatorPolicies.list())
        .route("/api/operator-policies/{vhost}", OperatorPolicies.list())
        .route(
            "/api/operator-policies/{vhost}/{name}",
            OperatorPolicies.one(),
        )
        .route("/api/parameters", Parameters.list())
        .route("/api/parameters/{component}", Parameters.list())
        .route("/api/parameters/{component}/{vhost}", Parameters.list())
        .route(
            "/api/parameters/{component}/{vhost}/{name}",
            Parameters.one(),
        )
}

/// The `{vhost}` of a request's path, if it has one.
fn vhost(params: &RawPathParams) -> Option<String> {
    params
        .iter()
        .find(|(key, _)| *key == "vhost")
        .map(|(_, value)| value.to_owned())
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
