//! An embedded-engine transaction: reads from its snapshot through its own writes,
//! records read conflict ranges, buffers mutations, and hands them to the committer at
//! commit.

use super::Shared;
use super::committer::{CommitRequest, PendingWatch, Request};
use super::mutation::Mutation;
use super::overlay::{Local, Overlay};
use super::snapshot::{Snapshot, merge};
use crate::engine::EngineTransaction;
use crate::error::{MAX_KEY_SIZE, MAX_TRANSACTION_SIZE, MAX_VALUE_SIZE};
use crate::keys::{key_after, split_versionstamp_offset};
use crate::{CommitInfo, KeyValue, RangeOption, StoreError, Value, Watch};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::oneshot;

/// A transaction; clones share it.
#[derive(Clone)]
pub struct Transaction {
    inner: Arc<Inner>,
}

struct Inner {
    shared: Arc<Shared>,
    /// The committed state this transaction reads (its read version).
    snapshot: Arc<Snapshot>,
    /// When the read version was taken, for the age limit.
    started: Instant,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Buffered writes, readable by this transaction.
    overlay: Overlay,
    /// Ranges read without snapshot isolation.
    reads: Vec<(Vec<u8>, Vec<u8>)>,
    /// Write conflict ranges added explicitly.
    extra_writes: Vec<(Vec<u8>, Vec<u8>)>,
    /// Bytes of mutations and conflict ranges, for the size limit.
    size: usize,
    /// The first limit violation, reported at commit (as FoundationDB does).
    deferred: Option<StoreError>,
    /// Watches to activate at commit.
    watches: Vec<PendingWatch>,
    /// Set once `commit` has been called.
    finished: bool,
}

impl State {
    fn defer(&mut self, e: StoreError) {
        self.deferred.get_or_insert(e);
    }

    fn check_key(&mut self, key: &[u8]) {
        if key.len() > MAX_KEY_SIZE {
            self.defer(StoreError::KeyTooLarge { size: key.len() });
        }
    }

    fn check_value(&mut self, value: &[u8]) {
        if value.len() > MAX_VALUE_SIZE {
            self.defer(StoreError::ValueTooLarge { size: value.len() });
        }
    }

    fn add_read(&mut self, begin: Vec<u8>, end: Vec<u8>) {
        self.size += begin.len() + end.len();
        self.reads.push((begin, end));
    }

    fn record(&mut self, m: Mutation) {
        self.size += m.size();
        match m {
            Mutation::Set { key, value } => self.overlay.set(key, value),
            Mutation::Clear { key } => self.overlay.clear(&key),
            Mutation::ClearRange { begin, end } => self.overlay.clear_range(&begin, &end),
            Mutation::Add { key, param } => self.overlay.add(&key, &param),
            m @ (Mutation::SetVersionstampedKey { .. }
            | Mutation::SetVersionstampedValue { .. }) => self.overlay.push_unreadable(m),
        }
    }
}

impl Transaction {
    pub(super) fn new(shared: Arc<Shared>, snapshot: Arc<Snapshot>) -> Self {
        Self {
            inner: Arc::new(Inner {
                shared,
                snapshot,
                started: Instant::now(),
                state: Mutex::new(State::default()),
            }),
        }
    }

    fn check_age(&self) -> Result<(), StoreError> {
        if self.inner.started.elapsed() > self.inner.shared.max_transaction_age {
            Err(StoreError::TransactionTooOld)
        } else {
            Ok(())
        }
    }
}

impl EngineTransaction for Transaction {
    async fn get(&self, key: &[u8], snapshot: bool) -> Result<Option<Vec<u8>>, StoreError> {
        self.check_age()?;
        if key.len() > MAX_KEY_SIZE {
            return Err(StoreError::KeyTooLarge { size: key.len() });
        }
        let mut st = self.inner.state.lock();
        let local = st.overlay.lookup(key);
        if let Some(Local::Value(v)) = local {
            return Ok(v.map(|v| v.to_vec()));
        }
        let base = self.inner.snapshot.get(key)?;
        if !snapshot {
            st.add_read(key.to_vec(), key_after(key));
        }
        Ok(match local {
            Some(adds) => adds.resolve(base.as_deref()),
            None => base,
        })
    }

