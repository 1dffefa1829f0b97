//! The embedded engine: FoundationDB's transaction semantics on one node — a commit log,
//! an in-memory versioned window and a checkpoint in redb.
//!
//! - **Commits** ([`committer`]) are appended to the [`commit_log`] (one write, one
//!   `fdatasync` per group commit) and added to the [`window`], and answered then: no
//!   B-tree is written on a commit's path.
//! - **Checkpoints** ([`checkpoint`]): a background thread writes the window's net effect
//!   into redb in large transactions; the window and the log then forget what redb holds.
//!   Opening replays the log after the checkpoint into the window.
//! - **Reads** come from a [`snapshot::Snapshot`]: the window at the newest commit version
//!   when the transaction began (its read version) over the checkpoint it began on,
//!   overlaid with the transaction's own writes ([`overlay`]).
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
//!   `ENOSPC` or `EIO` on a write or an fsync of the commit log or of the data file
//!   ([`data_file`]).
//! - **A failed write or fsync stops the engine.** The batch it belonged to fails (every
//!   caller gets [`StoreError::Failed`]), and so does every later transaction, until the
//!   process restarts and recovers the checkpoint and the log's whole records. A failed
//!   fsync is never retried: after one, the kernel may have dropped the unwritten pages
//!   and a second fsync could succeed without them (PostgreSQL's "fsyncgate").
//!
//! Durability: a commit is answered after its log record's `fdatasync`, so a commit
//! reported successful survives `kill -9`; a batch is one record, replayed entirely or
//! not at all; checkpoints commit with redb's `Durability::Immediate`.

mod batch;
mod checkpoint;
mod commit_log;
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
mod window;
mod write_set;

pub use commit_log::LOG_DIR;
pub use disk::{DATA_FILE, FORMAT, MARKER};
pub use faults::{DiskFault, Faults};
pub use transaction::Transaction;

use crate::StoreConfig;
use crate::StoreError;
use crate::engine::Engine;
use crate::error::MAX_TRANSACTION_AGE;
use checkpoint::{Checkpointer, Signal};
use commit_log::CommitLog;
use committer::{Committer, PendingWatch, Request};
use parking_lot::{Mutex, RwLock};
use snapshot::{Checkpoint, Snapshot};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use watches::Watches;
use window::Window;
use write_set::WriteSet;

/// How to open the embedded engine.
#[derive(Debug, Clone)]
pub struct Options {
    /// The data directory.
    pub path: PathBuf,
    /// redb's page cache, in bytes.
    pub cache_bytes: usize,
    /// The most bytes the window may hold (`store.window_mb`); a checkpoint starts at half.
    pub window_bytes: usize,
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
            window_bytes: (config.window_mb as usize).saturating_mul(1 << 20),
            max_batch: (config.max_batch as usize).clamp(1, 1 << 16),
            conflict_rate: config.inject_conflict_rate,
            unknown_result_rate: config.inject_unknown_result_rate,
            min_free_disk_bytes: config.min_free_disk_mb.saturating_mul(1 << 20),
            max_transaction_age: MAX_TRANSACTION_AGE,
        }
    }
}

/// A snapshot handed out, for finding the oldest one a live reader may still use.
struct Issued {
    snapshot: Weak<Snapshot>,
    published_at: Instant,
}

/// State shared by transactions and the committer thread.
struct Shared {
    /// The newest committed snapshot; transactions take their read version from it.
    published: RwLock<Arc<Snapshot>>,
    /// Snapshots published, oldest first, while a reader may use them.
    issued: Mutex<VecDeque<Issued>>,
    /// The window of changes since the checkpoint.
    window: Arc<Window>,
    /// The newest checkpoint; new snapshots read below the window from it.
    checkpoint: RwLock<Arc<Checkpoint>>,
    /// The checkpointer's inbox; `None` once the store is closed.
    checkpointer: Mutex<Option<Sender<Signal>>>,
    /// Set while the committer's request for a checkpoint is pending.
    checkpoint_asked: AtomicBool,
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
    /// The committer, checkpointer and free-disk monitor threads, joined on close.
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// The data directory (`store.path`), as opened.
    path: PathBuf,
}

impl Shared {
    fn latest(&self) -> Arc<Snapshot> {
        self.published.read().clone()
    }

