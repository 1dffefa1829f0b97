//! How an AMQP message is stored in a stage body, and how a stored message is delivered.
//!
//! A stage body holds, in order: a format byte (1), the exchange and routing key it was
//! published with (each a length byte and the bytes), the content-header property bytes
//! exactly as the publisher sent them (a 4-byte length and the bytes), then the body. The
//! properties stay raw so a delivery carries them byte for byte (header tables included,
//! in the publisher's key order); they are parsed only when something must read or change
//! them (priority and expiry at publish, `x-death` at dead-lettering). The layout is also
//! in `docs/keyspace.md`.

use crate::wire::codec::{self, CodecError};
use amq_protocol::protocol::basic::AMQPProperties;
use amq_protocol::types::AMQPValue;
use bytes::{BufMut, Bytes};

/// Format byte of the layout above.
const FORMAT: u8 = 1;

/// A message as a stage holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage {
    /// The exchange it was published to (for a dead-lettered message: the dead-letter
    /// exchange).
    pub exchange: String,
    /// The routing key it was published with.
    pub routing_key: String,
    /// The content-header property bytes.
    pub raw_properties: Bytes,
    /// The body.
    pub body: Bytes,
}

/// Why a stage body is not a stored AMQP message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a stored AMQP message is damaged or of another format ({0}); the stage was written by another front or version"
)]
pub struct MessageFormatError(&'static str);

impl StoredMessage {
    /// The stage body: the one copy of the body on its way into the store (every queue the
    /// message goes to, and every stored chunk of it, shares this buffer).
    pub fn encode(&self) -> Bytes {
        let mut out = Vec::with_capacity(
            7 + self.exchange.len()
                + self.routing_key.len()
                + self.raw_properties.len()
                + self.body.len(),
        );
        out.put_u8(FORMAT);
        put_short(&mut out, &self.exchange);
        put_short(&mut out, &self.routing_key);
        out.put_u32(self.raw_properties.len() as u32);
        out.put_slice(&self.raw_properties);
        out.put_slice(&self.body);
        Bytes::from(out)
    }

    /// Decodes a stage body (sharing its bytes).
    ///
    /// # Errors
    /// [`MessageFormatError`] for a body of another layout.
    pub fn decode(stored: Bytes) -> Result<Self, MessageFormatError> {
        let mut at = 0;
        let byte = |at: &mut usize| -> Result<u8, MessageFormatError> {
            let b = *stored.get(*at).ok_or(MessageFormatError("truncated"))?;
            *at += 1;
            Ok(b)
        };
        if byte(&mut at)? != FORMAT {
            return Err(MessageFormatError("unknown format byte"));
        }
        let short = |at: &mut usize| -> Result<String, MessageFormatError> {
            let len = byte(at)? as usize;
            let s = stored
                .get(*at..*at + len)
                .ok_or(MessageFormatError("truncated name"))?;
            *at += len;
            String::from_utf8(s.to_vec()).map_err(|_| MessageFormatError("name is not UTF-8"))
        };
        let exchange = short(&mut at)?;
        let routing_key = short(&mut at)?;
        let len = stored
            .get(at..at + 4)
            .ok_or(MessageFormatError("truncated properties"))?;
        let len = u32::from_be_bytes([len[0], len[1], len[2], len[3]]) as usize;
        at += 4;
        if stored.len() < at + len {
            return Err(MessageFormatError("truncated properties"));
        }
        Ok(Self {
            exchange,
            routing_key,
            raw_properties: stored.slice(at..at + len),
            body: stored.slice(at + len..),
        })
    }

    /// The properties, parsed.
    ///
    /// # Errors
    /// [`CodecError::MalformedHeader`] when the stored bytes do not parse.
    pub fn properties(&self) -> Result<AMQPProperties, CodecError> {
        codec::decode_properties(&self.raw_properties)
    }

    /// The property bytes a delivery carries: as stored, or — for a quorum queue's message
    /// returned `returns` times before — with the `x-delivery-count` header RabbitMQ's
    /// quorum queues add (parsed and encoded again only then).
    ///
    /// # Errors
    /// [`CodecError::MalformedHeader`] when the stored bytes do not parse.
    pub fn delivered_properties(&self, quorum: bool, returns: u32) -> Result<Bytes, CodecError> {
        if !quorum || returns == 0 {
            return Ok(self.raw_properties.clone());
        }
        let properties = self.properties()?;
        let mut headers = properties.headers().clone().unwrap_or_default();
        headers.insert(
            "x-delivery-count".into(),
            AMQPValue::LongLongInt(i64::from(returns)),
        );
        let properties = properties.with_headers(headers);
        Ok(Bytes::from(codec::encode_properties(&properties)))
    }
}

fn put_short(out: &mut Vec<u8>, s: &str) {
    // Exchange names and routing keys are AMQP short strings: at most 255 bytes.
    let bytes = &s.as_bytes()[..s.len().min(255)];
    out.put_u8(bytes.len() as u8);
    out.put_slice(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_message_round_trips() {
        let m = StoredMessage {
            exchange: "amq.topic".into(),
            routing_key: "a.b.c".into(),
            raw_properties: Bytes::from_static(&[0x10, 0x00, 0x02]),
            body: Bytes::from_static(b"payload"),
        };
        assert_eq!(StoredMessage::decode(m.encode()).unwrap(), m);
    }

    #[test]
    fn truncated_and_foreign_bodies_are_refused() {
        assert!(StoredMessage::decode(Bytes::from_static(b"")).is_err());
        assert!(StoredMessage::decode(Bytes::from_static(b"\x02abc")).is_err());
        assert!(StoredMessage::decode(Bytes::from_static(b"\x01\x05ab")).is_err());
        assert!(
            StoredMessage::decode(Bytes::from_static(b"\x01\x00\x00\x00\x00\x00\x09")).is_err()
        );
    }
}
