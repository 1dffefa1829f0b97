//! The AMQP 0-9-1 frame codec, free of I/O: bytes in, [`Frame`]s out, and frames to bytes.
//!
//! Decoding reads the 7-byte frame header first and refuses a declared size above the
//! negotiated `frame_max` *before* reserving any memory for it, so a frame declaring a 4 GB
//! payload costs nothing. Method and content-header payloads are parsed with `amq-protocol`;
//! a content header also keeps its property bytes exactly as the client sent them
//! ([`ContentHeader::raw_properties`]), so a message is delivered with byte-identical
//! properties and headers (`amq-protocol` re-encodes tables in key order, which would not
//! be).

use amq_protocol::frame::parsing::parse_content_header;
use amq_protocol::frame::{AMQPFrame, WriteContext, gen_frame};
use amq_protocol::protocol::basic::{AMQPProperties, gen_properties};
use amq_protocol::protocol::{AMQPClass, parse_class};
use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The protocol header of AMQP 0-9-1, the first 8 bytes a client sends; also what a client
/// with any other header is answered with before the socket closes.
pub const PROTOCOL_HEADER: [u8; 8] = *b"AMQP\x00\x00\x09\x01";
/// Bytes of a frame before its payload: type, channel, size.
pub const FRAME_HEADER_LEN: usize = 7;
/// Bytes a frame adds to its payload: the header and the end byte.
pub const FRAME_OVERHEAD: usize = FRAME_HEADER_LEN + 1;
/// The byte every frame ends with.
const FRAME_END: u8 = 0xCE;
/// Frame types.
const TYPE_METHOD: u8 = 1;
const TYPE_HEADER: u8 = 2;
const TYPE_BODY: u8 = 3;
const TYPE_HEARTBEAT: u8 = 8;
/// The class of `basic`, the only class with content.
pub const BASIC_CLASS: u16 = 60;
/// Bytes of a content header before its properties: class, weight, body size.
const CONTENT_HEADER_FIXED: usize = 12;

/// A decoded frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// A method on a channel (0: the connection).
    Method(u16, Box<AMQPClass>),
    /// A content header.
    Header(u16, Box<ContentHeader>),
    /// A piece of content body.
    Body(u16, Bytes),
    /// A heartbeat (valid only on channel 0).
    Heartbeat(u16),
}

impl Frame {
    /// The channel the frame belongs to.
    pub fn channel(&self) -> u16 {
        match self {
            Self::Method(c, _) | Self::Header(c, _) | Self::Body(c, _) | Self::Heartbeat(c) => *c,
        }
    }
}

/// A content header, parsed and raw.
#[derive(Debug, Clone, PartialEq)]
pub struct ContentHeader {
    /// The content's class (60, `basic`, for every method that carries content).
    pub class_id: u16,
    /// How many body bytes follow in body frames.
    pub body_size: u64,
    /// The properties, parsed (priority, expiration and headers steer routing and storage).
    pub properties: AMQPProperties,
    /// The property flags and values exactly as received, stored and delivered as they are.
    pub raw_properties: Bytes,
}

/// Why bytes are not a valid frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// The declared size exceeds the negotiated maximum.
    #[error("a frame of {size} bytes exceeds the negotiated frame_max of {max} bytes")]
    TooLarge {
        /// The frame's size, header and end byte included.
        size: u64,
        /// The negotiated maximum.
        max: u32,
    },
    /// The type byte is not one of AMQP 0-9-1's frame types.
    #[error("frame type {0} is not an AMQP 0-9-1 frame type")]
    UnknownType(u8),
    /// The frame does not end with 0xCE.
    #[error("the frame does not end with 0xCE (found {0:#04x})")]
    BadFrameEnd(u8),
    /// A method frame names a method AMQP 0-9-1 does not have.
    #[error("method {class}.{method} does not exist in AMQP 0-9-1")]
    UnknownMethod {
        /// The class id.
        class: u16,
        /// The method id.
        method: u16,
    },
    /// A known method whose fields do not parse.
    #[error("the fields of method {class}.{method} are malformed")]
    MalformedMethod {
        /// The class id.
        class: u16,
        /// The method id.
        method: u16,
    },
    /// A content header whose fields do not parse.
    #[error("the content header frame is malformed")]
    MalformedHeader,
}

