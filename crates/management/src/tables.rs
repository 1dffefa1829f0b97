//! AMQP field tables as JSON and back, as RabbitMQ's API shows and takes them: arguments,
//! client properties, message headers.
//!
//! To JSON: integers and floats as numbers, strings as strings (long strings that are not
//! UTF-8 as base64), booleans, nested tables and arrays as such, void as `null`,
//! timestamps as their integer seconds, decimals as numbers. From JSON (a declare's
//! `arguments`): integers become signed 64-bit integers, other numbers doubles, strings
//! long strings — the types RabbitMQ's API gives them.

use super::error::{ApiError, ApiResult};
use amq_protocol::types::{AMQPValue, FieldArray, FieldTable};
use base64::Engine as _;
use serde_json::{Map, Number, Value};

/// `table` as a JSON object.
pub(crate) fn to_json(table: &FieldTable) -> Value {
    Value::Object(
        table
            .inner()
            .iter()
            .map(|(k, v)| (k.as_str().to_owned(), value_to_json(v)))
            .collect(),
    )
}

/// One AMQP value as JSON.
pub(crate) fn value_to_json(value: &AMQPValue) -> Value {
    let number = |f: f64| Number::from_f64(f).map_or(Value::Null, Value::Number);
    match value {
        AMQPValue::Boolean(b) => Value::Bool(*b),
        AMQPValue::ShortShortInt(v) => (*v).into(),
        AMQPValue::ShortShortUInt(v) => (*v).into(),
        AMQPValue::ShortInt(v) => (*v).into(),
        AMQPValue::ShortUInt(v) => (*v).into(),
        AMQPValue::LongInt(v) => (*v).into(),
        AMQPValue::LongUInt(v) => (*v).into(),
        AMQPValue::LongLongInt(v) => (*v).into(),
        AMQPValue::Timestamp(v) => (*v).into(),
        AMQPValue::Float(v) => number(f64::from(*v)),
        AMQPValue::Double(v) => number(*v),
        AMQPValue::DecimalValue(d) => number(f64::from(d.value) / 10f64.powi(i32::from(d.scale))),
        AMQPValue::ShortString(s) => Value::String(s.as_str().to_owned()),
        AMQPValue::LongString(s) => match std::str::from_utf8(s.as_bytes()) {
            Ok(text) => Value::String(text.to_owned()),
            Err(_) => Value::String(base64::engine::general_purpose::STANDARD.encode(s.as_bytes())),
        },
        AMQPValue::ByteArray(b) => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(b.as_slice()))
        }
        AMQPValue::FieldArray(a) => Value::Array(a.as_slice().iter().map(value_to_json).collect()),
        AMQPValue::FieldTable(t) => to_json(t),
        AMQPValue::Void => Value::Null,
    }
}

/// The JSON object `object` (the value of field `field`) as a field table.
///
/// # Errors
/// 400 naming the field and key of a value that has no AMQP form (a number too large).
pub(crate) fn from_json(field: &str, object: &Map<String, Value>) -> ApiResult<FieldTable> {
    let mut table = FieldTable::default();
    for (key, value) in object {
        table.insert(key.as_str().into(), value_from_json(field, key, value)?);
    }
    Ok(table)
}

fn value_from_json(field: &str, key: &str, value: &Value) -> ApiResult<AMQPValue> {
    Ok(match value {
        Value::Null => AMQPValue::Void,
        Value::Bool(b) => AMQPValue::Boolean(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => AMQPValue::LongLongInt(i),
            (None, Some(f)) if n.is_f64() => AMQPValue::Double(f),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "field '{field}': '{key}' is {n}, beyond a signed 64-bit integer"
                )));
            }
        },
        Value::String(s) => AMQPValue::LongString(s.as_str().into()),
        Value::Array(items) => {
            let mut array = FieldArray::default();
            for item in items {
                array.push(value_from_json(field, key, item)?);
            }
            AMQPValue::FieldArray(array)
        }
        Value::Object(o) => AMQPValue::FieldTable(from_json(field, o)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_round_trip_through_json() {
        let json = json!({
            "x-max-length": 10,
            "x-dead-letter-exchange": "dlx",
            "x-single-active-consumer": true,
            "ratio": 0.5,
            "list": [1, "a"],
            "nested": {"k": null}
        });
        let table = from_json("arguments", json.as_object().unwrap()).unwrap();
        assert_eq!(
            table.inner().get("x-max-length"),
            Some(&AMQPValue::LongLongInt(10))
        );
        assert_eq!(to_json(&table), json);
    }

    #[test]
    fn client_properties_show_as_rabbitmq_shows_them() {
        let mut caps = FieldTable::default();
        caps.insert("publisher_confirms".into(), AMQPValue::Boolean(true));
        let mut props = FieldTable::default();
        props.insert("product".into(), AMQPValue::LongString("pika".into()));
        props.insert("capabilities".into(), AMQPValue::FieldTable(caps));
        props.insert("small".into(), AMQPValue::ShortShortUInt(7));
        props.insert("raw".into(), AMQPValue::LongString(vec![0xff, 0xfe].into()));
        assert_eq!(
            to_json(&props),
            json!({"product": "pika", "capabilities": {"publisher_confirms": true}, "small": 7, "raw": "//4="})
        );
    }

    #[test]
    fn a_number_beyond_i64_is_refused_by_name() {
        let json = json!({"x-max-length": u64::MAX});
        assert_eq!(
            from_json("arguments", json.as_object().unwrap())
                .unwrap_err()
                .reason,
            format!(
                "field 'arguments': 'x-max-length' is {}, beyond a signed 64-bit integer",
                u64::MAX
            )
        );
    }
}
