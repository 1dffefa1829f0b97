//! The embedded engine's directory and file: checks before opening, the format marker,
//! opening redb, and mapping redb's errors onto precise [`OpenError`]s.
//!
//! Layout of `store.path`:
//! - `FERRY_STORE`: the format marker (one line, [`FORMAT`]); a directory without it that
//!   holds other files is refused as foreign, so Ferry never writes into a stranger's data.
//! - `data.redb`: the checkpoint, a redb file holding every key (table `kv`) as of the
//!   checkpoint's version, and the engine's own metadata (table `meta`: that version).
//! - `log/`: the commit log, the commits after the checkpoint ([`super::commit_log`]).
//!
//! Format 2 added the log. A format 1 store (a `data.redb` holding every commit, no log)
//! is a format 2 store whose log is empty: its marker is rewritten on open. A build that
//! only knows format 1 refuses a format 2 store, whose newest commits it could not see.

use super::data_file::DataFile;
use super::faults::Faults;
use crate::error::{OpenError, StoreError};
use redb::{ReadableDatabase, TableDefinition};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Every key and value of the keyspace.
pub(super) const DATA: TableDefinition<&[u8], &[u8]> = TableDefinition::new("kv");
/// The engine's metadata.
pub(super) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
/// `META` key: the version of the last committed batch.
pub(super) const LAST_VERSION: &str = "last_version";

/// Name of the format marker file.
pub const MARKER: &str = "FERRY_STORE";
/// Name of the data file.
pub const DATA_FILE: &str = "data.redb";
/// The marker's content for the format this build reads and writes.
pub const FORMAT: &str = "ferry embedded store, format 2";
/// Earlier formats this build opens and upgrades.
const UPGRADED: &[&str] = &["ferry embedded store, format 1"];

/// An opened data file and the last version committed to it.
pub(super) struct Opened {
    pub(super) db: redb::Database,
    pub(super) last_version: u64,
}

/// Prepares `dir` (creating it, or checking it is a Ferry store) and opens its data file.
///
/// # Errors
/// A precise [`OpenError`] for a path that is a file, unwritable, foreign, missing its
/// data file, of another format, locked by another process, or corrupt.
pub(super) fn open(
    dir: &Path,
    cache_bytes: usize,
    faults: Arc<Faults>,
) -> Result<Opened, StoreError> {
    let (data_file, upgrade) = prepare_dir(dir)?;
    let mut builder = redb::Builder::new();
    builder.set_cache_size(cache_bytes);
    let db = DataFile::open(&data_file, faults)
        .and_then(|file| builder.create_with_backend(file))
        .map_err(|e| map_open_error(dir, &data_file, e))?;
    let last_version = init_tables(&db).map_err(|e| OpenError::Corrupt {
        file: data_file.clone(),
        reason: e,
    })?;
    if upgrade {
        // Only now, with the store locked by this process.
        write_marker(dir, &dir.join(MARKER)).map_err(|e| OpenError::NotWritable {
            path: dir.to_owned(),
            reason: e.to_string(),
        })?;
    }
    Ok(Opened { db, last_version })
}

/// Checks `dir` and returns the data file's path, and whether the store is of an earlier
/// format to upgrade once it is open; creates and marks a new store.
fn prepare_dir(dir: &Path) -> Result<(PathBuf, bool), OpenError> {
    let not_writable = |e: std::io::Error| OpenError::NotWritable {
        path: dir.to_owned(),
        reason: e.to_string(),
    };
    let data_file = dir.join(DATA_FILE);
    let marker = dir.join(MARKER);
    if dir.exists() && !dir.is_dir() {
        return Err(OpenError::NotADirectory {
            path: dir.to_owned(),
        });
    }
    std::fs::create_dir_all(dir).map_err(not_writable)?;
    match std::fs::read_to_string(&marker) {
        Ok(found) => {
            if UPGRADED.contains(&found.trim()) && data_file.exists() {
                return Ok((data_file, true));
            } else if found.trim() != FORMAT {
                return Err(OpenError::WrongFormat {
                    path: dir.to_owned(),
                    found: found.trim().to_owned(),
                    expected: FORMAT.to_owned(),
                });
            }
            if !data_file.exists() {
                return Err(OpenError::MissingData {
                    path: dir.to_owned(),
                    file: data_file,
                });
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut entries = std::fs::read_dir(dir).map_err(not_writable)?;
            if entries.next().is_some() {
                return Err(OpenError::Foreign {
                    path: dir.to_owned(),
                });
            }
            write_marker(dir, &marker).map_err(not_writable)?;
        }
        Err(e) => return Err(not_writable(e)),
    }
    Ok((data_file, false))
}

/// Writes the marker of [`FORMAT`] durably (a new file renamed over the old one).
fn write_marker(dir: &Path, marker: &Path) -> std::io::Result<()> {
    let fresh = dir.join(format!("{MARKER}.new"));
    std::fs::write(&fresh, format!("{FORMAT}\n"))?;
    std::fs::File::open(&fresh)?.sync_all()?;
    std::fs::rename(&fresh, marker)?;
    sync_dir(dir)
}

/// Makes a created, renamed or removed entry of `dir` durable.
pub(super) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::File::open(dir)?.sync_all()
}

