//! Online backup and restore of the whole store: every key and value at one read
//! version, in a file of checksummed frames.
//!
//! A [`Backup`] pins the newest committed state of the embedded engine
//! ([`crate::embedded::EmbeddedDb::pin`]: a checkpoint, read from the data file) and reads
//! it in chunks while the daemon keeps committing: what it writes is the store exactly as
//! of that version. [`restore`] loads
//! such a file into an empty store. A restored store is the store as a `kill -9` at that
//! version would have left it, and Ferry recovers it as it recovers from one (leases of
//! the old instances expire, unconfirmed work is redone).
//!
//! The file: the magic line `FERRY-BACKUP\n`, then frames `kind (1 byte) | length (u32
//! BE) | payload | CRC-32C (u32 BE) of kind, length and payload`:
//! - `H`, once, first: the header as JSON ([`Header`]: format, Ferry's version, engine,
//!   read version, time);
//! - `P`, any number: pairs `key length (u32 BE) | key | value length (u32 BE) | value`,
//!   in key order;
//! - `E`, once, last: the number of pairs and their bytes as JSON, so a file cut short
//!   is told from a whole one.
//!
//! FoundationDB has its own backup (`fdbbackup`, `fdbrestore`): its transactions cannot
//! outlive five seconds, so [`Backup::start`] refuses that engine and says so.

use crate::{Database, KeyValue, RangeOption, RunOptions, StoreError};
use serde::{Deserialize, Serialize};
use std::io::{self, Read};

/// The first bytes of every backup file.
pub const MAGIC: &[u8] = b"FERRY-BACKUP\n";
/// The version of the file layout this module writes and reads.
pub const FORMAT: u32 = 1;
/// About how many bytes of keys and values one `P` frame holds.
const FRAME_BYTES: usize = 1 << 20;
/// The largest frame payload a reader accepts (a `P` frame ends after the pair that
/// crosses [`FRAME_BYTES`]: at most a key and a value past it).
const MAX_PAYLOAD: usize = FRAME_BYTES + (1 << 20);
/// About how many bytes of keys and values one restore transaction writes (under the
/// store's 10 MB transaction limit).
const RESTORE_TRANSACTION_BYTES: usize = 4 << 20;

/// Why a backup or a restore failed.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Reading or writing the file failed.
    #[error("cannot read or write the backup: {0}")]
    Io(#[from] io::Error),
    /// The engine has a backup of its own.
    #[error(
        "the {0} engine is backed up with its own tools (fdbbackup start, fdbrestore): its \
         transactions cannot outlive five seconds; see docs/operations.md, \"Backup and restore\""
    )]
    Unsupported(&'static str),
    /// The file is not a backup, or is damaged.
    #[error("not a readable Ferry backup: {0}")]
    Corrupt(String),
    /// The store to restore into holds data.
    #[error(
        "the store is not empty (it holds key {0}): restore into a new store.path, or delete \
         this one's data first"
    )]
    NotEmpty(String),
    /// The restored store's versions are not past the backup's.
    #[error(
        "the store's commit version {store} is not past the backup's {backup}: new messages \
         would sort before restored ones, so nothing was loaded; restore on a machine whose \
         clock is not behind the one the backup was made on (FoundationDB: advance the \
         cluster's version past it first, fdbcli --exec 'advanceversion {backup}')"
    )]
    VersionBehind {
        /// The store's commit version before the restore.
        store: u64,
        /// The backup's read version.
        backup: u64,
    },
}

/// The `H` frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Header {
    /// [`FORMAT`] of the writer.
    pub format: u32,
    /// The version of the Ferry that wrote it.
    pub ferry_version: String,
    /// The engine it was read from.
    pub engine: String,
    /// The commit version every pair is read at.
    pub read_version: u64,
    /// When the backup began, in milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
}

/// The `E` frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Totals {
    /// How many pairs the file holds.
    pub pairs: u64,
    /// Their keys' and values' bytes.
    pub bytes: u64,
}

