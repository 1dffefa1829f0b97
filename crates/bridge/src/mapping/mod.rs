//! The one AMQP ↔ Kafka mapping, both ways (`docs/mapping.md` is its table).
//!
//! Each direction gives the other side's applications a *natural* view — an AMQP message
//! from Kafka has the record's headers as AMQP headers and its key as routing key; a Kafka
//! record from AMQP has the AMQP headers as Kafka headers and the properties as readable
//! `amqp.*` headers — and carries what the natural view cannot hold, so the round trip is
//! lossless:
//! - AMQP → Kafka → AMQP restores exchange, routing key, every property, the headers table
//!   with every value's type, and the body. Kafka header values are readable text; the
//!   types travel in `amqp.header-types`.
//! - Kafka → AMQP → Kafka restores key (including null and binary keys), value (including
//!   null), the header list in order with duplicates and null values, and the millisecond
//!   timestamp, carried in `x-kafka-key`, `x-kafka-headers`, `x-kafka-timestamp` and
//!   `x-kafka-null-value`.
//!
//! A value that cannot be mapped as its type says (a tampered `amqp.header-types`, say)
//! follows the fallback rule — it becomes a long string of its bytes — and is reported in
//! [`Mapped::fallbacks`] so callers count it; nothing is dropped.

pub mod values;

use amq_protocol::protocol::BasicProperties;
use amq_protocol::types::generation::gen_field_table;
use amq_protocol::types::parsing::parse_field_table;
use amq_protocol::types::{AMQPValue, ByteArray, FieldArray, FieldTable, LongString, ShortString};
use bytes::Bytes;
use ferry_amqp::port::AmqpMessage;
use ferry_config::KeySource;
use ferry_kafka::port::KafkaRecord;

/// Prefix of the Kafka headers that carry AMQP data.
pub const AMQP_PREFIX: &str = "amqp.";
/// Kafka header: the AMQP headers' type letters, an AMQP field table (name → letter).
/// Present exactly when the AMQP message had a headers table.
pub const AMQP_HEADER_TYPES: &str = "amqp.header-types";
/// Kafka header: the exchange the AMQP message was published to.
pub const AMQP_EXCHANGE: &str = "amqp.exchange";
/// Kafka header: the AMQP routing key; its presence marks a record that came from AMQP.
pub const AMQP_ROUTING_KEY: &str = "amqp.routing-key";
/// Prefix of an AMQP header whose own name starts with [`AMQP_PREFIX`].
pub const AMQP_ESCAPED: &str = "amqp.h.";

/// AMQP header: the Kafka key (byte array; void for a null key). Marks, with
/// [`KAFKA_HEADERS`], a message that came from Kafka.
pub const KAFKA_KEY: &str = "x-kafka-key";
/// AMQP header: the Kafka headers in order, an array of `[name, value]` arrays.
pub const KAFKA_HEADERS: &str = "x-kafka-headers";
/// AMQP header: the Kafka timestamp in milliseconds.
pub const KAFKA_TIMESTAMP: &str = "x-kafka-timestamp";
/// AMQP header: set when the Kafka value was null (a tombstone).
pub const KAFKA_NULL_VALUE: &str = "x-kafka-null-value";
/// Prefix of the AMQP headers that carry Kafka data.
pub const KAFKA_PREFIX: &str = "x-kafka-";

/// A mapped message, with the values that had to follow the fallback rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Mapped<T> {
    /// The result.
    pub message: T,
    /// Names of headers whose value could not be mapped as its type and became a long
    /// string of its bytes.
    pub fallbacks: Vec<String>,
}