/// Decodes the next frame from the front of `buf`, consuming it. Returns `Ok(None)` when
/// `buf` does not yet hold a whole frame (having reserved room for the rest, which the
/// size check bounds by `frame_max`).
///
/// # Errors
/// A [`CodecError`]; the connection cannot continue after it.
pub fn decode(buf: &mut BytesMut, frame_max: u32) -> Result<Option<Frame>, CodecError> {
    if buf.len() < FRAME_HEADER_LEN {
        return Ok(None);
    }
    let kind = buf[0];
    if !matches!(kind, TYPE_METHOD | TYPE_HEADER | TYPE_BODY | TYPE_HEARTBEAT) {
        return Err(CodecError::UnknownType(kind));
    }
    let channel = u16::from_be_bytes([buf[1], buf[2]]);
    let size = u32::from_be_bytes([buf[3], buf[4], buf[5], buf[6]]) as usize;
    let total = size as u64 + FRAME_OVERHEAD as u64;
    if total > u64::from(frame_max) {
        return Err(CodecError::TooLarge {
            size: total,
            max: frame_max,
        });
    }
    let total = total as usize;
    if buf.len() < total {
        buf.reserve(total - buf.len());
        return Ok(None);
    }
    let mut frame = buf.split_to(total).freeze();
    let end = frame[total - 1];
    if end != FRAME_END {
        return Err(CodecError::BadFrameEnd(end));
    }
    frame.advance(FRAME_HEADER_LEN);
    let payload = frame.slice(..size);
    Ok(Some(match kind {
        TYPE_METHOD => Frame::Method(channel, Box::new(decode_method(&payload)?)),
        TYPE_HEADER => Frame::Header(channel, Box::new(decode_header(payload)?)),
        TYPE_BODY => Frame::Body(channel, payload),
        _ => Frame::Heartbeat(channel),
    }))
}

fn decode_method(payload: &[u8]) -> Result<AMQPClass, CodecError> {
    let ids = |at: usize| {
        payload
            .get(at..at + 2)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
    };
    let (class, method) = (ids(0), ids(2));
    match parse_class(payload) {
        Ok(([], parsed)) => Ok(parsed),
        _ if is_known_method(class, method) => Err(CodecError::MalformedMethod { class, method }),
        _ => Err(CodecError::UnknownMethod { class, method }),
    }
}

fn decode_header(payload: Bytes) -> Result<ContentHeader, CodecError> {
    if payload.len() < CONTENT_HEADER_FIXED + 2 {
        return Err(CodecError::MalformedHeader);
    }
    match parse_content_header(&payload[..]) {
        Ok(([], parsed)) => Ok(ContentHeader {
            class_id: parsed.class_id,
            body_size: parsed.body_size,
            properties: parsed.properties,
            raw_properties: payload.slice(CONTENT_HEADER_FIXED..),
        }),
        _ => Err(CodecError::MalformedHeader),
    }
}

/// Whether AMQP 0-9-1 defines method `method` of class `class` (so a parse failure is a
/// syntax error, not an unknown method).
fn is_known_method(class: u16, method: u16) -> bool {
    let methods: &[u16] = match class {
        10 => &[10, 11, 20, 21, 30, 31, 40, 41, 50, 51, 60, 61, 70, 71],
        20 => &[10, 11, 20, 21, 40, 41],
        30 => &[10, 11],
        40 => &[10, 11, 20, 21, 30, 31, 40, 51],
        50 => &[10, 11, 20, 21, 30, 31, 40, 41, 50, 51],
        60 => &[
            10, 11, 20, 21, 30, 31, 40, 50, 60, 70, 71, 72, 80, 90, 100, 110, 111, 120,
        ],
        85 => &[10, 11],
        90 => &[10, 11, 20, 21, 30, 31],
        _ => &[],
    };
    methods.contains(&method)
}