/// A backup being written: yields the file's bytes frame by frame.
pub struct Backup {
    /// The pinned state (dropped at the end, releasing the data file's pages it holds).
    pinned: Option<crate::embedded::PinnedSnapshot>,
    /// The file's header.
    header: Header,
    /// Whether the magic line and the header are written.
    started: bool,
    /// Where the next `P` frame starts; `None` once the pairs are done.
    next: Option<Vec<u8>>,
    /// What has been written so far.
    totals: Totals,
}

impl Backup {
    /// Pins the newest committed state of `db` (after a checkpoint of the embedded
    /// engine).
    ///
    /// # Errors
    /// [`BackupError::Unsupported`] on FoundationDB; the store's error.
    pub async fn start(db: &Database) -> Result<Self, BackupError> {
        let pinned = match db {
            Database::Embedded(db) => db.pin().await?,
            #[cfg(feature = "fdb")]
            Database::Fdb(_) => return Err(BackupError::Unsupported("fdb")),
        };
        let header = Header {
            format: FORMAT,
            ferry_version: env!("CARGO_PKG_VERSION").to_owned(),
            engine: db.engine_name().to_owned(),
            read_version: pinned.version(),
            created_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        };
        Ok(Self {
            pinned: Some(pinned),
            header,
            started: false,
            next: Some(Vec::new()),
            totals: Totals { pairs: 0, bytes: 0 },
        })
    }

    /// The version the backup reads at.
    pub fn read_version(&self) -> Option<u64> {
        self.pinned
            .as_ref()
            .map(crate::embedded::PinnedSnapshot::version)
    }

    /// The next bytes of the file (the magic line and the header first, the end frame
    /// last), or `None` once it is complete. Blocking: reads the store.
    ///
    /// # Errors
    /// The store's error.
    pub fn next_bytes(&mut self) -> Result<Option<Vec<u8>>, BackupError> {
        if !self.started {
            self.started = true;
            let mut out = MAGIC.to_vec();
            let json = serde_json::to_vec(&self.header).map_err(io::Error::from)?;
            frame(&mut out, b'H', &json);
            return Ok(Some(out));
        }
        let Some(pinned) = &self.pinned else {
            return Ok(None);
        };
        if let Some(begin) = self.next.take() {
            let pairs = pinned.read_from(&begin, FRAME_BYTES)?;
            if let Some(last) = pairs.last() {
                self.next = Some(crate::keys::key_after(&last.key));
                let mut payload = Vec::with_capacity(FRAME_BYTES + 4096);
                for pair in &pairs {
                    put_piece(&mut payload, &pair.key);
                    put_piece(&mut payload, &pair.value);
                    self.totals.pairs += 1;
                    self.totals.bytes += (pair.key.len() + pair.value.len()) as u64;
                }
                let mut out = Vec::with_capacity(payload.len() + 9);
                frame(&mut out, b'P', &payload);
                return Ok(Some(out));
            }
        }
        self.pinned = None;
        let json = serde_json::to_vec(&self.totals).map_err(io::Error::from)?;
        let mut out = Vec::new();
        frame(&mut out, b'E', &json);
        Ok(Some(out))
    }

    /// Writes the whole backup to `out`; returns its header and totals. Blocking.
    ///
    /// # Errors
    /// The store's error, or the writer's.
    pub fn write_to(mut self, out: &mut impl io::Write) -> Result<(Header, Totals), BackupError> {
        while let Some(bytes) = self.next_bytes()? {
            out.write_all(&bytes)?;
        }
        out.flush()?;
        Ok((self.header, self.totals))
    }
}