/// Maps an AMQP message to a Kafka record.
pub fn amqp_to_kafka(m: &AmqpMessage, key: KeySource) -> KafkaRecord {
    let headers = m.properties.headers();
    if let Some(original) = headers.as_ref().and_then(kafka_origin) {
        return KafkaRecord {
            value: (!original.null_value).then(|| m.body.clone()),
            ..original.record
        };
    }
    let p = &m.properties;
    let mut out: Vec<(String, Option<Vec<u8>>)> = Vec::new();
    let mut put = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            out.push((name.to_owned(), Some(v.into_bytes())));
        }
    };
    let short = |s: &Option<ShortString>| s.as_ref().map(|s| s.as_str().to_owned());
    put(AMQP_EXCHANGE, Some(m.exchange.clone()));
    put(AMQP_ROUTING_KEY, Some(m.routing_key.clone()));
    put("amqp.content-type", short(p.content_type()));
    put("amqp.content-encoding", short(p.content_encoding()));
    put(
        "amqp.delivery-mode",
        p.delivery_mode().map(|v| v.to_string()),
    );
    put("amqp.priority", p.priority().map(|v| v.to_string()));
    put("amqp.correlation-id", short(p.correlation_id()));
    put("amqp.reply-to", short(p.reply_to()));
    put("amqp.expiration", short(p.expiration()));
    put("amqp.message-id", short(p.message_id()));
    put("amqp.timestamp", p.timestamp().map(|v| v.to_string()));
    put("amqp.type", short(p.kind()));
    put("amqp.user-id", short(p.user_id()));
    put("amqp.app-id", short(p.app_id()));
    put("amqp.cluster-id", short(p.cluster_id()));
    if let Some(table) = headers {
        let mut types = FieldTable::default();
        for (name, value) in table.inner() {
            let letter = values::type_of(value);
            if letter != 'S' {
                types.insert(name.clone(), AMQPValue::ShortShortUInt(letter as u8));
            }
            out.push((escape(name.as_str()), values::encode(value)));
        }
        out.push((
            AMQP_HEADER_TYPES.to_owned(),
            Some(values::wire(gen_field_table(&types))),
        ));
    }
    let record_key = match key {
        KeySource::RoutingKey => Some(Bytes::copy_from_slice(m.routing_key.as_bytes())),
        KeySource::MessageId => p
            .message_id()
            .as_ref()
            .map(|id| Bytes::copy_from_slice(id.as_str().as_bytes())),
        KeySource::None => None,
    };
    KafkaRecord {
        key: record_key,
        value: Some(m.body.clone()),
        headers: out,
        timestamp_ms: p
            .timestamp()
            .and_then(|s| i64::try_from(s.saturating_mul(1000)).ok()),
    }
}

/// Maps a Kafka record to an AMQP message published to `exchange`.
pub fn kafka_to_amqp(r: &KafkaRecord, exchange: &str) -> Mapped<AmqpMessage> {
    if r.headers.iter().any(|(n, _)| n == AMQP_ROUTING_KEY) {
        return amqp_origin(r);
    }
    let mut table = FieldTable::default();
    for (name, value) in &r.headers {
        // Reserved names, and names too long for an AMQP table key, appear only in the
        // exact copy in x-kafka-headers.
        if name.starts_with(KAFKA_PREFIX) || name.len() > 255 {
            continue;
        }
        let natural = match value {
            None => AMQPValue::Void,
            Some(v) => AMQPValue::LongString(LongString::from(v.clone())),
        };
        table.insert(ShortString::from(name.clone()), natural);
    }
    let key = r.key.as_ref().map_or(AMQPValue::Void, |k| {
        AMQPValue::ByteArray(ByteArray::from(&k[..]))
    });
    table.insert(KAFKA_KEY.into(), key);
    let exact: Vec<AMQPValue> = r
        .headers
        .iter()
        .map(|(n, v)| {
            let value = v.as_ref().map_or(AMQPValue::Void, |v| {
                AMQPValue::ByteArray(ByteArray::from(v.clone()))
            });
            AMQPValue::FieldArray(FieldArray::from(vec![
                AMQPValue::LongString(LongString::from(n.as_bytes().to_vec())),
                value,
            ]))
        })
        .collect();
    table.insert(
        KAFKA_HEADERS.into(),
        AMQPValue::FieldArray(FieldArray::from(exact)),
    );
    if let Some(ts) = r.timestamp_ms {
        table.insert(KAFKA_TIMESTAMP.into(), AMQPValue::LongLongInt(ts));
    }
    if r.value.is_none() {
        table.insert(KAFKA_NULL_VALUE.into(), AMQPValue::Boolean(true));
    }
    let routing_key = r
        .key
        .as_ref()
        .and_then(|k| std::str::from_utf8(k).ok())
        .filter(|k| k.len() <= 255)
        .unwrap_or_default()
        .to_owned();
    let mut properties = BasicProperties::default()
        .with_delivery_mode(2)
        .with_headers(table);
    if let Some(seconds) = r.timestamp_ms.and_then(|ms| u64::try_from(ms / 1000).ok()) {
        properties = properties.with_timestamp(seconds);
    }
    Mapped {
        message: AmqpMessage {
            exchange: exchange.to_owned(),
            routing_key,
            properties,
            body: r.value.clone().unwrap_or_default(),
        },
        fallbacks: Vec::new(),
    }
}

/// An AMQP header name as a Kafka header name: names in the reserved `amqp.` space are
/// escaped so they cannot be mistaken for mapping data.
fn escape(name: &str) -> String {
    if name.starts_with(AMQP_PREFIX) {
        format!("{AMQP_ESCAPED}{name}")
    } else {
        name.to_owned()
    }
}

