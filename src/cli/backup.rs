//! `ferry backup` and `ferry restore`: the whole store at one read version to a file, and
//! such a file into an empty store (docs/operations.md, "Backup and restore").
//!
//! `ferry backup` asks a running daemon's management API (`GET /api/ferry/backup`, an
//! administrator's login); `ferry backup --config` reads the store itself (the embedded
//! engine's store belongs to one process, so only while no daemon runs on it).
//! Either way the file is written to `FILE.partial` and renamed once complete, so a file
//! named `FILE` is always whole.

use anyhow::Context;
use ferry_config::Config;
use ferry_store::Database;
use ferry_store::backup::{Backup, BackupReader};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};

/// Writes a backup of `config`'s store to `out`; returns the line to print.
pub(crate) fn backup(config: &Config, out: &Path) -> anyhow::Result<String> {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let db = Database::open(&config.store)
            .await
            .context("cannot open the store")?;
        // Blocking reads and writes: nothing else runs on this runtime.
        let written = Backup::start(&db)
            .await
            .map_err(anyhow::Error::from)
            .and_then(|backup| write_whole(out, |file| Ok(backup.write_to(file)?)));
        db.close().await;
        let (header, totals) = written?;
        Ok(format!(
            "backed up {} keys ({} bytes) at read version {} to {}",
            totals.pairs,
            totals.bytes,
            header.read_version,
            out.display()
        ))
    })
}

/// Copies a running daemon's backup to `out`; returns the line to print.
pub(crate) fn download(connection: &ferry_admin::Connection, out: &Path) -> anyhow::Result<String> {
    let version = write_whole(out, |file| Ok(ferry_admin::backup(connection, file)?))?;
    let size = std::fs::metadata(out).map_or(0, |m| m.len());
    Ok(format!(
        "backed up {} at read version {version} to {} ({size} bytes)",
        connection.url,
        out.display()
    ))
}

/// Writes `out` through `write` into `OUT.partial`, reads it back through every frame's
/// checksum to its end frame, then renames it to `out`.
fn write_whole<T>(
    out: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> anyhow::Result<T>,
) -> anyhow::Result<T> {
    let partial = partial(out);
    let file =
        File::create(&partial).with_context(|| format!("cannot create '{}'", partial.display()))?;
    let mut writer = BufWriter::new(file);
    let result = write(&mut writer).and_then(|value| {
        let file = writer.into_inner().context("cannot write the backup")?;
        file.sync_all().context("cannot sync the backup")?;
        verify(&partial)?;
        Ok(value)
    });
    match result {
        Ok(value) => {
            std::fs::rename(&partial, out).with_context(|| {
                format!(
                    "cannot rename '{}' to '{}'",
                    partial.display(),
                    out.display()
                )
            })?;
            Ok(value)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            Err(e)
        }
    }
}

/// Reads the backup at `path` to its end, checking every frame.
fn verify(path: &Path) -> anyhow::Result<()> {
    let input = File::open(path).with_context(|| format!("cannot open '{}'", path.display()))?;
    let mut reader = BackupReader::open(BufReader::new(input))?;
    while reader.next_pairs()?.is_some() {}
    Ok(())
}

/// `FILE.partial`.
fn partial(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".partial");
    PathBuf::from(name)
}

/// Loads the backup `file` into `config`'s store, which must be empty; returns the line
/// to print.
pub(crate) fn restore(config: &Config, file: &Path) -> anyhow::Result<String> {
    let input = File::open(file).with_context(|| format!("cannot open '{}'", file.display()))?;
    let mut reader = BackupReader::open(BufReader::new(input))
        .with_context(|| format!("cannot restore '{}'", file.display()))?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let db = Database::open(&config.store)
            .await
            .context("cannot open the store")?;
        let restored = ferry_store::backup::restore(&db, &mut reader).await;
        db.close().await;
        let totals = restored.with_context(|| format!("cannot restore '{}'", file.display()))?;
        let header = reader.header();
        Ok(format!(
            "restored {} keys ({} bytes) of read version {} (Ferry {}, {} engine) into {}",
            totals.pairs,
            totals.bytes,
            header.read_version,
            header.ferry_version,
            header.engine,
            config.store.path.display()
        ))
    })
}
