//! The stream protocol's commands, both ways: what a client sends ([`Request`]) and what a
//! server sends ([`ServerFrame`]), each encoded without its size prefix ([`super::frame`]
//! adds it) and decoded from a frame's bytes, field by field as RabbitMQ 4's
//! `rabbit_stream_core` writes and parses them — including where that differs from
//! PROTOCOL.adoc: Subscribe's offset value only for the `offset` and `timestamp` types and
//! its properties only when there are any, an Open answer's properties likewise, Tune's and
//! Credit's answers without a correlation id, Metadata's without a response code.

use super::{Reader, Wire, WireError};
use bytes::{BufMut, Bytes, BytesMut};

/// The high bit of a key that marks a response.
pub const RESPONSE: u16 = 0x8000;

/// The commands' keys (PROTOCOL.adoc's names).
pub mod key {
    pub const DECLARE_PUBLISHER: u16 = 0x01;
    pub const PUBLISH: u16 = 0x02;
    pub const PUBLISH_CONFIRM: u16 = 0x03;
    pub const PUBLISH_ERROR: u16 = 0x04;
    pub const QUERY_PUBLISHER_SEQUENCE: u16 = 0x05;
    pub const DELETE_PUBLISHER: u16 = 0x06;
    pub const SUBSCRIBE: u16 = 0x07;
    pub const DELIVER: u16 = 0x08;
    pub const CREDIT: u16 = 0x09;
    pub const STORE_OFFSET: u16 = 0x0a;
    pub const QUERY_OFFSET: u16 = 0x0b;
    pub const UNSUBSCRIBE: u16 = 0x0c;
    pub const CREATE: u16 = 0x0d;
    pub const DELETE: u16 = 0x0e;
    pub const METADATA: u16 = 0x0f;
    pub const METADATA_UPDATE: u16 = 0x10;
    pub const PEER_PROPERTIES: u16 = 0x11;
    pub const SASL_HANDSHAKE: u16 = 0x12;
    pub const SASL_AUTHENTICATE: u16 = 0x13;
    pub const TUNE: u16 = 0x14;
    pub const OPEN: u16 = 0x15;
    pub const CLOSE: u16 = 0x16;
    pub const HEARTBEAT: u16 = 0x17;
    pub const ROUTE: u16 = 0x18;
    pub const PARTITIONS: u16 = 0x19;
    pub const CONSUMER_UPDATE: u16 = 0x1a;
    pub const EXCHANGE_COMMAND_VERSIONS: u16 = 0x1b;
    pub const STREAM_STATS: u16 = 0x1c;
    pub const CREATE_SUPER_STREAM: u16 = 0x1d;
    pub const DELETE_SUPER_STREAM: u16 = 0x1e;
    pub const RESOLVE_OFFSET_SPEC: u16 = 0x1f;
}

/// The response codes (PROTOCOL.adoc's names).
pub mod code {
    pub const OK: u16 = 0x01;
    pub const STREAM_DOES_NOT_EXIST: u16 = 0x02;
    pub const SUBSCRIPTION_ID_ALREADY_EXISTS: u16 = 0x03;
    pub const SUBSCRIPTION_ID_DOES_NOT_EXIST: u16 = 0x04;
    pub const STREAM_ALREADY_EXISTS: u16 = 0x05;
    pub const STREAM_NOT_AVAILABLE: u16 = 0x06;
    pub const SASL_MECHANISM_NOT_SUPPORTED: u16 = 0x07;
    pub const AUTHENTICATION_FAILURE: u16 = 0x08;
    pub const SASL_ERROR: u16 = 0x09;
    pub const SASL_CHALLENGE: u16 = 0x0a;
    pub const SASL_AUTHENTICATION_FAILURE_LOOPBACK: u16 = 0x0b;
    pub const VIRTUAL_HOST_ACCESS_FAILURE: u16 = 0x0c;
    pub const UNKNOWN_FRAME: u16 = 0x0d;
    pub const FRAME_TOO_LARGE: u16 = 0x0e;
    pub const INTERNAL_ERROR: u16 = 0x0f;
    pub const ACCESS_REFUSED: u16 = 0x10;
    pub const PRECONDITION_FAILED: u16 = 0x11;
    pub const PUBLISHER_DOES_NOT_EXIST: u16 = 0x12;
    pub const NO_OFFSET: u16 = 0x13;
}

/// Key–value pairs (properties, arguments).
pub type Pairs = Vec<(String, String)>;

/// Where a subscription starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    /// No change (a ConsumerUpdate answer only).
    None,
    /// The first offset the stream still has.
    First,
    /// The last chunk.
    Last,
    /// What is published from now on.
    Next,
    /// This offset.
    Offset(u64),
    /// The first chunk at or after this time (ms since the epoch).
    Timestamp(i64),
}

