//! AMQP 1.0's performatives as types (part 2.7 and 5.3 of the OASIS standard): each one
//! read from and written to a [`Performative`]'s positional fields, absent fields as
//! `None` or the standard's default. A field of the wrong type is an error naming the
//! performative and the field, so a front can close the connection with
//! `amqp:decode-error` saying what was wrong.

use crate::composite::{FieldError, Fields, trimmed};
use crate::frame::{Performative, performative as code};
use crate::types::{Array, Value};
use bytes::Bytes;

fn text(s: &Option<String>) -> Value {
    s.clone().map_or(Value::Null, Value::String)
}

fn symbols(list: &[String]) -> Value {
    if list.is_empty() {
        return Value::Null;
    }
    Value::Array(Array {
        descriptor: None,
        code: 0xa3,
        elements: list.iter().cloned().map(Value::Symbol).collect(),
    })
}

fn opt<T>(v: Option<T>, f: impl FnOnce(T) -> Value) -> Value {
    v.map_or(Value::Null, f)
}

/// `sasl-mechanisms`: what the server offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslMechanisms {
    pub mechanisms: Vec<String>,
}

/// `sasl-init`: the mechanism the client chose and its first response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslInit {
    pub mechanism: String,
    pub initial_response: Option<Bytes>,
    pub hostname: Option<String>,
}

/// `sasl-outcome`: 0 ok, 1 auth, 2 sys, 3 sys-perm, 4 sys-temp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslOutcome {
    pub code: u8,
    pub additional_data: Option<Bytes>,
}

/// `open`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Open {
    pub container_id: String,
    pub hostname: Option<String>,
    pub max_frame_size: Option<u32>,
    pub channel_max: Option<u16>,
    /// Milliseconds.
    pub idle_time_out: Option<u32>,
    pub offered_capabilities: Vec<String>,
    pub desired_capabilities: Vec<String>,
    pub properties: Option<Value>,
}

/// `begin`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Begin {
    pub remote_channel: Option<u16>,
    pub next_outgoing_id: u32,
    pub incoming_window: u32,
    pub outgoing_window: u32,
    pub handle_max: Option<u32>,
}

/// A link's source or target: the address and the rest of its fields as they came.
#[derive(Debug, Clone, PartialEq)]
pub struct Terminus {
    pub address: Option<String>,
    /// The fields after the address, kept for echoing back.
    pub rest: Vec<Value>,
}

/// `attach`.
#[derive(Debug, Clone, PartialEq)]
pub struct Attach {
    pub name: String,
    pub handle: u32,
    /// `false`: sender, `true`: receiver.
    pub role: bool,
    pub snd_settle_mode: Option<u8>,
    pub rcv_settle_mode: Option<u8>,
    pub source: Option<Terminus>,
    pub target: Option<Terminus>,
    pub initial_delivery_count: Option<u32>,
    pub max_message_size: Option<u64>,
}

/// `flow`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flow {
    pub next_incoming_id: Option<u32>,
    pub incoming_window: u32,
    pub next_outgoing_id: u32,
    pub outgoing_window: u32,
    pub handle: Option<u32>,
    pub delivery_count: Option<u32>,
    pub link_credit: Option<u32>,
    pub available: Option<u32>,
    pub drain: Option<bool>,
    pub echo: Option<bool>,
}

/// `transfer` (its payload travels after it in the frame).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Transfer {
    pub handle: u32,
    pub delivery_id: Option<u32>,
    pub delivery_tag: Option<Bytes>,
    pub message_format: Option<u32>,
    pub settled: Option<bool>,
    pub more: Option<bool>,
}

/// The described source and target lists' codes.
const SOURCE: u64 = 0x28;
const TARGET: u64 = 0x29;

