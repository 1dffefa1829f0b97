//! The FoundationDB-shaped transactional store.
//!
//! One interface, the subset of FoundationDB the layers above need: transactions run by a
//! retry loop ([`Database::run`]), `get`, range reads with limit, reverse and snapshot
//! isolation, `set`, `clear`, `clear_range`, atomic add, versionstamped keys and values,
//! explicit conflict ranges, watches, and FoundationDB's error classes ([`StoreError`]).
//!
//! Two engines implement it: [`embedded`] (the default, single node) and `fdb`
//! (FoundationDB, behind the cargo feature `fdb`). Each implements the traits of
//! [`engine`], so the compiler keeps their operations alike; [`Database`] and
//! [`Transaction`] are enums over the engines that dispatch to them, so the layers above
//! and the conformance suite use concrete types and are written once.
//! Keys are tuple-encoded (`foundationdb-tuple`) by the layers above, so both engines hold
//! byte-identical keyspaces.
//!
//! Invariant: a transaction closure may run many times. It computes and buffers mutations;
//! it never writes to a socket, acknowledges upstream or counts a success. Those happen
//! after [`Database::run`] returns.

pub mod backup;
mod change_counter;
pub mod chunked;
mod config;
pub mod embedded;
mod engine;
pub mod error;
#[cfg(feature = "fdb")]
mod fdb;
pub mod keys;
mod value;

pub use change_counter::ChangeCounter;
pub use config::{
    DEFAULT_CACHE_MB, DEFAULT_FDB_API_VERSION, DEFAULT_MAX_BATCH, DEFAULT_MIN_FREE_DISK_MB,
    DEFAULT_STORE_PATH, DEFAULT_STORE_PREFIX, DEFAULT_WINDOW_MB, EngineKind, StoreConfig,
};
pub use error::{OpenError, StoreError, TransactionError};
pub use value::Value;

use engine::{Engine, EngineTransaction};
use ferry_telemetry::names;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// A key and its value, as range reads return them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
}

/// A range read: keys in `[begin, end)`, at most `limit` of them (0: no limit), from the
/// end backwards when `reverse`.
#[derive(Debug, Clone)]
pub struct RangeOption {
    /// First key of the range (inclusive).
    pub begin: Vec<u8>,
    /// End of the range (exclusive).
    pub end: Vec<u8>,
    /// Most pairs to return; 0 returns all.
    pub limit: usize,
    /// Read from `end` towards `begin`.
    pub reverse: bool,
}

impl RangeOption {
    /// All keys in `[begin, end)`, forwards.
    pub fn new(begin: impl Into<Vec<u8>>, end: impl Into<Vec<u8>>) -> Self {
        Self {
            begin: begin.into(),
            end: end.into(),
            limit: 0,
            reverse: false,
        }
    }

    /// Every key starting with `prefix`.
    pub fn prefix(prefix: &[u8]) -> Self {
        let (begin, end) = keys::prefix_range(prefix);
        Self::new(begin, end)
    }

    /// Returns at most `limit` pairs.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Reads from the end of the range backwards.
    pub fn reverse(mut self) -> Self {
        self.reverse = true;
        self
    }
}

/// What a successful commit reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitInfo {
    /// The commit version (for a read-only transaction: its read version).
    pub version: u64,
    /// The 10-byte versionstamp versionstamped mutations received; `None` for a
    /// transaction that wrote nothing.
    pub versionstamp: Option<[u8; keys::VERSIONSTAMP_LEN]>,
}

/// A watch: resolves once the watched key's value differs from the value the creating
/// transaction saw. Active only after that transaction commits; fails with
/// [`StoreError::Cancelled`] if it never does.
pub struct Watch(Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send>>);

impl Watch {
    pub(crate) fn new(f: impl Future<Output = Result<(), StoreError>> + Send + 'static) -> Self {
        Self(Box::pin(f))
    }
}

impl Future for Watch {
    type Output = Result<(), StoreError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.0.as_mut().poll(cx)
    }
}

impl std::fmt::Debug for Watch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Watch")
    }
}

/// Limits on [`Database::run_with`]'s retry loop.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunOptions {
    /// Most attempts before the last retryable error is returned; `None`: no limit.
    pub max_attempts: Option<u32>,
    /// Longest the loop may keep retrying; `None`: no limit.
    pub timeout: Option<Duration>,
}