/// A record that came from AMQP: rebuild the original message from its `amqp.*` headers.
fn amqp_origin(r: &KafkaRecord) -> Mapped<AmqpMessage> {
    let get = |name: &str| {
        r.headers
            .iter()
            .find(|(n, _)| n == name)
            .and_then(|(_, v)| v.as_deref())
            .and_then(|v| std::str::from_utf8(v).ok())
    };
    let short = |name: &str| get(name).map(|s| ShortString::from(s.to_owned()));
    fn number<T: std::str::FromStr>(text: Option<&str>) -> Option<T> {
        text.and_then(|s| s.parse().ok())
    }
    let mut p = BasicProperties::default();
    macro_rules! set {
        ($with:ident, $value:expr) => {
            if let Some(v) = $value {
                p = p.$with(v);
            }
        };
    }
    set!(with_content_type, short("amqp.content-type"));
    set!(with_content_encoding, short("amqp.content-encoding"));
    set!(with_delivery_mode, number(get("amqp.delivery-mode")));
    set!(with_priority, number(get("amqp.priority")));
    set!(with_correlation_id, short("amqp.correlation-id"));
    set!(with_reply_to, short("amqp.reply-to"));
    set!(with_expiration, short("amqp.expiration"));
    set!(with_message_id, short("amqp.message-id"));
    set!(with_timestamp, number(get("amqp.timestamp")));
    set!(with_type, short("amqp.type"));
    set!(with_user_id, short("amqp.user-id"));
    set!(with_app_id, short("amqp.app-id"));
    set!(with_cluster_id, short("amqp.cluster-id"));

    let mut fallbacks = Vec::new();
    let types = r
        .headers
        .iter()
        .find(|(n, _)| n == AMQP_HEADER_TYPES)
        .map(|(_, v)| match v.as_deref().map(parse_field_table) {
            Some(Ok(([], t))) => t,
            _ => {
                fallbacks.push(AMQP_HEADER_TYPES.to_owned());
                FieldTable::default()
            }
        });
    if let Some(types) = types {
        let mut table = FieldTable::default();
        for (name, value) in &r.headers {
            let name = match name.strip_prefix(AMQP_ESCAPED) {
                Some(original) => original,
                None if name.starts_with(AMQP_PREFIX) => continue,
                None => name.as_str(),
            };
            let letter = match types.inner().get(name) {
                Some(AMQPValue::ShortShortUInt(l)) => char::from(*l),
                _ => 'S',
            };
            let mapped = values::decode(letter, value.as_deref()).unwrap_or_else(|| {
                fallbacks.push(name.to_owned());
                AMQPValue::LongString(LongString::from(value.clone().unwrap_or_default()))
            });
            table.insert(ShortString::from(name.to_owned()), mapped);
        }
        p = p.with_headers(table);
    }
    Mapped {
        message: AmqpMessage {
            exchange: get(AMQP_EXCHANGE).unwrap_or_default().to_owned(),
            routing_key: get(AMQP_ROUTING_KEY).unwrap_or_default().to_owned(),
            properties: p,
            body: r.value.clone().unwrap_or_default(),
        },
        fallbacks,
    }
}

/// The original Kafka record carried by an AMQP message that came from Kafka.
struct KafkaOrigin {
    record: KafkaRecord,
    null_value: bool,
}

/// Reads the `x-kafka-*` headers; `None` when the message did not come from Kafka.
fn kafka_origin(table: &FieldTable) -> Option<KafkaOrigin> {
    let t = table.inner();
    let key = match t.get(KAFKA_KEY)? {
        AMQPValue::ByteArray(k) => Some(Bytes::copy_from_slice(k.as_slice())),
        AMQPValue::Void => None,
        _ => return None,
    };
    let AMQPValue::FieldArray(list) = t.get(KAFKA_HEADERS)? else {
        return None;
    };
    let mut headers = Vec::with_capacity(list.as_slice().len());
    for entry in list.as_slice() {
        let AMQPValue::FieldArray(pair) = entry else {
            return None;
        };
        let (AMQPValue::LongString(name), value) =
            (pair.as_slice().first()?, pair.as_slice().get(1)?)
        else {
            return None;
        };
        let value = match value {
            AMQPValue::ByteArray(v) => Some(v.as_slice().to_vec()),
            AMQPValue::Void => None,
            _ => return None,
        };
        headers.push((String::from_utf8(name.as_bytes().to_vec()).ok()?, value));
    }
    let timestamp_ms = match t.get(KAFKA_TIMESTAMP) {
        Some(AMQPValue::LongLongInt(ms)) => Some(*ms),
        _ => None,
    };
    Some(KafkaOrigin {
        record: KafkaRecord {
            key,
            value: None,
            headers,
            timestamp_ms,
        },
        null_value: matches!(t.get(KAFKA_NULL_VALUE), Some(AMQPValue::Boolean(true))),
    })
}
