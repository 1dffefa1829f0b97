//! Watches: wake a waiter once a key's committed value differs from the value its
//! transaction saw.
//!
//! Race freedom: the committer publishes a batch's snapshot *before* it takes this
//! registry's lock to fire watches, and a registration takes the lock *before* reading the
//! newest snapshot, so a change is either seen at registration or fired afterwards.
//!
//! Abandoned watches: a waiter whose [`crate::Watch`] was dropped (its owner woke
//! for another reason, such as a stage's push counter when it also watched the return
//! counter) stays registered until its key is written — which for some keys is never.
//! Registrations therefore sweep every abandoned waiter once the registry has doubled
//! since the last sweep, so the registry holds O(live watches) at O(1) amortized cost per
//! registration (before, each idle consumer cycle left one waiter behind for good: ~3 MiB
//! a minute in the soak, docs/benchmarks.md).

use super::snapshot::Snapshot;
use super::write_set::WriteSet;
use crate::keys::key_after;
use std::collections::BTreeMap;
use tokio::sync::oneshot;

/// One registered watch.
struct Waiter {
    /// The value the watching transaction saw.
    seen: Option<Vec<u8>>,
    /// Resolved (by sending) when the value changes.
    wake: oneshot::Sender<()>,
}

/// Registrations between two sweeps at least (while few waiters are held).
const SWEEP_AFTER: usize = 1024;

/// Active watches by key.
#[derive(Default)]
pub(super) struct Watches {
    by_key: BTreeMap<Vec<u8>, Vec<Waiter>>,
    /// Waiters held, live or abandoned.
    held: usize,
    /// Waiters held right after the last sweep.
    held_after_sweep: usize,
}

impl Watches {
    /// Activates a watch on `key` for a transaction that saw `seen`; `current` is the
    /// newest committed value. Fires at once when they already differ.
    pub(super) fn register(
        &mut self,
        key: Vec<u8>,
        seen: Option<Vec<u8>>,
        current: Option<Vec<u8>>,
        wake: oneshot::Sender<()>,
    ) {
        if seen != current {
            let _ = wake.send(());
            return;
        }
        self.by_key
            .entry(key)
            .or_default()
            .push(Waiter { seen, wake });
        self.held += 1;
        if self.held >= (2 * self.held_after_sweep).max(SWEEP_AFTER) {
            self.sweep();
        }
    }

    /// Drops every waiter nobody waits for any more, and keys left without waiters.
    fn sweep(&mut self) {
        self.by_key.retain(|_, waiters| {
            waiters.retain(|w| !w.wake.is_closed());
            !waiters.is_empty()
        });
        self.held = self.by_key.values().map(Vec::len).sum();
        self.held_after_sweep = self.held;
    }

    /// Fires the watches on keys `writes` touched whose value in `snapshot` differs from
    /// what their transaction saw; drops watches nobody waits for any more.
    pub(super) fn fire(&mut self, writes: &WriteSet, snapshot: &Snapshot) {
        if self.by_key.is_empty() || writes.is_empty() {
            return;
        }
        let touched: Vec<Vec<u8>> = self
            .by_key
            .keys()
            .filter(|k| writes.intersects(k, &key_after(k)))
            .cloned()
            .collect();
        for key in touched {
            let now = snapshot.get(&key).ok().flatten();
            if let Some(waiters) = self.by_key.get_mut(&key) {
                let before = waiters.len();
                let mut kept = Vec::with_capacity(before);
                for w in waiters.drain(..) {
                    if w.seen != now {
                        let _ = w.wake.send(());
                    } else if !w.wake.is_closed() {
                        kept.push(w);
                    }
                }
                self.held -= before - kept.len();
                *waiters = kept;
                if waiters.is_empty() {
                    self.by_key.remove(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot::error::TryRecvError;

    /// Registers a watch on `key` that has seen nothing, as the value is now.
    fn watch(watches: &mut Watches, key: &[u8]) -> oneshot::Receiver<()> {
        let (wake, woken) = oneshot::channel();
        watches.register(key.to_vec(), None, None, wake);
        woken
    }

    #[test]
    fn abandoned_watches_on_keys_never_written_are_swept() {
        let mut watches = Watches::default();
        for i in 0..100_000u32 {
            // Half on one key that is never written (a stage's return counter), half on
            // keys of their own (a dequeue request's key).
            let key = if i % 2 == 0 {
                b"returned".to_vec()
            } else {
                i.to_be_bytes().to_vec()
            };
            drop(watch(&mut watches, &key));
        }
        assert!(watches.held < SWEEP_AFTER, "{} held", watches.held);
        assert!(
            watches.by_key.len() < SWEEP_AFTER,
            "{} keys",
            watches.by_key.len()
        );
    }

    #[test]
    fn a_sweep_keeps_the_watches_still_waited_for() {
        let mut watches = Watches::default();
        let mut live = Vec::new();
        for i in 0..10 * SWEEP_AFTER {
            let woken = watch(&mut watches, b"returned");
            if i % 10 == 0 {
                live.push(woken);
            }
        }
        watches.sweep();
        assert_eq!(watches.held, live.len());
        for mut woken in live {
            assert_eq!(woken.try_recv(), Err(TryRecvError::Empty));
        }
    }
}
