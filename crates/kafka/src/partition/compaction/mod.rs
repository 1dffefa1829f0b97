//! Log compaction: topics with `cleanup.policy` `compact` (or `compact,delete`) keep the
//! newest record of each key.
//!
//! Each partition's compactor runs beside its sequencer, as a task of the lease's holder:
//! every transaction it writes in first checks that lease without renewing it (a
//! conflicting read), so a new holder's claim makes it fail and the compactor stops with
//! its sequencer. A pass, every `kafka.compaction_check_interval_ms`:
//!
//! 1. **Plan** (snapshot reads): the mapped section runs from the checkpoint `("clean")`
//!    to the last stable offset (open transactions may still abort), capped at
//!    [`MAX_KEYS`] records. The cleanable section ends where the mapped one does, or
//!    before at the log's newest batch (which is never compacted, so every offset below
//!    the high watermark has a batch ending at or after it) and at the first batch newer
//!    than `min.compaction.lag.ms`; its part after the checkpoint is the dirty section.
//!    The pass runs when the dirty section's bytes are at least
//!    `min.cleanable.dirty.ratio` of the log's.
//! 2. **Map** (snapshot reads, outside any write): the newest offset of each key in the
//!    mapped section, by key hash ([`records::KeyHash`]), leaving out control batches and
//!    the records of aborted transactions.
//! 3. **Rewrite** from the log's first batch to the section's end, in transactions of at
//!    most [`TRANSACTION_BATCHES`] batches and [`TRANSACTION_BYTES`] bytes: a record goes
//!    when a newer record of its key exists, when it is a tombstone (null value) of a batch
//!    older than `delete.retention.ms`, or when it belongs to an aborted transaction; a
//!    batch keeps its offsets ([`records`]) and goes when nothing is left. The last
//!    transaction moves the checkpoint to the section's end.
//!
//! Produce and Fetch never wait on it: its transactions are small, sequencing goes on in
//! the sequencer's own task meanwhile (appends write only above the section), and readers
//! read snapshots. A kill between transactions loses nothing: each removes only records
//! whose key has a newer record that stays, and the next pass starts again from the
//! checkpoint.
//!
//! The subset: transaction markers (control batches) and keyless records are kept; a
//! batch kept in a spill (larger than one transaction) is neither rewritten nor mapped, and
//! tombstones after one are kept (removing them could bring back a value the spill holds);
//! tombstones expire by their batch's timestamp, not by when compaction first saw them
//! (Kafka's KIP-534 delete horizon); `max.compaction.lag.ms` is accepted and inert.

pub(crate) mod records;

use crate::keys::PartitionKeys;
use crate::metadata::settings::TopicConfig;
use crate::metadata::settings::broker::BrokerSettings;
use crate::metadata::topics::{Partition, Topics};
use crate::partition::lease::Lease;
use crate::partition::log::{Aborted, BatchIndex, Log, LogError, is_aborted};
use bytes::Bytes;
use ferry_stage::now_ms;
use ferry_store::{Database, StoreError, TransactionError};
use ferry_telemetry::kafka as m;
use records::{KeyHash, Records, RecordsError, Retained};
use std::collections::HashMap;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Most records one pass maps (a key takes about 40 bytes of memory): a longer dirty
/// section is compacted over several passes.
pub(crate) const MAX_KEYS: i64 = 100_000;
/// Most batches one compaction transaction reads or rewrites.
pub(crate) const TRANSACTION_BATCHES: usize = 128;
/// Most batch bytes one compaction transaction reads or rewrites (at least one batch).
pub(crate) const TRANSACTION_BYTES: usize = 1 << 20;

/// Why a compaction pass stopped.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum CompactionError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The log holds something undecodable.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The partition's sequencer lease is no longer the one this compactor works for.
    #[error("the partition's sequencer lease changed hands")]
    NotHolder,
}

impl TransactionError for CompactionError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) | Self::Log(LogError::Store(e)) => Some(e),
            _ => None,
        }
    }
}