impl Terminus {
    fn read(
        value: Option<Value>,
        name: &'static str,
        field: &'static str,
    ) -> Result<Option<Self>, FieldError> {
        let wrong = || FieldError {
            composite: name,
            field,
            expected: "a source or target",
        };
        match value {
            None => Ok(None),
            Some(Value::Described(_, list)) => match *list {
                Value::List(mut fields) => {
                    let address = match fields.first() {
                        None | Some(Value::Null) => None,
                        Some(Value::String(a)) => Some(a.clone()),
                        Some(_) => return Err(wrong()),
                    };
                    if !fields.is_empty() {
                        fields.remove(0);
                    }
                    Ok(Some(Self {
                        address,
                        rest: fields,
                    }))
                }
                _ => Err(wrong()),
            },
            Some(_) => Err(wrong()),
        }
    }

    fn value(&self, code: u64) -> Value {
        let mut fields = vec![text(&self.address)];
        fields.extend(self.rest.iter().cloned());
        Value::Described(Box::new(Value::Ulong(code)), Box::new(Value::List(fields)))
    }
}

/// A performative's typed form.
#[derive(Debug, Clone, PartialEq)]
pub enum Typed {
    SaslMechanisms(SaslMechanisms),
    SaslInit(SaslInit),
    SaslOutcome(SaslOutcome),
    Open(Open),
    Begin(Begin),
    Attach(Attach),
    Flow(Flow),
    Transfer(Transfer),
    /// The performatives not typed yet (disposition, detach, end, close, SASL challenge
    /// and response), as they came.
    Other(Performative),
}

impl Typed {
    /// Reads `p`.
    ///
    /// # Errors
    /// [`FieldError`] for a field of the wrong type or a required one missing.
    pub fn read(p: &Performative) -> Result<Self, FieldError> {
        let f = |name| Fields {
            name,
            fields: &p.fields,
        };
        Ok(match p.code {
            code::SASL_MECHANISMS => {
                let f = f("sasl-mechanisms");
                Self::SaslMechanisms(SaslMechanisms {
                    mechanisms: f.symbols(0, "sasl-server-mechanisms")?,
                })
            }
            code::SASL_INIT => {
                let f = f("sasl-init");
                Self::SaslInit(SaslInit {
                    mechanism: f.required(f.symbol(0, "mechanism"), "mechanism", "a symbol")?,
                    initial_response: f.binary(1, "initial-response")?,
                    hostname: f.string(2, "hostname")?,
                })
            }
            code::SASL_OUTCOME => {
                let f = f("sasl-outcome");
                Self::SaslOutcome(SaslOutcome {
                    code: f.required(f.ubyte(0, "code"), "code", "a ubyte")?,
                    additional_data: f.binary(1, "additional-data")?,
                })
            }
            code::OPEN => {
                let f = f("open");
                Self::Open(Open {
                    container_id: f.required(
                        f.string(0, "container-id"),
                        "container-id",
                        "a string",
                    )?,
                    hostname: f.string(1, "hostname")?,
                    max_frame_size: f.uint(2, "max-frame-size")?,
                    channel_max: f.ushort(3, "channel-max")?,
                    idle_time_out: f.uint(4, "idle-time-out")?,
                    offered_capabilities: f.symbols(7, "offered-capabilities")?,
                    desired_capabilities: f.symbols(8, "desired-capabilities")?,
                    properties: f.any(9),
                })
            }
            code::BEGIN => {
                let f = f("begin");
                Self::Begin(Begin {
                    remote_channel: f.ushort(0, "remote-channel")?,
                    next_outgoing_id: f.required(
                        f.uint(1, "next-outgoing-id"),
                        "next-outgoing-id",
                        "a uint",
                    )?,
                    incoming_window: f.required(
                        f.uint(2, "incoming-window"),
                        "incoming-window",
                        "a uint",
                    )?,
                    outgoing_window: f.required(
                        f.uint(3, "outgoing-window"),
                        "outgoing-window",
                        "a uint",
                    )?,
                    handle_max: f.uint(4, "handle-max")?,
                })
            }
            code::ATTACH => {
                let f = f("attach");
                Self::Attach(Attach {
                    name: f.required(f.string(0, "name"), "name", "a string")?,
                    handle: f.required(f.uint(1, "handle"), "handle", "a uint")?,
                    role: f.required(f.boolean(2, "role"), "role", "a boolean")?,
                    snd_settle_mode: f.ubyte(3, "snd-settle-mode")?,
                    rcv_settle_mode: f.ubyte(4, "rcv-settle-mode")?,
                    source: Terminus::read(f.any(5), "attach", "source")?,
                    target: Terminus::read(f.any(6), "attach", "target")?,
                    initial_delivery_count: f.uint(9, "initial-delivery-count")?,
                    max_message_size: f.ulong(10, "max-message-size")?,
                })
            }
            code::FLOW => {
                let f = f("flow");
                Self::Flow(Flow {
                    next_incoming_id: f.uint(0, "next-incoming-id")?,
                    incoming_window: f.required(
                        f.uint(1, "incoming-window"),
                        "incoming-window",
                        "a uint",
                    )?,
                    next_outgoing_id: f.required(
                        f.uint(2, "next-outgoing-id"),
                        "next-outgoing-id",
                        "a uint",
                    )?,
                    outgoing_window: f.required(
                        f.uint(3, "outgoing-window"),
                        "outgoing-window",
                        "a uint",
                    )?,
                    handle: f.uint(4, "handle")?,
                    delivery_count: f.uint(5, "delivery-count")?,
                    link_credit: f.uint(6, "link-credit")?,
                    available: f.uint(7, "available")?,
                    drain: f.boolean(8, "drain")?,
                    echo: f.boolean(9, "echo")?,
                })
            }
            code::TRANSFER => {
                let f = f("transfer");
                Self::Transfer(Transfer {
                    handle: f.required(f.uint(0, "handle"), "handle", "a uint")?,
                    delivery_id: f.uint(1, "delivery-id")?,
                    delivery_tag: f.binary(2, "delivery-tag")?,
                    message_format: f.uint(3, "message-format")?,
                    settled: f.boolean(4, "settled")?,
                    more: f.boolean(5, "more")?,
                })
            }
            _ => Self::Other(p.clone()),
        })
    }