impl Wire for OffsetSpec {
    fn put(&self, out: &mut BytesMut) {
        match *self {
            Self::None => out.put_u16(0),
            Self::First => out.put_u16(1),
            Self::Last => out.put_u16(2),
            Self::Next => out.put_u16(3),
            Self::Offset(o) => {
                out.put_u16(4);
                out.put_u64(o);
            }
            Self::Timestamp(t) => {
                out.put_u16(5);
                out.put_i64(t);
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok(match u16::get(r)? {
            0 => Self::None,
            1 => Self::First,
            2 => Self::Last,
            3 => Self::Next,
            4 => Self::Offset(u64::get(r)?),
            5 => Self::Timestamp(i64::get(r)?),
            other => {
                return Err(WireError::Length {
                    what: "an offset type",
                    length: i64::from(other),
                });
            }
        })
    }
}

/// One message of a Publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// Its publishing id (the publisher's sequence).
    pub publishing_id: u64,
    /// Its filter value (Publish version 2).
    pub filter_value: Option<String>,
    /// The AMQP 1.0 message.
    pub message: Bytes,
}

/// What a client sends: PROTOCOL.adoc's commands and fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    PeerProperties {
        correlation_id: u32,
        properties: Pairs,
    },
    SaslHandshake {
        correlation_id: u32,
    },
    SaslAuthenticate {
        correlation_id: u32,
        mechanism: String,
        response: Option<Bytes>,
    },
    /// The answer to the server's Tune.
    Tune {
        frame_max: u32,
        heartbeat: u32,
    },
    Open {
        correlation_id: u32,
        vhost: String,
    },
    Close {
        correlation_id: u32,
        code: u16,
        reason: String,
    },
    /// The answer to a Close the server sent.
    CloseOk {
        correlation_id: u32,
        code: u16,
    },
    Heartbeat,
    /// `reference` empty for none (RabbitMQ takes a null one for an unknown frame).
    DeclarePublisher {
        correlation_id: u32,
        publisher_id: u8,
        reference: String,
        stream: String,
    },
    /// Version 2 when a message has a filter value.
    Publish {
        publisher_id: u8,
        messages: Vec<Published>,
    },
    QueryPublisherSequence {
        correlation_id: u32,
        reference: String,
        stream: String,
    },
    DeletePublisher {
        correlation_id: u32,
        publisher_id: u8,
    },
    Subscribe {
        correlation_id: u32,
        subscription_id: u8,
        stream: String,
        offset: OffsetSpec,
        credit: u16,
        properties: Pairs,
    },
    Credit {
        subscription_id: u8,
        credit: u16,
    },
    StoreOffset {
        reference: String,
        stream: String,
        offset: u64,
    },
    QueryOffset {
        correlation_id: u32,
        reference: String,
        stream: String,
    },
    Unsubscribe {
        correlation_id: u32,
        subscription_id: u8,
    },
    Create {
        correlation_id: u32,
        stream: String,
        arguments: Pairs,
    },
    Delete {
        correlation_id: u32,
        stream: String,
    },
    Metadata {
        correlation_id: u32,
        streams: Vec<String>,
    },
    Route {
        correlation_id: u32,
        routing_key: String,
        super_stream: String,
    },
    Partitions {
        correlation_id: u32,
        super_stream: String,
    },
    /// The answer to the server's ConsumerUpdate.
    ConsumerUpdateOk {
        correlation_id: u32,
        code: u16,
        offset: OffsetSpec,
    },
    ExchangeCommandVersions {
        correlation_id: u32,
        versions: Vec<(u16, u16, u16)>,
    },
    StreamStats {
        correlation_id: u32,
        stream: String,
    },
    CreateSuperStream {
        correlation_id: u32,
        name: String,
        partitions: Vec<String>,
        binding_keys: Vec<String>,
        arguments: Pairs,
    },
    DeleteSuperStream {
        correlation_id: u32,
        name: String,
    },
    ResolveOffsetSpec {
        correlation_id: u32,
        stream: String,
        offset: OffsetSpec,
        properties: Pairs,
    },
}

/// Writes `fields` in order.
macro_rules! put_all {
    ($out:expr, $($field:expr),* $(,)?) => {{ $(Wire::put($field, $out);)* }};
}

/// Properties at the end of a command: written only when there are any, read when bytes
/// are left.
fn put_trailing(pairs: &Pairs, out: &mut BytesMut) {
    if !pairs.is_empty() {
        pairs.put(out);
    }
}

fn get_trailing(r: &mut Reader<'_>) -> Result<Pairs, WireError> {
    let mut probe = Reader::new(r.rest);
    if probe.rest.is_empty() {
        return Ok(Pairs::new());
    }
    let pairs = Pairs::get(&mut probe)?;
    *r = probe;
    Ok(pairs)
}

