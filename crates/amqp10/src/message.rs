//! AMQP 1.0's message format (part 3, section 3.2 of the OASIS standard): a bare message of
//! properties, application properties and a body, annotated by a header, delivery and
//! message annotations and a footer, each section a described value. Sections are read in
//! any order the standard allows and identified by numeric or symbolic descriptor;
//! [`Message::encode`] writes them in the standard's order with numeric descriptors.

use crate::composite::{FieldError, Fields, trimmed};
use crate::types::{DecodeError, Value};
use bytes::{Bytes, BytesMut};

/// The sections' descriptors: (code, symbolic name).
mod descriptor {
    pub(super) const HEADER: (u64, &str) = (0x70, "amqp:header:list");
    pub(super) const DELIVERY_ANNOTATIONS: (u64, &str) = (0x71, "amqp:delivery-annotations:map");
    pub(super) const MESSAGE_ANNOTATIONS: (u64, &str) = (0x72, "amqp:message-annotations:map");
    pub(super) const PROPERTIES: (u64, &str) = (0x73, "amqp:properties:list");
    pub(super) const APPLICATION_PROPERTIES: (u64, &str) =
        (0x74, "amqp:application-properties:map");
    pub(super) const DATA: (u64, &str) = (0x75, "amqp:data:binary");
    pub(super) const AMQP_SEQUENCE: (u64, &str) = (0x76, "amqp:amqp-sequence:list");
    pub(super) const AMQP_VALUE: (u64, &str) = (0x77, "amqp:value:*");
    pub(super) const FOOTER: (u64, &str) = (0x78, "amqp:footer:map");
    pub(super) const ALL: [(u64, &str); 9] = [
        HEADER,
        DELIVERY_ANNOTATIONS,
        MESSAGE_ANNOTATIONS,
        PROPERTIES,
        APPLICATION_PROPERTIES,
        DATA,
        AMQP_SEQUENCE,
        AMQP_VALUE,
        FOOTER,
    ];
}

/// Why bytes are not an AMQP 1.0 message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// A section that does not decode.
    #[error(transparent)]
    Value(#[from] DecodeError),
    /// Something other than a message section, or a section of the wrong shape.
    #[error("not a message section: {0}")]
    Section(String),
    /// A header or properties field of the wrong type.
    #[error(transparent)]
    Field(#[from] FieldError),
    /// Sections out of the standard's order, or a body of two kinds.
    #[error("message sections out of order: {0}")]
    Order(String),
}

/// The header section.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Header {
    pub durable: Option<bool>,
    pub priority: Option<u8>,
    /// Milliseconds.
    pub ttl: Option<u32>,
    pub first_acquirer: Option<bool>,
    pub delivery_count: Option<u32>,
}

/// The properties section (`message_id`, `correlation_id`: ulong, uuid, binary or string).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Properties {
    pub message_id: Option<Value>,
    pub user_id: Option<Bytes>,
    pub to: Option<String>,
    pub subject: Option<String>,
    pub reply_to: Option<String>,
    pub correlation_id: Option<Value>,
    pub content_type: Option<String>,
    pub content_encoding: Option<String>,
    /// Milliseconds since the epoch.
    pub absolute_expiry_time: Option<i64>,
    /// Milliseconds since the epoch.
    pub creation_time: Option<i64>,
    pub group_id: Option<String>,
    pub group_sequence: Option<u32>,
    pub reply_to_group_id: Option<String>,
}

/// The body.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// One or more data sections.
    Data(Vec<Bytes>),
    /// One or more amqp-sequence sections.
    Sequence(Vec<Vec<Value>>),
    /// One amqp-value section.
    Value(Value),
}

/// An annotated message.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub header: Option<Header>,
    pub delivery_annotations: Option<Vec<(Value, Value)>>,
    pub message_annotations: Option<Vec<(Value, Value)>>,
    pub properties: Option<Properties>,
    pub application_properties: Option<Vec<(String, Value)>>,
    /// `None` for a message with no body section (the standard requires one; RabbitMQ
    /// accepts its absence).
    pub body: Option<Body>,
    pub footer: Option<Vec<(Value, Value)>>,
}

impl Message {
    /// A message whose body is one data section.
    pub fn data(body: impl Into<Bytes>) -> Self {
        Self {
            header: None,
            delivery_annotations: None,
            message_annotations: None,
            properties: None,
            application_properties: None,
            body: Some(Body::Data(vec![body.into()])),
            footer: None,
        }
    }

