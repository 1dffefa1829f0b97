//! AMQP 1.0's transport (part 2 of the OASIS standard; SASL in part 5): the 8-byte protocol
//! headers that open each layer, and frames — a size, a data offset, a type (AMQP or SASL),
//! a channel, then a performative (a described list: `open`, `attach`, `transfer`,
//! `sasl-init`, …) and, for a transfer, the message bytes after it. A frame without a
//! body is a heartbeat. Performatives are kept as their descriptor code and fields, read
//! by position as the standard lists them; a symbolic descriptor reads as its code.
//!
//! [`next_frame`] refuses a frame larger than the negotiated `max-frame-size` before its
//! body is awaited, and a data offset or size the frame cannot hold.

use crate::composite::{present, trimmed};
use crate::types::{DecodeError, Value};
use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The layer a protocol header opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// AMQP itself (protocol id 0).
    Amqp,
    /// TLS (protocol id 2).
    Tls,
    /// SASL (protocol id 3).
    Sasl,
}

impl Layer {
    /// The 8-byte header that opens the layer: `AMQP`, the protocol id, version 1.0.0.
    pub fn header(self) -> [u8; 8] {
        let id = match self {
            Self::Amqp => 0,
            Self::Tls => 2,
            Self::Sasl => 3,
        };
        [b'A', b'M', b'Q', b'P', id, 1, 0, 0]
    }

    /// The layer an 8-byte protocol header opens; `None` for any other 8 bytes (another
    /// version, AMQP 0-9-1's header).
    pub fn of_header(header: &[u8]) -> Option<Self> {
        match header {
            [b'A', b'M', b'Q', b'P', id, 1, 0, 0] => match id {
                0 => Some(Self::Amqp),
                2 => Some(Self::Tls),
                3 => Some(Self::Sasl),
                _ => None,
            },
            _ => None,
        }
    }
}

/// The performatives' descriptor codes (and their symbolic names).
pub mod performative {
    pub const OPEN: u64 = 0x10;
    pub const BEGIN: u64 = 0x11;
    pub const ATTACH: u64 = 0x12;
    pub const FLOW: u64 = 0x13;
    pub const TRANSFER: u64 = 0x14;
    pub const DISPOSITION: u64 = 0x15;
    pub const DETACH: u64 = 0x16;
    pub const END: u64 = 0x17;
    pub const CLOSE: u64 = 0x18;
    pub const SASL_MECHANISMS: u64 = 0x40;
    pub const SASL_INIT: u64 = 0x41;
    pub const SASL_CHALLENGE: u64 = 0x42;
    pub const SASL_RESPONSE: u64 = 0x43;
    pub const SASL_OUTCOME: u64 = 0x44;
    /// (code, symbolic descriptor) of each.
    pub const NAMES: [(u64, &str); 14] = [
        (OPEN, "amqp:open:list"),
        (BEGIN, "amqp:begin:list"),
        (ATTACH, "amqp:attach:list"),
        (FLOW, "amqp:flow:list"),
        (TRANSFER, "amqp:transfer:list"),
        (DISPOSITION, "amqp:disposition:list"),
        (DETACH, "amqp:detach:list"),
        (END, "amqp:end:list"),
        (CLOSE, "amqp:close:list"),
        (SASL_MECHANISMS, "amqp:sasl-mechanisms:list"),
        (SASL_INIT, "amqp:sasl-init:list"),
        (SASL_CHALLENGE, "amqp:sasl-challenge:list"),
        (SASL_RESPONSE, "amqp:sasl-response:list"),
        (SASL_OUTCOME, "amqp:sasl-outcome:list"),
    ];
}

/// A frame's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameType {
    /// 0x00.
    Amqp,
    /// 0x01.
    Sasl,
}

/// A performative: its descriptor code and its fields in the standard's order (trailing
/// absent ones left out).
#[derive(Debug, Clone, PartialEq)]
pub struct Performative {
    pub code: u64,
    pub fields: Vec<Value>,
}

impl Performative {
    /// Field `i`, `None` when absent or null.
    pub fn field(&self, i: usize) -> Option<&Value> {
        present(&self.fields, i)
    }
}

/// One frame.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub frame_type: FrameType,
    pub channel: u16,
    /// `None` for an empty frame (a heartbeat).
    pub performative: Option<Performative>,
    /// What follows the performative: a transfer's message bytes.
    pub payload: Bytes,
}

/// Why bytes are not a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Larger than the negotiated maximum.
    #[error("a frame of {size} bytes is larger than the maximum of {max}")]
    TooLarge { size: usize, max: usize },
    /// A size below 8, a data offset below 2 or past the frame, or a type other than 0 and 1.
    #[error("malformed frame header: {0}")]
    Header(String),
    /// A body that is not a performative.
    #[error("not a performative: {0}")]
    Body(String),
    #[error(transparent)]
    Value(#[from] DecodeError),
}