fn map_open_error(dir: &Path, file: &Path, e: redb::DatabaseError) -> OpenError {
    match e {
        redb::DatabaseError::DatabaseAlreadyOpen => OpenError::Locked {
            path: dir.to_owned(),
        },
        redb::DatabaseError::Storage(redb::StorageError::Io(io))
            if io.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            OpenError::NotWritable {
                path: dir.to_owned(),
                reason: io.to_string(),
            }
        }
        other => OpenError::Corrupt {
            file: file.to_owned(),
            reason: other.to_string(),
        },
    }
}

/// Creates the tables of a new store and reads the last committed version.
fn init_tables(db: &redb::Database) -> Result<u64, String> {
    let tx = db.begin_write().map_err(|e| e.to_string())?;
    tx.open_table(DATA).map_err(|e| e.to_string())?;
    tx.open_table(META).map_err(|e| e.to_string())?;
    tx.commit().map_err(|e| e.to_string())?;
    let tx = db.begin_read().map_err(|e| e.to_string())?;
    let meta = tx.open_table(META).map_err(|e| e.to_string())?;
    let last = meta
        .get(LAST_VERSION)
        .map_err(|e| e.to_string())?
        .map_or(0, |v| v.value());
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_directory_gets_a_marker_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        drop(open(&path, 1 << 20, Arc::default()).unwrap());
        assert!(path.join(MARKER).exists());
        drop(open(&path, 1 << 20, Arc::default()).unwrap());
    }

    #[test]
    fn a_format_1_store_is_upgraded_and_a_newer_format_refused() {
        let dir = tempfile::tempdir().unwrap();
        drop(open(dir.path(), 1 << 20, Arc::default()).unwrap());
        let marker = dir.path().join(MARKER);
        std::fs::write(&marker, "ferry embedded store, format 1\n").unwrap();
        drop(open(dir.path(), 1 << 20, Arc::default()).unwrap());
        assert_eq!(
            std::fs::read_to_string(&marker).unwrap(),
            format!("{FORMAT}\n")
        );
        std::fs::write(&marker, "ferry embedded store, format 3\n").unwrap();
        let err = open(dir.path(), 1 << 20, Arc::default()).err().unwrap();
        assert!(err.to_string().contains("format 3"), "{err}");
    }

    #[test]
    fn foreign_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
        let err = open(dir.path(), 1 << 20, Arc::default()).err().unwrap();
        assert!(err.to_string().contains("is not a Ferry store"), "{err}");
    }

    #[test]
    fn missing_data_file_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        drop(open(dir.path(), 1 << 20, Arc::default()).unwrap());
        std::fs::remove_file(dir.path().join(DATA_FILE)).unwrap();
        let err = open(dir.path(), 1 << 20, Arc::default()).err().unwrap();
        assert!(err.to_string().contains("missing its data file"), "{err}");
    }

    #[test]
    fn corrupt_data_file_is_reported_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        drop(open(dir.path(), 1 << 20, Arc::default()).unwrap());
        let file = dir.path().join(DATA_FILE);
        std::fs::write(&file, vec![0x5a; 8192]).unwrap();
        let err = open(dir.path(), 1 << 20, Arc::default()).err().unwrap();
        assert!(err.to_string().contains("is corrupt"), "{err}");
        assert_eq!(std::fs::read(&file).unwrap(), vec![0x5a; 8192]);
    }

    #[test]
    fn second_open_is_refused_while_the_first_holds_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let first = open(dir.path(), 1 << 20, Arc::default()).unwrap();
        let err = open(dir.path(), 1 << 20, Arc::default()).err().unwrap();
        assert!(err.to_string().contains("already open"), "{err}");
        drop(first);
    }
}
