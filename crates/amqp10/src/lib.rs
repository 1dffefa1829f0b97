//! AMQP 1.0's type system ([`Value`]), message format ([`Message`]) and transport (protocol
//! headers, frames and performatives: [`Layer`], [`next_frame`], [`Typed`]), decoded and encoded: what
//! AMQP 1.0 clients (and RabbitMQ stream clients, as messages) send — the ground the AMQP 1.0
//! and streams fronts (issues 36 and 37) and the one message model across protocols stand
//! on. Checked against Qpid Proton, the reference implementation (`tests/amqp10/`). No
//! front uses it yet.

mod composite;
mod frame;
mod message;
mod performatives;
mod types;

pub use composite::FieldError;
pub use frame::{
    Frame, FrameError, FrameType, Layer, Performative, encode_frame, next_frame, performative,
};
pub use message::{Body, Header, Message, MessageError, Properties};
pub use performatives::{
    Attach, Begin, Flow, Open, SaslInit, SaslMechanisms, SaslOutcome, Terminus, Transfer, Typed,
};
pub use types::{Array, DecodeError, MAX_DEPTH, Value};
