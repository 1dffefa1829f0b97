//! The API's refusals, in RabbitMQ's JSON form `{"error": ..., "reason": ...}` with its
//! status codes, and the mapping of the AMQP front's errors onto them (a precondition
//! failure is a 400 whose reason is the AMQP reply text without its code name).

use super::reply::Json;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use ferry_amqp::admin::{AmqpError, ReplyCode};
use serde_json::json;

/// The realm RabbitMQ's basic-auth challenge names.
const REALM: &str = "Basic realm=\"RabbitMQ Management\"";

/// A refused request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// RabbitMQ's `error` word (`bad_request`, `not_authorized`, `Object Not Found`, ...).
    pub error: &'static str,
    /// Why, in words a person can act on.
    pub reason: String,
}

impl ApiError {
    /// 400: the request is malformed or asks for something impossible.
    pub(crate) fn bad_request(reason: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            error: "bad_request",
            reason: reason.into(),
        }
    }

    /// 404, in RabbitMQ's words.
    pub(crate) fn not_found() -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            error: "Object Not Found",
            reason: "Not Found".to_owned(),
        }
    }

    /// 401 `not_authorized`: the login failed.
    pub(crate) fn not_authorized(reason: impl Into<String>) -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            error: "not_authorized",
            reason: reason.into(),
        }
    }

    /// 401 with no body: no credentials were sent (RabbitMQ answers so, with the
    /// challenge).
    pub(crate) fn no_credentials() -> Self {
        Self::not_authorized(String::new())
    }

    /// 401 `not_authorised` (RabbitMQ's British spelling for every refusal after a
    /// successful login): the user may not use the API, this endpoint, the vhost or the
    /// object. RabbitMQ's reasons are short ([`Self::ACCESS_REFUSED`], ...); Ferry uses
    /// the same words, so scripts that match them keep working.
    pub(crate) fn not_authorised(reason: impl Into<String>) -> Self {
        Self {
            status: StatusCode::UNAUTHORIZED,
            error: "not_authorised",
            reason: reason.into(),
        }
    }

    /// RabbitMQ's reason when a permission (configure, write, read) refuses an operation.
    pub(crate) const ACCESS_REFUSED: &'static str = "Access refused.";
    /// RabbitMQ's reason when the user has no permissions in the vhost.
    pub(crate) const VHOST_REFUSED: &'static str = "User not authorised to access virtual host";
    /// RabbitMQ's reason when the object (a connection) belongs to another user.
    pub(crate) const OBJECT_REFUSED: &'static str = "User not authorised to access object";

    /// 409: the object's state forbids the change now (a topic that exists, a consumer
    /// group with members).
    pub(crate) fn conflict(reason: impl Into<String>) -> Self {
        Self {
            status: StatusCode::CONFLICT,
            error: "conflict",
            reason: reason.into(),
        }
    }

    /// 503: another instance must answer (it coordinates the object).
    pub(crate) fn unavailable(reason: impl Into<String>) -> Self {
        Self {
            status: StatusCode::SERVICE_UNAVAILABLE,
            error: "service_unavailable",
            reason: reason.into(),
        }
    }

    /// 500: the store or the front failed.
    pub(crate) fn internal(reason: impl Into<String>) -> Self {
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            error: "internal_server_error",
            reason: reason.into(),
        }
    }
}

impl From<AmqpError> for ApiError {
    fn from(e: AmqpError) -> Self {
        match e.code {
            ReplyCode::NotFound => Self::not_found(),
            ReplyCode::AccessRefused => Self::not_authorised(Self::ACCESS_REFUSED),
            ReplyCode::InternalError => Self::internal(e.text),
            // 406 PRECONDITION_FAILED, 405 RESOURCE_LOCKED, 503 COMMAND_INVALID, ...:
            // RabbitMQ's API answers them all as a bad request in the reply's words.
            _ => Self::bad_request(e.text),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status == StatusCode::UNAUTHORIZED && self.reason.is_empty() {
            return (self.status, [(header::WWW_AUTHENTICATE, REALM)]).into_response();
        }
        let body = Json(json!({"error": self.error, "reason": self.reason}));
        if self.status == StatusCode::UNAUTHORIZED {
            return (self.status, [(header::WWW_AUTHENTICATE, REALM)], body).into_response();
        }
        (self.status, body).into_response()
    }
}

/// What a handler returns.
pub(crate) type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amqp_errors_map_onto_rabbitmqs_statuses() {
        let e: ApiError = AmqpError::precondition_failed("queue 'q' in vhost '/' not empty").into();
        assert_eq!(
            (e.status, e.reason.as_str()),
            (StatusCode::BAD_REQUEST, "queue 'q' in vhost '/' not empty")
        );
        let e: ApiError = AmqpError::not_found("no queue 'q' in vhost '/'").into();
        assert_eq!(e, ApiError::not_found());
        let e: ApiError = AmqpError::access_refused("access to queue 'q' refused").into();
        assert_eq!(
            (e.status, e.error, e.reason.as_str()),
            (
                StatusCode::UNAUTHORIZED,
                "not_authorised",
                "Access refused."
            )
        );
    }
}