/// Appends one frame.
fn frame(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    let start = out.len();
    out.push(kind);
    out.extend_from_slice(
        &u32::try_from(payload.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// Appends a length-prefixed piece.
fn put_piece(out: &mut Vec<u8>, piece: &[u8]) {
    out.extend_from_slice(&u32::try_from(piece.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(piece);
}

/// A backup file being read: checks every frame's checksum and the end frame's totals.
pub struct BackupReader<R> {
    input: R,
    /// The file's header.
    header: Header,
    /// What has been read so far.
    totals: Totals,
    /// Bytes read so far (for the offset in errors).
    offset: u64,
    /// Set once the end frame was read and checked.
    ended: bool,
}

impl<R: Read> BackupReader<R> {
    /// Reads the magic line and the header.
    ///
    /// # Errors
    /// [`BackupError::Corrupt`] for anything but a backup this Ferry reads.
    pub fn open(mut input: R) -> Result<Self, BackupError> {
        let mut magic = vec![0; MAGIC.len()];
        input
            .read_exact(&mut magic)
            .map_err(|_| corrupt("the file is shorter than the magic line"))?;
        if magic != MAGIC {
            return Err(corrupt("the file does not start with FERRY-BACKUP"));
        }
        let mut reader = Self {
            input,
            header: Header {
                format: 0,
                ferry_version: String::new(),
                engine: String::new(),
                read_version: 0,
                created_unix_ms: 0,
            },
            totals: Totals { pairs: 0, bytes: 0 },
            offset: MAGIC.len() as u64,
            ended: false,
        };
        let (kind, payload) = reader.frame()?;
        if kind != b'H' {
            return Err(corrupt("the first frame is not the header"));
        }
        let header: Header = serde_json::from_slice(&payload)
            .map_err(|e| corrupt(&format!("the header does not parse: {e}")))?;
        if header.format != FORMAT {
            return Err(corrupt(&format!(
                "it is in backup format {} (written by Ferry {}); this Ferry ({}) reads format {FORMAT}",
                header.format,
                header.ferry_version,
                env!("CARGO_PKG_VERSION")
            )));
        }
        reader.header = header;
        Ok(reader)
    }

    /// The file's header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The next pairs, in key order, or `None` after the end frame (whose totals must
    /// match what was read).
    ///
    /// # Errors
    /// [`BackupError::Corrupt`] for a damaged or cut-short file.
    pub fn next_pairs(&mut self) -> Result<Option<Vec<KeyValue>>, BackupError> {
        if self.ended {
            return Ok(None);
        }
        let (kind, payload) = self.frame()?;
        match kind {
            b'P' => {
                let pairs = pairs(&payload)?;
                for pair in &pairs {
                    self.totals.pairs += 1;
                    self.totals.bytes += (pair.key.len() + pair.value.len()) as u64;
                }
                Ok(Some(pairs))
            }
            b'E' => {
                let totals: Totals = serde_json::from_slice(&payload)
                    .map_err(|e| corrupt(&format!("the end frame does not parse: {e}")))?;
                if totals != self.totals {
                    return Err(corrupt(&format!(
                        "the end frame counts {} pairs of {} bytes, the file holds {} of {}",
                        totals.pairs, totals.bytes, self.totals.pairs, self.totals.bytes
                    )));
                }
                self.ended = true;
                Ok(None)
            }
            other => Err(corrupt(&format!(
                "unexpected frame kind {other:#04x} at byte {}",
                self.offset
            ))),
        }
    }

    /// The totals read so far.
    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// Reads one frame and checks its checksum.
    fn frame(&mut self) -> Result<(u8, Vec<u8>), BackupError> {
        let at = self.offset;
        let cut = |_| {
            corrupt(&format!(
                "the file ends inside the frame at byte {at}: it was cut short"
            ))
        };
        let mut head = [0; 5];
        self.input.read_exact(&mut head).map_err(cut)?;
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        if len > MAX_PAYLOAD {
            return Err(corrupt(&format!(
                "the frame at byte {at} claims {len} bytes"
            )));
        }
        let mut payload = vec![0; len];
        self.input.read_exact(&mut payload).map_err(cut)?;
        let mut crc = [0; 4];
        self.input.read_exact(&mut crc).map_err(cut)?;
        let expected = crc32c::crc32c_append(crc32c::crc32c(&head), &payload);
        if u32::from_be_bytes(crc) != expected {
            return Err(corrupt(&format!(
                "the frame at byte {at} fails its checksum"
            )));
        }
        self.offset += (head.len() + len + crc.len()) as u64;
        Ok((head[0], payload))
    }
}

/// The pairs of a `P` frame's payload.
fn pairs(mut payload: &[u8]) -> Result<Vec<KeyValue>, BackupError> {
    let mut pairs = Vec::new();
    while !payload.is_empty() {
        let key = piece(&mut payload)?;
        let value = piece(&mut payload)?;
        pairs.push(KeyValue { key, value });
    }
    Ok(pairs)
}

/// Takes one length-prefixed piece off the front of `payload`.
fn piece(payload: &mut &[u8]) -> Result<Vec<u8>, BackupError> {
    let bad = || corrupt("a pair frame's lengths do not add up");
    let (len, rest) = payload.split_first_chunk::<4>().ok_or_else(bad)?;
    let len = u32::from_be_bytes(*len) as usize;
    let (piece, rest) = rest.split_at_checked(len).ok_or_else(bad)?;
    *payload = rest;
    Ok(piece.to_vec())
}

fn corrupt(what: &str) -> BackupError {
    BackupError::Corrupt(what.to_owned())
}

/// Loads the backup `reader` reads into `db`, which must hold no key at all; returns the
/// totals loaded. The pairs are written in transactions of a few megabytes, in key
/// order; a restore that stops half-way leaves a store that is not empty, which the next
/// restore refuses (start again on a new store).
///
/// # Errors
/// [`BackupError::NotEmpty`], [`BackupError::Corrupt`] (nothing after the damaged frame
/// is loaded), [`BackupError::VersionBehind`], the store's errors.
pub async fn restore<R: Read>(
    db: &Database,
    reader: &mut BackupReader<R>,
) -> Result<Totals, BackupError> {
    let everything = RangeOption::new(Vec::new(), crate::keys::keyspace_end());
    let first = db
        .run(|tx| {
            let range = everything.clone().limit(1);
            async move { tx.get_range(&range, true).await }
        })
        .await?;
    if let Some(pair) = first.first() {
        return Err(BackupError::NotEmpty(printable(&pair.key)));
    }
    // A commit that leaves nothing behind tells the store's version now: every later
    // commit's is past it, so restored versionstamped keys keep sorting before new ones.
    let probe = b"\xfe/ferry/restore-probe".to_vec();
    let store = write(db, &[(probe.clone(), None)], Some(&probe)).await?;
    let backup = reader.header().read_version;
    if store <= backup {
        return Err(BackupError::VersionBehind { store, backup });
    }
    let mut batch: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    let mut batch_bytes = 0;
    loop {
        let next = reader.next_pairs()?;
        let done = next.is_none();
        for KeyValue { key, value } in next.into_iter().flatten() {
            batch_bytes += key.len() + value.len();
            batch.push((key, Some(value)));
            if batch_bytes >= RESTORE_TRANSACTION_BYTES {
                write(db, &std::mem::take(&mut batch), None).await?;
                batch_bytes = 0;
            }
        }
        if done {
            break;
        }
    }
    if !batch.is_empty() {
        write(db, &batch, None).await?;
    }
    Ok(reader.totals())
}

/// Sets `pairs` (a `None` value: sets the key empty) and then clears `clear`, in one
/// transaction; returns its commit version.
async fn write(
    db: &Database,
    pairs: &[(Vec<u8>, Option<Vec<u8>>)],
    clear: Option<&[u8]>,
) -> Result<u64, StoreError> {
    let ((), info) = db
        .run_with(RunOptions::default(), |tx| async move {
            for (key, value) in pairs {
                tx.set(key, value.clone().unwrap_or_default());
            }
            if let Some(key) = clear {
                tx.clear(key);
            }
            Ok::<_, StoreError>(())
        })
        .await?;
    Ok(info.version)
}

/// A key as an error shows it: printable ASCII as is, other bytes as `\xNN`.
fn printable(key: &[u8]) -> String {
    key.iter()
        .take(64)
        .flat_map(|&b| std::ascii::escape_default(b))
        .map(char::from)
        .collect()
}