impl Request {
    /// The command's key and version.
    pub fn key_version(&self) -> (u16, u16) {
        use key::*;
        match self {
            Self::PeerProperties { .. } => (PEER_PROPERTIES, 1),
            Self::SaslHandshake { .. } => (SASL_HANDSHAKE, 1),
            Self::SaslAuthenticate { .. } => (SASL_AUTHENTICATE, 1),
            Self::Tune { .. } => (TUNE | RESPONSE, 1),
            Self::Open { .. } => (OPEN, 1),
            Self::Close { .. } => (CLOSE, 1),
            Self::CloseOk { .. } => (CLOSE | RESPONSE, 1),
            Self::Heartbeat => (HEARTBEAT, 1),
            Self::DeclarePublisher { .. } => (DECLARE_PUBLISHER, 1),
            Self::Publish { messages, .. } => {
                let filtered = messages.iter().any(|m| m.filter_value.is_some());
                (PUBLISH, if filtered { 2 } else { 1 })
            }
            Self::QueryPublisherSequence { .. } => (QUERY_PUBLISHER_SEQUENCE, 1),
            Self::DeletePublisher { .. } => (DELETE_PUBLISHER, 1),
            Self::Subscribe { .. } => (SUBSCRIBE, 1),
            Self::Credit { .. } => (CREDIT, 1),
            Self::StoreOffset { .. } => (STORE_OFFSET, 1),
            Self::QueryOffset { .. } => (QUERY_OFFSET, 1),
            Self::Unsubscribe { .. } => (UNSUBSCRIBE, 1),
            Self::Create { .. } => (CREATE, 1),
            Self::Delete { .. } => (DELETE, 1),
            Self::Metadata { .. } => (METADATA, 1),
            Self::Route { .. } => (ROUTE, 1),
            Self::Partitions { .. } => (PARTITIONS, 1),
            Self::ConsumerUpdateOk { .. } => (CONSUMER_UPDATE | RESPONSE, 1),
            Self::ExchangeCommandVersions { .. } => (EXCHANGE_COMMAND_VERSIONS, 1),
            Self::StreamStats { .. } => (STREAM_STATS, 1),
            Self::CreateSuperStream { .. } => (CREATE_SUPER_STREAM, 1),
            Self::DeleteSuperStream { .. } => (DELETE_SUPER_STREAM, 1),
            Self::ResolveOffsetSpec { .. } => (RESOLVE_OFFSET_SPEC, 1),
        }
    }

    /// Appends the command (key, version, fields).
    pub fn encode(&self, out: &mut BytesMut) {
        let (key, version) = self.key_version();
        put_all!(out, &key, &version);
        match self {
            Self::PeerProperties {
                correlation_id,
                properties,
            } => put_all!(out, correlation_id, properties),
            Self::SaslHandshake { correlation_id } => put_all!(out, correlation_id),
            Self::SaslAuthenticate {
                correlation_id,
                mechanism,
                response,
            } => {
                put_all!(out, correlation_id, mechanism, response);
            }
            Self::Tune {
                frame_max,
                heartbeat,
            } => put_all!(out, frame_max, heartbeat),
            Self::Open {
                correlation_id,
                vhost,
            } => put_all!(out, correlation_id, vhost),
            Self::Close {
                correlation_id,
                code,
                reason,
            } => put_all!(out, correlation_id, code, reason),
            Self::CloseOk {
                correlation_id,
                code,
            } => put_all!(out, correlation_id, code),
            Self::Heartbeat => {}
            Self::DeclarePublisher {
                correlation_id,
                publisher_id,
                reference,
                stream,
            } => {
                put_all!(out, correlation_id, publisher_id, reference, stream);
            }
            Self::Publish {
                publisher_id,
                messages,
            } => {
                put_all!(out, publisher_id, &(messages.len() as i32));
                for m in messages {
                    m.publishing_id.put(out);
                    if version == 2 {
                        m.filter_value.put(out);
                    }
                    m.message.put(out);
                }
            }
            Self::QueryPublisherSequence {
                correlation_id,
                reference,
                stream,
            }
            | Self::QueryOffset {
                correlation_id,
                reference,
                stream,
            } => {
                put_all!(out, correlation_id, reference, stream);
            }
            Self::DeletePublisher {
                correlation_id,
                publisher_id: id,
            }
            | Self::Unsubscribe {
                correlation_id,
                subscription_id: id,
            } => put_all!(out, correlation_id, id),
            Self::Subscribe {
                correlation_id,
                subscription_id,
                stream,
                offset,
                credit,
                properties,
            } => {
                put_all!(out, correlation_id, subscription_id, stream, offset, credit);
                put_trailing(properties, out);
            }
            Self::Credit {
                subscription_id,
                credit,
            } => put_all!(out, subscription_id, credit),
            Self::StoreOffset {
                reference,
                stream,
                offset,
            } => put_all!(out, reference, stream, offset),
            Self::Create {
                correlation_id,
                stream,
                arguments,
            } => put_all!(out, correlation_id, stream, arguments),
            Self::Delete {
                correlation_id,
                stream: name,
            }
            | Self::StreamStats {
                correlation_id,
                stream: name,
            }
            | Self::Partitions {
                correlation_id,
                super_stream: name,
            }
            | Self::DeleteSuperStream {
                correlation_id,
                name,
            } => put_all!(out, correlation_id, name),
            Self::Metadata {
                correlation_id,
                streams,
            } => put_all!(out, correlation_id, streams),
            Self::Route {
                correlation_id,
                routing_key,
                super_stream,
            } => {
                put_all!(out, correlation_id, routing_key, super_stream);
            }
            Self::ConsumerUpdateOk {
                correlation_id,
                code,
                offset,
            } => put_all!(out, correlation_id, code, offset),
            Self::ExchangeCommandVersions {
                correlation_id,
                versions,
            } => put_all!(out, correlation_id, versions),
            Self::CreateSuperStream {
                correlation_id,
                name,
                partitions,
                binding_keys,
                arguments,
            } => {
                put_all!(
                    out,
                    correlation_id,
                    name,
                    partitions,
                    binding_keys,
                    arguments
                );
            }
            Self::ResolveOffsetSpec {
                correlation_id,
                stream,
                offset,
                properties,
            } => {
                put_all!(out, correlation_id, stream, offset);
                put_trailing(properties, out);
            }
        }
    }

