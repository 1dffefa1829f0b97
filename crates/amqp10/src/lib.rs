//! AMQP 1.0's type system ([`Value`]) and message format ([`Message`]): what AMQP 1.0
//! clients, RabbitMQ stream clients and RabbitMQ 4 itself send as a message, decoded and
//! encoded — the ground the AMQP 1.0 and streams fronts (issues 36 and 37) and the one
//! message model across protocols stand on. Checked against Qpid Proton, the reference
//! implementation (`tests/amqp10/`). No front uses it yet.

mod message;
mod types;

pub use message::{Body, Header, Message, MessageError, Properties};
pub use types::{Array, DecodeError, MAX_DEPTH, Value};
