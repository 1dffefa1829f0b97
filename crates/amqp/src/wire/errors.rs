//! AMQP exceptions: the reply codes of AMQP 0-9-1 and the error that carries one.
//!
//! An [`AmqpError`] closes its channel (a soft error: 403, 404, 405, 406) or the whole
//! connection (a hard error: 320, 501–506, 530, 540, 541), as the specification says for its
//! code. Its text reads like RabbitMQ's — `NOT_FOUND - no exchange 'x' in vhost '/'` — so
//! operators and client logs see familiar messages.

use amq_protocol::protocol::AMQPClass;
use ferry_stage::StageError;
use ferry_store::{StoreError, TransactionError};
use ferry_telemetry::amqp as metric;

/// An AMQP 0-9-1 reply code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReplyCode {
    /// 311: a message too large for the server (soft).
    ContentTooLarge,
    /// 312: a mandatory message that no queue took (basic.return only).
    NoRoute,
    /// 320: the server closes the connection (shutting down).
    ConnectionForced,
    /// 403: bad credentials, a vhost or an entity the client may not use (soft, and hard
    /// during the handshake).
    AccessRefused,
    /// 404: no such exchange or queue.
    NotFound,
    /// 405: a queue another connection holds exclusively.
    ResourceLocked,
    /// 406: a request the current state forbids (inequivalent redeclare, unknown delivery
    /// tag, if-unused/if-empty, a message too large).
    PreconditionFailed,
    /// 501: a malformed frame.
    FrameError,
    /// 502: a method whose fields do not parse or make sense.
    SyntaxError,
    /// 503: a method that is invalid here (an unknown exchange type, say).
    CommandInvalid,
    /// 504: a frame on a channel that is not open, or a second open.
    ChannelError,
    /// 505: a frame the channel's state does not expect (content without a publish).
    UnexpectedFrame,
    /// 530: something the server does not allow (an unknown vhost, too many channels).
    NotAllowed,
    /// 540: a feature Ferry does not implement.
    NotImplemented,
    /// 541: the server failed (the store did not answer).
    InternalError,
}

impl ReplyCode {
    /// Every code an exception can carry (312 belongs to basic.return alone).
    pub const EXCEPTIONS: [Self; 14] = [
        Self::ContentTooLarge,
        Self::ConnectionForced,
        Self::AccessRefused,
        Self::NotFound,
        Self::ResourceLocked,
        Self::PreconditionFailed,
        Self::FrameError,
        Self::SyntaxError,
        Self::CommandInvalid,
        Self::ChannelError,
        Self::UnexpectedFrame,
        Self::NotAllowed,
        Self::NotImplemented,
        Self::InternalError,
    ];

    /// The numeric code.
    pub fn code(self) -> u16 {
        match self {
            Self::ContentTooLarge => 311,
            Self::NoRoute => 312,
            Self::ConnectionForced => 320,
            Self::AccessRefused => 403,
            Self::NotFound => 404,
            Self::ResourceLocked => 405,
            Self::PreconditionFailed => 406,
            Self::FrameError => 501,
            Self::SyntaxError => 502,
            Self::CommandInvalid => 503,
            Self::ChannelError => 504,
            Self::UnexpectedFrame => 505,
            Self::NotAllowed => 530,
            Self::NotImplemented => 540,
            Self::InternalError => 541,
        }
    }

    /// The specification's name, as RabbitMQ prefixes reply texts with it.
    pub fn name(self) -> &'static str {
        match self {
            Self::ContentTooLarge => "CONTENT_TOO_LARGE",
            Self::NoRoute => "NO_ROUTE",
            Self::ConnectionForced => "CONNECTION_FORCED",
            Self::AccessRefused => "ACCESS_REFUSED",
            Self::NotFound => "NOT_FOUND",
            Self::ResourceLocked => "RESOURCE_LOCKED",
            Self::PreconditionFailed => "PRECONDITION_FAILED",
            Self::FrameError => "FRAME_ERROR",
            Self::SyntaxError => "SYNTAX_ERROR",
            Self::CommandInvalid => "COMMAND_INVALID",
            Self::ChannelError => "CHANNEL_ERROR",
            Self::UnexpectedFrame => "UNEXPECTED_FRAME",
            Self::NotAllowed => "NOT_ALLOWED",
            Self::NotImplemented => "NOT_IMPLEMENTED",
            Self::InternalError => "INTERNAL_ERROR",
        }
    }

    /// Whether the specification makes this a connection exception (closing every channel)
    /// rather than a channel exception.
    pub(crate) fn closes_connection(self) -> bool {
        !matches!(
            self,
            Self::ContentTooLarge
                | Self::NoRoute
                | Self::AccessRefused
                | Self::NotFound
                | Self::ResourceLocked
                | Self::PreconditionFailed
        )
    }
}

/// An AMQP exception: the reply code, a readable text, and the method that caused it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} - {text}", code.name())]
pub struct AmqpError {
    /// The reply code.
    pub code: ReplyCode,
    /// What went wrong, naming the entity (`no queue 'q' in vhost '/'`).
    pub text: String,
    /// The class of the method that failed (0: not caused by a method).
    pub class_id: u16,
    /// The method that failed.
    pub method_id: u16,
}

impl AmqpError {
    /// An exception with `code` and `text`, not yet tied to a method.
    pub fn new(code: ReplyCode, text: impl Into<String>) -> Self {
        Self {
            code,
            text: text.into(),
            class_id: 0,
            method_id: 0,
        }
    }