impl RunOptions {
    /// One attempt: a retryable error is returned to the caller instead of retried.
    pub fn once() -> Self {
        Self {
            max_attempts: Some(1),
            timeout: None,
        }
    }
}

/// The first delay of the retry loop's exponential backoff.
const BACKOFF_INITIAL: Duration = Duration::from_millis(2);
/// The longest delay of the retry loop's exponential backoff.
const BACKOFF_MAX: Duration = Duration::from_millis(500);

/// Whether this build holds the FoundationDB engine (the cargo feature `fdb`).
pub const FDB_BUILT_IN: bool = cfg!(feature = "fdb");

/// Releases process-wide engine resources (FoundationDB's client network thread); call
/// once, just before the process exits, after every [`Database`] is closed.
pub fn stop_engines() {
    #[cfg(feature = "fdb")]
    fdb::stop_network();
}

/// A handle on the store; cheap to clone.
#[derive(Clone)]
pub enum Database {
    /// The embedded single-node engine.
    Embedded(embedded::EmbeddedDb),
    /// A FoundationDB cluster.
    #[cfg(feature = "fdb")]
    Fdb(fdb::FdbDb),
}

/// One transaction; cheap to clone (clones share the transaction).
#[derive(Clone)]
pub struct Transaction {
    engine: AnyTransaction,
    attempt: Arc<Attempt>,
}

/// The transaction of whichever engine the database is on.
#[derive(Clone)]
enum AnyTransaction {
    /// A transaction on the embedded engine.
    Embedded(embedded::Transaction),
    /// A transaction on FoundationDB.
    #[cfg(feature = "fdb")]
    Fdb(fdb::FdbTransaction),
}

/// What one attempt of the retry loop knows, whatever the engine.
struct Attempt {
    /// Whether an earlier attempt ended in `commit_unknown_result`.
    maybe_committed: bool,
    /// User versions handed out by `next_user_version`.
    user_versions: AtomicU32,
}

/// Calls the same [`Engine`] method on whichever engine a [`Database`] holds, or the same
/// [`EngineTransaction`] method on whichever engine's transaction a [`Transaction`] holds
/// (`engine self`).
macro_rules! dispatch {
    ($self:expr, $v:ident => $e:expr) => {
        match $self {
            Self::Embedded($v) => $e,
            #[cfg(feature = "fdb")]
            Self::Fdb($v) => $e,
        }
    };
    (engine $self:expr, $v:ident => $e:expr) => {
        match &$self.engine {
            AnyTransaction::Embedded($v) => $e,
            #[cfg(feature = "fdb")]
            AnyTransaction::Fdb($v) => $e,
        }
    };
}

impl Database {
    /// Opens the engine named by `config.engine`.
    ///
    /// # Errors
    /// [`StoreError::Open`] when the store cannot be opened; the message names the path or
    /// key and what to do.
    pub async fn open(config: &StoreConfig) -> Result<Self, StoreError> {
        let db = Self::open_engine(config).await?;
        // At 0 from the start, so a rate or increase over them has a first sample.
        for name in [
            names::STORE_COMMITS_TOTAL,
            names::STORE_CONFLICTS_TOTAL,
            names::STORE_RETRIES_TOTAL,
        ] {
            metrics::counter!(name, names::LABEL_ENGINE => db.engine_name()).increment(0);
        }
        Ok(db)
    }

    /// Opens the engine named by `config.engine`.
    async fn open_engine(config: &StoreConfig) -> Result<Self, StoreError> {
        match config.engine {
            EngineKind::Embedded => {
                Self::open_embedded(embedded::Options::from_config(config)).await
            }
            #[cfg(feature = "fdb")]
            EngineKind::Fdb => Ok(Self::Fdb(fdb::FdbDb::open(config)?)),
            #[cfg(not(feature = "fdb"))]
            EngineKind::Fdb => Err(OpenError::Engine(
                "'fdb' needs a ferry built with `--features fdb`".into(),
            )
            .into()),
        }
    }

