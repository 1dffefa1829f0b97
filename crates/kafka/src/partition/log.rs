//! A partition's log in the store: record batches at dense int64 offsets, the high
//! watermark, the log start offset, a time index, and retention that deletes old ranges.
//!
//! Layout (keys in [`crate::keys`]): each batch is stored as sent (compression kept, base
//! offset rewritten) in chunks of at most 100,000 bytes under `("l", base, n)`, with an
//! index entry `("i", base)` giving its last offset, newest timestamp, size and record
//! count. `hw` is the next offset: only the partition's sequencer writes it, in the
//! transaction that appends, and fetchers watch it. `("t", ts, base)` records where the
//! log's newest timestamp first reached `ts` (the running maximum, as Kafka's time index),
//! so a timestamp lookup is one range read.
//!
//! Large batches: a batch too large for one transaction reaches the sequencer already
//! written to a spill ([`ferry_stage::spill`]), its staged record holding only its header.
//! The log then keeps no chunks for it: its index entry names the spill, as does
//! `("spill", base)` (so deleting a partition finds every spill its log references without
//! reading its index), and the log holds one reference to the spill, taken in the
//! sequencer's transaction as the stage entry's is dropped — no byte is copied. The spill
//! keeps the batch as produced: readers rewrite its base offset (bytes 0..8, outside the
//! CRC) as they read it, in pieces, outside the transaction that found it ([`Read::fill`]).
//! Every deletion of a batch (retention, DeleteRecords, the topic's deletion) drops its
//! reference, and the spill collector frees it.
//!
//! Transactions: a transactional batch keeps its producer id in its header; the sequencer
//! records where each producer's open transaction begins (`("open", id)`) and, when it
//! appends that transaction's abort marker, an aborted-transactions entry `("ab", marker,
//! id)`. The last stable offset — what `read_committed` consumers may read up to — is the
//! first offset of the oldest open transaction, or the high watermark when none is open.
//!
//! Compaction ([`crate::partition::compaction`]) rewrites batches in place with fewer records (their
//! headers' offsets kept) and deletes those left empty, so a compacted log has gaps: a
//! read from an offset in one begins with the next batch.

use crate::keys::{PartitionKeys, decode_i64, encode_i64};
use crate::wire::batch::{
    self, BatchHeader, first_record_at_or_after, set_base_offset, set_leader_epoch,
};
use bytes::{Bytes, BytesMut};
use ferry_stage::{Spill, Spills, StageError};
use ferry_store::keys::key_after;
use ferry_store::{RangeOption, StoreError, Transaction};
use foundationdb_tuple::{pack, unpack};

/// Bytes per stored chunk of a batch: FoundationDB's value limit.
const CHUNK: usize = 100_000;
/// Format version of [`BatchIndex`] values.
const FORMAT: u16 = 1;
/// Format version of the [`BatchIndex`] value of a batch kept in a spill: format 1's
/// fields, then the spill's id and the leader epoch that appended the batch (its bytes,
/// written before it was sequenced, carry the producer's). Only such batches use it.
const SPILLED_FORMAT: u16 = 2;
/// Most index entries one read looks at.
const INDEX_READ_LIMIT: usize = 1024;

/// Why the log cannot be read or written.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LogError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored value does not decode.
    #[error("the store holds a partition log value this ferry cannot decode ({0})")]
    Corrupt(String),
    /// The spill of a batch cannot be read.
    #[error("cannot read a batch kept in a spill: {0}")]
    Spill(StageError),
}

impl ferry_store::TransactionError for LogError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) | Self::Spill(StageError::Store(e)) => Some(e),
            Self::Corrupt(_) | Self::Spill(_) => None,
        }
    }
}

/// What the log keeps about one batch besides its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchIndex {
    /// The batch's first offset.
    pub base: i64,
    /// Its last offset.
    pub last: i64,
    /// Its newest record timestamp.
    pub max_timestamp: i64,
    /// Its size in bytes.
    pub size: u32,
    /// Its record count.
    pub records: i32,
    /// The spill it is kept in (its length is `size`) and the leader epoch that appended
    /// it, for a batch too large for one transaction; `None`: its bytes are the log's
    /// chunks.
    pub spill: Option<(u64, i32)>,
}