    /// Decodes a whole message.
    ///
    /// # Errors
    /// [`MessageError`] when the bytes are not one.
    pub fn decode(mut input: &[u8]) -> Result<Self, MessageError> {
        let mut message = Self {
            body: None,
            ..Self::data(Bytes::new())
        };
        // The index in descriptor::ALL of the last section read; sections come in that
        // order, data and sequence sections repeating.
        let mut last: Option<usize> = None;
        while !input.is_empty() {
            let Value::Described(d, value) = Value::decode(&mut input)? else {
                return Err(MessageError::Section(
                    "a value that is not described".into(),
                ));
            };
            let index = descriptor::ALL
                .iter()
                .position(|(code, name)| match &*d {
                    Value::Ulong(c) => c == code,
                    Value::Symbol(s) => s == name,
                    _ => false,
                })
                .ok_or_else(|| MessageError::Section(format!("descriptor {d:?}")))?;
            let (code, name) = descriptor::ALL[index];
            let repeats = matches!(code, 0x75 | 0x76) && last == Some(index);
            if last.is_some_and(|l| l >= index) && !repeats {
                return Err(MessageError::Order(format!("{name} after another section")));
            }
            if (5..=7).contains(&index) && last.is_some_and(|l| (5..=7).contains(&l)) && !repeats {
                return Err(MessageError::Order(format!(
                    "{name} in a body of another kind"
                )));
            }
            last = Some(index);
            let kind = kind(&value);
            let wrong = || MessageError::Section(format!("{name} holding {kind}"));
            match (code, *value) {
                (0x70, Value::List(fields)) => message.header = Some(header(&fields)?),
                (0x71, Value::Map(m)) => message.delivery_annotations = Some(m),
                (0x72, Value::Map(m)) => message.message_annotations = Some(m),
                (0x73, Value::List(fields)) => message.properties = Some(properties(&fields)?),
                (0x74, Value::Map(m)) => {
                    let pairs = m
                        .into_iter()
                        .map(|(k, v)| match k {
                            Value::String(k) => Some((k, v)),
                            _ => None,
                        })
                        .collect::<Option<_>>()
                        .ok_or_else(wrong)?;
                    message.application_properties = Some(pairs);
                }
                (0x75, Value::Binary(b)) => match &mut message.body {
                    Some(Body::Data(parts)) => parts.push(b),
                    _ => message.body = Some(Body::Data(vec![b])),
                },
                (0x76, Value::List(items)) => match &mut message.body {
                    Some(Body::Sequence(parts)) => parts.push(items),
                    _ => message.body = Some(Body::Sequence(vec![items])),
                },
                (0x77, v) => message.body = Some(Body::Value(v)),
                (0x78, Value::Map(m)) => message.footer = Some(m),
                _ => return Err(wrong()),
            }
        }
        Ok(message)
    }

    /// Encodes the message, sections in the standard's order.
    pub fn encode(&self, out: &mut BytesMut) {
        let section = |code: u64, value: Value, out: &mut BytesMut| {
            Value::Described(Box::new(Value::Ulong(code)), Box::new(value)).encode(out);
        };
        if let Some(h) = &self.header {
            let fields = vec![
                h.durable.map_or(Value::Null, Value::Bool),
                h.priority.map_or(Value::Null, Value::Ubyte),
                h.ttl.map_or(Value::Null, Value::Uint),
                h.first_acquirer.map_or(Value::Null, Value::Bool),
                h.delivery_count.map_or(Value::Null, Value::Uint),
            ];
            section(descriptor::HEADER.0, Value::List(trimmed(fields)), out);
        }
        if let Some(m) = &self.delivery_annotations {
            section(
                descriptor::DELIVERY_ANNOTATIONS.0,
                Value::Map(m.clone()),
                out,
            );
        }
        if let Some(m) = &self.message_annotations {
            section(
                descriptor::MESSAGE_ANNOTATIONS.0,
                Value::Map(m.clone()),
                out,
            );
        }
        if let Some(p) = &self.properties {
            let text = |s: &Option<String>| s.clone().map_or(Value::Null, Value::String);
            let symbol = |s: &Option<String>| s.clone().map_or(Value::Null, Value::Symbol);
            let fields = vec![
                p.message_id.clone().unwrap_or(Value::Null),
                p.user_id.clone().map_or(Value::Null, Value::Binary),
                text(&p.to),
                text(&p.subject),
                text(&p.reply_to),
                p.correlation_id.clone().unwrap_or(Value::Null),
                symbol(&p.content_type),
                symbol(&p.content_encoding),
                p.absolute_expiry_time.map_or(Value::Null, Value::Timestamp),
                p.creation_time.map_or(Value::Null, Value::Timestamp),
                text(&p.group_id),
                p.group_sequence.map_or(Value::Null, Value::Uint),
                text(&p.reply_to_group_id),
            ];
            section(descriptor::PROPERTIES.0, Value::List(trimmed(fields)), out);
        }
        if let Some(a) = &self.application_properties {
            let map = a
                .iter()
                .map(|(k, v)| (Value::String(k.clone()), v.clone()))
                .collect();
            section(descriptor::APPLICATION_PROPERTIES.0, Value::Map(map), out);
        }
        match &self.body {
            None => {}
            Some(Body::Data(parts)) => {
                for part in parts {
                    section(descriptor::DATA.0, Value::Binary(part.clone()), out);
                }
            }
            Some(Body::Sequence(parts)) => {
                for part in parts {
                    section(descriptor::AMQP_SEQUENCE.0, Value::List(part.clone()), out);
                }
            }
            Some(Body::Value(v)) => section(descriptor::AMQP_VALUE.0, v.clone(), out),
        }
        if let Some(m) = &self.footer {
            section(descriptor::FOOTER.0, Value::Map(m.clone()), out);
        }
    }

