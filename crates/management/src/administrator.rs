//! What the administrators' endpoints (users, permissions, definitions) and the
//! monitoring ones (Kafka, routes) share: the refusal of anyone else, in RabbitMQ's words,
//! and store failures as a 500.

use super::error::{ApiError, ApiResult};
use super::login::Principal;

/// Refuses a user who is not an administrator, with RabbitMQ's answer.
///
/// # Errors
/// 401 "Not administrator user".
pub(crate) fn administrator(principal: &Principal) -> ApiResult<()> {
    if principal.access.is_administrator() {
        return Ok(());
    }
    Err(ApiError::not_authorised("Not administrator user"))
}

/// Refuses a user who is neither `monitoring` nor `administrator`, as RabbitMQ refuses
/// its monitoring-only endpoints.
///
/// # Errors
/// 401 "Not monitor user".
pub(crate) fn monitor(principal: &Principal) -> ApiResult<()> {
    if principal.access.is_monitoring() {
        return Ok(());
    }
    Err(ApiError::not_authorised("Not monitor user"))
}

/// A store failure as a 500 (its text names no secret).
pub(crate) fn store_failed(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal(e.to_string())
}
