//! Recent commits' write sets, for optimistic conflict detection.
//!
//! A transaction conflicts when a range it read (without snapshot isolation) was written
//! by a commit newer than its read version. Only the last few seconds of commits are kept:
//! a transaction whose read version is older than everything kept cannot be checked and
//! fails with `transaction_too_old`, as in FoundationDB.

use super::write_set::WriteSet;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a commit's writes are kept beyond the transaction age limit.
const RETENTION_MARGIN: Duration = Duration::from_secs(1);

/// One committed batch's writes.
struct Entry {
    version: u64,
    committed_at: Instant,
    writes: Arc<WriteSet>,
}

/// The writes of recent commits, oldest first.
pub(super) struct History {
    entries: VecDeque<Entry>,
    /// Newest version forgotten; a read version below it cannot be checked.
    floor: u64,
    /// How long commits are kept: the transaction age limit plus [`RETENTION_MARGIN`],
    /// so every transaction young enough to commit can be checked.
    retention: Duration,
}

/// What checking a transaction's reads found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// No newer commit wrote anything it read.
    Clean,
    /// A newer commit wrote something it read.
    Conflict,
    /// Its read version is older than the history kept.
    TooOld,
}

impl History {
    /// Starts after `version` (the last version on disk): older read versions are too old.
    /// Keeps commits long enough to check transactions up to `max_transaction_age` old.
    pub(super) fn starting_at(version: u64, max_transaction_age: Duration) -> Self {
        Self {
            entries: VecDeque::new(),
            floor: version,
            retention: max_transaction_age + RETENTION_MARGIN,
        }
    }

    /// Checks reads made at `read_version` against every later commit.
    pub(super) fn check(&self, read_version: u64, reads: &[(Vec<u8>, Vec<u8>)]) -> Verdict {
        if read_version < self.floor {
            return Verdict::TooOld;
        }
        let newer = self
            .entries
            .iter()
            .rev()
            .take_while(|e| e.version > read_version);
        for entry in newer {
            if reads.iter().any(|(b, e)| entry.writes.intersects(b, e)) {
                return Verdict::Conflict;
            }
        }
        Verdict::Clean
    }

    /// Records a committed batch and forgets batches older than the age limit allows.
    pub(super) fn record(&mut self, version: u64, writes: Arc<WriteSet>) {
        let now = Instant::now();
        self.entries.push_back(Entry {
            version,
            committed_at: now,
            writes,
        });
        while let Some(oldest) = self.entries.front() {
            if now.duration_since(oldest.committed_at) <= self.retention {
                break;
            }
            self.floor = oldest.version;
            self.entries.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(k: &[u8]) -> WriteSet {
        let mut w = WriteSet::default();
        w.add_point(k.to_vec());
        w
    }

    #[test]
    fn only_commits_after_the_read_version_conflict() {
        let mut h = History::starting_at(0, Duration::from_secs(5));
        h.record(10, Arc::new(point(b"a")));
        h.record(20, Arc::new(point(b"b")));
        let read_a = [(b"a".to_vec(), b"a\0".to_vec())];
        assert_eq!(h.check(5, &read_a), Verdict::Conflict);
        assert_eq!(h.check(10, &read_a), Verdict::Clean);
        let read_b = [(b"b".to_vec(), b"c".to_vec())];
        assert_eq!(h.check(15, &read_b), Verdict::Conflict);
    }

    #[test]
    fn read_versions_before_the_start_are_too_old() {
        let h = History::starting_at(100, Duration::from_secs(5));
        assert_eq!(h.check(99, &[]), Verdict::TooOld);
        assert_eq!(h.check(100, &[]), Verdict::Clean);
    }
}