/// Appends a method frame to `out`.
pub fn encode_method(out: &mut Vec<u8>, channel: u16, method: AMQPClass) {
    let frame = AMQPFrame::Method(channel, method);
    let buffer = std::mem::take(out);
    *out = match gen_frame(&frame)(WriteContext::from(buffer)) {
        Ok(written) => written.into_inner().0,
        // Writing to a Vec only fails for a value the protocol cannot express (a short
        // string over 255 bytes), which the front never builds from checked input.
        Err(e) => panic!("cannot encode {frame}: {e:?}"),
    };
}

/// Appends a content header frame carrying `raw_properties` as they are, then the body in
/// frames of at most `frame_max` bytes.
pub fn encode_content(
    out: &mut Vec<u8>,
    channel: u16,
    raw_properties: &[u8],
    body: &[u8],
    frame_max: u32,
) {
    out.reserve(FRAME_OVERHEAD * 2 + CONTENT_HEADER_FIXED + raw_properties.len() + body.len());
    encode_content_header(out, channel, raw_properties, body.len() as u64);
    encode_body(out, channel, body, frame_max);
}

/// A content header announcing a body of `body_size` bytes, whose frames follow
/// ([`encode_body`]).
pub fn encode_content_header(
    out: &mut Vec<u8>,
    channel: u16,
    raw_properties: &[u8],
    body_size: u64,
) {
    let header_size = CONTENT_HEADER_FIXED + raw_properties.len();
    out.put_u8(TYPE_HEADER);
    out.put_u16(channel);
    out.put_u32(header_size as u32);
    out.put_u16(BASIC_CLASS);
    out.put_u16(0);
    out.put_u64(body_size);
    out.put_slice(raw_properties);
    out.put_u8(FRAME_END);
}

/// Body frames carrying `body` (a whole body, or the next piece of one), each at most
/// `frame_max` bytes.
pub fn encode_body(out: &mut Vec<u8>, channel: u16, body: &[u8], frame_max: u32) {
    let chunk = (frame_max as usize).saturating_sub(FRAME_OVERHEAD).max(1);
    for piece in body.chunks(chunk) {
        out.put_u8(TYPE_BODY);
        out.put_u16(channel);
        out.put_u32(piece.len() as u32);
        out.put_slice(piece);
        out.put_u8(FRAME_END);
    }
}

/// A heartbeat frame.
pub const HEARTBEAT: [u8; 8] = [TYPE_HEARTBEAT, 0, 0, 0, 0, 0, 0, FRAME_END];

/// Encodes properties (flags and values) as a content header carries them.
pub fn encode_properties(properties: &AMQPProperties) -> Vec<u8> {
    match gen_properties(properties)(WriteContext::from(Vec::new())) {
        Ok(written) => written.into_inner().0,
        Err(e) => panic!("cannot encode message properties: {e:?}"),
    }
}

