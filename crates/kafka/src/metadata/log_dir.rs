//! This instance's one Kafka log directory. Ferry keeps every partition's log in the
//! store, so an instance has exactly one log dir: the embedded store's data directory
//! (`store.path`, made absolute), or, on FoundationDB, whose data lives on its own servers,
//! the name [`FDB_LOG_DIR`]. DescribeLogDirs lists it, AlterReplicaLogDirs may only name
//! it, and a broker's `log.dirs` is it.

use ferry_store::Database;
use ferry_telemetry::file_system::{Space, space};
use std::path::PathBuf;

/// The log dir of an instance over FoundationDB.
pub(crate) const FDB_LOG_DIR: &str = "foundationdb";

/// The log dir, named as Kafka names one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LogDir {
    /// Its name in answers: an absolute path, or [`FDB_LOG_DIR`].
    pub(crate) path: String,
    /// The directory whose file system it fills; `None` on FoundationDB.
    disk: Option<PathBuf>,
}

impl LogDir {
    /// The log dir of an instance over `db`.
    pub(crate) fn of(db: &Database) -> Self {
        match db.data_dir() {
            Some(dir) => {
                let dir = std::fs::canonicalize(dir)
                    .or_else(|_| std::path::absolute(dir))
                    .unwrap_or_else(|_| dir.to_path_buf());
                Self {
                    path: dir.display().to_string(),
                    disk: Some(dir),
                }
            }
            None => Self {
                path: FDB_LOG_DIR.to_owned(),
                disk: None,
            },
        }
    }

    /// The size and free space of its file system, read now; `None` on FoundationDB or
    /// when it cannot be read.
    pub(crate) fn space(&self) -> Option<Space> {
        self.disk.as_deref().and_then(space)
    }
}