impl BatchIndex {
    fn encode(&self) -> Vec<u8> {
        let records = i64::from(self.records);
        match self.spill {
            None => pack(&(FORMAT, self.last, self.max_timestamp, self.size, records)),
            Some((id, leader_epoch)) => pack(&(
                SPILLED_FORMAT,
                self.last,
                self.max_timestamp,
                self.size,
                records,
                id,
                i64::from(leader_epoch),
            )),
        }
    }

    pub(crate) fn decode(base: i64, bytes: &[u8]) -> Result<Self, LogError> {
        let ((_, last, max_timestamp, size, records), spill) =
            match unpack::<(u16, i64, i64, u32, i64)>(bytes) {
                Ok(fields) => (fields, None),
                Err(e) => {
                    let (v, last, ts, size, records, id, epoch) =
                        unpack::<(u16, i64, i64, u32, i64, u64, i64)>(bytes)
                            .map_err(|_| LogError::Corrupt(format!("batch index: {e:?}")))?;
                    let epoch = i32::try_from(epoch).unwrap_or(-1);
                    ((v, last, ts, size, records), Some((id, epoch)))
                }
            };
        Ok(Self {
            base,
            last,
            max_timestamp,
            size,
            records: i32::try_from(records).unwrap_or(i32::MAX),
            spill,
        })
    }

    /// The spill it is kept in, with its length, and the leader epoch that appended it.
    fn spilled(&self) -> Option<(Spill, i32)> {
        self.spill.map(|(id, leader_epoch)| {
            let spill = Spill {
                id,
                len: u64::from(self.size),
            };
            (spill, leader_epoch)
        })
    }
}

/// Where the bytes of a batch to append are.
#[derive(Debug, Clone)]
pub(crate) enum Stored {
    /// Here: the batch, its base offset rewritten; the log keeps it in chunks.
    Inline(Bytes),
    /// In this spill, which a stage entry popped in the same transaction referenced: the
    /// log takes its own reference. Readers stamp the base offset and the leader epoch
    /// appending it into what they read.
    Spilled {
        /// The spill.
        spill: Spill,
        /// The leader epoch appending it.
        leader_epoch: i32,
    },
}

/// A batch kept in a spill, found by a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpilledBatch {
    /// Its base offset in the log.
    pub base: i64,
    /// Its spill.
    pub spill: Spill,
    /// The leader epoch that appended it.
    pub leader_epoch: i32,
}

/// Offsets and size of a partition log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bounds {
    /// The first offset still stored.
    pub start: i64,
    /// The next offset to be assigned (high watermark, log end offset).
    pub high_watermark: i64,
}

/// An aborted transaction in a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aborted {
    /// Its producer.
    pub producer_id: i64,
    /// Its first offset in the partition.
    pub first: i64,
    /// The offset of its abort marker.
    pub marker: i64,
}

impl Aborted {
    /// Whether the batch of `producer_id` at `offset` belongs to this transaction.
    pub fn covers(&self, producer_id: i64, offset: i64) -> bool {
        self.producer_id == producer_id && (self.first..self.marker).contains(&offset)
    }
}

/// Whether the batch with `header` belongs to one of the `aborted` transactions (which
/// `read_committed` readers drop).
pub(crate) fn is_aborted(aborted: &[Aborted], header: &BatchHeader) -> bool {
    header.is_transactional()
        && aborted
            .iter()
            .any(|a| a.covers(header.producer_id, header.base_offset))
}

/// Where readers of a log may read: its bounds and its last stable offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Readable {
    /// The log's start offset and high watermark.
    pub bounds: Bounds,
    /// The last stable offset: how far `read_committed` readers may read.
    pub stable: i64,
}

