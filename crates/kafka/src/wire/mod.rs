//! Kafka's wire formats, free of I/O: the request and response codec ([`codec`]), record
//! batches of message format v2 ([`batch`]), the message sets of formats v0 and v1 that old
//! producers send ([`legacy`]), a record as the port carries it with its batch encoding
//! ([`record`]), and the record compression codecs ([`compression`]).

pub mod batch;
pub(crate) mod codec;
pub(crate) mod compression;
pub mod legacy;
pub(crate) mod record;
