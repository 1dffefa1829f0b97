//! Answers and query strings: [`Json`] sends a value as `application/json` (Ferry's axum
//! has no JSON feature: this is all the API needs of one), and [`Flags`] reads the
//! `?if-empty=true` kind of query parameter.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// A JSON answer.
#[derive(Debug, Clone)]
pub(crate) struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        match serde_json::to_vec(&self.0) {
            Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
            Err(e) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the answer cannot be written as JSON: {e}"),
            )
                .into_response(),
        }
    }
}

/// The boolean parameters of a query string.
#[derive(Debug, Clone, Default)]
pub(crate) struct Flags {
    set: Vec<String>,
}

impl Flags {
    /// The parameters of `query` (the part after `?`) whose value is `true`.
    pub(crate) fn parse(query: Option<&str>) -> Self {
        let set = form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .filter(|(_, value)| value == "true")
            .map(|(name, _)| name.into_owned())
            .collect();
        Self { set }
    }

    /// Whether `name=true` was given.
    pub(crate) fn on(&self, name: &str) -> bool {
        self.set.iter().any(|s| s == name)
    }
}

/// The status of a `PUT`, as RabbitMQ answers it: 201 when it created the object, 204 when
/// the object was there already.
pub(crate) fn put_status(existed: bool) -> StatusCode {
    if existed {
        StatusCode::NO_CONTENT
    } else {
        StatusCode::CREATED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_true_flags_are_on() {
        let flags = Flags::parse(Some("if-empty=true&if-unused=false&columns=name"));
        assert!(flags.on("if-empty"));
        assert!(!flags.on("if-unused") && !flags.on("columns"));
        assert!(!Flags::parse(None).on("if-empty"));
    }
}
