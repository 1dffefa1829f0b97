//! libFuzzer's entry to the `config` target; `fuzz/targets/config.rs` says what it feeds
//! (the test suite replays its corpus through the same code: tests/daemon/fuzz_corpus.rs).
#![no_main]

#[path = "../targets/config.rs"]
mod target;

libfuzzer_sys::fuzz_target!(|data: &[u8]| target::run(data));
