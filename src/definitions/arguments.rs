//! Declaration arguments between JSON and AMQP field tables, with the types RabbitMQ's
//! definitions give them: integers as signed 64-bit integers, other numbers as doubles,
//! strings as long strings, lists as arrays, objects as tables, `null` as void.

use amq_protocol::types::{AMQPValue, FieldArray, FieldTable, LongString, ShortString};
use serde_json::{Map, Number, Value};

/// `object` as a field table.
///
/// # Errors
/// The key of a number that has no AMQP form (an integer beyond the signed 64-bit range).
pub fn to_table(object: &Map<String, Value>) -> Result<FieldTable, String> {
    let mut table = FieldTable::default();
    for (key, value) in object {
        table.insert(
            ShortString::from(key.clone()),
            to_value(value).map_err(|()| key.clone())?,
        );
    }
    Ok(table)
}

fn to_value(value: &Value) -> Result<AMQPValue, ()> {
    Ok(match value {
        Value::Null => AMQPValue::Void,
        Value::Bool(b) => AMQPValue::Boolean(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => AMQPValue::LongLongInt(i),
            (None, Some(f)) if !n.is_u64() => AMQPValue::Double(f),
            _ => return Err(()),
        },
        Value::String(s) => AMQPValue::LongString(LongString::from(s.clone())),
        Value::Array(items) => AMQPValue::FieldArray(FieldArray::from(
            items.iter().map(to_value).collect::<Result<Vec<_>, ()>>()?,
        )),
        Value::Object(o) => AMQPValue::FieldTable(to_table(o).map_err(|_| ())?),
    })
}

/// `table` as a JSON object.
pub fn to_json(table: &FieldTable) -> Map<String, Value> {
    table
        .inner()
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), value_to_json(v)))
        .collect()
}

fn value_to_json(value: &AMQPValue) -> Value {
    let float = |f: f64| Number::from_f64(f).map_or(Value::Null, Value::Number);
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
        AMQPValue::Float(v) => float(f64::from(*v)),
        AMQPValue::Double(v) => float(*v),
        AMQPValue::DecimalValue(d) => float(f64::from(d.value) / 10f64.powi(i32::from(d.scale))),
        AMQPValue::ShortString(s) => Value::String(s.as_str().to_owned()),
        AMQPValue::LongString(s) => {
            Value::String(String::from_utf8_lossy(s.as_bytes()).into_owned())
        }
        AMQPValue::ByteArray(b) => {
            Value::String(String::from_utf8_lossy(b.as_slice()).into_owned())
        }
        AMQPValue::FieldArray(a) => Value::Array(a.as_slice().iter().map(value_to_json).collect()),
        AMQPValue::FieldTable(t) => Value::Object(to_json(t)),
        AMQPValue::Void => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_round_trip_with_rabbitmqs_types() {
        let json = serde_json::json!({"x-max-priority": 5, "ratio": 0.5, "x-dead-letter-exchange": "dlx", "on": true, "list": [1, "a"], "nested": {"k": null}});
        let table = to_table(json.as_object().unwrap()).unwrap();
        assert_eq!(
            table
                .inner()
                .get(&ShortString::from("x-max-priority".to_owned())),
            Some(&AMQPValue::LongLongInt(5))
        );
        assert_eq!(Value::Object(to_json(&table)), json);
        let huge = serde_json::json!({"big": u64::MAX});
        assert_eq!(to_table(huge.as_object().unwrap()).unwrap_err(), "big");
    }
}
