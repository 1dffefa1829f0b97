//! The embedded engine: FoundationDB's transaction semantics on one node, stored in redb.
//!
//! - **Reads** come from a [`snapshot::Snapshot`]: redb's MVCC view at the newest commit
//!   version when the transaction began (its read version), overlaid with the
//!   transaction's own writes ([`overlay`]).
//! - **Optimistic concurrency**: non-snapshot reads record conflict ranges; at commit the
//!   [`committer`] refuses a transaction whose read ranges a newer commit wrote
//!   ([`history`]), with FoundationDB's retryable `not_committed`.
//! - **Group commit**: the committer applies every waiting transaction in one redb write
//!   transaction and one fsync, assigning versions and versionstamps in commit order.
//! - **Watches** ([`watches`]) fire when a watched key's committed value changes.
//! - **Limits** as FoundationDB's: 5 s transaction age (an [`Options`] field, so tests
//!   can shorten it), 10 MB transactions, 100 kB values, 10 kB keys, each with
//!   FoundationDB's error code.
//! - **Free-disk alarm** ([`free_space`]): raised while the data directory's file system
//!   has less than `store.min_free_disk_mb` free; the fronts block publishers meanwhile.
//! - **Faults** ([`Faults`]) inject conflicts, `commit_unknown_result`, and a disk's
//!   `ENOSPC` or `EIO` on a write or an fsync of the data file ([`data_file`]).
//! - **A failed write or fsync stops the engine.** The batch it belonged to fails (every
//!   caller gets [`StoreError::Failed`]), and so does every later transaction, until the
//!   process restarts and redb recovers the file to its last durable commit. A failed
//!   fsync is never retried: after one, the kernel may have dropped the unwritten pages
//!   and a second fsync could succeed without them (PostgreSQL's "fsyncgate").
//!
//! Durability: redb commits with `Durability::Immediate`, so a commit reported successful
//! survives `kill -9`, and a batch is applied entirely or not at all.

mod apply;
mod committer;
mod data_file;
mod disk;
mod faults;
mod free_space;
mod history;
mod mutation;
mod overlay;
mod snapshot;
mod transaction;
mod watches;
mod write_set;

pub use disk::{DATA_FILE, FORMAT, MARKER};
pub use faults::{DiskFault, Faults};
pub use transaction::Transaction;

use crate::StoreConfig;
use crate::StoreError;
use crate::engine::Engine;
use crate::error::MAX_TRANSACTION_AGE;
use committer::{Committer, PendingWatch, Request};
use parking_lot::{Mutex, RwLock};
use snapshot::Snapshot;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Duration;
use watches::Watches;
use write_set::WriteSet;

/// How to open the embedded engine.
#[derive(Debug, Clone)]
pub struct Options {
    /// The data directory.
    pub path: PathBuf,
    /// redb's page cache, in bytes.
    pub cache_bytes: usize,
    /// Most transactions per group commit (at most 65,536: the versionstamp's order field
    /// has two bytes).
    pub max_batch: usize,
    /// Injected conflict probability.
    pub conflict_rate: f64,
    /// Injected `commit_unknown_result` probability.
    pub unknown_result_rate: f64,
    /// Free bytes on the data directory's file system below which the free-disk alarm is
    /// raised (0: never).
    pub min_free_disk_bytes: u64,
    /// How long a transaction may live after taking its read version before it fails with
    /// `transaction_too_old`. FoundationDB's five seconds by default; no config key sets
    /// it (a cluster's limit is not a client's choice either), but tests of the limit
    /// shorten it so they need not wait five seconds.
    pub max_transaction_age: Duration,
}

impl Options {
    /// Defaults for a store in `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::from_config(&StoreConfig {
            path: path.into(),
            ..StoreConfig::default()
        })
    }

    /// The options `[store]` describes.
    pub fn from_config(config: &StoreConfig) -> Self {
        Self {
            path: config.path.clone(),
            cache_bytes: (config.cache_mb as usize).saturating_mul(1 << 20),
            max_batch: (config.max_batch as usize).clamp(1, 1 << 16),
            conflict_rate: config.inject_conflict_rate,
            unknown_result_rate: config.inject_unknown_result_rate,
            min_free_disk_bytes: config.min_free_disk_mb.saturating_mul(1 << 20),
            max_transaction_age: MAX_TRANSACTION_AGE,
        }
    }
}