/// Takes the next whole frame off `buffer`; `None` while it is not all there.
///
/// # Errors
/// [`FrameError`]: too large (checked from the size alone), a malformed header or body.
pub fn next_frame(buffer: &mut BytesMut, max: usize) -> Result<Option<Frame>, FrameError> {
    let Some(header) = buffer.get(..8) else {
        return Ok(None);
    };
    let size = u32::from_be_bytes(header[..4].try_into().expect("four bytes")) as usize;
    let (doff, kind, channel) = (
        usize::from(header[4]) * 4,
        header[5],
        u16::from_be_bytes([header[6], header[7]]),
    );
    if size > max {
        return Err(FrameError::TooLarge { size, max });
    }
    if size < 8 || doff < 8 || doff > size {
        return Err(FrameError::Header(format!(
            "size {size}, data offset {doff}"
        )));
    }
    let frame_type = match kind {
        0 => FrameType::Amqp,
        1 => FrameType::Sasl,
        other => return Err(FrameError::Header(format!("frame type {other}"))),
    };
    if buffer.len() < size {
        buffer.reserve(size - buffer.len());
        return Ok(None);
    }
    let mut frame = buffer.split_to(size).freeze();
    frame.advance(doff);
    if frame.is_empty() {
        return Ok(Some(Frame {
            frame_type,
            channel,
            performative: None,
            payload: Bytes::new(),
        }));
    }
    let mut body = &frame[..];
    let performative = match Value::decode(&mut body)? {
        Value::Described(descriptor, fields) => {
            let code = match *descriptor {
                Value::Ulong(code) => code,
                Value::Symbol(name) => performative::NAMES
                    .iter()
                    .find(|(_, n)| *n == name)
                    .map(|(code, _)| *code)
                    .ok_or_else(|| FrameError::Body(format!("descriptor {name}")))?,
                other => return Err(FrameError::Body(format!("descriptor {other:?}"))),
            };
            let Value::List(fields) = *fields else {
                return Err(FrameError::Body("fields that are not a list".into()));
            };
            Performative { code, fields }
        }
        _ => return Err(FrameError::Body("a value that is not described".into())),
    };
    let payload = frame.slice(frame.len() - body.len()..);
    Ok(Some(Frame {
        frame_type,
        channel,
        performative: Some(performative),
        payload,
    }))
}

/// Appends `frame` (data offset 2: no extended header).
pub fn encode_frame(frame: &Frame, out: &mut BytesMut) {
    let mut body = BytesMut::new();
    if let Some(p) = &frame.performative {
        let fields = Value::List(trimmed(p.fields.clone()));
        Value::Described(Box::new(Value::Ulong(p.code)), Box::new(fields)).encode(&mut body);
    }
    body.put_slice(&frame.payload);
    out.put_u32((body.len() + 8) as u32);
    out.put_u8(2);
    out.put_u8(match frame.frame_type {
        FrameType::Amqp => 0,
        FrameType::Sasl => 1,
    });
    out.put_u16(frame.channel);
    out.put_slice(&body);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_read_back_and_bad_headers_and_oversized_frames_are_refused() {
        let transfer = Frame {
            frame_type: FrameType::Amqp,
            channel: 3,
            performative: Some(Performative {
                code: performative::TRANSFER,
                fields: vec![
                    Value::Uint(0),
                    Value::Uint(1),
                    Value::Binary(Bytes::from_static(b"\0")),
                ],
            }),
            payload: Bytes::from_static(b"\x00\x53\x75\xa0\x02hi"),
        };
        let heartbeat = Frame {
            frame_type: FrameType::Amqp,
            channel: 0,
            performative: None,
            payload: Bytes::new(),
        };
        let mut buffer = BytesMut::new();
        encode_frame(&transfer, &mut buffer);
        encode_frame(&heartbeat, &mut buffer);
        let whole = buffer.clone();
        buffer.truncate(whole.len() - 1);
        assert_eq!(next_frame(&mut buffer, 1 << 16), Ok(Some(transfer)));
        assert_eq!(next_frame(&mut buffer, 1 << 16), Ok(None));
        buffer.extend_from_slice(&whole[whole.len() - 1..]);
        assert_eq!(next_frame(&mut buffer, 1 << 16), Ok(Some(heartbeat)));
        let oversized = [0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0];
        assert!(matches!(
            next_frame(&mut BytesMut::from(&oversized[..]), 512),
            Err(FrameError::TooLarge { .. })
        ));
        let doff_past_size = [0, 0, 0, 8, 3, 0, 0, 0];
        assert!(matches!(
            next_frame(&mut BytesMut::from(&doff_past_size[..]), 512),
            Err(FrameError::Header(_))
        ));
        assert_eq!(Layer::of_header(&Layer::Sasl.header()), Some(Layer::Sasl));
        assert_eq!(Layer::of_header(b"AMQP\x00\x00\x09\x01"), None);
    }
}