/// What one pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Pass {
    /// Records removed.
    pub records: i64,
    /// Batches removed whole.
    pub batches: i64,
    /// Batch bytes freed.
    pub bytes: i64,
}

/// The sections of the log a pass maps and compacts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Plan {
    /// Where the dirty section begins (the checkpoint).
    cleaned: i64,
    /// Where the cleanable section ends: batches with smaller bases are compacted.
    end: i64,
    /// Where the mapped section ends (at or after `end`): its newest records supersede.
    mapped: i64,
}

/// What decides the fate of each record of a pass.
struct Rules<'a> {
    /// The newest offset of each key of the dirty section.
    newest: &'a HashMap<KeyHash, i64>,
    /// Batches whose newest timestamp is older than this lose their tombstones.
    tombstone_horizon: i64,
    /// Most bytes a batch's records may decompress to.
    max_decompressed: usize,
}

/// The compactor of one partition, working for the sequencer lease `holder`.
pub(crate) struct Compactor {
    /// The store.
    db: Database,
    /// The partition.
    partition: Partition,
    /// The sequencer lease it works for: (node, epoch).
    holder: (i32, i64),
    /// Most bytes a batch's records may decompress to (`kafka.max_request_size`: what a
    /// producer could have sent uncompressed).
    max_decompressed: usize,
}

impl Compactor {
    /// The compactor of `partition` for the sequencer holding its lease as `holder`.
    pub(crate) fn new(
        db: Database,
        partition: Partition,
        holder: (i32, i64),
        max_decompressed: usize,
    ) -> Self {
        Self {
            db,
            partition,
            holder,
            max_decompressed,
        }
    }

