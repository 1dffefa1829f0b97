//! The fuzz targets' corpora and the inputs that once failed them (`fuzz/corpus/TARGET`,
//! `fuzz/regressions/TARGET`; docs/fuzzing.md), replayed through the targets' own code
//! (`fuzz/targets/`) in the test suite's debug build, where integer overflow panics: a
//! fix undone fails here with neither libFuzzer nor the nightly toolchain. What libFuzzer
//! adds beyond this (new inputs, the allocation and RSS limits) is `scripts/fuzz.sh`.

use crate::fuzz_targets as targets;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

/// Every input kept for `target`: its corpus and its regressions, in name order.
fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut paths: Vec<PathBuf> = ["corpus", "regressions"]
        .iter()
        .map(|kind| fuzz.join(kind).join(target))
        .filter(|dir| dir.is_dir())
        .flat_map(|dir| std::fs::read_dir(dir).expect("a fuzz input directory"))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    paths.sort();
    paths
}

/// Runs every input of `target` through `run`; fails naming each input that panicked.
fn replay(target: &str, run: fn(&[u8])) {
    let paths = inputs(target);
    assert!(
        paths.len() > 10,
        "{target}: only {} inputs under fuzz/",
        paths.len()
    );
    let failed: Vec<&PathBuf> = paths
        .iter()
        .filter(|path| {
            let data = std::fs::read(path).expect("a fuzz input");
            catch_unwind(AssertUnwindSafe(|| run(&data))).is_err()
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{target}: {} of {} inputs panicked (messages above): {failed:?}",
        failed.len(),
        paths.len()
    );
}

#[test]
fn amqp_frames_inputs_pass() {
    replay("amqp_frames", targets::amqp_frames::run);
}

#[test]
fn config_inputs_pass() {
    replay("config", targets::config::run);
}

#[test]
fn kafka_requests_inputs_pass() {
    replay("kafka_requests", targets::kafka_requests::run);
}

#[test]
fn sasl_inputs_pass() {
    replay("sasl", targets::sasl::run);
}

#[test]
fn stored_records_inputs_pass() {
    replay("stored_records", targets::stored_records::run);
}

#[test]
fn stream_frames_inputs_pass() {
    replay("stream_frames", targets::stream_frames::run);
}

#[test]
fn amqp10_messages_inputs_pass() {
    replay("amqp10_messages", targets::amqp10_messages::run);
}