/// Batches read from a log.
#[derive(Debug, Clone, Default)]
pub struct Read {
    /// The batches, back to back, as a Fetch answer carries them.
    pub bytes: Bytes,
    /// How many records they hold.
    pub records: i64,
    /// A batch kept in a spill, which a read returns alone: `bytes` is empty until
    /// [`Read::fill`] reads it.
    pub spilled: Option<SpilledBatch>,
}

impl Read {
    /// The bytes of the batches read, a spilled batch's counted before it is filled in.
    pub fn size(&self) -> usize {
        self.bytes.len() + self.spilled.map_or(0, |s| s.spill.len as usize)
    }

    /// Reads the spilled batch, if any, into `bytes` ([`SpilledBatch::read`]).
    ///
    /// # Errors
    /// As [`SpilledBatch::read`].
    pub async fn fill(self, spills: &Spills) -> Result<Self, LogError> {
        let Some(batch) = self.spilled else {
            return Ok(self);
        };
        Ok(Self {
            bytes: batch.read(spills).await?,
            records: self.records,
            spilled: None,
        })
    }
}

impl SpilledBatch {
    /// The batch, with its base offset and leader epoch written in: read in pieces of a few MB, one
    /// transaction each, outside the transaction that found it (so that one stays short).
    ///
    /// # Errors
    /// [`LogError::Spill`] when the spill cannot be read (retention deleted the batch
    /// meanwhile, and the collector freed it; or the store failed).
    pub async fn read(&self, spills: &Spills) -> Result<Bytes, LogError> {
        let bytes = spills.read_all(self.spill).await.map_err(LogError::Spill)?;
        if bytes.len() < batch::HEADER_LEN {
            return Err(LogError::Corrupt(format!(
                "the batch at {} has {} bytes",
                self.base,
                bytes.len()
            )));
        }
        let mut bytes = BytesMut::from(bytes);
        set_base_offset(&mut bytes, self.base);
        set_leader_epoch(&mut bytes, self.leader_epoch);
        Ok(bytes.freeze())
    }
}

/// One partition's log.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Log<'a> {
    /// The partition's keys.
    pub keys: &'a PartitionKeys,
}

impl<'a> Log<'a> {
    /// The log of the partition with `keys`.
    pub(crate) fn new(keys: &'a PartitionKeys) -> Self {
        Self { keys }
    }

