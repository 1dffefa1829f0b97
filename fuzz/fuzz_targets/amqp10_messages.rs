//! libFuzzer's entry to the `amqp10_messages` target; `fuzz/targets/amqp10_messages.rs` says what it feeds
//! (the test suite replays its corpus through the same code: tests/daemon/fuzz_corpus.rs).
#![no_main]

#[path = "../targets/amqp10_messages.rs"]
mod target;

libfuzzer_sys::fuzz_target!(|data: &[u8]| target::run(data));
