//! One AMQP field value as Kafka header bytes and back.
//!
//! Strings and byte arrays travel as their raw bytes, numbers, booleans, decimals and
//! timestamps as decimal text (readable by any Kafka consumer), nested tables and arrays in
//! AMQP's own wire encoding, and `void` as a null header value. The value's AMQP type
//! letter (RabbitMQ's: `I` for a 32-bit int, `F` for a table, …) is what the bytes alone do
//! not say; the mapping carries it separately.

use amq_protocol::types::generation::{gen_field_array, gen_field_table};
use amq_protocol::types::parsing::{parse_field_array, parse_field_table};
use amq_protocol::types::{AMQPType, AMQPValue, ByteArray, DecimalValue, LongString, ShortString};

/// The type letter of `value` (RabbitMQ's field-table type codes).
pub fn type_of(value: &AMQPValue) -> char {
    value.get_type().get_id()
}

/// The Kafka header bytes of `value` (`None` for `void`).
pub fn encode(value: &AMQPValue) -> Option<Vec<u8>> {
    let text = |s: String| Some(s.into_bytes());
    match value {
        AMQPValue::Boolean(b) => text(b.to_string()),
        AMQPValue::ShortShortInt(i) => text(i.to_string()),
        AMQPValue::ShortShortUInt(u) => text(u.to_string()),
        AMQPValue::ShortInt(i) => text(i.to_string()),
        AMQPValue::ShortUInt(u) => text(u.to_string()),
        AMQPValue::LongInt(i) => text(i.to_string()),
        AMQPValue::LongUInt(u) => text(u.to_string()),
        AMQPValue::LongLongInt(i) => text(i.to_string()),
        // Rust prints the shortest decimal that parses back to the same float.
        AMQPValue::Float(f) => text(f.to_string()),
        AMQPValue::Double(d) => text(d.to_string()),
        AMQPValue::DecimalValue(d) => text(format!("{}:{}", d.scale, d.value)),
        AMQPValue::ShortString(s) => Some(s.as_str().as_bytes().to_vec()),
        AMQPValue::LongString(s) => Some(s.as_bytes().to_vec()),
        AMQPValue::Timestamp(t) => text(t.to_string()),
        AMQPValue::ByteArray(a) => Some(a.as_slice().to_vec()),
        AMQPValue::FieldArray(a) => Some(wire(gen_field_array(a))),
        AMQPValue::FieldTable(t) => Some(wire(gen_field_table(t))),
        AMQPValue::Void => None,
    }
}

/// The AMQP value of Kafka header bytes of type `letter`; `None` when the bytes do not
/// parse as that type (the caller falls back to a long string and counts it).
pub fn decode(letter: char, bytes: Option<&[u8]>) -> Option<AMQPValue> {
    let Some(bytes) = bytes else {
        return (letter == 'V').then_some(AMQPValue::Void);
    };
    let text = || std::str::from_utf8(bytes).ok();
    // A short string is no wire type (amq-protocol names it '_'), but a client library can
    // still put one in a table it builds.
    if letter == '_' {
        return Some(AMQPValue::ShortString(ShortString::from(
            text()?.to_owned(),
        )));
    }
    Some(match AMQPType::from_id(letter)? {
        AMQPType::Boolean => AMQPValue::Boolean(text()?.parse().ok()?),
        AMQPType::ShortShortInt => AMQPValue::ShortShortInt(text()?.parse().ok()?),
        AMQPType::ShortShortUInt => AMQPValue::ShortShortUInt(text()?.parse().ok()?),
        AMQPType::ShortInt => AMQPValue::ShortInt(text()?.parse().ok()?),
        AMQPType::ShortUInt => AMQPValue::ShortUInt(text()?.parse().ok()?),
        AMQPType::LongInt => AMQPValue::LongInt(text()?.parse().ok()?),
        AMQPType::LongUInt => AMQPValue::LongUInt(text()?.parse().ok()?),
        AMQPType::LongLongInt | AMQPType::LongLongUInt => {
            AMQPValue::LongLongInt(text()?.parse().ok()?)
        }
        AMQPType::Float => AMQPValue::Float(text()?.parse().ok()?),
        AMQPType::Double => AMQPValue::Double(text()?.parse().ok()?),
        AMQPType::DecimalValue => {
            let (scale, value) = text()?.split_once(':')?;
            AMQPValue::DecimalValue(DecimalValue {
                scale: scale.parse().ok()?,
                value: value.parse().ok()?,
            })
        }
        AMQPType::ShortString => return None,
        AMQPType::LongString => AMQPValue::LongString(LongString::from(bytes.to_vec())),
        AMQPType::Timestamp => AMQPValue::Timestamp(text()?.parse().ok()?),
        AMQPType::ByteArray => AMQPValue::ByteArray(ByteArray::from(bytes.to_vec())),
        AMQPType::FieldArray => match parse_field_array(bytes) {
            Ok(([], a)) => AMQPValue::FieldArray(a),
            _ => return None,
        },
        AMQPType::FieldTable => match parse_field_table(bytes) {
            Ok(([], t)) => AMQPValue::FieldTable(t),
            _ => return None,
        },
        AMQPType::Void => return None,
    })
}