/// Parses properties encoded as a content header carries them.
///
/// # Errors
/// [`CodecError::MalformedHeader`] when they do not parse.
pub fn decode_properties(raw: &[u8]) -> Result<AMQPProperties, CodecError> {
    match amq_protocol::protocol::basic::parse_properties(raw) {
        Ok(([], parsed)) => Ok(parsed),
        _ => Err(CodecError::MalformedHeader),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amq_protocol::protocol::{basic, queue};
    use amq_protocol::types::{AMQPValue, FieldTable};

    fn method_bytes(channel: u16, method: AMQPClass) -> Vec<u8> {
        let mut out = Vec::new();
        encode_method(&mut out, channel, method);
        out
    }

    #[test]
    fn a_method_frame_round_trips() {
        let declare = AMQPClass::Queue(queue::AMQPMethod::Declare(queue::Declare {
            queue: "orders".into(),
            durable: true,
            ..Default::default()
        }));
        let mut buf = BytesMut::from(&method_bytes(3, declare.clone())[..]);
        assert_eq!(
            decode(&mut buf, 4096).unwrap(),
            Some(Frame::Method(3, Box::new(declare)))
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn a_partial_frame_waits_for_more_bytes() {
        let bytes = method_bytes(
            1,
            AMQPClass::Basic(basic::AMQPMethod::QosOk(basic::QosOk {})),
        );
        let mut buf = BytesMut::from(&bytes[..bytes.len() - 1]);
        assert_eq!(decode(&mut buf, 4096).unwrap(), None);
        buf.extend_from_slice(&bytes[bytes.len() - 1..]);
        assert!(decode(&mut buf, 4096).unwrap().is_some());
    }

    #[test]
    fn a_huge_declared_size_is_refused_before_allocating() {
        let mut buf = BytesMut::from(&[TYPE_BODY, 0, 1, 0xff, 0xff, 0xff, 0xff][..]);
        assert_eq!(
            decode(&mut buf, 131_072).unwrap_err(),
            CodecError::TooLarge {
                size: 0xffff_ffff + 8,
                max: 131_072
            }
        );
        assert!(
            buf.capacity() < 1024,
            "nothing was reserved for the payload"
        );
    }

    #[test]
    fn garbage_is_an_unknown_frame_type() {
        let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\n"[..]);
        assert_eq!(
            decode(&mut buf, 4096).unwrap_err(),
            CodecError::UnknownType(b'G')
        );
    }

    #[test]
    fn a_wrong_end_byte_is_refused() {
        let mut bytes = HEARTBEAT.to_vec();
        bytes[7] = 0;
        let mut buf = BytesMut::from(&bytes[..]);
        assert_eq!(
            decode(&mut buf, 4096).unwrap_err(),
            CodecError::BadFrameEnd(0)
        );
    }

    #[test]
    fn unknown_and_malformed_methods_are_told_apart() {
        let frame = |payload: &[u8]| {
            let mut b = vec![TYPE_METHOD, 0, 1];
            b.extend_from_slice(&(payload.len() as u32).to_be_bytes());
            b.extend_from_slice(payload);
            b.push(FRAME_END);
            BytesMut::from(&b[..])
        };
        assert_eq!(
            decode(&mut frame(&[0, 60, 0, 99]), 4096).unwrap_err(),
            CodecError::UnknownMethod {
                class: 60,
                method: 99
            }
        );
        // queue.declare whose queue name claims 200 bytes but has none.
        assert_eq!(
            decode(&mut frame(&[0, 50, 0, 10, 0, 0, 200]), 4096).unwrap_err(),
            CodecError::MalformedMethod {
                class: 50,
                method: 10
            }
        );
    }

    #[test]
    fn content_keeps_raw_properties_byte_for_byte() {
        let mut headers = FieldTable::default();
        headers.insert("b".into(), AMQPValue::LongString("2".into()));
        headers.insert("a".into(), AMQPValue::LongInt(1));
        let properties = basic::AMQPProperties::default()
            .with_priority(5)
            .with_headers(headers);
        let raw = encode_properties(&properties);
        let mut out = Vec::new();
        encode_content(&mut out, 2, &raw, b"hello world", 4096);
        let mut buf = BytesMut::from(&out[..]);
        let Some(Frame::Header(2, header)) = decode(&mut buf, 4096).unwrap() else {
            panic!("expected a content header");
        };
        assert_eq!(header.raw_properties, raw);
        assert_eq!(header.properties, properties);
        assert_eq!(header.body_size, 11);
        assert_eq!(
            decode(&mut buf, 4096).unwrap(),
            Some(Frame::Body(2, Bytes::from_static(b"hello world")))
        );
    }

    #[test]
    fn bodies_are_split_at_frame_max() {
        let mut out = Vec::new();
        let body = vec![7u8; 10_000];
        encode_content(
            &mut out,
            1,
            &encode_properties(&Default::default()),
            &body,
            4096,
        );
        let mut buf = BytesMut::from(&out[..]);
        let mut sizes = Vec::new();
        while let Some(frame) = decode(&mut buf, 4096).unwrap() {
            if let Frame::Body(_, b) = frame {
                sizes.push(b.len());
            }
        }
        assert_eq!(sizes, [4088, 4088, 1824]);
    }
}