    /// Makes the state at `version` (the window's entries up to it, over the current
    /// checkpoint) the newest and fires the watches its batch (`writes`) touched.
    ///
    /// The checkpoint is read under the `published` lock, which [`Self::use_checkpoint`]
    /// takes after switching checkpoints: a snapshot published on an older checkpoint
    /// is issued before the switch and replaced by it, so the window keeps what it needs
    /// while it lives; one built on a checkpoint read earlier could be published after
    /// the window pruned the entries between that checkpoint and the next.
    fn publish(&self, version: u64, writes: &WriteSet) {
        let snapshot = {
            let mut published = self.published.write();
            let snapshot = Arc::new(Snapshot {
                version,
                window: self.window.clone(),
                base: self.checkpoint.read().clone(),
            });
            self.issue(&snapshot);
            *published = snapshot.clone();
            snapshot
        };
        self.watches.lock().fire(writes, &snapshot);
    }

    /// Records a snapshot handed out.
    fn issue(&self, snapshot: &Arc<Snapshot>) {
        self.issued.lock().push_back(Issued {
            snapshot: Arc::downgrade(snapshot),
            published_at: Instant::now(),
        });
    }

    /// Makes `base` the checkpoint new snapshots read, and gives the newest snapshot its
    /// view, so the previous one is freed as soon as its readers end.
    fn use_checkpoint(&self, base: Arc<Checkpoint>) {
        *self.checkpoint.write() = base.clone();
        let mut published = self.published.write();
        if published.base.version < base.version {
            let snapshot = Arc::new(Snapshot {
                version: published.version,
                window: published.window.clone(),
                base,
            });
            self.issue(&snapshot);
            *published = snapshot;
        }
    }

    /// The oldest snapshot a transaction may use: dropped ones are forgotten, and so are
    /// ones superseded longer ago than a transaction may live (any reader still holding
    /// one fails with `transaction_too_old`).
    fn oldest_issued(&self) -> Option<Arc<Snapshot>> {
        let mut issued = self.issued.lock();
        let limit = self.max_transaction_age + Duration::from_secs(1);
        loop {
            let superseded_long_ago = issued
                .get(1)
                .is_some_and(|next| next.published_at.elapsed() > limit);
            let front = issued.front()?;
            match front.snapshot.upgrade() {
                Some(snapshot) if !superseded_long_ago => return Some(snapshot),
                _ => {
                    issued.pop_front();
                }
            }
        }
    }

    /// The oldest read version a live reader may use.
    fn oldest_live_read(&self) -> u64 {
        self.oldest_issued()
            .map_or_else(|| self.latest().version, |s| s.version)
    }