    /// The encoded message.
    pub fn to_bytes(&self) -> Bytes {
        let mut out = BytesMut::new();
        self.encode(&mut out);
        out.freeze()
    }
}

/// What kind of value `v` is, for an error.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::List(_) => "a list",
        Value::Map(_) => "a map",
        Value::Binary(_) => "binary",
        Value::Array(_) => "an array",
        Value::Described(..) => "a described value",
        _ => "a primitive value",
    }
}

fn header(fields: &[Value]) -> Result<Header, FieldError> {
    let f = Fields {
        name: "header",
        fields,
    };
    Ok(Header {
        durable: f.boolean(0, "durable")?,
        priority: f.ubyte(1, "priority")?,
        ttl: f.uint(2, "ttl")?,
        first_acquirer: f.boolean(3, "first-acquirer")?,
        delivery_count: f.uint(4, "delivery-count")?,
    })
}

fn properties(fields: &[Value]) -> Result<Properties, FieldError> {
    let f = Fields {
        name: "properties",
        fields,
    };
    Ok(Properties {
        message_id: f.id(0, "message-id")?,
        user_id: f.binary(1, "user-id")?,
        to: f.string(2, "to")?,
        subject: f.string(3, "subject")?,
        reply_to: f.string(4, "reply-to")?,
        correlation_id: f.id(5, "correlation-id")?,
        content_type: f.symbol(6, "content-type")?,
        content_encoding: f.symbol(7, "content-encoding")?,
        absolute_expiry_time: f.timestamp(8, "absolute-expiry-time")?,
        creation_time: f.timestamp(9, "creation-time")?,
        group_id: f.string(10, "group-id")?,
        group_sequence: f.uint(11, "group-sequence")?,
        reply_to_group_id: f.string(12, "reply-to-group-id")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_message_reads_back_and_sections_out_of_order_are_refused() {
        let message = Message {
            header: Some(Header {
                durable: Some(true),
                priority: Some(4),
                ttl: Some(60_000),
                ..Header::default()
            }),
            delivery_annotations: None,
            message_annotations: Some(vec![(
                Value::Symbol("x-opt-routing-key".into()),
                Value::String("k".into()),
            )]),
            properties: Some(Properties {
                message_id: Some(Value::String("id-1".into())),
                content_type: Some("application/json".into()),
                creation_time: Some(1_700_000_000_000),
                ..Properties::default()
            }),
            application_properties: Some(vec![("region".into(), Value::String("eu".into()))]),
            body: Some(Body::Data(vec![
                Bytes::from_static(b"{}"),
                Bytes::from_static(b"[]"),
            ])),
            footer: None,
        };
        let bytes = message.to_bytes();
        assert_eq!(Message::decode(&bytes), Ok(message.clone()));
        // The body before the header.
        let mut swapped = BytesMut::new();
        Message {
            header: None,
            ..message.clone()
        }
        .encode(&mut swapped);
        let header_only = Message {
            body: None,
            properties: None,
            message_annotations: None,
            application_properties: None,
            ..message
        }
        .to_bytes();
        swapped.extend_from_slice(&header_only);
        assert!(matches!(
            Message::decode(&swapped),
            Err(MessageError::Order(_))
        ));
        // A symbolic descriptor reads as the numeric one.
        let symbolic = Value::Described(
            Box::new(Value::Symbol("amqp:value:*".into())),
            Box::new(Value::Long(5)),
        )
        .to_bytes();
        assert_eq!(
            Message::decode(&symbolic).unwrap().body,
            Some(Body::Value(Value::Long(5)))
        );
        assert!(Message::decode(&Value::Long(5).to_bytes()).is_err());
    }
}
