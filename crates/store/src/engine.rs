//! The contract every engine keeps: [`Engine`] (a handle on a store) and
//! [`EngineTransaction`] (one of its transactions).
//!
//! [`Database`](super::Database) and [`Transaction`](super::Transaction) stay enums over
//! the engines, dispatching each call to the variant they hold, so the layers above use
//! concrete types and never name an engine. These traits are what makes every variant
//! answer the same calls with the same signatures: an engine that lacks an operation, or
//! offers it with another shape, does not compile. Behaviour the shared layer adds for
//! every engine (the retry loop, user versions, `maybe_committed`, commit metrics) lives
//! in [`super`], not here.
//!
//! Async operations return `impl Future + Send`: the daemon spawns transactions on tokio's
//! worker threads, so no engine may hand back a future that cannot move between them.

use super::{CommitInfo, KeyValue, RangeOption, StoreError, Value, Watch};
use std::future::Future;

/// A handle on an open store of one engine; cheap to clone.
pub(crate) trait Engine: Clone + Send + Sync + 'static {
    /// The engine's transaction.
    type Transaction: EngineTransaction;

    /// The engine's name, as the `engine` metric label gives it.
    const NAME: &'static str;

    /// Starts a transaction.
    ///
    /// # Errors
    /// [`StoreError::Closed`] after [`Engine::close`]; the engine's reason when it can
    /// start no transaction (a failed embedded store, an unreachable cluster).
    fn begin(&self) -> Result<Self::Transaction, StoreError>;

    /// Why the engine stopped accepting transactions, if it did and a restart recovers it.
    fn failure(&self) -> Option<StoreError>;

    /// Stops accepting transactions, finishes the commits in progress and releases what
    /// the engine holds. Idempotent.
    fn close(&self) -> impl Future<Output = ()> + Send;
}

/// One transaction of an engine; clones share it. Each method is the operation of the
/// same name on [`Transaction`](super::Transaction), which documents it.
pub(crate) trait EngineTransaction: Clone + Send + Sync + 'static {
    /// Reads `key`; a snapshot read adds no read conflict.
    fn get(
        &self,
        key: &[u8],
        snapshot: bool,
    ) -> impl Future<Output = Result<Option<Vec<u8>>, StoreError>> + Send;

    /// Reads the pairs of `range`.
    fn get_range(
        &self,
        range: &RangeOption,
        snapshot: bool,
    ) -> impl Future<Output = Result<Vec<KeyValue>, StoreError>> + Send;

    /// Sets `key` to `value`.
    fn set(&self, key: &[u8], value: Value);

    /// Removes `key`.
    fn clear(&self, key: &[u8]);

    /// Removes every key in `[begin, end)`.
    fn clear_range(&self, begin: &[u8], end: &[u8]);

    /// Adds the little-endian integer `param` to the value at `key`.
    fn atomic_add(&self, key: &[u8], param: &[u8]);

    /// Sets a versionstamped key (template followed by the placeholder's 4-byte offset).
    fn set_versionstamped_key(&self, key: &[u8], value: Value);

    /// Sets a versionstamped value (template followed by the placeholder's 4-byte offset).
    fn set_versionstamped_value(&self, key: &[u8], value: Value);

    /// Adds a read conflict range.
    fn add_read_conflict_range(&self, begin: &[u8], end: &[u8]);

    /// Adds a write conflict range.
    fn add_write_conflict_range(&self, begin: &[u8], end: &[u8]);

    /// Watches `key` from the value this transaction sees.
    fn watch(&self, key: &[u8]) -> Watch;

    /// Commits.
    fn commit(&self) -> impl Future<Output = Result<CommitInfo, StoreError>> + Send;
}
