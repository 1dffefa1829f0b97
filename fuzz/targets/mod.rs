//! The fuzz targets' bodies, one module each: libFuzzer's entries in `fuzz/fuzz_targets/`
//! call them, and the test suite replays the kept inputs through them
//! (`tests/daemon/fuzz_corpus.rs`, which includes this module).

pub mod amqp10_messages;
pub mod amqp_frames;
pub mod config;
pub mod kafka_requests;
pub mod sasl;
pub mod stored_records;
pub mod stream_frames;
