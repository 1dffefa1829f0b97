//! The AMQP ↔ Kafka mapping is lossless both ways, for arbitrary messages (property
//! tests), and gives each side a natural view (examples).

use amq_protocol::protocol::BasicProperties;
use amq_protocol::types::generation::gen_field_table;
use amq_protocol::types::{
    AMQPValue, ByteArray, DecimalValue, FieldArray, FieldTable, LongString, ShortString,
};
use bytes::Bytes;
use ferry_amqp::port::AmqpMessage;
use ferry_bridge::mapping::{amqp_to_kafka, kafka_to_amqp, values};
use ferry_config::KeySource;
use ferry_kafka::port::KafkaRecord;
use proptest::prelude::*;

fn short_string() -> impl Strategy<Value = String> {
    "\\PC{0,24}"
}

/// Every field-table value type RabbitMQ puts on the wire (short strings are not one).
fn scalar() -> impl Strategy<Value = AMQPValue> {
    prop_oneof![
        any::<bool>().prop_map(AMQPValue::Boolean),
        any::<i8>().prop_map(AMQPValue::ShortShortInt),
        any::<u8>().prop_map(AMQPValue::ShortShortUInt),
        any::<i16>().prop_map(AMQPValue::ShortInt),
        any::<u16>().prop_map(AMQPValue::ShortUInt),
        any::<i32>().prop_map(AMQPValue::LongInt),
        any::<u32>().prop_map(AMQPValue::LongUInt),
        any::<i64>().prop_map(AMQPValue::LongLongInt),
        // NaN is never equal to itself; every other float must round-trip exactly.
        any::<f32>()
            .prop_filter("not NaN", |f| !f.is_nan())
            .prop_map(AMQPValue::Float),
        any::<f64>()
            .prop_filter("not NaN", |f| !f.is_nan())
            .prop_map(AMQPValue::Double),
        (any::<u8>(), any::<u32>())
            .prop_map(|(scale, value)| AMQPValue::DecimalValue(DecimalValue { scale, value })),
        proptest::collection::vec(any::<u8>(), 0..32)
            .prop_map(|b| AMQPValue::LongString(LongString::from(b))),
        any::<u64>().prop_map(AMQPValue::Timestamp),
        proptest::collection::vec(any::<u8>(), 0..32)
            .prop_map(|b| AMQPValue::ByteArray(ByteArray::from(b))),
        Just(AMQPValue::Void),
    ]
}

fn field_value() -> impl Strategy<Value = AMQPValue> {
    scalar().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4)
                .prop_map(|v| AMQPValue::FieldArray(FieldArray::from(v))),
            proptest::collection::btree_map(short_string(), inner, 0..4)
                .prop_map(|m| AMQPValue::FieldTable(table(m))),
        ]
    })
}

fn table(m: impl IntoIterator<Item = (String, AMQPValue)>) -> FieldTable {
    let mut t = FieldTable::default();
    for (k, v) in m {
        t.insert(ShortString::from(k), v);
    }
    t
}

/// AMQP header names: anything but the reserved `x-kafka-` space (names in the `amqp.`
/// space included, to exercise the escape).
fn header_name() -> impl Strategy<Value = String> {
    prop_oneof![
        short_string(),
        short_string().prop_map(|s| format!("amqp.{s}"))
    ]
    .prop_filter("x-kafka- is reserved", |n| !n.starts_with("x-kafka-"))
}

fn properties() -> impl Strategy<Value = BasicProperties> {
    let s = || proptest::option::of(short_string());
    (
        (
            s(),
            s(),
            proptest::option::of(any::<u8>()),
            proptest::option::of(any::<u8>()),
            s(),
            s(),
            s(),
        ),
        (s(), proptest::option::of(any::<u64>()), s(), s(), s(), s()),
        proptest::option::of(proptest::collection::btree_map(
            header_name(),
            field_value(),
            0..6,
        )),
    )
        .prop_map(
            |((ct, ce, dm, pr, corr, reply, exp), (id, ts, kind, user, app, cluster), headers)| {
                let mut p = BasicProperties::default();
                let ss = ShortString::from;
                if let Some(v) = ct {
                    p = p.with_content_type(ss(v));
                }
                if let Some(v) = ce {
                    p = p.with_content_encoding(ss(v));
                }
                if let Some(v) = dm {
                    p = p.with_delivery_mode(v);
                }
                if let Some(v) = pr {
                    p = p.with_priority(v);
                }
                if let Some(v) = corr {
                    p = p.with_correlation_id(ss(v));
                }
                if let Some(v) = reply {
                    p = p.with_reply_to(ss(v));
                }
                if let Some(v) = exp {
                    p = p.with_expiration(ss(v));
                }
                if let Some(v) = id {
                    p = p.with_message_id(ss(v));
                }
                if let Some(v) = ts {
                    p = p.with_timestamp(v);
                }
                if let Some(v) = kind {
                    p = p.with_type(ss(v));
                }
                if let Some(v) = user {
                    p = p.with_user_id(ss(v));
                }
                if let Some(v) = app {
                    p = p.with_app_id(ss(v));
                }
                if let Some(v) = cluster {
                    p = p.with_cluster_id(ss(v));
                }
                if let Some(h) = headers {
                    p = p.with_headers(table(h));
                }
                p
            },
        )
}

