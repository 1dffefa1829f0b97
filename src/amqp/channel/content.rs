//! Content assembly: basic.publish, then a content header, then body frames until the
//! header's body size is reached.
//!
//! The body size is checked against `amqp.max_message_size` when the header arrives,
//! before any body byte is kept, and the body grows only as frames arrive, so a header
//! declaring a huge body costs nothing.

use crate::amqp::codec::{BASIC_CLASS, ContentHeader};
use crate::amqp::errors::{AmqpError, ReplyCode};
use crate::amqp::publish::Incoming;
use amq_protocol::protocol::basic;
use bytes::{Bytes, BytesMut};
use std::time::Instant;

/// A publish being assembled.
#[derive(Debug)]
struct Assembly {
    publish: basic::Publish,
    header: Option<Box<ContentHeader>>,
    body: BytesMut,
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
        assembly.header = Some(header);
        Ok(if empty {
            self.complete(Bytes::new())
        } else {
            None
        })
    }

    /// A body frame; returns the message once its body is complete.
    ///
    /// # Errors
    /// 505 without a content header before it, 501 for more bytes than the header
    /// declared.
    pub fn body(&mut self, piece: Bytes) -> Result<Option<Incoming>, AmqpError> {
        let Some((assembly, size)) = self
            .current
            .as_mut()
            .and_then(|a| a.header.as_ref().map(|h| h.body_size).map(|s| (a, s)))
        else {
            return Err(AmqpError::unexpected_frame(
                "content body received without a content header",
            ));
        };
        let have = assembly.body.len() as u64 + piece.len() as u64;
        if have > size {
            return Err(AmqpError::new(
                ReplyCode::FrameError,
                format!(
                    "content body of at least {have} bytes exceeds the declared size of {size} bytes"
                ),
            ));
        }
        if have < size {
            assembly.body.extend_from_slice(&piece);
            return Ok(None);
        }
        // The usual case, a body in one frame, keeps the frame's bytes without a copy.
        let body = if assembly.body.is_empty() {
            piece
        } else {
            assembly.body.extend_from_slice(&piece);
            std::mem::take(&mut assembly.body).freeze()
        };
        Ok(self.complete(body))
    }

    fn complete(&mut self, body: Bytes) -> Option<Incoming> {
        let assembly = self.current.take()?;
        Some(Incoming {
            publish: assembly.publish,
            header: assembly.header?,
            body,
            received: Instant::now(),
        })
    }
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
        assert!(c.body(Bytes::from_static(b"he")).unwrap().is_none());
        let m = c.body(Bytes::from_static(b"llo")).unwrap().unwrap();
        assert_eq!(&m.body[..], b"hello");
        assert!(!c.in_progress());
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