    async fn get_range(
        &self,
        range: &RangeOption,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>, StoreError> {
        self.check_age()?;
        let (begin, end) = (range.begin.as_slice(), range.end.as_slice());
        if begin >= end {
            return Ok(Vec::new());
        }
        let limit = if range.limit == 0 {
            usize::MAX
        } else {
            range.limit
        };
        let mut st = self.inner.state.lock();
        let snap = &self.inner.snapshot;
        let out = {
            let overlay = &st.overlay;
            let stored = snap
                .range(begin, end, range.reverse)?
                .filter(|r| r.as_ref().map_or(true, |(k, _)| !overlay.hides(k)));
            let points = overlay.points_in(begin, end);
            let points: Box<dyn Iterator<Item = _> + Send> = if range.reverse {
                Box::new(points.rev())
            } else {
                Box::new(points)
            };
            let local = points.filter_map(|(k, l)| match l {
                Local::Value(None) => None,
                Local::Value(Some(v)) => Some(Ok((k.clone(), v.to_vec()))),
                adds @ Local::Adds(_) => match snap.get(k) {
                    Ok(base) => adds.resolve(base.as_deref()).map(|v| Ok((k.clone(), v))),
                    Err(e) => Some(Err(e)),
                },
            });
            merge(stored, local, range.reverse)
                .take(limit)
                .map(|r| r.map(|(key, value)| KeyValue { key, value }))
                .collect::<Result<Vec<_>, _>>()?
        };
        if !snapshot {
            // Conflict only on what was returned when the limit cut the read short, so
            // appends past the end of a queue's head do not conflict with its consumer.
            let (b, e) = match out.last() {
                Some(last) if out.len() == limit && !range.reverse => {
                    (begin.to_vec(), key_after(&last.key))
                }
                Some(last) if out.len() == limit => (last.key.clone(), end.to_vec()),
                _ => (begin.to_vec(), end.to_vec()),
            };
            st.add_read(b, e);
        }
        Ok(out)
    }

    fn set(&self, key: &[u8], value: Value) {
        let mut st = self.inner.state.lock();
        st.check_key(key);
        st.check_value(&value);
        st.record(Mutation::Set {
            key: key.to_vec(),
            value: value.into_bytes(),
        });
    }

    fn clear(&self, key: &[u8]) {
        let mut st = self.inner.state.lock();
        st.check_key(key);
        st.record(Mutation::Clear { key: key.to_vec() });
    }

    fn clear_range(&self, begin: &[u8], end: &[u8]) {
        if begin >= end {
            return;
        }
        let mut st = self.inner.state.lock();
        st.check_key(begin);
        st.check_key(end);
        st.record(Mutation::ClearRange {
            begin: begin.to_vec(),
            end: end.to_vec(),
        });
    }

    fn atomic_add(&self, key: &[u8], param: &[u8]) {
        let mut st = self.inner.state.lock();
        st.check_key(key);
        st.record(Mutation::Add {
            key: key.to_vec(),
            param: param.to_vec(),
        });
    }

    fn set_versionstamped_key(&self, key: &[u8], value: Value) {
        let mut st = self.inner.state.lock();
        let Some((template, offset)) = split_versionstamp_offset(key) else {
            st.defer(StoreError::BadVersionstampOffset {
                offset: key.len().saturating_sub(4),
            });
            return;
        };
        st.check_key(template);
        st.check_value(&value);
        st.record(Mutation::SetVersionstampedKey {
            key: template.to_vec(),
            offset,
            value: value.into_bytes(),
        });
    }

    fn set_versionstamped_value(&self, key: &[u8], value: Value) {
        let mut st = self.inner.state.lock();
        let Some((template, offset)) = split_versionstamp_offset(&value) else {
            st.defer(StoreError::BadVersionstampOffset {
                offset: value.len().saturating_sub(4),
            });
            return;
        };
        st.check_key(key);
        st.check_value(template);
        // The template is the value without its 4-byte offset: the same buffer, shortened.
        let template_len = template.len();
        let mut template = value.into_bytes();
        template.truncate(template_len);
        st.record(Mutation::SetVersionstampedValue {
            key: key.to_vec(),
            value: template,
            offset,
        });
    }

    fn add_read_conflict_range(&self, begin: &[u8], end: &[u8]) {
        if begin < end {
            self.inner
                .state
                .lock()
                .add_read(begin.to_vec(), end.to_vec());
        }
    }

    fn add_write_conflict_range(&self, begin: &[u8], end: &[u8]) {
        if begin < end {
            let mut st = self.inner.state.lock();
            st.size += begin.len() + end.len();
            st.extra_writes.push((begin.to_vec(), end.to_vec()));
        }
    }

    fn watch(&self, key: &[u8]) -> Watch {
        let (wake, woken) = oneshot::channel();
        let mut st = self.inner.state.lock();
        let seen = match st.overlay.lookup(key) {
            Some(Local::Value(v)) => v.map(|v| v.to_vec()),
            other => {
                let base = self.inner.snapshot.get(key).ok().flatten();
                match other {
                    Some(adds) => adds.resolve(base.as_deref()),
                    None => base,
                }
            }
        };
        st.watches.push(PendingWatch {
            key: key.to_vec(),
            seen,
            wake,
        });
        Watch::new(async move { woken.await.map_err(|_| StoreError::Cancelled) })
    }

    async fn commit(&self) -> Result<CommitInfo, StoreError> {
        let (mutations, reads, extra_writes, watches) = {
            let mut st = self.inner.state.lock();
            if st.finished {
                return Err(StoreError::Cancelled);
            }
            st.finished = true;
            if let Some(e) = st.deferred.take() {
                return Err(e);
            }
            if st.size > MAX_TRANSACTION_SIZE {
                return Err(StoreError::TransactionTooLarge { size: st.size });
            }
            let overlay = std::mem::take(&mut st.overlay);
            (
                overlay.log,
                std::mem::take(&mut st.reads),
                std::mem::take(&mut st.extra_writes),
                std::mem::take(&mut st.watches),
            )
        };
        self.check_age()?;
        if mutations.is_empty() && extra_writes.is_empty() {
            // Read-only: nothing to order or make durable.
            self.inner.shared.register_watches(watches);
            return Ok(CommitInfo {
                version: self.inner.snapshot.version,
                versionstamp: None,
            });
        }
        let (reply, outcome) = oneshot::channel();
        self.inner.shared.send(Request::Commit(CommitRequest {
            read_version: self.inner.snapshot.version,
            reads,
            mutations,
            extra_writes,
            watches,
            reply,
        }))?;
        outcome.await.map_err(|_| StoreError::Closed)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embedded::{EmbeddedDb, Options};
    use crate::engine::Engine;
    use bytes::Bytes;

    #[tokio::test]
    async fn a_bytes_value_is_buffered_without_copying() {
        let dir = tempfile::tempdir().unwrap();
        let db = EmbeddedDb::open(Options::new(dir.path().join("store"))).unwrap();
        let tx = db.begin().unwrap();
        let body = Bytes::from(vec![7u8; 1024]);
        tx.set(b"k", Value::from(body.clone()));
        {
            let st = tx.inner.state.lock();
            let Some(Mutation::Set { value, .. }) = st.overlay.log.first() else {
                panic!("the set is logged");
            };
            assert_eq!(
                value.as_ptr(),
                body.as_ptr(),
                "the log holds the caller's buffer"
            );
            let Some(Local::Value(Some(read))) = st.overlay.lookup(b"k") else {
                panic!("the set is readable");
            };
            assert_eq!(read.as_ptr(), body.as_ptr(), "the overlay shares it");
        }
        assert_eq!(
            tx.get(b"k", false).await.unwrap().as_deref(),
            Some(&body[..])
        );
        tx.commit().await.unwrap();
        db.close().await;
    }
}
