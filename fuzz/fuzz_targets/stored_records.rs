//! libFuzzer's entry to the `stored_records` target; `fuzz/targets/stored_records.rs` says what it feeds
//! (the test suite replays its corpus through the same code: tests/daemon/fuzz_corpus.rs).
#![no_main]

#[path = "../targets/stored_records.rs"]
mod target;

libfuzzer_sys::fuzz_target!(|data: &[u8]| target::run(data));