    /// Opens the embedded engine with `options`, including those no config key sets (the
    /// transaction age limit, which tests of that limit shorten).
    ///
    /// # Errors
    /// As [`Database::open`].
    pub async fn open_embedded(options: embedded::Options) -> Result<Self, StoreError> {
        let db = tokio::task::spawn_blocking(move || embedded::EmbeddedDb::open(options))
            .await
            .map_err(|e| StoreError::Storage(format!("opening the store panicked: {e}")))??;
        Ok(Self::Embedded(db))
    }

    /// The engine's name, as the `engine` metric label gives it.
    pub fn engine_name(&self) -> &'static str {
        fn name<E: Engine>(_: &E) -> &'static str {
            E::NAME
        }
        dispatch!(self, db => name(db))
    }

    /// Which engine the database is on.
    pub fn engine_kind(&self) -> EngineKind {
        match self {
            Self::Embedded(_) => EngineKind::Embedded,
            #[cfg(feature = "fdb")]
            Self::Fdb(_) => EngineKind::Fdb,
        }
    }

    /// Makes the embedded engine write its window into the data file now and waits for
    /// it (tests of checkpoints); FoundationDB has nothing to do.
    ///
    /// # Errors
    /// The checkpoint's failure, which stops the embedded engine.
    pub async fn checkpoint(&self) -> Result<(), StoreError> {
        match self {
            Self::Embedded(db) => db.checkpoint().await,
            #[cfg(feature = "fdb")]
            Self::Fdb(_) => Ok(()),
        }
    }

    /// The fault injector, for engines that can inject FoundationDB's failures (the
    /// embedded engine); `None` otherwise.
    pub fn faults(&self) -> Option<&embedded::Faults> {
        match self {
            Self::Embedded(db) => Some(db.faults()),
            #[cfg(feature = "fdb")]
            Self::Fdb(_) => None,
        }
    }

    /// Why publishers must be blocked, while the embedded engine's free-disk alarm is
    /// raised (`store.min_free_disk_mb`); never with FoundationDB, which manages its own
    /// space.
    pub fn disk_alarm(&self) -> Option<String> {
        match self {
            Self::Embedded(db) => db.disk_alarm(),
            #[cfg(feature = "fdb")]
            Self::Fdb(_) => None,
        }
    }

    /// Free bytes on the embedded store's file system, as last read.
    pub fn disk_free_bytes(&self) -> Option<u64> {
        match self {
            Self::Embedded(db) => db.disk_free_bytes(),
            #[cfg(feature = "fdb")]
            Self::Fdb(_) => None,
        }
    }

    /// The embedded store's data directory (`store.path`, as opened); `None` on
    /// FoundationDB, whose data lives on its own servers.
    pub fn data_dir(&self) -> Option<&std::path::Path> {
        match self {
            Self::Embedded(db) => Some(db.path()),
            #[cfg(feature = "fdb")]
            Self::Fdb(_) => None,
        }
    }

    /// Why the store stopped accepting transactions, if it did (a failed write on the
    /// embedded engine); the daemon exits on it so a restart recovers the store.
    pub fn failure(&self) -> Option<StoreError> {
        dispatch!(self, db => db.failure())
    }

    /// Starts a transaction.
    ///
    /// # Errors
    /// [`StoreError::Closed`] after [`Database::close`].
    pub fn begin(&self) -> Result<Transaction, StoreError> {
        self.begin_attempt(false)
    }

    fn begin_attempt(&self, maybe_committed: bool) -> Result<Transaction, StoreError> {
        let engine = match self {
            Self::Embedded(db) => AnyTransaction::Embedded(db.begin()?),
            #[cfg(feature = "fdb")]
            Self::Fdb(db) => AnyTransaction::Fdb(db.begin()?),
        };
        Ok(Transaction {
            engine,
            attempt: Arc::new(Attempt {
                maybe_committed,
                user_versions: AtomicU32::new(0),
            }),
        })
    }

    /// Runs `f` in a transaction and commits it, retrying on retryable errors with
    /// exponential backoff (FoundationDB's retry loop). `f` may run many times: it must
    /// not have side effects outside the transaction.
    ///
    /// # Errors
    /// The first non-retryable error from `f` or from the commit.
    pub async fn run<T, E, F, Fut>(&self, f: F) -> Result<T, E>
    where
        F: FnMut(Transaction) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: TransactionError,
    {
        self.run_with(RunOptions::default(), f)
            .await
            .map(|(value, _)| value)
    }

    /// [`Database::run`] with limits on retrying, also returning what the commit reported.
    ///
    /// # Errors
    /// The first non-retryable error, or the last retryable one once a limit is reached.
    pub async fn run_with<T, E, F, Fut>(
        &self,
        options: RunOptions,
        mut f: F,
    ) -> Result<(T, CommitInfo), E>
    where
        F: FnMut(Transaction) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: TransactionError,
    {
        let started = Instant::now();
        let mut backoff = BACKOFF_INITIAL;
        let mut maybe_committed = false;
        let mut attempt = 0u32;
        loop {
            attempt += 1;
            let tx = self.begin_attempt(maybe_committed)?;
            let error = match f(tx.clone()).await {
                Ok(value) => match tx.commit().await {
                    Ok(info) => return Ok((value, info)),
                    Err(e) => E::from(e),
                },
                Err(e) => e,
            };
            let Some(store_error) = error.store_error() else {
                return Err(error);
            };
            let out_of_attempts = options.max_attempts.is_some_and(|m| attempt >= m);
            let out_of_time = options.timeout.is_some_and(|t| started.elapsed() >= t);
            if !store_error.is_retryable() || out_of_attempts || out_of_time {
                return Err(error);
            }
            maybe_committed |= store_error.is_maybe_committed();
            metrics::counter!(names::STORE_RETRIES_TOTAL, names::LABEL_ENGINE => self.engine_name())
                .increment(1);
            let delay = backoff.mul_f64(fastrand::f64());
            backoff = (backoff * 2).min(BACKOFF_MAX);
            tokio::time::sleep(delay).await;
        }
    }

    /// Answers when the store serves a read (used by `/readyz`).
    ///
    /// # Errors
    /// The store's error when it does not answer.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let tx = self.begin()?;
        tx.get(b"\xfe", true).await.map(|_| ())
    }

    /// Stops accepting transactions, finishes the commits in progress and releases the
    /// store (for the embedded engine: its file lock). Idempotent.
    pub async fn close(&self) {
        dispatch!(self, db => db.close().await)
    }
}

