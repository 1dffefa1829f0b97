//! `[store]`, the store's own section of `ferry.toml`: which engine holds Ferry's keyspace
//! and how it is tuned. The daemon's configuration embeds it and checks its values.

use serde::Deserialize;
use std::path::PathBuf;

/// The transactional key-value engine behind the stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// The single-node engine built into Ferry (FoundationDB semantics on redb).
    Embedded,
    /// A FoundationDB cluster (needs the `fdb` cargo feature and `libfdb_c`).
    Fdb,
}

/// `[store]` section.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// Which engine to use: `embedded` (default) or `fdb`.
    pub engine: EngineKind,
    /// Embedded engine: the data directory (created on first start).
    pub path: PathBuf,
    /// First element of every key Ferry writes, so several Ferry deployments can share one
    /// FoundationDB cluster.
    pub prefix: String,
    /// Embedded engine: page cache size in MiB.
    pub cache_mb: u64,
    /// Embedded engine: the most memory (MiB) the window of changes not yet checkpointed
    /// may hold; a checkpoint starts at half, commits wait at all of it.
    pub window_mb: u64,
    /// Embedded engine: the most transactions one group commit (one fsync) may hold.
    pub max_batch: u32,
    /// Embedded engine: the free space (MiB) on the data directory's file system below
    /// which publishers are blocked, RabbitMQ's `disk_free_limit`; 0: no alarm.
    pub min_free_disk_mb: u64,
    /// FoundationDB engine: path of the cluster file; empty means FoundationDB's default
    /// lookup (`FDB_CLUSTER_FILE`, then `/etc/foundationdb/fdb.cluster`).
    pub fdb_cluster_file: String,
    /// FoundationDB engine: client API version (730 = FoundationDB 7.3).
    pub fdb_api_version: u32,
    /// Fault injection, for testing only: probability that a commit fails with a retryable
    /// conflict (`not_committed`) although it did not conflict.
    pub inject_conflict_rate: f64,
    /// Fault injection, for testing only: probability that an applied commit reports
    /// `commit_unknown_result`.
    pub inject_unknown_result_rate: f64,
}

/// Default for `store.path`.
pub const DEFAULT_STORE_PATH: &str = "data";
/// Default for `store.prefix`.
pub const DEFAULT_STORE_PREFIX: &str = "ferry";
/// Default for `store.cache_mb`.
pub const DEFAULT_CACHE_MB: u64 = 256;
/// Default for `store.window_mb`.
pub const DEFAULT_WINDOW_MB: u64 = 512;
/// Default for `store.max_batch`.
pub const DEFAULT_MAX_BATCH: u32 = 8192;
/// Default for `store.min_free_disk_mb` (RabbitMQ's `disk_free_limit`).
pub const DEFAULT_MIN_FREE_DISK_MB: u64 = 50;
/// Default for `store.fdb_api_version`.
pub const DEFAULT_FDB_API_VERSION: u32 = 730;

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            engine: EngineKind::Embedded,
            path: PathBuf::from(DEFAULT_STORE_PATH),
            prefix: DEFAULT_STORE_PREFIX.to_owned(),
            cache_mb: DEFAULT_CACHE_MB,
            window_mb: DEFAULT_WINDOW_MB,
            max_batch: DEFAULT_MAX_BATCH,
            min_free_disk_mb: DEFAULT_MIN_FREE_DISK_MB,
            fdb_cluster_file: String::new(),
            fdb_api_version: DEFAULT_FDB_API_VERSION,
            inject_conflict_rate: 0.0,
            inject_unknown_result_rate: 0.0,
        }
    }
}