    /// The oldest checkpoint a live reader may use.
    fn oldest_live_checkpoint(&self) -> u64 {
        self.oldest_issued()
            .map_or_else(|| self.checkpoint.read().version, |s| s.base.version)
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
        let recovered = CommitLog::open(&options.path, opened.last_version, faults.clone())?;
        let window = Arc::new(Window::default());
        let mut last_version = opened.last_version;
        for batch in &recovered.batches {
            window.apply(batch, batch.version);
            last_version = batch.version;
        }
        if !recovered.batches.is_empty() {
            tracing::info!(
                batches = recovered.batches.len(),
                checkpoint = opened.last_version,
                "replayed the commit log after the checkpoint"
            );
        }
        let base = Arc::new(Checkpoint::capture(&opened.db, opened.last_version)?);
        let snapshot = Arc::new(Snapshot {
            version: last_version,
            window: window.clone(),
            base: base.clone(),
        });
        faults.set_conflict_rate(options.conflict_rate);
        faults.set_unknown_result_rate(options.unknown_result_rate);
        let (tx, rx) = std::sync::mpsc::channel();
        let (signal, signals) = std::sync::mpsc::channel();
        let shared = Arc::new(Shared {
            published: RwLock::new(snapshot.clone()),
            issued: Mutex::new(VecDeque::new()),
            window,
            checkpoint: RwLock::new(base),
            checkpointer: Mutex::new(Some(signal.clone())),
            checkpoint_asked: AtomicBool::new(false),
            watches: Mutex::new(Watches::default()),
            faults,
            max_transaction_age: options.max_transaction_age,
            requests: RwLock::new(Some(tx)),
            failure: Mutex::new(None),
            disk: Mutex::new(free_space::Reading::default()),
            stop_monitor: Mutex::new(None),
            threads: Mutex::new(Vec::new()),
            path: options.path.clone(),
        });
        shared.issue(&snapshot);
        let monitor = free_space::Monitor {
            path: options.path.clone(),
            min_free_bytes: options.min_free_disk_bytes,
        };
        // Read once before anything is served, so the alarm is right from the start.
        monitor.read(&shared);
        let (stop_monitor, stopped) = std::sync::mpsc::channel();
        *shared.stop_monitor.lock() = Some(stop_monitor);
        let last_logged = recovered.batches.last().map_or(0, |b| b.version);
        let log = Arc::new(Mutex::new(recovered.log));
        let committer = Committer {
            log: log.clone(),
            shared: shared.clone(),
            history: history::History::starting_at(last_version, options.max_transaction_age),
            last_version,
            last_logged,
            max_batch: options.max_batch,
            window_budget: options.window_bytes.max(1 << 20),
            checkpointer: signal,
        };
        let checkpointer = Checkpointer {
            db: opened.db,
            shared: shared.clone(),
            log,
        };
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| StoreError::Storage(format!("cannot start the {name} thread: {e}")))
        };
        let monitor_shared = shared.clone();
        let threads = vec![
            spawn("ferry-committer", Box::new(move || committer.run(rx)))?,
            spawn(
                "ferry-checkpoint",
                Box::new(move || checkpointer.run(signals)),
            )?,
            spawn(
                "ferry-disk-monitor",
                Box::new(move || monitor.run(&monitor_shared, &stopped)),
            )?,
        ];
        *shared.threads.lock() = threads;
        Ok(Self { shared })
    }

    /// Writes a checkpoint now and waits for it (tests: a reader older than a checkpoint,
    /// faults on the data file, recovery from a checkpoint plus a log).
    ///
    /// # Errors
    /// The checkpoint's failure (the engine then stops), or [`StoreError::Closed`].
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        let (done, outcome) = tokio::sync::oneshot::channel();
        let sent = self
            .shared
            .checkpointer
            .lock()
            .as_ref()
            .is_some_and(|c| c.send(Signal::Now(done)).is_ok());
        if !sent {
            return Err(StoreError::Closed);
        }
        outcome.await.map_err(|_| StoreError::Closed)?
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

    /// The data directory (`store.path`), as opened.
    pub fn path(&self) -> &std::path::Path {
        &self.shared.path
    }

    /// The newest committed state, read from the data file: a checkpoint is written
    /// first, and the handle keeps redb's view of it (the pages it shows stay in the file
    /// while the handle lives, so the file grows by what is rewritten meanwhile). The
    /// window is not held back, so commits go on at full speed however long a reader (a
    /// backup) keeps it.
    ///
    /// # Errors
    /// [`StoreError::Closed`], or the engine's failure.
    pub async fn pin(&self) -> Result<PinnedSnapshot, StoreError> {
        if let Some(e) = self.failure() {
            return Err(e);
        }
        self.checkpoint().await?;
        Ok(PinnedSnapshot {
            checkpoint: self.shared.checkpoint.read().clone(),
        })
    }
}

/// A committed state held readable by [`EmbeddedDb::pin`].
pub struct PinnedSnapshot {
    checkpoint: Arc<Checkpoint>,
}

impl PinnedSnapshot {
    /// The commit version it shows.
    pub fn version(&self) -> u64 {
        self.checkpoint.version
    }

    /// The pairs from `begin` (inclusive) on, in key order, until about `max_bytes` of
    /// keys and values (at least one pair while any is left); empty at the end.
    ///
    /// # Errors
    /// A storage error of the data file.
    pub fn read_from(
        &self,
        begin: &[u8],
        max_bytes: usize,
    ) -> Result<Vec<crate::KeyValue>, StoreError> {
        let end = crate::keys::keyspace_end();
        let mut pairs = Vec::new();
        let mut bytes = 0;
        for pair in self.checkpoint.range(begin, &end, false)? {
            let (key, value) = pair?;
            bytes += key.len() + value.len();
            pairs.push(crate::KeyValue { key, value });
            if bytes >= max_bytes {
                break;
            }
        }
        Ok(pairs)
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
        drop(self.shared.checkpointer.lock().take());
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