impl Transaction {
    /// Reads `key`; a snapshot read adds no read conflict.
    ///
    /// # Errors
    /// [`StoreError::TransactionTooOld`] once the transaction is older than the engine's
    /// age limit (FoundationDB's five seconds); engine errors.
    pub async fn get(&self, key: &[u8], snapshot: bool) -> Result<Option<Vec<u8>>, StoreError> {
        dispatch!(engine self, t => t.get(key, snapshot).await)
    }

    /// Reads the pairs of `range` in key order (reverse order when `range.reverse`); a
    /// non-snapshot read conflicts only on the part of the range it returned when the
    /// limit cut it short.
    ///
    /// # Errors
    /// As [`Transaction::get`].
    pub async fn get_range(
        &self,
        range: &RangeOption,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>, StoreError> {
        dispatch!(engine self, t => t.get_range(range, snapshot).await)
    }

    /// Sets `key` to `value`: a `Bytes` (or an owned `Vec<u8>`) is kept without copying,
    /// borrowed bytes are copied ([`Value`]).
    pub fn set(&self, key: &[u8], value: impl Into<Value>) {
        let value = value.into();
        dispatch!(engine self, t => t.set(key, value))
    }

    /// Removes `key`.
    pub fn clear(&self, key: &[u8]) {
        dispatch!(engine self, t => t.clear(key))
    }

    /// Removes every key in `[begin, end)`.
    pub fn clear_range(&self, begin: &[u8], end: &[u8]) {
        dispatch!(engine self, t => t.clear_range(begin, end))
    }

    /// Adds `delta` to the little-endian 64-bit integer at `key` without reading it (a
    /// missing key counts as 0): concurrent adds never conflict.
    pub fn atomic_add(&self, key: &[u8], delta: i64) {
        dispatch!(engine self, t => t.atomic_add(key, &delta.to_le_bytes()))
    }

    /// Sets a key whose 10 bytes at an offset are replaced by the commit's versionstamp.
    /// `key` is FoundationDB's form: the template followed by the placeholder's 4-byte
    /// little-endian offset (what `foundationdb_tuple::pack_with_versionstamp` produces).
    /// `value` as in [`Transaction::set`].
    pub fn set_versionstamped_key(&self, key: &[u8], value: impl Into<Value>) {
        let value = value.into();
        dispatch!(engine self, t => t.set_versionstamped_key(key, value))
    }

    /// Sets `key` to a value whose 10 bytes at an offset are replaced by the commit's
    /// versionstamp; `value` is the template followed by the 4-byte little-endian offset,
    /// taken as in [`Transaction::set`] (the template is kept without copying a `Bytes`).
    pub fn set_versionstamped_value(&self, key: &[u8], value: impl Into<Value>) {
        let value = value.into();
        dispatch!(engine self, t => t.set_versionstamped_value(key, value))
    }

    /// Makes the commit conflict with any concurrent write to `[begin, end)`, as if the
    /// range had been read.
    pub fn add_read_conflict_range(&self, begin: &[u8], end: &[u8]) {
        dispatch!(engine self, t => t.add_read_conflict_range(begin, end))
    }

    /// Makes concurrent readers of `[begin, end)` conflict with this commit, as if the
    /// range had been written.
    pub fn add_write_conflict_range(&self, begin: &[u8], end: &[u8]) {
        dispatch!(engine self, t => t.add_write_conflict_range(begin, end))
    }

    /// Watches `key`: the returned [`Watch`] resolves after this transaction commits, once
    /// the key's value differs from the value this transaction saw.
    pub fn watch(&self, key: &[u8]) -> Watch {
        dispatch!(engine self, t => t.watch(key))
    }

    /// A user version for the next versionstamped key of this transaction (0, 1, 2, …):
    /// FoundationDB gives every versionstamped mutation of one transaction the same
    /// 10-byte transaction version, so keys made in one transaction differ by this
    /// 2-byte suffix (erlfdb's `get_next_tx_id`).
    ///
    /// # Panics
    /// Panics after 65,536 calls in one transaction.
    pub fn next_user_version(&self) -> u16 {
        let n = self.attempt.user_versions.fetch_add(1, Ordering::Relaxed);
        u16::try_from(n).expect("at most 65,536 versionstamped keys per transaction")
    }

    /// Whether an earlier attempt of this transaction ended in `commit_unknown_result`:
    /// its effects may already be in the store, so the closure must check before
    /// repeating a non-idempotent change.
    pub fn maybe_committed(&self) -> bool {
        self.attempt.maybe_committed
    }

    /// Commits the transaction. The retry loop calls this; call it directly only for a
    /// transaction begun with [`Database::begin`].
    ///
    /// # Errors
    /// [`StoreError::NotCommitted`] on a conflict, [`StoreError::CommitUnknownResult`]
    /// when the outcome is unknown, a limit error, or a storage error.
    pub async fn commit(&self) -> Result<CommitInfo, StoreError> {
        let started = Instant::now();
        let (engine, result) = match &self.engine {
            AnyTransaction::Embedded(t) => (embedded::EmbeddedDb::NAME, t.commit().await),
            #[cfg(feature = "fdb")]
            AnyTransaction::Fdb(t) => (fdb::FdbDb::NAME, t.commit().await),
        };
        metrics::histogram!(names::STORE_COMMIT_SECONDS, names::LABEL_ENGINE => engine)
            .record(started.elapsed().as_secs_f64());
        match &result {
            Ok(_) => {
                metrics::counter!(names::STORE_COMMITS_TOTAL, names::LABEL_ENGINE => engine)
                    .increment(1);
            }
            Err(e) => {
                if matches!(e, StoreError::NotCommitted) {
                    metrics::counter!(names::STORE_CONFLICTS_TOTAL, names::LABEL_ENGINE => engine)
                        .increment(1);
                }
                let code = e
                    .code()
                    .map_or_else(|| "none".to_owned(), |c| c.to_string());
                metrics::counter!(names::STORE_ERRORS_TOTAL, names::LABEL_ENGINE => engine, names::LABEL_CODE => code)
                    .increment(1);
            }
        }
        result
    }
}