    /// Decodes a command a client sent (a frame without its size).
    ///
    /// # Errors
    /// [`WireError`]: an unknown key or version, a field that does not decode, bytes left over.
    pub fn decode(frame: &[u8]) -> Result<Self, WireError> {
        use key::*;
        let mut r = Reader::new(frame);
        let (key, version) = (u16::get(&mut r)?, u16::get(&mut r)?);
        let unsupported = WireError::UnsupportedVersion { key, version };
        if version != 1 && !(key == PUBLISH && version == 2) {
            return Err(if Self::knows(key) {
                unsupported
            } else {
                WireError::UnknownKey(key)
            });
        }
        let r = &mut r;
        let request = match key {
            PEER_PROPERTIES => Self::PeerProperties {
                correlation_id: g(r)?,
                properties: g(r)?,
            },
            SASL_HANDSHAKE => Self::SaslHandshake {
                correlation_id: g(r)?,
            },
            SASL_AUTHENTICATE => Self::SaslAuthenticate {
                correlation_id: g(r)?,
                mechanism: g(r)?,
                response: g(r)?,
            },
            k if k == TUNE | RESPONSE => Self::Tune {
                frame_max: g(r)?,
                heartbeat: g(r)?,
            },
            OPEN => Self::Open {
                correlation_id: g(r)?,
                vhost: g(r)?,
            },
            CLOSE => Self::Close {
                correlation_id: g(r)?,
                code: g(r)?,
                reason: g(r)?,
            },
            k if k == CLOSE | RESPONSE => Self::CloseOk {
                correlation_id: g(r)?,
                code: g(r)?,
            },
            HEARTBEAT => Self::Heartbeat,
            DECLARE_PUBLISHER => Self::DeclarePublisher {
                correlation_id: g(r)?,
                publisher_id: g(r)?,
                reference: g(r)?,
                stream: g(r)?,
            },
            PUBLISH => {
                let publisher_id = g(r)?;
                let count = i32::get(r)?;
                // Each message takes at least 12 bytes (id and length).
                let n = r
                    .length(i64::from(count), 12, "published messages")?
                    .unwrap_or(0);
                let mut messages = Vec::with_capacity(n);
                for _ in 0..n {
                    messages.push(Published {
                        publishing_id: g(r)?,
                        filter_value: if version == 2 { g(r)? } else { None },
                        message: g(r)?,
                    });
                }
                Self::Publish {
                    publisher_id,
                    messages,
                }
            }
            QUERY_PUBLISHER_SEQUENCE => Self::QueryPublisherSequence {
                correlation_id: g(r)?,
                reference: g(r)?,
                stream: g(r)?,
            },
            DELETE_PUBLISHER => Self::DeletePublisher {
                correlation_id: g(r)?,
                publisher_id: g(r)?,
            },
            SUBSCRIBE => Self::Subscribe {
                correlation_id: g(r)?,
                subscription_id: g(r)?,
                stream: g(r)?,
                offset: g(r)?,
                credit: g(r)?,
                properties: get_trailing(r)?,
            },
            CREDIT => Self::Credit {
                subscription_id: g(r)?,
                credit: g(r)?,
            },
            STORE_OFFSET => Self::StoreOffset {
                reference: g(r)?,
                stream: g(r)?,
                offset: g(r)?,
            },
            QUERY_OFFSET => Self::QueryOffset {
                correlation_id: g(r)?,
                reference: g(r)?,
                stream: g(r)?,
            },
            UNSUBSCRIBE => Self::Unsubscribe {
                correlation_id: g(r)?,
                subscription_id: g(r)?,
            },
            CREATE => Self::Create {
                correlation_id: g(r)?,
                stream: g(r)?,
                arguments: g(r)?,
            },
            DELETE => Self::Delete {
                correlation_id: g(r)?,
                stream: g(r)?,
            },
            METADATA => Self::Metadata {
                correlation_id: g(r)?,
                streams: g(r)?,
            },
            ROUTE => Self::Route {
                correlation_id: g(r)?,
                routing_key: g(r)?,
                super_stream: g(r)?,
            },
            PARTITIONS => Self::Partitions {
                correlation_id: g(r)?,
                super_stream: g(r)?,
            },
            k if k == CONSUMER_UPDATE | RESPONSE => Self::ConsumerUpdateOk {
                correlation_id: g(r)?,
                code: g(r)?,
                offset: g(r)?,
            },
            EXCHANGE_COMMAND_VERSIONS => Self::ExchangeCommandVersions {
                correlation_id: g(r)?,
                versions: g(r)?,
            },
            STREAM_STATS => Self::StreamStats {
                correlation_id: g(r)?,
                stream: g(r)?,
            },
            CREATE_SUPER_STREAM => Self::CreateSuperStream {
                correlation_id: g(r)?,
                name: g(r)?,
                partitions: g(r)?,
                binding_keys: g(r)?,
                arguments: g(r)?,
            },
            DELETE_SUPER_STREAM => Self::DeleteSuperStream {
                correlation_id: g(r)?,
                name: g(r)?,
            },
            RESOLVE_OFFSET_SPEC => Self::ResolveOffsetSpec {
                correlation_id: g(r)?,
                stream: g(r)?,
                offset: g(r)?,
                properties: get_trailing(r)?,
            },
            _ => return Err(WireError::UnknownKey(key)),
        };
        r.finish()?;
        Ok(request)
    }