    /// The log's start offset and high watermark.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn bounds(
        &self,
        tx: &Transaction,
        snapshot: bool,
    ) -> Result<Bounds, LogError> {
        let (start_key, hw_key) = (self.keys.log_start(), self.keys.high_watermark());
        let (start, hw) =
            futures::try_join!(tx.get(&start_key, snapshot), tx.get(&hw_key, snapshot))?;
        Ok(Bounds {
            start: decode_i64(start.as_deref()),
            high_watermark: decode_i64(hw.as_deref()),
        })
    }

    /// The log's bounds and its last stable offset, as a reader sees them (snapshot reads).
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn readable(&self, tx: &Transaction) -> Result<Readable, LogError> {
        let bounds = self.bounds(tx, true).await?;
        let stable = self.last_stable(tx, bounds.high_watermark).await?;
        Ok(Readable { bounds, stable })
    }

    /// [`Log::read`] for a `read_committed` reader, with the aborted transactions among
    /// what it read (their batches are to be dropped). `until` is at most the last stable
    /// offset.
    ///
    /// # Errors
    /// The store's error, or a corrupt index.
    pub(crate) async fn read_committed(
        &self,
        tx: &Transaction,
        from: i64,
        until: i64,
        max_bytes: usize,
        at_least_one: bool,
    ) -> Result<(Read, Vec<Aborted>), LogError> {
        let read = self.read(tx, from, until, max_bytes, at_least_one).await?;
        let aborted = self.aborted(tx, from, until).await?;
        Ok((read, aborted))
    }

    /// Bytes stored in the log (a snapshot read: retention's estimate need not conflict
    /// with appends).
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn size(&self, tx: &Transaction) -> Result<i64, LogError> {
        Ok(decode_i64(
            tx.get(&self.keys.bytes(), true).await?.as_deref(),
        ))
    }

    /// The newest timestamp the log has held (`i64::MIN` for an empty log).
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn newest_timestamp(&self, tx: &Transaction) -> Result<i64, LogError> {
        match tx.get(&self.keys.max_timestamp(), false).await? {
            Some(v) => unpack::<(i64,)>(&v)
                .map(|(t,)| t)
                .map_err(|e| LogError::Corrupt(format!("newest timestamp: {e:?}"))),
            None => Ok(i64::MIN),
        }
    }

    /// Appends the batch with `header` at `base` within `tx`: its chunks (or its spill
    /// entry and reference, taken from `spills`), its index entry and, when it holds the
    /// log's newest timestamp so far, a time index entry. `newest` is the log's newest
    /// timestamp before it; returns the one after. The caller (the sequencer) sets the
    /// high watermark once per transaction.
    pub(crate) fn append(
        &self,
        tx: &Transaction,
        spills: &Spills,
        base: i64,
        batch: Stored,
        header: &BatchHeader,
        newest: i64,
    ) -> i64 {
        let (size, spill) = match batch {
            Stored::Inline(batch) => {
                self.write_chunks(tx, base, &batch);
                (batch.len(), None)
            }
            Stored::Spilled {
                spill,
                leader_epoch,
            } => {
                tx.set(&self.keys.spilled(base), pack(&(spill.id,)));
                spills.add_ref_in(tx, spill.id);
                (spill.len as usize, Some((spill.id, leader_epoch)))
            }
        };
        let timestamp = header.newest_timestamp();
        let entry = BatchIndex {
            base,
            last: base + header.offset_span() - 1,
            max_timestamp: timestamp,
            size: size as u32,
            records: header.record_count,
            spill,
        };
        tx.set(&self.keys.index(base), entry.encode());
        tx.atomic_add(&self.keys.bytes(), size as i64);
        if timestamp > newest {
            tx.set(&self.keys.time(timestamp, base), b"");
            timestamp
        } else {
            newest
        }
    }

    /// Writes `batch`, at `base`, as the log's chunks: each a slice of it, not a copy.
    fn write_chunks(&self, tx: &Transaction, base: i64, batch: &Bytes) {
        for (n, start) in (0..batch.len()).step_by(CHUNK).enumerate() {
            let chunk = batch.slice(start..(start + CHUNK).min(batch.len()));
            tx.set(&self.keys.log_chunk(base, n as u32), chunk);
        }
    }

    /// Records the end of an append transaction: the new high watermark and newest
    /// timestamp.
    pub(crate) fn seal(&self, tx: &Transaction, high_watermark: i64, newest: i64) {
        tx.set(&self.keys.high_watermark(), &encode_i64(high_watermark));
        tx.set(&self.keys.max_timestamp(), pack(&(newest,)));
    }

    /// The last stable offset: where the oldest open transaction begins, or
    /// `high_watermark` when none is open. A snapshot read.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn last_stable(
        &self,
        tx: &Transaction,
        high_watermark: i64,
    ) -> Result<i64, LogError> {
        let (b, e) = self.keys.open_transactions();
        let open = tx.get_range(&RangeOption::new(b, e), true).await?;
        Ok(open
            .iter()
            .map(|kv| decode_i64(Some(&kv.value)))
            .fold(high_watermark, i64::min))
    }

    /// The aborted transactions a `read_committed` read of `[from, to)` must know: each
    /// whose marker is at or after `from` and whose first offset is before `to`. At most
    /// [`INDEX_READ_LIMIT`] are looked at; snapshot reads.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn aborted(
        &self,
        tx: &Transaction,
        from: i64,
        to: i64,
    ) -> Result<Vec<Aborted>, LogError> {
        let (b, e) = self.keys.aborted_range(from, i64::MAX);
        let entries = tx
            .get_range(&RangeOption::new(b, e).limit(INDEX_READ_LIMIT), true)
            .await?;
        let mut out = Vec::new();
        for kv in entries {
            let (marker, producer_id) = self
                .keys
                .aborted_entry(&kv.key)
                .ok_or_else(|| LogError::Corrupt("undecodable aborted transaction key".into()))?;
            let first = decode_i64(Some(&kv.value));
            if first < to {
                out.push(Aborted {
                    producer_id,
                    first,
                    marker,
                });
            }
        }
        Ok(out)
    }

    /// Reads whole batches from the one holding offset `from`, stopping before the batch
    /// that would take the total over `max_bytes` — but, when `at_least_one`, returning the
    /// first however large, so a consumer can make progress (Kafka's KIP-74: only the first
    /// partition of a fetch to return data may) — and before the first batch at or after
    /// `until` (the last stable offset for `read_committed`). A batch kept in a spill is
    /// returned alone, as [`Read::spilled`], when it comes first, and ends the read
    /// otherwise. Snapshot reads.
    ///
    /// # Errors
    /// The store's error, or a corrupt index.
    pub(crate) async fn read(
        &self,
        tx: &Transaction,
        from: i64,
        until: i64,
        max_bytes: usize,
        at_least_one: bool,
    ) -> Result<Read, LogError> {
        let (b, e) = self.keys.index_range(i64::MIN, from.saturating_add(1));
        let first = tx
            .get_range(&RangeOption::new(b, e).limit(1).reverse(), true)
            .await?;
        // In a compacted log no batch may begin at or before `from`, or the one found may
        // end before it (compaction removed what followed): the read begins with the next.
        let first_base = match first.first() {
            Some(kv) => {
                let entry = BatchIndex::decode(self.base_of(&kv.key)?, &kv.value)?;
                if entry.last < from { from } else { entry.base }
            }
            None => from,
        };
        let limit = (max_bytes / 512).clamp(16, INDEX_READ_LIMIT);
        let (b, e) = self.keys.index_range(first_base, i64::MAX);
        let entries = tx
            .get_range(&RangeOption::new(b, e).limit(limit), true)
            .await?;
        let mut total = 0usize;
        let mut records = 0i64;
        let mut end = first_base;
        for kv in &entries {
            let entry = BatchIndex::decode(self.base_of(&kv.key)?, &kv.value)?;
            let may_exceed = total == 0 && at_least_one;
            if entry.base >= until || (!may_exceed && total + entry.size as usize > max_bytes) {
                break;
            }
            if let Some((spill, leader_epoch)) = entry.spilled() {
                if total > 0 {
                    break;
                }
                return Ok(Read {
                    bytes: Bytes::new(),
                    records: i64::from(entry.records),
                    spilled: Some(SpilledBatch {
                        base: entry.base,
                        spill,
                        leader_epoch,
                    }),
                });
            }
            total += entry.size as usize;
            records += i64::from(entry.records);
            end = entry.base + 1;
        }
        if total == 0 {
            return Ok(Read::default());
        }
        Ok(Read {
            bytes: self.chunks(tx, first_base, end, total).await?,
            records,
            spilled: None,
        })
    }

    /// The bytes of the batches with bases in `[from, to)` kept in the log's chunks, back to
    /// back, which the index says are `total` (a snapshot read).
    async fn chunks(
        &self,
        tx: &Transaction,
        from: i64,
        to: i64,
        total: usize,
    ) -> Result<Bytes, LogError> {
        let (b, e) = self.keys.log_range(from, to);
        let chunks = tx.get_range(&RangeOption::new(b, e), true).await?;
        let mut bytes = BytesMut::with_capacity(total);
        for kv in chunks {
            bytes.extend_from_slice(&kv.value);
        }
        if bytes.len() != total {
            return Err(LogError::Corrupt(format!(
                "batches from offset {from} hold {} of their {total} bytes",
                bytes.len()
            )));
        }
        Ok(bytes.freeze())
    }

    /// The batches with bases in `[from, to)`, in order, up to `max_bytes` of them (at
    /// least one) and at most `limit`: each one's index entry and, unless it is kept in a
    /// spill, its bytes. With `snapshot` false the index entries are conflicting reads, so
    /// a transaction that rewrites what it read fails when another changed it meanwhile
    /// (retention, DeleteRecords, a topic's deletion).
    ///
    /// # Errors
    /// The store's error, or a corrupt index.
    pub(crate) async fn batches(
        &self,
        tx: &Transaction,
        (from, to): (i64, i64),
        max_bytes: usize,
        limit: usize,
        snapshot: bool,
    ) -> Result<Vec<(BatchIndex, Option<Bytes>)>, LogError> {
        let entries = self.index(tx, (from, to), limit, snapshot).await?;
        let mut found = Vec::with_capacity(entries.len());
        let mut total = 0usize;
        for entry in entries {
            if !found.is_empty() && total + entry.size as usize > max_bytes {
                break;
            }
            total += entry.size as usize;
            found.push(entry);
        }
        let Some(last) = found.last() else {
            return Ok(Vec::new());
        };
        let inline: usize = found
            .iter()
            .filter(|e| e.spill.is_none())
            .map(|e| e.size as usize)
            .sum();
        let mut bytes = self
            .chunks(tx, found[0].base, last.base + 1, inline)
            .await?;
        Ok(found
            .into_iter()
            .map(|entry| {
                let batch = entry
                    .spill
                    .is_none()
                    .then(|| bytes.split_to(entry.size as usize));
                (entry, batch)
            })
            .collect())
    }

    /// The index entries of the batches with bases in `[from, to)`, at most `limit`.
    ///
    /// # Errors
    /// The store's error, or a corrupt index.
    pub(crate) async fn index(
        &self,
        tx: &Transaction,
        (from, to): (i64, i64),
        limit: usize,
        snapshot: bool,
    ) -> Result<Vec<BatchIndex>, LogError> {
        let (b, e) = self.keys.index_range(from, to);
        let entries = tx
            .get_range(&RangeOption::new(b, e).limit(limit), snapshot)
            .await?;
        entries
            .iter()
            .map(|kv| BatchIndex::decode(self.base_of(&kv.key)?, &kv.value))
            .collect()
    }

    /// The base offset of the newest batch below `high_watermark` (a snapshot read).
    ///
    /// # Errors
    /// The store's error, or a corrupt index.
    pub(crate) async fn newest_base(
        &self,
        tx: &Transaction,
        high_watermark: i64,
    ) -> Result<Option<i64>, LogError> {
        let (b, e) = self.keys.index_range(i64::MIN, high_watermark);
        let newest = tx
            .get_range(&RangeOption::new(b, e).limit(1).reverse(), true)
            .await?;
        newest.first().map(|kv| self.base_of(&kv.key)).transpose()
    }

    /// Replaces the batch of `entry` (read by [`Log::batches`] in `tx`, not in a spill)
    /// with what compaction left of it: `Some((batch, records))`, rewritten in place, its
    /// base offset and index entry's last offset and newest timestamp kept; `None`,
    /// deleted (nothing is left; the caller then hands its time index entries on with
    /// [`Log::pass_on_time_entries`]). Adjusts the log's byte count.
    pub(crate) fn replace(
        &self,
        tx: &Transaction,
        entry: &BatchIndex,
        left: Option<(&Bytes, i32)>,
    ) {
        let (b, e) = self.keys.log_range(entry.base, entry.base + 1);
        tx.clear_range(&b, &e);
        let Some((batch, records)) = left else {
            tx.clear(&self.keys.index(entry.base));
            tx.atomic_add(&self.keys.bytes(), -i64::from(entry.size));
            return;
        };
        self.write_chunks(tx, entry.base, batch);
        let rewritten = BatchIndex {
            size: batch.len() as u32,
            records,
            ..*entry
        };
        tx.set(&self.keys.index(entry.base), rewritten.encode());
        tx.atomic_add(
            &self.keys.bytes(),
            batch.len() as i64 - i64::from(entry.size),
        );
    }

    /// Hands the time index entries naming the batch of `entry`, which compaction has just
    /// deleted from the log in `tx`, on to the next batch of the log: a timestamp search
    /// that led to the deleted batch leads to the next one (whose records are the first
    /// left at or after that time, or later ones with no entry of their own when they did
    /// not raise the running maximum), and entries do not pile up for batches that are gone.
    /// The entries naming the next batch keep only the newest timestamp that matters. With
    /// no batch after it they stay, as a batch appended later with the same timestamp gets
    /// no entry of its own. Entries are in timestamp and base order alike (the running
    /// maximum), so those naming the batch are among the first from its newest timestamp.
    ///
    /// # Errors
    /// The store's error, or a corrupt index.
    pub(crate) async fn pass_on_time_entries(
        &self,
        tx: &Transaction,
        entry: &BatchIndex,
    ) -> Result<(), LogError> {
        let (b, e) = self.keys.index_range(entry.base + 1, i64::MAX);
        let after = tx.get_range(&RangeOption::new(b, e).limit(1), true).await?;
        let Some(next) = after.first().map(|kv| self.base_of(&kv.key)).transpose()? else {
            return Ok(());
        };
        let (b, e) = self.keys.time_from(entry.max_timestamp);
        let entries = tx
            .get_range(&RangeOption::new(b, e).limit(INDEX_READ_LIMIT), true)
            .await?;
        let (mut newest, mut next_has_one) = (None, false);
        for kv in &entries {
            match self.keys.time_entry(&kv.key) {
                Some((_, base)) if base < entry.base => {}
                Some((timestamp, base)) if base == entry.base => {
                    tx.clear(&kv.key);
                    newest = Some(timestamp);
                }
                Some((_, base)) => {
                    next_has_one = base == next;
                    break;
                }
                None => break,
            }
        }
        if let (Some(timestamp), false) = (newest, next_has_one) {
            tx.set(&self.keys.time(timestamp, next), b"");
        }
        Ok(())
    }

    /// Compaction's checkpoint: the offset below which the log is compacted (the log
    /// start offset when it was never compacted). A snapshot read.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn cleaned(&self, tx: &Transaction, start: i64) -> Result<i64, LogError> {
        let cleaned = tx.get(&self.keys.cleaned(), true).await?;
        Ok(decode_i64(cleaned.as_deref()).max(start))
    }

    /// Sets compaction's checkpoint.
    pub(crate) fn set_cleaned(&self, tx: &Transaction, offset: i64) {
        tx.set(&self.keys.cleaned(), &encode_i64(offset));
    }

    /// The first offset whose record timestamp is at least `at`, with that record's
    /// timestamp (for a compressed batch or one kept in a spill, the batch's first offset and
    /// newest timestamp); `None` when no record is that new.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn offset_for_timestamp(
        &self,
        tx: &Transaction,
        at: i64,
        start: i64,
    ) -> Result<Option<(i64, i64)>, LogError> {
        let (b, e) = self.keys.time_from(at);
        let hit = tx.get_range(&RangeOption::new(b, e).limit(1), true).await?;
        let Some((timestamp, base)) = hit.first().and_then(|kv| self.keys.time_entry(&kv.key))
        else {
            return Ok(None);
        };
        let (b, e) = self.keys.log_range(base, base + 1);
        let chunks = tx.get_range(&RangeOption::new(b, e), true).await?;
        let batch: Vec<u8> = chunks.into_iter().flat_map(|kv| kv.value).collect();
        let (offset, timestamp) = first_record_at_or_after(&batch, at).unwrap_or((base, timestamp));
        Ok(Some((offset.max(start), timestamp)))
    }

    /// Deletes whole batches from the start of the log while `expired(entry, bytes_left)`
    /// says so, at most `limit` of them, within `tx`, and moves the log start offset past
    /// them — or to `floor` when that is further and every batch ending before it went
    /// (DeleteRecords: the new start may fall inside a batch, which then stays whole, its
    /// bytes counted, for Fetch from the start to read). The log's references to the
    /// spills of the batches deleted are dropped in `spills`. Returns how many batches
    /// went.
    /// The bounds are conflicting reads (an append or another trim makes `tx` retry);
    /// index reads are snapshot reads with conflict ranges only on the entries deleted.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn trim(
        &self,
        tx: &Transaction,
        spills: &Spills,
        limit: usize,
        floor: i64,
        mut expired: impl FnMut(&BatchIndex, i64) -> bool,
    ) -> Result<usize, LogError> {
        let bounds = self.bounds(tx, false).await?;
        let mut size = self.size(tx).await?;
        // From the first batch stored, which may begin before `start`.
        let (b, e) = self.keys.index_range(i64::MIN, bounds.high_watermark);
        let entries = tx
            .get_range(&RangeOption::new(b, e).limit(limit), true)
            .await?;
        let mut batches_end = bounds.start;
        let mut freed = 0i64;
        let mut deleted = 0;
        let mut spilled = Vec::new();
        for kv in &entries {
            let entry = BatchIndex::decode(self.base_of(&kv.key)?, &kv.value)?;
            if !expired(&entry, size) {
                break;
            }
            spilled.extend(entry.spill.map(|(id, _)| id));
            size -= i64::from(entry.size);
            freed += i64::from(entry.size);
            batches_end = batches_end.max(entry.last + 1);
            deleted += 1;
        }
        let all_read = deleted < entries.len() || entries.len() < limit;
        let new_start = if all_read {
            batches_end.max(floor)
        } else {
            batches_end
        };
        if deleted > 0 {
            let first_key = &entries[0].key;
            tx.add_read_conflict_range(first_key, &key_after(&entries[deleted - 1].key));
            let (b, e) = self.keys.index_range(i64::MIN, batches_end);
            tx.clear_range(&b, &e);
            let (b, e) = self.keys.log_range(i64::MIN, batches_end);
            tx.clear_range(&b, &e);
            let (b, e) = self.keys.spilled_range(i64::MIN, batches_end);
            tx.clear_range(&b, &e);
            for id in spilled {
                spills.drop_ref_in(tx, id);
            }
            self.clear_time_entries_before(tx, batches_end).await?;
            tx.atomic_add(&self.keys.bytes(), -freed);
        }
        if new_start > bounds.start {
            let (b, e) = self.keys.aborted_range(i64::MIN, new_start);
            tx.clear_range(&b, &e);
            tx.set(&self.keys.log_start(), &encode_i64(new_start));
        }
        Ok(deleted)
    }

    /// Removes time index entries of batches before `start` (they are in base order, as
    /// the running maximum only grows).
    async fn clear_time_entries_before(
        &self,
        tx: &Transaction,
        start: i64,
    ) -> Result<(), LogError> {
        let (b, e) = self.keys.time_from(i64::MIN);
        let entries = tx
            .get_range(&RangeOption::new(b, e).limit(INDEX_READ_LIMIT), true)
            .await?;
        for kv in entries {
            match self.keys.time_entry(&kv.key) {
                Some((_, base)) if base < start => tx.clear(&kv.key),
                _ => break,
            }
        }
        Ok(())
    }

    fn base_of(&self, key: &[u8]) -> Result<i64, LogError> {
        self.keys
            .index_base(key)
            .ok_or_else(|| LogError::Corrupt("undecodable batch index key".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_entries_round_trip() {
        let e = BatchIndex {
            base: 10,
            last: 14,
            max_timestamp: -1,
            size: 900,
            records: 5,
            spill: None,
        };
        assert_eq!(BatchIndex::decode(10, &e.encode()).unwrap(), e);
        let spilled = BatchIndex {
            spill: Some((77, 3)),
            ..e
        };
        assert_eq!(BatchIndex::decode(10, &spilled.encode()).unwrap(), spilled);
        assert_ne!(spilled.encode(), e.encode());
    }
}
