//! Content assembly: basic.publish, then a content header, then body frames until the
//! header's body size is reached.
//!
//! The body size is checked against `amqp.max_message_size` when the header arrives,
//! before any body byte is kept, and the body grows only as frames arrive, so a header
//! declaring a huge body costs nothing.
//!
//! A body larger than [`spill::SPILL_ABOVE`] is not assembled: it is handed on in segments of
//! [`SEGMENT`] bytes as its frames arrive, for the channel to write to the message's spill
//! ([`crate::message::large`]); the message completes without a body, naming its spill.

use crate::publishing::publish::Incoming;
use crate::state::direct_reply;
use crate::wire::codec::{BASIC_CLASS, ContentHeader};
use crate::wire::errors::{AmqpError, ReplyCode};
use amq_protocol::protocol::basic;
use bytes::{Bytes, BytesMut};
use ferry_stage::spill::{self, SEGMENT};
use ferry_stage::{Spill, Spills};
use std::time::Instant;

/// A publish being assembled.
#[derive(Debug)]
struct Assembly {
    publish: basic::Publish,
    header: Option<Box<ContentHeader>>,
    body: BytesMut,
    /// For a large body: its spill's id and the bytes handed on so far.
    spill: Option<(u64, u64)>,
}

/// A piece of a large body to write to its spill.
#[derive(Debug)]
pub struct Segment {
    /// The spill.
    pub spill: u64,
    /// Where in the body it starts.
    pub offset: u64,
    /// Its bytes ([`SEGMENT`] of them, but for the last).
    pub bytes: Bytes,
}

/// What a body frame completed.
#[derive(Debug, Default)]
pub struct Filled {
    /// Segments of a large body to write to its spill first, in order.
    pub segments: Vec<Segment>,
    /// The message, when this was its last frame.
    pub message: Option<Incoming>,
}

/// The content state of a channel.
#[derive(Debug)]
pub struct Content {
    current: Option<Assembly>,
    max_message_size: u32,
}

impl Content {
    /// No publish in progress; bodies above `max_message_size` are refused.
    pub fn new(max_message_size: u32) -> Self {
        Self {
            current: None,
            max_message_size,
        }
    }

    /// Whether a publish waits for its header or body (any method now is unexpected).
    pub fn in_progress(&self) -> bool {
        self.current.is_some()
    }

    /// basic.publish: content frames follow.
    pub fn start(&mut self, publish: basic::Publish) {
        self.current = Some(Assembly {
            publish,
            header: None,
            body: BytesMut::new(),
            spill: None,
        });
    }

    /// A content header; returns the message when it has no body.
    ///
    /// # Errors
    /// 505 without a basic.publish before it, 406 for a body larger than allowed.
    pub fn header(&mut self, header: Box<ContentHeader>) -> Result<Option<Incoming>, AmqpError> {
        let Some(assembly) = self.current.as_mut().filter(|a| a.header.is_none()) else {
            return Err(AmqpError::unexpected_frame(
                "content header received without a preceding basic.publish",
            ));
        };
        if header.class_id != BASIC_CLASS {
            return Err(AmqpError::unexpected_frame(format!(
                "content header of class {} where class {BASIC_CLASS} (basic) was expected",
                header.class_id
            )));
        }
        if header.body_size > u64::from(self.max_message_size) {
            self.current = None;
            return Err(AmqpError::precondition_failed(format!(
                "message size {} is larger than configured max size {}",
                header.body_size, self.max_message_size
            )));
        }
        let empty = header.body_size == 0;
        // A direct reply goes from memory to its channel, never through the store.
        let reply = assembly.publish.exchange.as_str().is_empty()
            && assembly
                .publish
                .routing_key
                .as_str()
                .starts_with(direct_reply::ADDRESS_PREFIX);
        // Stored at least once; a fanout too large for one transaction is spilled when
        // the message is routed (`super::Channel::spill_fanout`).
        if spill::spills(header.body_size, 1) && !reply {
            assembly.spill = Some((Spills::new_id(), 0));
        }
        assembly.header = Some(header);
        Ok(if empty {
            self.complete(Bytes::new(), None)
        } else {
            None
        })
    }

    /// A body frame; returns the segments of a large body it filled, and the message once
    /// its body is complete.
    ///
    /// # Errors
    /// 505 without a content header before it, 501 for more bytes than the header
    /// declared.
    pub fn body(&mut self, piece: Bytes) -> Result<Filled, AmqpError> {
        let Some((assembly, size)) = self
            .current
            .as_mut()
            .and_then(|a| a.header.as_ref().map(|h| h.body_size).map(|s| (a, s)))
        else {
            return Err(AmqpError::unexpected_frame(
                "content body received without a content header",
            ));
        };
        // A large body's segments handed on so far count too.
        let handed = assembly.spill.map_or(0, |(_, handed)| handed);
        let have = handed + assembly.body.len() as u64 + piece.len() as u64;
        if have > size {
            return Err(AmqpError::new(
                ReplyCode::FrameError,
                format!(
                    "content body of at least {have} bytes exceeds the declared size of {size} bytes"
                ),
            ));
        }
        if let Some((id, handed)) = assembly.spill.as_mut() {
            let id = *id;
            let segments = segments_of(&mut assembly.body, id, handed, piece, have == size);
            let message = if have == size {
                self.complete(Bytes::new(), Some(Spill { id, len: size }))
            } else {
                None
            };
            return Ok(Filled { segments, message });
        }
        if have < size {
            assembly.body.extend_from_slice(&piece);
            return Ok(Filled::default());
        }
        // The usual case, a body in one frame, keeps the frame's bytes without a copy.
        let body = if assembly.body.is_empty() {
            piece
        } else {
            assembly.body.extend_from_slice(&piece);
            std::mem::take(&mut assembly.body).freeze()
        };
        Ok(Filled {
            segments: Vec::new(),
            message: self.complete(body, None),
        })
    }

