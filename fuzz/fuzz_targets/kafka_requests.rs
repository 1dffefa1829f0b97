//! libFuzzer's entry to the `kafka_requests` target; `fuzz/targets/kafka_requests.rs` says what it feeds
//! (the test suite replays its corpus through the same code: tests/daemon/fuzz_corpus.rs).
#![no_main]

#[path = "../targets/kafka_requests.rs"]
mod target;

libfuzzer_sys::fuzz_target!(|data: &[u8]| target::run(data));