    /// Whether `key` is a command a client sends.
    fn knows(key: u16) -> bool {
        use key::*;
        matches!(key & !RESPONSE, DECLARE_PUBLISHER..=RESOLVE_OFFSET_SPEC)
            && !matches!(
                key,
                PUBLISH_CONFIRM | PUBLISH_ERROR | DELIVER | METADATA_UPDATE
            )
    }
}

/// Reads one field.
fn g<T: Wire>(r: &mut Reader<'_>) -> Result<T, WireError> {
    T::get(r)
}

/// A stream's entry in a Metadata answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamMetadata {
    /// Its name.
    pub stream: String,
    /// OK, or why it has no leader (does not exist, not available, access refused).
    pub code: u16,
    /// The broker leading it (an index of the answer's brokers; `u16::MAX` for none).
    pub leader: u16,
    /// Its replicas' brokers.
    pub replicas: Vec<u16>,
}

/// What an answer carries after its response code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Nothing.
    Empty,
    /// Key–value pairs (PeerProperties; Open, when there are any).
    Properties(Pairs),
    /// SASL mechanisms (SaslHandshake).
    Mechanisms(Vec<String>),
    /// A SASL challenge (SaslAuthenticate; absent without one).
    Challenge(Option<String>),
    /// A publishing id or an offset (QueryPublisherSequence, QueryOffset).
    Value(u64),
    /// Streams (Route, Partitions).
    Streams(Vec<String>),
    /// Command versions (ExchangeCommandVersions).
    Versions(Vec<(u16, u16, u16)>),
    /// Statistics (StreamStats).
    Stats(Vec<(String, i64)>),
    /// An offset type and offset (ResolveOffsetSpec).
    Resolved(u16, u64),
}

/// What a server sends: PROTOCOL.adoc's commands and fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerFrame {
    /// The answer to request `key` (its key without the response bit).
    Response {
        key: u16,
        correlation_id: u32,
        code: u16,
        answer: Answer,
    },
    Tune {
        frame_max: u32,
        heartbeat: u32,
    },
    Close {
        correlation_id: u32,
        code: u16,
        reason: String,
    },
    Heartbeat,
    PublishConfirm {
        publisher_id: u8,
        publishing_ids: Vec<u64>,
    },
    PublishError {
        publisher_id: u8,
        errors: Vec<(u64, u16)>,
    },
    /// Version 2 carries the committed chunk id.
    Deliver {
        subscription_id: u8,
        committed_chunk_id: Option<u64>,
        chunk: Bytes,
    },
    MetadataUpdate {
        code: u16,
        stream: String,
    },
    /// A Credit refused (the only Credit answer there is).
    CreditRefused {
        code: u16,
        subscription_id: u8,
    },
    ConsumerUpdate {
        correlation_id: u32,
        subscription_id: u8,
        active: bool,
    },
    Metadata {
        correlation_id: u32,
        brokers: Vec<(u16, String, u32)>,
        streams: Vec<StreamMetadata>,
    },
}

