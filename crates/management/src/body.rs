//! Request bodies: a JSON object read field by field, so a refusal names the field —
//! malformed JSON, a field the request does not take, a value of the wrong type — before
//! anything changes.
//!
//! Values are taken as RabbitMQ takes them: booleans and integers also as the strings
//! `"true"`, `"false"` and `"12"` (`rabbitmqadmin` sends them so). Fields a client sends
//! that only repeat the URL (`name`, `vhost`, ...) are listed by each request as accepted
//! and ignored.

use super::error::{ApiError, ApiResult};
use serde_json::{Map, Value};

/// `bytes` as a JSON object, for a body read whole (e.g. into a typed definition).
///
/// # Errors
/// 400 when it is not JSON or not an object.
pub(crate) fn object(bytes: &[u8]) -> ApiResult<Map<String, Value>> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?;
    match value {
        Value::Object(fields) => Ok(fields),
        _ => Err(ApiError::bad_request("the body must be a JSON object")),
    }
}

/// A request body being read.
#[derive(Debug)]
pub(crate) struct Body {
    fields: Map<String, Value>,
}

impl Body {
    /// Parses `bytes` as a JSON object (an empty body is an empty object) whose fields
    /// are all among `accepted`.
    ///
    /// # Errors
    /// 400 naming what is wrong: not JSON, not an object, or an unknown field.
    pub(crate) fn parse(bytes: &[u8], accepted: &[&str]) -> ApiResult<Self> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self { fields: Map::new() });
        }
        let fields = object(bytes)?;
        if let Some(unknown) = fields.keys().find(|k| !accepted.contains(&k.as_str())) {
            return Err(ApiError::bad_request(format!(
                "unknown field '{unknown}' (this request takes {})",
                accepted.join(", ")
            )));
        }
        Ok(Self { fields })
    }

    /// The value of field `name` as sent, for a field of a shape of its own (a list, a
    /// string or a list).
    pub(crate) fn value(&self, name: &str) -> Option<&Value> {
        self.fields.get(name)
    }

    /// Whether field `name` is present.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.fields.contains_key(name)
    }

    /// The boolean field `name` (`true`, `false`, `"true"`, `"false"`), or `default`.
    ///
    /// # Errors
    /// 400 naming the field when it holds anything else.
    pub(crate) fn bool(&self, name: &str, default: bool) -> ApiResult<bool> {
        match self.fields.get(name) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) if s == "true" => Ok(true),
            Some(Value::String(s)) if s == "false" => Ok(false),
            Some(other) => Err(wrong(name, "true or false", other)),
        }
    }

    /// The non-negative integer field `name` (a number or a string of digits), or
    /// `default`.
    ///
    /// # Errors
    /// 400 naming the field when it holds anything else.
    pub(crate) fn u64(&self, name: &str, default: u64) -> ApiResult<u64> {
        match self.fields.get(name) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Number(n)) if n.as_u64().is_some() => Ok(n.as_u64().unwrap_or(default)),
            Some(Value::String(s)) if s.parse::<u64>().is_ok() => Ok(s.parse().unwrap_or(default)),
            Some(other) => Err(wrong(name, "a non-negative integer", other)),
        }
    }

    /// The string field `name`, if present.
    ///
    /// # Errors
    /// 400 naming the field when it holds anything but a string.
    pub(crate) fn string(&self, name: &str) -> ApiResult<Option<String>> {
        match self.fields.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(wrong(name, "a string", other)),
        }
    }

    /// The string field `name`, which must be present.
    ///
    /// # Errors
    /// 400 naming the field when it is missing or not a string.
    pub(crate) fn required_string(&self, name: &str) -> ApiResult<String> {
        self.string(name)?
            .ok_or_else(|| ApiError::bad_request(format!("field '{name}' is missing")))
    }

    /// The object field `name` (empty when absent).
    ///
    /// # Errors
    /// 400 naming the field when it holds anything but an object.
    pub(crate) fn object(&self, name: &str) -> ApiResult<Map<String, Value>> {
        match self.fields.get(name) {
            None | Some(Value::Null) => Ok(Map::new()),
            Some(Value::Object(o)) => Ok(o.clone()),
            Some(other) => Err(wrong(name, "a JSON object", other)),
        }
    }
}

/// 400: field `name` holds `found` where `expected` belongs.
fn wrong(name: &str, expected: &str, found: &Value) -> ApiError {
    ApiError::bad_request(format!("field '{name}' must be {expected}, not {found}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_read_as_rabbitmq_reads_them() {
        let body = Body::parse(
            br#"{"durable":"true","auto_delete":false,"count":"5","truncate":7,"arguments":{"x":1}}"#,
            &["durable", "auto_delete", "count", "truncate", "arguments"],
        )
        .unwrap();
        assert!(body.bool("durable", false).unwrap());
        assert!(!body.bool("auto_delete", true).unwrap());
        assert!(body.bool("internal", true).unwrap());
        assert_eq!(body.u64("count", 1).unwrap(), 5);
        assert_eq!(body.u64("truncate", 0).unwrap(), 7);
        assert_eq!(body.object("arguments").unwrap().len(), 1);
        assert!(
            Body::parse(b"", &[])
                .unwrap()
                .string("x")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn refusals_name_the_field() {
        let reason =
            |bytes: &[u8], accepted: &[&str]| Body::parse(bytes, accepted).unwrap_err().reason;
        assert!(reason(b"{bad", &[]).starts_with("the body is not valid JSON: "));
        assert_eq!(reason(b"[1]", &[]), "the body must be a JSON object");
        assert_eq!(
            reason(br#"{"durable":true,"foo":1}"#, &["durable"]),
            "unknown field 'foo' (this request takes durable)"
        );
        let body = Body::parse(
            br#"{"durable":"yes","count":-1,"arguments":[]}"#,
            &["durable", "count", "arguments"],
        )
        .unwrap();
        assert_eq!(
            body.bool("durable", false).unwrap_err().reason,
            "field 'durable' must be true or false, not \"yes\""
        );
        assert_eq!(
            body.u64("count", 1).unwrap_err().reason,
            "field 'count' must be a non-negative integer, not -1"
        );
        assert_eq!(
            body.object("arguments").unwrap_err().reason,
            "field 'arguments' must be a JSON object, not []"
        );
        assert_eq!(
            body.required_string("ackmode").unwrap_err().reason,
            "field 'ackmode' is missing"
        );
    }
}
