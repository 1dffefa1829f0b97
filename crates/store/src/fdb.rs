//! The FoundationDB engine: the store interface mapped onto the `foundationdb` crate.
//!
//! Deliberately thin: each operation is the crate's call plus error mapping, so the
//! conformance suite, run against the embedded engine everywhere and against this engine
//! wherever `FDB_CLUSTER_FILE` names a cluster, covers nearly all of its logic. The retry
//! loop is the shared one in [`crate::Database::run`].

#![allow(
    unsafe_code,
    reason = "the FoundationDB client network is booted once per process, an unsafe call of the bindings"
)]

use crate::StoreConfig;
use crate::engine::{Engine, EngineTransaction};
use crate::error::{OpenError, StoreError, code};
use crate::{CommitInfo, KeyValue, RangeOption, Value, Watch};
use foundationdb::options::{ConflictRangeType, MutationType, StreamingMode};
use foundationdb::{FdbError, KeySelector};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

/// The client network thread; FoundationDB allows one per process, started on first open.
static NETWORK: OnceLock<Mutex<Option<foundationdb::api::NetworkAutoStop>>> = OnceLock::new();

/// Stops FoundationDB's client network thread, as the client library requires before the
/// process exits. No FoundationDB store can be opened afterwards in this process.
pub(crate) fn stop_network() {
    if let Some(network) = NETWORK.get() {
        drop(network.lock().take());
    }
}

/// A handle on a FoundationDB cluster.
#[derive(Clone)]
pub struct FdbDb {
    db: Arc<foundationdb::Database>,
}

impl FdbDb {
    /// Starts the client network (once per process) and opens the cluster named by
    /// `config.fdb_cluster_file`.
    ///
    /// # Errors
    /// [`OpenError::Engine`] naming the cluster file and FoundationDB's reason.
    pub fn open(config: &StoreConfig) -> Result<Self, StoreError> {
        let mut started = Ok(());
        NETWORK.get_or_init(|| {
            let network = foundationdb::api::FdbApiBuilder::default()
                .set_runtime_version(config.fdb_api_version as i32)
                .build()
                // SAFETY: the guard lives in a static and is dropped by `stop_network`,
                // which the daemon calls before it exits.
                .and_then(|b| unsafe { b.boot() });
            match network {
                Ok(n) => Mutex::new(Some(n)),
                Err(e) => {
                    started = Err(e);
                    Mutex::new(None)
                }
            }
        });
        started
            .map_err(|e| OpenError::Engine(format!("cannot start the FoundationDB client: {e}")))?;
        let path =
            (!config.fdb_cluster_file.is_empty()).then_some(config.fdb_cluster_file.as_str());
        let db = foundationdb::Database::new(path).map_err(|e| {
            OpenError::Engine(format!(
                "cannot open the FoundationDB cluster file '{}': {e}; set store.fdb_cluster_file",
                path.unwrap_or(foundationdb::default_config_path())
            ))
        })?;
        Ok(Self { db: Arc::new(db) })
    }
}

impl Engine for FdbDb {
    type Transaction = FdbTransaction;

    const NAME: &'static str = "fdb";

    fn begin(&self) -> Result<FdbTransaction, StoreError> {
        let tx = self.db.create_trx().map_err(map_error)?;
        Ok(FdbTransaction {
            inner: Arc::new(Inner {
                tx: Mutex::new(Some(tx)),
                wrote: AtomicBool::new(false),
            }),
        })
    }

    /// The cluster's failures are per transaction; the handle itself never fails.
    fn failure(&self) -> Option<StoreError> {
        None
    }

    /// Nothing to release: the cluster connection lives as long as the process.
    async fn close(&self) {}
}

struct Inner {
    /// The crate's transaction; taken by `commit`.
    tx: Mutex<Option<foundationdb::Transaction>>,
    /// Whether a mutation was made, so a read-only commit reports no versionstamp.
    wrote: AtomicBool,
}

/// A FoundationDB transaction; clones share it.
#[derive(Clone)]
pub(crate) struct FdbTransaction {
    inner: Arc<Inner>,
}

impl FdbTransaction {
    /// Runs `f` on the live transaction, or reports it cancelled after commit.
    fn with<T>(&self, f: impl FnOnce(&foundationdb::Transaction) -> T) -> Result<T, StoreError> {
        self.inner
            .tx
            .lock()
            .as_ref()
            .map(f)
            .ok_or(StoreError::Cancelled)
    }

    fn mutate(&self, f: impl FnOnce(&foundationdb::Transaction)) {
        self.inner.wrote.store(true, Ordering::Relaxed);
        // After commit the transaction is gone, and FoundationDB would refuse the mutation.
        let _ = self.with(f);
    }
}