impl ServerFrame {
    /// Appends the command (key, version, fields).
    pub fn encode(&self, out: &mut BytesMut) {
        use key::*;
        match self {
            Self::Response {
                key,
                correlation_id,
                code,
                answer,
            } => {
                put_all!(out, &(key | RESPONSE), &1u16, correlation_id, code);
                match answer {
                    Answer::Empty | Answer::Challenge(None) => {}
                    Answer::Properties(p) if *key == OPEN => put_trailing(p, out),
                    Answer::Properties(p) => p.put(out),
                    Answer::Mechanisms(s) | Answer::Streams(s) => s.put(out),
                    Answer::Challenge(Some(c)) => c.put(out),
                    Answer::Value(v) => v.put(out),
                    Answer::Versions(v) => v.put(out),
                    Answer::Stats(s) => s.put(out),
                    Answer::Resolved(t, o) => put_all!(out, t, o),
                }
            }
            Self::Tune {
                frame_max,
                heartbeat,
            } => put_all!(out, &TUNE, &1u16, frame_max, heartbeat),
            Self::Close {
                correlation_id,
                code,
                reason,
            } => {
                put_all!(out, &CLOSE, &1u16, correlation_id, code, reason);
            }
            Self::Heartbeat => put_all!(out, &HEARTBEAT, &1u16),
            Self::PublishConfirm {
                publisher_id,
                publishing_ids,
            } => {
                put_all!(out, &PUBLISH_CONFIRM, &1u16, publisher_id, publishing_ids);
            }
            Self::PublishError {
                publisher_id,
                errors,
            } => {
                put_all!(out, &PUBLISH_ERROR, &1u16, publisher_id, errors);
            }
            Self::Deliver {
                subscription_id,
                committed_chunk_id,
                chunk,
            } => {
                let version: u16 = if committed_chunk_id.is_some() { 2 } else { 1 };
                put_all!(out, &DELIVER, &version, subscription_id);
                if let Some(id) = committed_chunk_id {
                    id.put(out);
                }
                out.put_slice(chunk);
            }
            Self::MetadataUpdate { code, stream } => {
                put_all!(out, &METADATA_UPDATE, &1u16, code, stream)
            }
            Self::CreditRefused {
                code,
                subscription_id,
            } => {
                put_all!(out, &(CREDIT | RESPONSE), &1u16, code, subscription_id);
            }
            Self::ConsumerUpdate {
                correlation_id,
                subscription_id,
                active,
            } => {
                put_all!(
                    out,
                    &CONSUMER_UPDATE,
                    &1u16,
                    correlation_id,
                    subscription_id,
                    &u8::from(*active)
                );
            }
            Self::Metadata {
                correlation_id,
                brokers,
                streams,
            } => {
                put_all!(
                    out,
                    &(METADATA | RESPONSE),
                    &1u16,
                    correlation_id,
                    brokers,
                    &(streams.len() as i32)
                );
                for s in streams {
                    put_all!(out, &s.stream, &s.code, &s.leader, &s.replicas);
                }
            }
        }
    }

