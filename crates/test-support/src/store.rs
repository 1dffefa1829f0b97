//! Stores for tests: one per test on every engine (each test in its own key prefix, so
//! tests can share a FoundationDB cluster), the embedded engine's settings for a temporary
//! directory, and [`for_each_engine`](crate::for_each_engine), which instantiates one set of
//! test bodies per engine.

use ferry_store::Database;
use ferry_store::EngineKind;
use ferry_store::StoreConfig;
use ferry_store::embedded::Options as EmbeddedOptions;
use ferry_store::error::MAX_TRANSACTION_AGE;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The embedded engine's settings for a store in `dir/store`.
pub fn embedded(dir: &Path) -> StoreConfig {
    StoreConfig {
        path: dir.join("store"),
        cache_mb: 64,
        ..StoreConfig::default()
    }
}

/// A store for one test, on one engine.
pub struct TestStore {
    /// The store.
    pub db: Database,
    /// Its settings, to reopen it.
    config: StoreConfig,
    /// Keeps the embedded engine's directory alive for the test.
    _dir: Option<tempfile::TempDir>,
    /// A prefix no other test uses, so tests can share a FoundationDB cluster.
    pub prefix: Vec<u8>,
    /// The embedded engine's transaction age limit, when a test set one.
    transaction_age: Option<Duration>,
}

impl TestStore {
    /// A fresh store on `engine`, or `None` (with the reason printed) when the engine is
    /// not available here.
    pub async fn open(engine: EngineKind) -> Option<Self> {
        let (config, dir) = match engine {
            EngineKind::Embedded => {
                let dir = tempfile::tempdir().expect("temp dir");
                (embedded(dir.path()), Some(dir))
            }
            EngineKind::Fdb if !ferry_store::FDB_BUILT_IN => {
                eprintln!(
                    "skipped: ferry is built without the `fdb` feature (cargo test --features fdb)"
                );
                return None;
            }
            EngineKind::Fdb => {
                let Ok(cluster_file) = std::env::var("FDB_CLUSTER_FILE") else {
                    eprintln!(
                        "skipped: FDB_CLUSTER_FILE is not set, so there is no FoundationDB cluster to test against"
                    );
                    return None;
                };
                let config = StoreConfig {
                    engine: EngineKind::Fdb,
                    fdb_cluster_file: cluster_file,
                    ..StoreConfig::default()
                };
                (config, None)
            }
        };
        let db = Database::open(&config).await.expect("open store");
        let prefix = format!("test-{:016x}/", fastrand::u64(..)).into_bytes();
        Some(Self {
            db,
            config,
            _dir: dir,
            prefix,
            transaction_age: None,
        })
    }

    /// `suffix` under this test's prefix.
    pub fn key(&self, suffix: &str) -> Vec<u8> {
        let mut k = self.prefix.clone();
        k.extend_from_slice(suffix.as_bytes());
        k
    }

    /// Closes the store and opens it again, as a process restart would.
    pub async fn restart(&mut self) {
        self.db.close().await;
        self.db = match self.transaction_age {
            Some(age) => {
                Database::open_embedded(EmbeddedOptions {
                    max_transaction_age: age,
                    ..EmbeddedOptions::from_config(&self.config)
                })
                .await
            }
            None => Database::open(&self.config).await,
        }
        .expect("reopen store");
    }

    /// Limits transactions to `age` where the engine takes that option (the embedded
    /// engine: the store is reopened with it) and returns the limit that now applies:
    /// `age`, or the FoundationDB cluster's five seconds.
    pub async fn limit_transaction_age(&mut self, age: Duration) -> Duration {
        match self.config.engine {
            EngineKind::Embedded => {
                self.transaction_age = Some(age);
                self.restart().await;
                age
            }
            EngineKind::Fdb => MAX_TRANSACTION_AGE,
        }
    }

    /// The embedded engine's data directory.
    pub fn path(&self) -> PathBuf {
        self.config.path.clone()
    }
}

/// Declares one test per engine for each named async test body `fn(TestStore)`.
#[macro_export]
macro_rules! for_each_engine {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let store = $crate::store::TestStore::open(ferry_store::EngineKind::Embedded)
                        .await
                        .expect("the embedded engine is always available");
                    super::$name(store).await;
                }
            )*
        }
        mod fdb {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(store) = $crate::store::TestStore::open(ferry_store::EngineKind::Fdb).await {
                        super::$name(store).await;
                    }
                }
            )*
        }
    };
}