/// Runs an amq-protocol serializer into a new buffer.
pub fn wire<F: amq_protocol::types::generation::SerializeFn<Vec<u8>>>(f: F) -> Vec<u8> {
    // Writing into a Vec cannot fail.
    cookie_factory::gen_simple(f, Vec::new()).expect("serializing into a Vec")
}

#[cfg(test)]
mod tests {
    use super::*;
    use amq_protocol::types::{FieldArray, FieldTable};

    fn round_trip(v: AMQPValue) {
        let bytes = encode(&v);
        assert_eq!(decode(type_of(&v), bytes.as_deref()), Some(v));
    }

    #[test]
    fn scalars_travel_as_readable_text() {
        assert_eq!(encode(&AMQPValue::LongInt(-42)).unwrap(), b"-42");
        assert_eq!(encode(&AMQPValue::Boolean(true)).unwrap(), b"true");
        assert_eq!(encode(&AMQPValue::Double(0.1)).unwrap(), b"0.1");
        assert_eq!(
            encode(&AMQPValue::LongString("héllo".into())).unwrap(),
            "héllo".as_bytes()
        );
    }

    #[test]
    fn every_type_round_trips() {
        let mut table = FieldTable::default();
        table.insert("n".into(), AMQPValue::ShortInt(7));
        for v in [
            AMQPValue::Boolean(false),
            AMQPValue::ShortShortInt(-3),
            AMQPValue::ShortShortUInt(250),
            AMQPValue::ShortInt(-300),
            AMQPValue::ShortUInt(60_000),
            AMQPValue::LongInt(i32::MIN),
            AMQPValue::LongUInt(u32::MAX),
            AMQPValue::LongLongInt(i64::MIN),
            AMQPValue::Float(-0.0),
            AMQPValue::Double(f64::INFINITY),
            AMQPValue::DecimalValue(DecimalValue {
                scale: 2,
                value: 12345,
            }),
            AMQPValue::ShortString("s".into()),
            AMQPValue::Timestamp(1_700_000_000),
            AMQPValue::ByteArray(vec![0, 255, 1].into()),
            AMQPValue::FieldArray(FieldArray::from(vec![
                AMQPValue::LongInt(1),
                AMQPValue::Void,
            ])),
            AMQPValue::FieldTable(table),
            AMQPValue::Void,
        ] {
            round_trip(v);
        }
    }

    #[test]
    fn bytes_that_do_not_parse_as_their_type_are_refused() {
        assert_eq!(decode('I', Some(b"forty-two")), None);
        assert_eq!(decode('F', Some(b"\x00\x00\x00\x09abc")), None);
        assert_eq!(decode('?', Some(b"1")), None);
    }
}