    /// The performative's code and positional fields.
    pub fn performative(&self) -> Performative {
        let (code, fields) = match self {
            Self::SaslMechanisms(m) => (code::SASL_MECHANISMS, vec![symbols(&m.mechanisms)]),
            Self::SaslInit(i) => (
                code::SASL_INIT,
                vec![
                    Value::Symbol(i.mechanism.clone()),
                    opt(i.initial_response.clone(), Value::Binary),
                    text(&i.hostname),
                ],
            ),
            Self::SaslOutcome(o) => (
                code::SASL_OUTCOME,
                vec![
                    Value::Ubyte(o.code),
                    opt(o.additional_data.clone(), Value::Binary),
                ],
            ),
            Self::Open(o) => (
                code::OPEN,
                vec![
                    Value::String(o.container_id.clone()),
                    text(&o.hostname),
                    opt(o.max_frame_size, Value::Uint),
                    opt(o.channel_max, Value::Ushort),
                    opt(o.idle_time_out, Value::Uint),
                    Value::Null,
                    Value::Null,
                    symbols(&o.offered_capabilities),
                    symbols(&o.desired_capabilities),
                    o.properties.clone().unwrap_or(Value::Null),
                ],
            ),
            Self::Begin(b) => (
                code::BEGIN,
                vec![
                    opt(b.remote_channel, Value::Ushort),
                    Value::Uint(b.next_outgoing_id),
                    Value::Uint(b.incoming_window),
                    Value::Uint(b.outgoing_window),
                    opt(b.handle_max, Value::Uint),
                ],
            ),
            Self::Attach(a) => (
                code::ATTACH,
                vec![
                    Value::String(a.name.clone()),
                    Value::Uint(a.handle),
                    Value::Bool(a.role),
                    opt(a.snd_settle_mode, Value::Ubyte),
                    opt(a.rcv_settle_mode, Value::Ubyte),
                    a.source.as_ref().map_or(Value::Null, |s| s.value(SOURCE)),
                    a.target.as_ref().map_or(Value::Null, |t| t.value(TARGET)),
                    Value::Null,
                    Value::Null,
                    opt(a.initial_delivery_count, Value::Uint),
                    opt(a.max_message_size, Value::Ulong),
                ],
            ),
            Self::Flow(f) => (
                code::FLOW,
                vec![
                    opt(f.next_incoming_id, Value::Uint),
                    Value::Uint(f.incoming_window),
                    Value::Uint(f.next_outgoing_id),
                    Value::Uint(f.outgoing_window),
                    opt(f.handle, Value::Uint),
                    opt(f.delivery_count, Value::Uint),
                    opt(f.link_credit, Value::Uint),
                    opt(f.available, Value::Uint),
                    opt(f.drain, Value::Bool),
                    opt(f.echo, Value::Bool),
                ],
            ),
            Self::Transfer(t) => (
                code::TRANSFER,
                vec![
                    Value::Uint(t.handle),
                    opt(t.delivery_id, Value::Uint),
                    opt(t.delivery_tag.clone(), Value::Binary),
                    opt(t.message_format, Value::Uint),
                    opt(t.settled, Value::Bool),
                    opt(t.more, Value::Bool),
                ],
            ),
            Self::Other(p) => return p.clone(),
        };
        Performative {
            code,
            fields: trimmed(fields),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_performatives_read_back_and_wrong_fields_are_named() {
        let attach = Typed::Attach(Attach {
            name: "l".into(),
            handle: 1,
            role: true,
            snd_settle_mode: None,
            rcv_settle_mode: Some(0),
            source: Some(Terminus {
                address: Some("/queues/q".into()),
                rest: vec![Value::Uint(0)],
            }),
            target: None,
            initial_delivery_count: None,
            max_message_size: Some(1 << 20),
        });
        for typed in [
            Typed::SaslMechanisms(SaslMechanisms {
                mechanisms: vec!["PLAIN".into(), "ANONYMOUS".into()],
            }),
            Typed::SaslInit(SaslInit {
                mechanism: "PLAIN".into(),
                initial_response: Some(Bytes::from_static(b"\0u\0p")),
                hostname: None,
            }),
            Typed::SaslOutcome(SaslOutcome {
                code: 1,
                additional_data: None,
            }),
            Typed::Open(Open {
                container_id: "c".into(),
                max_frame_size: Some(65_536),
                offered_capabilities: vec!["ANONYMOUS-RELAY".into()],
                ..Open::default()
            }),
            Typed::Begin(Begin {
                remote_channel: Some(0),
                next_outgoing_id: 1,
                incoming_window: 2,
                outgoing_window: 3,
                handle_max: None,
            }),
            attach,
            Typed::Flow(Flow {
                incoming_window: 10,
                next_outgoing_id: 0,
                outgoing_window: 10,
                handle: Some(1),
                link_credit: Some(100),
                ..Flow::default()
            }),
            Typed::Transfer(Transfer {
                handle: 1,
                delivery_id: Some(7),
                delivery_tag: Some(Bytes::from_static(b"t")),
                ..Transfer::default()
            }),
        ] {
            assert_eq!(Typed::read(&typed.performative()), Ok(typed));
        }
        let wrong = Performative {
            code: code::OPEN,
            fields: vec![Value::Uint(1)],
        };
        assert_eq!(
            Typed::read(&wrong).unwrap_err().to_string(),
            "open: field container-id is not a string"
        );
        let missing = Performative {
            code: code::TRANSFER,
            fields: vec![],
        };
        assert_eq!(
            Typed::read(&missing).unwrap_err().to_string(),
            "transfer: field handle is not a uint"
        );
    }
}
