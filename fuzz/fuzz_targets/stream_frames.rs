//! libFuzzer's entry to the `stream_frames` target; `fuzz/targets/stream_frames.rs` says what it feeds
//! (the test suite replays its corpus through the same code: tests/daemon/fuzz_corpus.rs).
#![no_main]

#[path = "../targets/stream_frames.rs"]
mod target;

libfuzzer_sys::fuzz_target!(|data: &[u8]| target::run(data));
