//! Fault injection: FoundationDB's failures on demand, so the retry and idempotence paths
//! above the store are exercised without a cluster.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Probabilities of injected failures, changeable while the store runs.
#[derive(Debug, Default)]
pub struct Faults {
    /// Probability (as `f64` bits) that a commit is refused with `not_committed`.
    conflict: AtomicU64,
    /// Probability (as `f64` bits) that an applied commit reports `commit_unknown_result`.
    unknown_result: AtomicU64,
    /// Whether the next group commit fails as a full disk would make it.
    storage_failure: AtomicBool,
}

impl Faults {
    /// Sets the probability that a commit fails with a retryable conflict although it did
    /// not conflict (nothing is applied).
    pub fn set_conflict_rate(&self, p: f64) {
        self.conflict.store(p.to_bits(), Ordering::Relaxed);
    }

    /// Sets the probability that a commit is applied but reported as
    /// `commit_unknown_result`.
    pub fn set_unknown_result_rate(&self, p: f64) {
        self.unknown_result.store(p.to_bits(), Ordering::Relaxed);
    }

    /// Makes the next group commit fail as a write to a full disk would: nothing of it is
    /// applied, and the engine stops accepting transactions.
    pub fn fail_storage(&self) {
        self.storage_failure.store(true, Ordering::Relaxed);
    }

    /// Whether to fail this group commit's write (once).
    pub(super) fn storage_failure(&self) -> bool {
        self.storage_failure.swap(false, Ordering::Relaxed)
    }

    /// Draws whether to inject a conflict now.
    pub(super) fn conflict(&self) -> bool {
        draw(&self.conflict)
    }

    /// Draws whether to report an applied commit as unknown now.
    pub(super) fn unknown_result(&self) -> bool {
        draw(&self.unknown_result)
    }
}

fn draw(p: &AtomicU64) -> bool {
    let p = f64::from_bits(p.load(Ordering::Relaxed));
    p > 0.0 && fastrand::f64() < p
}