/// State shared by transactions and the committer thread.
struct Shared {
    /// The newest committed snapshot; transactions take their read version from it.
    published: RwLock<Arc<Snapshot>>,
    /// Active watches.
    watches: Mutex<Watches>,
    /// Injected failures (shared with the data file's I/O).
    faults: Arc<Faults>,
    /// How long a transaction may live ([`Options::max_transaction_age`]).
    max_transaction_age: Duration,
    /// The committer's inbox; `None` once the store is closed.
    requests: RwLock<Option<Sender<Request>>>,
    /// Set once a group commit's write failed: redb refuses further writes after an I/O
    /// error, so the engine refuses transactions until a restart recovers the file.
    failure: Mutex<Option<StoreError>>,
    /// The last reading of the free-disk monitor.
    disk: Mutex<free_space::Reading>,
    /// Dropped on close: the free-disk monitor then stops.
    stop_monitor: Mutex<Option<Sender<()>>>,
    /// The committer, finisher and free-disk monitor threads, joined on close.
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Shared {
    fn latest(&self) -> Arc<Snapshot> {
        self.published.read().clone()
    }

    /// Makes `snapshot` the newest and fires the watches its batch (`writes`) touched.
    fn publish(&self, snapshot: Arc<Snapshot>, writes: &WriteSet) {
        *self.published.write() = snapshot.clone();
        self.watches.lock().fire(writes, &snapshot);
    }

    /// Activates the watches of a committed transaction.
    fn register_watches(&self, pending: Vec<PendingWatch>) {
        if pending.is_empty() {
            return;
        }
        let mut watches = self.watches.lock();
        let latest = self.latest();
        for w in pending {
            let current = latest.get(&w.key).ok().flatten();
            watches.register(w.key, w.seen, current, w.wake);
        }
    }

    fn send(&self, request: Request) -> Result<(), StoreError> {
        match &*self.requests.read() {
            Some(tx) => tx.send(request).map_err(|_| StoreError::Closed),
            None => Err(StoreError::Closed),
        }
    }
}

/// A handle on an open embedded store; cheap to clone.
#[derive(Clone)]
pub struct EmbeddedDb {
    shared: Arc<Shared>,
}

impl EmbeddedDb {
    /// Opens (or creates) the store in `options.path` and starts its committer. Blocking:
    /// call from a blocking context.
    ///
    /// # Errors
    /// [`StoreError::Open`] naming the path and what to do.
    pub fn open(options: Options) -> Result<Self, StoreError> {
        let faults = Arc::new(Faults::default());
        let opened = disk::open(&options.path, options.cache_bytes, faults.clone())?;
        let snapshot = Arc::new(Snapshot::capture(&opened.db, opened.last_version)?);
        faults.set_conflict_rate(options.conflict_rate);
        faults.set_unknown_result_rate(options.unknown_result_rate);
        let (tx, rx) = std::sync::mpsc::channel();
        let shared = Arc::new(Shared {
            published: RwLock::new(snapshot),
            watches: Mutex::new(Watches::default()),
            faults,
            max_transaction_age: options.max_transaction_age,
            requests: RwLock::new(Some(tx)),
            failure: Mutex::new(None),
            disk: Mutex::new(free_space::Reading::default()),
            stop_monitor: Mutex::new(None),
            threads: Mutex::new(Vec::new()),
        });
        let monitor = free_space::Monitor {
            path: options.path.clone(),
            min_free_bytes: options.min_free_disk_bytes,
        };
        // Read once before anything is served, so the alarm is right from the start.
        monitor.read(&shared);
        let (stop_monitor, stopped) = std::sync::mpsc::channel();
        *shared.stop_monitor.lock() = Some(stop_monitor);
        let (finisher, completions) = std::sync::mpsc::channel();
        let committer = Committer {
            db: opened.db,
            shared: shared.clone(),
            history: history::History::starting_at(
                opened.last_version,
                options.max_transaction_age,
            ),
            last_version: opened.last_version,
            max_batch: options.max_batch,
            finisher,
        };
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| StoreError::Storage(format!("cannot start the {name} thread: {e}")))
        };
        let finisher_shared = shared.clone();
        let monitor_shared = shared.clone();
        let threads = vec![
            spawn("ferry-committer", Box::new(move || committer.run(rx)))?,
            spawn(
                "ferry-finisher",
                Box::new(move || committer::finish(&finisher_shared, completions)),
            )?,
            spawn(
                "ferry-disk-monitor",
                Box::new(move || monitor.run(&monitor_shared, &stopped)),
            )?,
        ];
        *shared.threads.lock() = threads;
        Ok(Self { shared })
    }

    /// The fault injector; tests switch faults on and off through it.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Why publishers must be blocked, while the free-disk alarm is raised.
    pub fn disk_alarm(&self) -> Option<String> {
        self.shared.disk.lock().alarm.clone()
    }

    /// Free bytes on the data directory's file system, as last read.
    pub fn disk_free_bytes(&self) -> Option<u64> {
        self.shared.disk.lock().free_bytes
    }
}

impl Engine for EmbeddedDb {
    type Transaction = Transaction;

    const NAME: &'static str = "embedded";

    /// Starts a transaction at the newest committed version.
    fn begin(&self) -> Result<Transaction, StoreError> {
        if self.shared.requests.read().is_none() {
            return Err(StoreError::Closed);
        }
        if let Some(e) = self.failure() {
            return Err(e);
        }
        Ok(Transaction::new(self.shared.clone(), self.shared.latest()))
    }

    /// Set once a group commit's write failed.
    fn failure(&self) -> Option<StoreError> {
        self.shared.failure.lock().clone()
    }

    /// Refuses new transactions, lets the committer finish the commits already queued,
    /// and releases the data file.
    async fn close(&self) {
        let Some(requests) = self.shared.requests.write().take() else {
            return;
        };
        drop(self.shared.stop_monitor.lock().take());
        let (ack, done) = tokio::sync::oneshot::channel();
        if requests.send(Request::Close(ack)).is_ok() {
            let _ = done.await;
        }
        drop(requests);
        let threads = std::mem::take(&mut *self.shared.threads.lock());
        let _ = tokio::task::spawn_blocking(move || {
            for t in threads {
                let _ = t.join();
            }
        })
        .await;
    }
}