    /// Compacts the partition every `interval` while its topic's policy (its own, else the
    /// broker default of `broker_settings`) says so, until `stop` or until the lease
    /// changes hands.
    pub(crate) async fn run(
        self,
        topics: Topics,
        broker_settings: BrokerSettings,
        interval: Duration,
        stop: CancellationToken,
    ) {
        let p = &self.partition;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(interval) => {}
            }
            let Some(topic) = topics.get(&p.topic).filter(|t| t.meta.id == p.topic_id) else {
                continue;
            };
            let config = broker_settings.topic_defaults().resolve(&topic.meta.config);
            if !config.cleanup_policy().compacts() {
                continue;
            }
            // A pass stops with its sequencer: what it committed stands on its own.
            let outcome = tokio::select! {
                () = stop.cancelled() => return,
                outcome = self.pass(&config, now_ms() as i64) => outcome,
            };
            match outcome {
                Ok(Some(pass)) => {
                    let topic = p.topic.to_string();
                    metrics::counter!(m::COMPACTION_PASSES_TOTAL, m::LABEL_TOPIC => topic.clone())
                        .increment(1);
                    metrics::counter!(m::COMPACTED_RECORDS_TOTAL, m::LABEL_TOPIC => topic.clone())
                        .increment(pass.records.max(0) as u64);
                    metrics::counter!(m::COMPACTED_BYTES_TOTAL, m::LABEL_TOPIC => topic)
                        .increment(pass.bytes.max(0) as u64);
                    if pass.records > 0 {
                        info!(topic = %p.topic, partition = p.index, records = pass.records, batches = pass.batches, bytes = pass.bytes, "compacted");
                    }
                }
                Ok(None) => {}
                Err(CompactionError::NotHolder) => return,
                Err(e) => {
                    warn!(topic = %p.topic, partition = p.index, error = %e, "compaction failed; trying again next interval");
                }
            }
        }
    }

    /// One pass at time `now` (ms) under `config`: `None` when the log is not dirty
    /// enough to compact.
    ///
    /// # Errors
    /// [`CompactionError`]; what the pass committed before stays.
    pub(crate) async fn pass(
        &self,
        config: &TopicConfig,
        now: i64,
    ) -> Result<Option<Pass>, CompactionError> {
        let Some(plan) = self.plan(config, now).await? else {
            return Ok(None);
        };
        let newest = self.map(plan).await?;
        let rules = Rules {
            newest: &newest,
            tombstone_horizon: now.saturating_sub(config.delete_retention_ms()),
            max_decompressed: self.max_decompressed,
        };
        self.rewrite(plan, &rules).await.map(Some)
    }

    fn keys(&self) -> &PartitionKeys {
        &self.partition.keys
    }

    /// Finds the section to compact, or `None` when it is clean enough.
    async fn plan(&self, config: &TopicConfig, now: i64) -> Result<Option<Plan>, CompactionError> {
        let log = Log::new(self.keys());
        let tx = self.db.begin()?;
        let readable = log.readable(&tx).await?;
        let size = log.size(&tx).await?;
        let cleaned = log.cleaned(&tx, readable.bounds.start).await?;
        let newest_batch = log.newest_base(&tx, readable.bounds.high_watermark).await?;
        let cap = newest_batch.unwrap_or(i64::MIN);
        let too_young = now.saturating_sub(config.min_compaction_lag_ms());
        let mut plan = Plan {
            cleaned,
            end: cleaned,
            mapped: cleaned,
        };
        let (mut records, mut dirty, mut rewriting) = (0i64, 0i64, true);
        'scan: while plan.mapped < readable.stable {
            let tx = self.db.begin()?;
            let range = (plan.mapped, readable.stable);
            let page = log.index(&tx, range, TRANSACTION_BATCHES, true).await?;
            if page.is_empty() {
                break;
            }
            for entry in page {
                if records > 0 && records + i64::from(entry.records) > MAX_KEYS {
                    break 'scan;
                }
                records += i64::from(entry.records);
                plan.mapped = entry.last + 1;
                rewriting &= entry.base < cap && entry.max_timestamp <= too_young;
                if rewriting {
                    dirty += i64::from(entry.size);
                    plan.end = entry.last + 1;
                }
            }
        }
        let ratio = config.min_cleanable_dirty_ratio();
        if dirty == 0 || (dirty as f64) < ratio * size as f64 {
            return Ok(None);
        }
        Ok(Some(plan))
    }

    /// The newest offset of each key in the plan's mapped section.
    async fn map(&self, plan: Plan) -> Result<HashMap<KeyHash, i64>, CompactionError> {
        let log = Log::new(self.keys());
        let mut newest = HashMap::new();
        let mut from = plan.cleaned;
        loop {
            let tx = self.db.begin()?;
            let page = log
                .batches(
                    &tx,
                    (from, plan.mapped),
                    TRANSACTION_BYTES,
                    TRANSACTION_BATCHES,
                    true,
                )
                .await?;
            let Some((last, _)) = page.last() else {
                return Ok(newest);
            };
            let aborted = log.aborted(&tx, from, plan.mapped).await?;
            from = last.base + 1;
            for (_, batch) in page {
                // A batch kept in a spill is not mapped (nor rewritten).
                let Some(batch) = batch else { continue };
                let Some(records) = self.data_records(&batch, &aborted) else {
                    continue;
                };
                for r in records.records {
                    if let Some(key) = r.key {
                        newest.insert(key, r.offset);
                    }
                }
            }
        }
    }

    /// The records of `batch` that can supersede others: `None` for a control batch, one
    /// of an aborted transaction, or one that does not decode (kept whole, with a warning).
    fn data_records(&self, batch: &[u8], aborted: &[Aborted]) -> Option<Records> {
        match Records::decode(batch, self.max_decompressed) {
            Ok(r) if r.header.is_control() || is_aborted(aborted, &r.header) => None,
            Ok(r) => Some(r),
            Err(e) => {
                warn!(topic = %self.partition.topic, partition = self.partition.index, error = %e, "a batch is kept whole");
                None
            }
        }
    }

    /// Rewrites the cleanable section by `rules`, page by page, then moves the checkpoint.
    async fn rewrite(&self, plan: Plan, rules: &Rules<'_>) -> Result<Pass, CompactionError> {
        let mut pass = Pass::default();
        let (mut from, mut after_spill) = (i64::MIN, false);
        loop {
            let page = self
                .db
                .run(|tx| async move {
                    if Lease::held(&tx, &self.keys().lease(), self.holder, now_ms())
                        .await?
                        .is_none()
                    {
                        return Err(CompactionError::NotHolder);
                    }
                    let log = Log::new(self.keys());
                    let page = log
                        .batches(
                            &tx,
                            (from, plan.end),
                            TRANSACTION_BYTES,
                            TRANSACTION_BATCHES,
                            false,
                        )
                        .await?;
                    let Some((last, _)) = page.last() else {
                        log.set_cleaned(&tx, plan.end);
                        return Ok(None);
                    };
                    let next = last.base + 1;
                    let aborted = log.aborted(&tx, page[0].0.base, plan.end).await?;
                    let mut done = Pass::default();
                    let mut spill = after_spill;
                    for (entry, batch) in &page {
                        let Some(batch) = batch else {
                            spill = true;
                            continue;
                        };
                        let retained = self.retained(batch, entry, &aborted, rules, spill);
                        match &retained {
                            Retained::All => {}
                            Retained::Nothing => {
                                log.replace(&tx, entry, None);
                                log.pass_on_time_entries(&tx, entry).await?;
                            }
                            Retained::Some(batch, records) => {
                                log.replace(&tx, entry, Some((batch, *records)));
                            }
                        }
                        done.add(entry, &retained);
                    }
                    Ok(Some((next, spill, done)))
                })
                .await?;
            let Some((next, spill, done)) = page else {
                return Ok(pass);
            };
            (from, after_spill) = (next, spill);
            pass.records += done.records;
            pass.batches += done.batches;
            pass.bytes += done.bytes;
        }
    }

    /// What `rules` keep of `batch` (indexed by `entry`); `after_spill`: a batch kept in a
    /// spill comes before it, so its tombstones stay.
    fn retained(
        &self,
        batch: &Bytes,
        entry: &BatchIndex,
        aborted: &[Aborted],
        rules: &Rules<'_>,
        after_spill: bool,
    ) -> Retained {
        match decide(batch, entry, aborted, rules, after_spill) {
            Ok(retained) => retained,
            Err(e) => {
                warn!(topic = %self.partition.topic, partition = self.partition.index, error = %e, "a batch is kept whole");
                Retained::All
            }
        }
    }
}

