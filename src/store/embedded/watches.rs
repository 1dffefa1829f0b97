//! Watches: wake a waiter once a key's committed value differs from the value its
//! transaction saw.
//!
//! Race freedom: the committer publishes a batch's snapshot *before* it takes this
//! registry's lock to fire watches, and a registration takes the lock *before* reading the
//! newest snapshot, so a change is either seen at registration or fired afterwards.

use super::snapshot::Snapshot;
use super::write_set::WriteSet;
use crate::store::keys::key_after;
use std::collections::BTreeMap;
use tokio::sync::oneshot;

/// One registered watch.
struct Waiter {
    /// The value the watching transaction saw.
    seen: Option<Vec<u8>>,
    /// Resolved (by sending) when the value changes.
    wake: oneshot::Sender<()>,
}

/// Active watches by key.
#[derive(Default)]
pub(super) struct Watches {
    by_key: BTreeMap<Vec<u8>, Vec<Waiter>>,
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
                let mut kept = Vec::with_capacity(waiters.len());
                for w in waiters.drain(..) {
                    if w.seen != now {
                        let _ = w.wake.send(());
                    } else if !w.wake.is_closed() {
                        kept.push(w);
                    }
                }
                *waiters = kept;
                if waiters.is_empty() {
                    self.by_key.remove(&key);
                }
            }
        }
    }
}
