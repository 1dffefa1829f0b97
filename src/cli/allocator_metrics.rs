//! The allocator's statistics as metrics: every few seconds, jemalloc's allocated, active,
//! metadata and resident bytes, so an operator can tell memory the daemon uses from
//! memory the allocator keeps (docs/operations.md, "Where the memory goes").
//!
//! This belongs to the binary, where jemalloc is the global allocator; the library's
//! tests run on the system allocator, whose statistics these are not.

#![allow(
    unsafe_code,
    reason = "jemalloc's options are read through its untyped mallctl interface"
)]

use ferry_telemetry::names;
use std::time::Duration;
use tikv_jemalloc_ctl::{epoch, stats};

/// Time between two readings.
const PERIOD: Duration = Duration::from_secs(5);

/// Publishes the allocator's statistics every [`PERIOD`], for the life of the runtime.
pub async fn run() {
    let mut ticks = tokio::time::interval(PERIOD);
    loop {
        ticks.tick().await;
        if let Err(e) = publish() {
            tracing::warn!(error = %e, "cannot read the allocator's statistics");
            return;
        }
    }
}

/// Refreshes jemalloc's statistics and sets one gauge per figure.
fn publish() -> tikv_jemalloc_ctl::Result<()> {
    // jemalloc's statistics are a snapshot taken when the epoch advances.
    epoch::advance()?;
    for (name, bytes) in [
        (names::MEMORY_ALLOCATED_BYTES, stats::allocated::read()?),
        (names::MEMORY_ACTIVE_BYTES, stats::active::read()?),
        (names::MEMORY_METADATA_BYTES, stats::metadata::read()?),
        (
            names::MEMORY_ALLOCATOR_RESIDENT_BYTES,
            stats::resident::read()?,
        ),
    ] {
        metrics::gauge!(name).set(bytes as f64);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tikv_jemalloc_ctl::raw;

    /// The binary's `JEMALLOC_OPTIONS` reach jemalloc (a misspelt export name would leave
    /// its defaults silently).
    #[test]
    fn the_binary_options_reach_jemalloc() {
        // SAFETY: `opt.dirty_decay_ms` is a jemalloc option of type ssize_t.
        let decay: isize = unsafe { raw::read(b"opt.dirty_decay_ms\0") }.unwrap();
        // SAFETY: `opt.background_thread` is a jemalloc option of type bool.
        let background: bool = unsafe { raw::read(b"opt.background_thread\0") }.unwrap();
        assert_eq!(decay, 1000);
        assert!(background);
    }

    /// The statistics are jemalloc's, which this binary allocates through.
    #[test]
    fn statistics_count_this_binary_allocations() {
        epoch::advance().unwrap();
        let before = stats::allocated::read().unwrap();
        let held = vec![1u8; 64 << 20];
        epoch::advance().unwrap();
        let after = stats::allocated::read().unwrap();
        assert!(after >= before + (64 << 20), "{before} -> {after}");
        drop(held);
    }
}