    /// Ties the exception to the method that caused it (unless it already is).
    pub fn on(mut self, method: &AMQPClass) -> Self {
        if self.class_id == 0 {
            self.class_id = method.get_amqp_class_id();
            self.method_id = method.get_amqp_method_id();
        }
        self
    }

    /// The reply text sent to the client: `CODE_NAME - text`, at most 255 bytes.
    pub(crate) fn reply_text(&self) -> String {
        let mut text = self.to_string();
        if text.len() > 255 {
            let mut cut = 255;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        text
    }

    /// Exports `ferry_amqp_errors_total` at 0 for every exception code, so an alert on its
    /// increase sees the first exception after a start (a series born at 1 has no
    /// increase).
    pub(crate) fn export_counters() {
        for code in ReplyCode::EXCEPTIONS {
            metrics::counter!(metric::ERRORS_TOTAL, metric::LABEL_CODE => code.code().to_string())
                .increment(0);
        }
    }

    /// Counts the exception in `ferry_amqp_errors_total`; call once, when it is sent.
    pub fn count(&self) {
        metrics::counter!(metric::ERRORS_TOTAL, metric::LABEL_CODE => self.code.code().to_string())
            .increment(1);
    }

    /// 403.
    pub fn access_refused(text: impl Into<String>) -> Self {
        Self::new(ReplyCode::AccessRefused, text)
    }

    /// 404.
    pub fn not_found(text: impl Into<String>) -> Self {
        Self::new(ReplyCode::NotFound, text)
    }

    /// 405.
    pub(crate) fn resource_locked(text: impl Into<String>) -> Self {
        Self::new(ReplyCode::ResourceLocked, text)
    }

    /// 406.
    pub fn precondition_failed(text: impl Into<String>) -> Self {
        Self::new(ReplyCode::PreconditionFailed, text)
    }

    /// 503.
    pub(crate) fn command_invalid(text: impl Into<String>) -> Self {
        Self::new(ReplyCode::CommandInvalid, text)
    }

    /// 505.
    pub(crate) fn unexpected_frame(text: impl Into<String>) -> Self {
        Self::new(ReplyCode::UnexpectedFrame, text)
    }

    /// 530.
    pub(crate) fn not_allowed(text: impl Into<String>) -> Self {
        Self::new(ReplyCode::NotAllowed, text)
    }

    /// 540.
    pub(crate) fn not_implemented(text: impl Into<String>) -> Self {
        Self::new(ReplyCode::NotImplemented, text)
    }

    /// 541.
    pub fn internal(text: impl Into<String>) -> Self {
        Self::new(ReplyCode::InternalError, text)
    }
}

impl From<crate::wire::codec::CodecError> for AmqpError {
    fn from(e: crate::wire::codec::CodecError) -> Self {
        use crate::wire::codec::CodecError as C;
        let code = match e {
            C::UnknownMethod { .. } => ReplyCode::NotImplemented,
            C::MalformedMethod { .. } => ReplyCode::SyntaxError,
            C::TooLarge { .. } | C::UnknownType(_) | C::BadFrameEnd(_) | C::MalformedHeader => {
                ReplyCode::FrameError
            }
        };
        Self::new(code, e.to_string())
    }
}

impl From<StoreError> for AmqpError {
    fn from(e: StoreError) -> Self {
        Self::internal(format!("the store failed: {e}"))
    }
}

impl From<StageError> for AmqpError {
    fn from(e: StageError) -> Self {
        Self::internal(format!("the stage failed: {e}"))
    }
}

/// An error inside a store transaction of the front: either the store's (retried by the
/// retry loop when retryable) or an AMQP exception decided by what the transaction read.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TxError {
    /// The store or stage failed.
    #[error(transparent)]
    Stage(#[from] StageError),
    /// What the transaction found violates AMQP (a queue in use, say).
    #[error(transparent)]
    Amqp(#[from] AmqpError),
}

impl From<StoreError> for TxError {
    fn from(e: StoreError) -> Self {
        Self::Stage(StageError::Store(e))
    }
}

impl TransactionError for TxError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Stage(e) => e.store_error(),
            Self::Amqp(_) => None,
        }
    }
}

impl From<TxError> for AmqpError {
    fn from(e: TxError) -> Self {
        match e {
            TxError::Stage(e) => e.into(),
            TxError::Amqp(e) => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use amq_protocol::protocol::queue;

    #[test]
    fn reply_text_reads_like_rabbitmq() {
        let e = AmqpError::not_found("no queue 'q' in vhost '/'");
        assert_eq!(e.reply_text(), "NOT_FOUND - no queue 'q' in vhost '/'");
        assert_eq!(e.code.code(), 404);
        assert!(!e.code.closes_connection());
        assert!(ReplyCode::FrameError.closes_connection());
    }

    #[test]
    fn the_causing_method_is_recorded_once() {
        let declare = AMQPClass::Queue(queue::AMQPMethod::Declare(queue::Declare::default()));
        let delete = AMQPClass::Queue(queue::AMQPMethod::Delete(queue::Delete::default()));
        let e = AmqpError::precondition_failed("x").on(&declare).on(&delete);
        assert_eq!((e.class_id, e.method_id), (50, 10));
    }

    #[test]
    fn long_texts_are_cut_at_255_bytes_on_a_char_boundary() {
        let e = AmqpError::not_found("é".repeat(200));
        let text = e.reply_text();
        assert!(text.len() <= 255);
        assert!(text.starts_with("NOT_FOUND - é"));
    }
}