impl EngineTransaction for FdbTransaction {
    async fn get(&self, key: &[u8], snapshot: bool) -> Result<Option<Vec<u8>>, StoreError> {
        let value = self
            .with(|tx| tx.get(key, snapshot))?
            .await
            .map_err(map_error)?;
        Ok(value.map(|v| v.to_vec()))
    }

    async fn get_range(
        &self,
        range: &RangeOption,
        snapshot: bool,
    ) -> Result<Vec<KeyValue>, StoreError> {
        let mut opt = Some(foundationdb::RangeOption {
            begin: KeySelector::first_greater_or_equal(range.begin.clone()),
            end: KeySelector::first_greater_or_equal(range.end.clone()),
            limit: (range.limit > 0).then_some(range.limit),
            reverse: range.reverse,
            mode: StreamingMode::WantAll,
            ..foundationdb::RangeOption::default()
        });
        let mut out = Vec::new();
        let mut iteration = 1;
        while let Some(o) = opt {
            let values = self
                .with(|tx| tx.get_range(&o, iteration, snapshot))?
                .await
                .map_err(map_error)?;
            out.extend(values.iter().map(|kv| KeyValue {
                key: kv.key().to_vec(),
                value: kv.value().to_vec(),
            }));
            opt = o.next_range(&values);
            iteration += 1;
        }
        Ok(out)
    }

    // The crate copies values into the C client, which needs its own copy anyway.
    fn set(&self, key: &[u8], value: Value) {
        self.mutate(|tx| tx.set(key, &value));
    }

    fn clear(&self, key: &[u8]) {
        self.mutate(|tx| tx.clear(key));
    }

    fn clear_range(&self, begin: &[u8], end: &[u8]) {
        self.mutate(|tx| tx.clear_range(begin, end));
    }

    fn atomic_add(&self, key: &[u8], param: &[u8]) {
        self.mutate(|tx| tx.atomic_op(key, param, MutationType::Add));
    }

    fn set_versionstamped_key(&self, key: &[u8], value: Value) {
        self.mutate(|tx| tx.atomic_op(key, &value, MutationType::SetVersionstampedKey));
    }

    fn set_versionstamped_value(&self, key: &[u8], value: Value) {
        self.mutate(|tx| tx.atomic_op(key, &value, MutationType::SetVersionstampedValue));
    }

    fn add_read_conflict_range(&self, begin: &[u8], end: &[u8]) {
        let _ = self.with(|tx| tx.add_conflict_range(begin, end, ConflictRangeType::Read));
    }

    fn add_write_conflict_range(&self, begin: &[u8], end: &[u8]) {
        self.inner.wrote.store(true, Ordering::Relaxed);
        let _ = self.with(|tx| tx.add_conflict_range(begin, end, ConflictRangeType::Write));
    }

    fn watch(&self, key: &[u8]) -> Watch {
        match self.with(|tx| tx.watch(key)) {
            Ok(f) => Watch::new(async move { f.await.map_err(map_error) }),
            Err(e) => Watch::new(async move { Err(e) }),
        }
    }

    async fn commit(&self) -> Result<CommitInfo, StoreError> {
        let tx = self.inner.tx.lock().take().ok_or(StoreError::Cancelled)?;
        let stamp = tx.get_versionstamp();
        let committed = tx.commit().await.map_err(|e| map_error(*e))?;
        let version = committed.committed_version().map_err(map_error)?;
        let versionstamp = if self.inner.wrote.load(Ordering::Relaxed) {
            let s = stamp.await.map_err(map_error)?;
            s.as_ref().try_into().ok()
        } else {
            None
        };
        Ok(CommitInfo {
            version: u64::try_from(version).unwrap_or(0),
            versionstamp,
        })
    }
}

/// Maps FoundationDB's error onto the shared classes; errors without a shared variant keep
/// FoundationDB's code and message (`StoreError::code` is the same either way).
fn map_error(e: FdbError) -> StoreError {
    match e.code() {
        code::NOT_COMMITTED => StoreError::NotCommitted,
        code::COMMIT_UNKNOWN_RESULT => StoreError::CommitUnknownResult,
        code::TRANSACTION_TOO_OLD => StoreError::TransactionTooOld,
        code::TRANSACTION_CANCELLED => StoreError::Cancelled,
        c => StoreError::Fdb {
            code: c,
            message: e.message().to_owned(),
            retryable: e.is_retryable(),
            maybe_committed: e.is_maybe_committed(),
        },
    }
}
