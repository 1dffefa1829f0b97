//! RabbitMQ's stream protocol (the binary protocol of `rabbitmq_stream`, port 5552), for the
//! streams front the architecture puts beside the AMQP and Kafka fronts, over the Kafka
//! front's partition logs: so far its frames ([`next_frame`], [`framed`]) and every command
//! both ways ([`Request`], [`ServerFrame`]), decoded without panicking or allocating past
//! the frame whatever the bytes, checked against RabbitMQ's own stream server
//! (`tests/streams/`) and fuzzed (`fuzz/fuzz_targets/stream_frames.rs`).

mod wire;

pub use wire::WireError;
pub use wire::commands::{
    Answer, OffsetSpec, Pairs, Published, RESPONSE, Request, ServerFrame, StreamMetadata, code, key,
};
pub use wire::frame::{framed, next_frame};