    /// Decodes a command a server sent (a frame without its size).
    ///
    /// # Errors
    /// [`WireError`]: an unknown key or version, a field that does not decode, bytes left over.
    pub fn decode(frame: &[u8]) -> Result<Self, WireError> {
        use key::*;
        let mut r = Reader::new(frame);
        let (raw, version) = (u16::get(&mut r)?, u16::get(&mut r)?);
        let r = &mut r;
        if version != 1 && raw != DELIVER {
            return Err(WireError::UnsupportedVersion { key: raw, version });
        }
        let frame = match raw {
            TUNE => Self::Tune {
                frame_max: g(r)?,
                heartbeat: g(r)?,
            },
            CLOSE => Self::Close {
                correlation_id: g(r)?,
                code: g(r)?,
                reason: g(r)?,
            },
            HEARTBEAT => Self::Heartbeat,
            PUBLISH_CONFIRM => Self::PublishConfirm {
                publisher_id: g(r)?,
                publishing_ids: g(r)?,
            },
            PUBLISH_ERROR => Self::PublishError {
                publisher_id: g(r)?,
                errors: g(r)?,
            },
            DELIVER => Self::Deliver {
                subscription_id: g(r)?,
                committed_chunk_id: match version {
                    1 => None,
                    2 => Some(g(r)?),
                    _ => return Err(WireError::UnsupportedVersion { key: raw, version }),
                },
                chunk: Bytes::copy_from_slice(r.rest()),
            },
            METADATA_UPDATE => Self::MetadataUpdate {
                code: g(r)?,
                stream: g(r)?,
            },
            CONSUMER_UPDATE => Self::ConsumerUpdate {
                correlation_id: g(r)?,
                subscription_id: g(r)?,
                active: u8::get(r)? != 0,
            },
            k if k == CREDIT | RESPONSE => Self::CreditRefused {
                code: g(r)?,
                subscription_id: g(r)?,
            },
            k if k == METADATA | RESPONSE => {
                let correlation_id = g(r)?;
                let brokers = g(r)?;
                let count = i32::get(r)?;
                let n = r
                    .length(i64::from(count), 10, "stream metadata")?
                    .unwrap_or(0);
                let mut streams = Vec::with_capacity(n);
                for _ in 0..n {
                    streams.push(StreamMetadata {
                        stream: g(r)?,
                        code: g(r)?,
                        leader: g(r)?,
                        replicas: g(r)?,
                    });
                }
                Self::Metadata {
                    correlation_id,
                    brokers,
                    streams,
                }
            }
            k if k & RESPONSE != 0 => {
                let key = k & !RESPONSE;
                let (correlation_id, code) = (g(r)?, g(r)?);
                let answer = match key {
                    PEER_PROPERTIES => Answer::Properties(g(r)?),
                    OPEN => Answer::Properties(get_trailing(r)?),
                    SASL_HANDSHAKE => Answer::Mechanisms(g(r)?),
                    SASL_AUTHENTICATE if r.rest.is_empty() => Answer::Challenge(None),
                    SASL_AUTHENTICATE => Answer::Challenge(Some(g(r)?)),
                    QUERY_PUBLISHER_SEQUENCE | QUERY_OFFSET => Answer::Value(g(r)?),
                    ROUTE | PARTITIONS => Answer::Streams(g(r)?),
                    EXCHANGE_COMMAND_VERSIONS => Answer::Versions(g(r)?),
                    STREAM_STATS => Answer::Stats(g(r)?),
                    RESOLVE_OFFSET_SPEC => Answer::Resolved(g(r)?, g(r)?),
                    _ => Answer::Empty,
                };
                Self::Response {
                    key,
                    correlation_id,
                    code,
                    answer,
                }
            }
            _ => return Err(WireError::UnknownKey(raw)),
        };
        r.finish()?;
        Ok(frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(kv: &[(&str, &str)]) -> Pairs {
        kv.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn every_request_reads_back_as_written() {
        let requests = [
            Request::PeerProperties {
                correlation_id: 1,
                properties: pairs(&[("product", "x")]),
            },
            Request::SaslHandshake { correlation_id: 2 },
            Request::SaslAuthenticate {
                correlation_id: 3,
                mechanism: "PLAIN".into(),
                response: Some(Bytes::from_static(b"\0u\0p")),
            },
            Request::SaslAuthenticate {
                correlation_id: 3,
                mechanism: "EXTERNAL".into(),
                response: None,
            },
            Request::Tune {
                frame_max: 1 << 20,
                heartbeat: 60,
            },
            Request::Open {
                correlation_id: 4,
                vhost: "/".into(),
            },
            Request::Close {
                correlation_id: 5,
                code: code::OK,
                reason: "bye".into(),
            },
            Request::CloseOk {
                correlation_id: 5,
                code: code::OK,
            },
            Request::Heartbeat,
            Request::DeclarePublisher {
                correlation_id: 6,
                publisher_id: 0,
                reference: String::new(),
                stream: "s".into(),
            },
            Request::Publish {
                publisher_id: 0,
                messages: vec![Published {
                    publishing_id: 9,
                    filter_value: None,
                    message: Bytes::from_static(b"m"),
                }],
            },
            Request::Publish {
                publisher_id: 1,
                messages: vec![
                    Published {
                        publishing_id: 1,
                        filter_value: Some("eu".into()),
                        message: Bytes::from_static(b"a"),
                    },
                    Published {
                        publishing_id: 2,
                        filter_value: None,
                        message: Bytes::new(),
                    },
                ],
            },
            Request::QueryPublisherSequence {
                correlation_id: 7,
                reference: "p".into(),
                stream: "s".into(),
            },
            Request::DeletePublisher {
                correlation_id: 8,
                publisher_id: 3,
            },
            Request::Subscribe {
                correlation_id: 9,
                subscription_id: 1,
                stream: "s".into(),
                offset: OffsetSpec::Next,
                credit: 10,
                properties: Pairs::new(),
            },
            Request::Subscribe {
                correlation_id: 9,
                subscription_id: 1,
                stream: "s".into(),
                offset: OffsetSpec::Timestamp(-1),
                credit: 1,
                properties: pairs(&[("filter.0", "eu")]),
            },
            Request::Credit {
                subscription_id: 1,
                credit: 5,
            },
            Request::StoreOffset {
                reference: "c".into(),
                stream: "s".into(),
                offset: 42,
            },
            Request::QueryOffset {
                correlation_id: 10,
                reference: "c".into(),
                stream: "s".into(),
            },
            Request::Unsubscribe {
                correlation_id: 11,
                subscription_id: 1,
            },
            Request::Create {
                correlation_id: 12,
                stream: "s".into(),
                arguments: pairs(&[("max-age", "1h")]),
            },
            Request::Delete {
                correlation_id: 13,
                stream: "s".into(),
            },
            Request::Metadata {
                correlation_id: 14,
                streams: vec!["a".into(), "b".into()],
            },
            Request::Route {
                correlation_id: 15,
                routing_key: "k".into(),
                super_stream: "ss".into(),
            },
            Request::Partitions {
                correlation_id: 16,
                super_stream: "ss".into(),
            },
            Request::ConsumerUpdateOk {
                correlation_id: 17,
                code: code::OK,
                offset: OffsetSpec::Offset(7),
            },
            Request::ExchangeCommandVersions {
                correlation_id: 18,
                versions: vec![(key::PUBLISH, 1, 2)],
            },
            Request::StreamStats {
                correlation_id: 19,
                stream: "s".into(),
            },
            Request::CreateSuperStream {
                correlation_id: 20,
                name: "ss".into(),
                partitions: vec!["ss-0".into()],
                binding_keys: vec!["0".into()],
                arguments: Pairs::new(),
            },
            Request::DeleteSuperStream {
                correlation_id: 21,
                name: "ss".into(),
            },
            Request::ResolveOffsetSpec {
                correlation_id: 22,
                stream: "s".into(),
                offset: OffsetSpec::First,
                properties: Pairs::new(),
            },
        ];
        for request in requests {
            let mut out = BytesMut::new();
            request.encode(&mut out);
            assert_eq!(Request::decode(&out), Ok(request.clone()), "{out:?}");
            // Cut short anywhere, it is an error, never a panic.
            for end in 0..out.len() {
                assert!(
                    Request::decode(&out[..end]).is_err()
                        || matches!(
                            request,
                            Request::Subscribe { .. } | Request::ResolveOffsetSpec { .. }
                        )
                );
            }
        }
    }

    #[test]
    fn every_server_frame_reads_back_as_written() {
        let frames = [
            ServerFrame::Response {
                key: key::PEER_PROPERTIES,
                correlation_id: 1,
                code: code::OK,
                answer: Answer::Properties(pairs(&[("a", "b")])),
            },
            ServerFrame::Response {
                key: key::OPEN,
                correlation_id: 1,
                code: code::OK,
                answer: Answer::Properties(Pairs::new()),
            },
            ServerFrame::Response {
                key: key::SASL_HANDSHAKE,
                correlation_id: 2,
                code: code::OK,
                answer: Answer::Mechanisms(vec!["PLAIN".into()]),
            },
            ServerFrame::Response {
                key: key::SASL_AUTHENTICATE,
                correlation_id: 3,
                code: code::OK,
                answer: Answer::Challenge(None),
            },
            ServerFrame::Response {
                key: key::QUERY_OFFSET,
                correlation_id: 4,
                code: code::NO_OFFSET,
                answer: Answer::Value(0),
            },
            ServerFrame::Response {
                key: key::CREATE,
                correlation_id: 5,
                code: code::STREAM_ALREADY_EXISTS,
                answer: Answer::Empty,
            },
            ServerFrame::Response {
                key: key::PARTITIONS,
                correlation_id: 6,
                code: code::OK,
                answer: Answer::Streams(vec!["p".into()]),
            },
            ServerFrame::Response {
                key: key::EXCHANGE_COMMAND_VERSIONS,
                correlation_id: 7,
                code: code::OK,
                answer: Answer::Versions(vec![(2, 1, 2)]),
            },
            ServerFrame::Response {
                key: key::STREAM_STATS,
                correlation_id: 8,
                code: code::OK,
                answer: Answer::Stats(vec![("first_chunk_id".into(), -1)]),
            },
            ServerFrame::Response {
                key: key::RESOLVE_OFFSET_SPEC,
                correlation_id: 9,
                code: code::OK,
                answer: Answer::Resolved(4, 10),
            },
            ServerFrame::Tune {
                frame_max: 1_048_576,
                heartbeat: 60,
            },
            ServerFrame::Close {
                correlation_id: 1,
                code: code::OK,
                reason: "shutdown".into(),
            },
            ServerFrame::Heartbeat,
            ServerFrame::PublishConfirm {
                publisher_id: 0,
                publishing_ids: vec![1, 2],
            },
            ServerFrame::PublishError {
                publisher_id: 0,
                errors: vec![(3, code::PUBLISHER_DOES_NOT_EXIST)],
            },
            ServerFrame::Deliver {
                subscription_id: 1,
                committed_chunk_id: None,
                chunk: Bytes::from_static(b"chunk"),
            },
            ServerFrame::Deliver {
                subscription_id: 1,
                committed_chunk_id: Some(7),
                chunk: Bytes::new(),
            },
            ServerFrame::MetadataUpdate {
                code: code::STREAM_NOT_AVAILABLE,
                stream: "s".into(),
            },
            ServerFrame::CreditRefused {
                code: code::SUBSCRIPTION_ID_DOES_NOT_EXIST,
                subscription_id: 9,
            },
            ServerFrame::ConsumerUpdate {
                correlation_id: 10,
                subscription_id: 1,
                active: true,
            },
            ServerFrame::Metadata {
                correlation_id: 11,
                brokers: vec![(0, "localhost".into(), 5552)],
                streams: vec![
                    StreamMetadata {
                        stream: "s".into(),
                        code: code::OK,
                        leader: 0,
                        replicas: vec![],
                    },
                    StreamMetadata {
                        stream: "t".into(),
                        code: code::STREAM_DOES_NOT_EXIST,
                        leader: u16::MAX,
                        replicas: vec![],
                    },
                ],
            },
        ];
        for frame in frames {
            let mut out = BytesMut::new();
            frame.encode(&mut out);
            assert_eq!(ServerFrame::decode(&out), Ok(frame), "{out:?}");
        }
    }

    #[test]
    fn unknown_keys_other_versions_and_trailing_bytes_are_refused() {
        assert_eq!(
            Request::decode(&[0x00, 0x7f, 0, 1]),
            Err(WireError::UnknownKey(0x7f))
        );
        assert_eq!(
            Request::decode(&[0, key::OPEN as u8, 0, 9, 0, 0, 0, 1, 0, 1, b'/']),
            Err(WireError::UnsupportedVersion {
                key: key::OPEN,
                version: 9
            })
        );
        assert_eq!(
            Request::decode(&[0, key::HEARTBEAT as u8, 0, 1, 0]),
            Err(WireError::Trailing(1))
        );
        // Sent by a server only.
        assert_eq!(
            Request::decode(&[0, key::DELIVER as u8, 0, 1, 1]),
            Err(WireError::UnknownKey(key::DELIVER))
        );
    }
}