fn amqp_message() -> impl Strategy<Value = AmqpMessage> {
    (
        short_string(),
        short_string(),
        properties(),
        proptest::collection::vec(any::<u8>(), 0..64),
    )
        .prop_map(|(exchange, routing_key, properties, body)| AmqpMessage {
            exchange,
            routing_key,
            properties,
            body: body.into(),
        })
}

/// Kafka records: any key, value, timestamp, and headers with repeated names, null values
/// and names in Ferry's `x-kafka-` space — anything but the reserved `amqp.` space.
fn kafka_record() -> impl Strategy<Value = KafkaRecord> {
    let bytes = || proptest::option::of(proptest::collection::vec(any::<u8>(), 0..32));
    let name = prop_oneof![
        Just("trace".to_owned()),
        Just("x-kafka-key".to_owned()),
        "\\PC{0,300}"
    ]
    .prop_filter("amqp. is reserved", |n| !n.starts_with("amqp."));
    (
        bytes(),
        bytes(),
        proptest::collection::vec((name, bytes()), 0..6),
        proptest::option::of(any::<i64>()),
    )
        .prop_map(|(key, value, headers, timestamp_ms)| KafkaRecord {
            key: key.map(Into::into),
            value: value.map(Into::into),
            headers,
            timestamp_ms,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn amqp_to_kafka_to_amqp_is_lossless(m in amqp_message(), key in prop_oneof![Just(KeySource::RoutingKey), Just(KeySource::MessageId), Just(KeySource::None)]) {
        let record = amqp_to_kafka(&m, key);
        let back = kafka_to_amqp(&record, "ignored");
        prop_assert!(back.fallbacks.is_empty(), "fallbacks: {:?}", back.fallbacks);
        prop_assert_eq!(back.message, m);
    }

    #[test]
    fn kafka_to_amqp_to_kafka_is_lossless(r in kafka_record(), key in prop_oneof![Just(KeySource::RoutingKey), Just(KeySource::None)]) {
        let m = kafka_to_amqp(&r, "x").message;
        // The AMQP message must be one a client can send: its table encodes on the wire.
        if let Some(headers) = m.properties.headers() {
            values::wire(gen_field_table(headers));
        }
        prop_assert!(m.routing_key.len() <= 255);
        prop_assert_eq!(amqp_to_kafka(&m, key), r);
    }
}

#[test]
fn kafka_consumers_see_readable_headers_and_the_routing_key_as_key() {
    let mut headers = FieldTable::default();
    headers.insert("retries".into(), AMQPValue::LongInt(3));
    headers.insert("tenant".into(), AMQPValue::LongString("acme".into()));
    let m = AmqpMessage {
        exchange: "orders".into(),
        routing_key: "eu.created".into(),
        properties: BasicProperties::default()
            .with_content_type("application/json".into())
            .with_priority(7)
            .with_headers(headers),
        body: Bytes::from_static(b"{}"),
    };
    let r = amqp_to_kafka(&m, KeySource::RoutingKey);
    let header = |n: &str| {
        r.headers
            .iter()
            .find(|(k, _)| k == n)
            .and_then(|(_, v)| v.clone())
    };
    assert_eq!(r.key.as_deref(), Some(&b"eu.created"[..]));
    assert_eq!(header("retries").unwrap(), b"3");
    assert_eq!(header("tenant").unwrap(), b"acme");
    assert_eq!(header("amqp.content-type").unwrap(), b"application/json");
    assert_eq!(header("amqp.priority").unwrap(), b"7");
}

#[test]
fn amqp_consumers_see_kafka_headers_key_and_timestamp() {
    let r = KafkaRecord {
        key: Some(Bytes::from_static(b"user-42")),
        value: Some(Bytes::from_static(b"hello")),
        headers: vec![
            ("trace".into(), Some(b"abc".to_vec())),
            ("empty".into(), None),
        ],
        timestamp_ms: Some(1_700_000_000_123),
    };
    let m = kafka_to_amqp(&r, "events").message;
    assert_eq!(m.routing_key, "user-42");
    assert_eq!(m.exchange, "events");
    assert_eq!(*m.properties.timestamp(), Some(1_700_000_000));
    assert_eq!(*m.properties.delivery_mode(), Some(2));
    let h = m.properties.headers().as_ref().unwrap().inner();
    assert_eq!(h.get("trace"), Some(&AMQPValue::LongString("abc".into())));
    assert_eq!(h.get("empty"), Some(&AMQPValue::Void));
}

#[test]
fn a_tampered_type_table_falls_back_to_strings_and_is_reported() {
    let m = AmqpMessage {
        properties: BasicProperties::default()
            .with_headers(table([("n".to_owned(), AMQPValue::LongInt(5))])),
        ..AmqpMessage::default()
    };
    let mut r = amqp_to_kafka(&m, KeySource::None);
    for (name, value) in &mut r.headers {
        if name == "n" {
            *value = Some(b"five".to_vec());
        }
    }
    let back = kafka_to_amqp(&r, "");
    assert_eq!(back.fallbacks, ["n"]);
    let h = back.message.properties.headers().as_ref().unwrap().inner();
    assert_eq!(h.get("n"), Some(&AMQPValue::LongString("five".into())));
}