    fn complete(&mut self, body: Bytes, spill: Option<Spill>) -> Option<Incoming> {
        let assembly = self.current.take()?;
        Some(Incoming {
            publish: assembly.publish,
            header: assembly.header?,
            body,
            spill,
            received: Instant::now(),
        })
    }
}

/// Adds `piece` to the segment being filled in `buffer`; returns every segment it
/// filled (and, at the `last` piece, the rest), `handed` counting the bytes handed on.
fn segments_of(
    buffer: &mut BytesMut,
    spill: u64,
    handed: &mut u64,
    mut piece: Bytes,
    last: bool,
) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut hand = |buffer: &mut BytesMut| {
        let bytes = buffer.split().freeze();
        out.push(Segment {
            spill,
            offset: *handed,
            bytes,
        });
        *handed += out.last().map_or(0, |s| s.bytes.len() as u64);
    };
    while !piece.is_empty() {
        if buffer.capacity() == 0 {
            buffer.reserve(SEGMENT);
        }
        let take = piece.split_to((SEGMENT - buffer.len()).min(piece.len()));
        buffer.extend_from_slice(&take);
        if buffer.len() == SEGMENT {
            hand(buffer);
        }
    }
    if last && !buffer.is_empty() {
        hand(buffer);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use amq_protocol::protocol::basic::AMQPProperties;

    fn header(size: u64) -> Box<ContentHeader> {
        Box::new(ContentHeader {
            class_id: BASIC_CLASS,
            body_size: size,
            properties: AMQPProperties::default(),
            raw_properties: Bytes::from_static(&[0, 0]),
        })
    }

    #[test]
    fn a_body_split_across_frames_is_joined() {
        let mut c = Content::new(100);
        c.start(basic::Publish::default());
        assert!(c.header(header(5)).unwrap().is_none());
        assert!(c.body(Bytes::from_static(b"he")).unwrap().message.is_none());
        let m = c.body(Bytes::from_static(b"llo")).unwrap().message.unwrap();
        assert_eq!(&m.body[..], b"hello");
        assert!(m.spill.is_none());
        assert!(!c.in_progress());
    }

    #[test]
    fn a_large_body_is_handed_on_in_segments_as_it_arrives() {
        let size = spill::SPILL_ABOVE as usize + SEGMENT + 10;
        let mut c = Content::new(u32::MAX);
        c.start(basic::Publish::default());
        assert!(c.header(header(size as u64)).unwrap().is_none());
        let frame = Bytes::from(vec![7u8; 131_064]);
        let (mut segments, mut sent, mut message) = (Vec::new(), 0, None);
        while sent < size {
            let piece = frame.slice(..frame.len().min(size - sent));
            sent += piece.len();
            let filled = c.body(piece).unwrap();
            assert!(filled.segments.iter().all(|s| s.bytes.len() == SEGMENT) || sent == size);
            segments.extend(filled.segments);
            message = filled.message;
        }
        let m = message.expect("complete after its last frame");
        let spill = m.spill.expect("a large body is spilled");
        assert_eq!(spill.len, size as u64);
        assert!(m.body.is_empty(), "the body is not assembled");
        let offsets: Vec<u64> = segments.iter().map(|s| s.offset).collect();
        assert_eq!(offsets, [0, SEGMENT as u64, 2 * SEGMENT as u64]);
        assert_eq!(segments.iter().map(|s| s.bytes.len()).sum::<usize>(), size);
        assert!(segments.iter().all(|s| s.spill == spill.id));
    }

    #[test]
    fn an_empty_body_completes_with_the_header() {
        let mut c = Content::new(100);
        c.start(basic::Publish::default());
        assert!(c.header(header(0)).unwrap().is_some());
    }

    #[test]
    fn an_oversized_body_is_refused_at_the_header() {
        let mut c = Content::new(100);
        c.start(basic::Publish::default());
        let e = c.header(header(4_000_000_000)).unwrap_err();
        assert_eq!(
            e.reply_text(),
            "PRECONDITION_FAILED - message size 4000000000 is larger than configured max size 100"
        );
    }

    #[test]
    fn frames_out_of_order_are_unexpected() {
        let mut c = Content::new(100);
        assert_eq!(
            c.header(header(1)).unwrap_err().code,
            ReplyCode::UnexpectedFrame
        );
        assert_eq!(
            c.body(Bytes::from_static(b"x")).unwrap_err().code,
            ReplyCode::UnexpectedFrame
        );
        c.start(basic::Publish::default());
        c.header(header(1)).unwrap();
        assert_eq!(
            c.body(Bytes::from_static(b"xy")).unwrap_err().code,
            ReplyCode::FrameError
        );
    }
}