impl Pass {
    /// Counts what compaction did to the batch of `entry`.
    fn add(&mut self, entry: &BatchIndex, retained: &Retained) {
        match retained {
            Retained::All => {}
            Retained::Nothing => {
                self.records += i64::from(entry.records);
                self.batches += 1;
                self.bytes += i64::from(entry.size);
            }
            Retained::Some(batch, records) => {
                self.records += i64::from(entry.records - records);
                self.bytes += i64::from(entry.size) - batch.len() as i64;
            }
        }
    }
}

/// What compaction keeps of one batch: a control batch whole, none of an aborted
/// transaction's, and of the others each record that is the newest of its key (or
/// keyless) unless it is a tombstone past the horizon.
fn decide(
    batch: &Bytes,
    entry: &BatchIndex,
    aborted: &[Aborted],
    rules: &Rules<'_>,
    after_spill: bool,
) -> Result<Retained, RecordsError> {
    let records = Records::decode(batch, rules.max_decompressed)?;
    if records.header.is_control() {
        return Ok(Retained::All);
    }
    if is_aborted(aborted, &records.header) {
        return Ok(Retained::Nothing);
    }
    let tombstones_expired = !after_spill && entry.max_timestamp < rules.tombstone_horizon;
    let keep: Vec<bool> = records
        .records
        .iter()
        .map(|r| match r.key {
            None => true,
            Some(key) => {
                let newest = rules.newest.get(&key).is_none_or(|n| *n <= r.offset);
                newest && !(r.tombstone && tombstones_expired)
            }
        })
        .collect();
    records.retain(batch, &keep)
}

#[cfg(test)]
mod tests;
