//! A share group's dead-letter topic (`errors.deadletterqueue.topic.name`, the group
//! setting KIP-1191 names): records the group archives — rejected, or released after
//! `share.delivery.count.limit` deliveries — are copied to that topic with why, how often
//! they were delivered and where they came from as headers. Without one, archived records
//! are dropped, as Kafka archives them.
//!
//! Archiving moves a record's offset into the share-partition's dead stage (the stage's
//! dead-lettering, in the transaction that settles it); this loop takes it from there and
//! appends the record to the dead-letter topic's partition (the source partition's index,
//! modulo the topic's partitions) through the front's port **in the same transaction**, so
//! each archived record is copied exactly once, whatever crashes. It sleeps on store
//! watches of the dead stages, not a timer, set before each pass reads them.

use super::ShareGroups;
use super::partition::SharePartition;
use crate::Context;
use crate::partition::log::{Log, LogError};
use crate::port::{KafkaPort, KafkaRecord, decode_committed_with};
use ferry_stage::{Delivery, StageError, now_ms};
use futures::FutureExt;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// Archived records one transaction copies.
const BATCH: usize = 100;
/// The longest a batch of one record may read of the log.
const READ_BYTES: usize = 1 << 20;
/// The pause after a failed pass.
const RETRY: Duration = Duration::from_secs(1);

/// The headers a copied record carries, after its own.
mod headers {
    /// The share group that archived it.
    pub(crate) const GROUP: &str = "ferry.dlq.group";
    /// Its topic.
    pub(crate) const TOPIC: &str = "ferry.dlq.topic";
    /// Its partition.
    pub(crate) const PARTITION: &str = "ferry.dlq.partition";
    /// Its offset.
    pub(crate) const OFFSET: &str = "ferry.dlq.offset";
    /// How many times it was delivered.
    pub(crate) const DELIVERY_COUNT: &str = "ferry.dlq.delivery.count";
    /// Why it was archived: `rejected` or `delivery_limit`.
    pub(crate) const REASON: &str = "ferry.dlq.reason";
}

/// Copies archived records until `shutdown`.
pub(crate) async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let port = KafkaPort::new(ctx.clone());
    loop {
        let opened = ctx.share.inner.opened.notified();
        let partitions = ctx.share.opened();
        // Watched before the pass looks: a record archived after the pass read its dead
        // stage wakes the loop (watched after, it would wait for the next one).
        let archived = watch(&ctx.share, &partitions).await;
        let mut failed = false;
        for sp in &partitions {
            loop {
                match forward(&ctx, &port, sp).await {
                    Ok(n) if n == BATCH => continue,
                    Ok(_) => break,
                    Err(e) => {
                        warn!(group = sp.group, topic = %sp.log.topic, partition = sp.log.index, error = %e, "cannot copy archived records to the dead-letter topic");
                        failed = true;
                        break;
                    }
                }
            }
        }
        let wake = match archived {
            Some(wake) if !failed => wake,
            _ => tokio::time::sleep(RETRY).boxed(),
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = opened => {}
            () = wake => {}
        }
    }
}

/// A future that completes when a record is archived into one of `partitions`' dead stages
/// after this call.
async fn watch(
    groups: &ShareGroups,
    partitions: &[SharePartition],
) -> Option<futures::future::BoxFuture<'static, ()>> {
    let tx = groups.inner.db.begin().ok()?;
    let waits: Vec<_> = partitions
        .iter()
        .map(|sp| sp.dead.watch_ready(&tx).wait().map(|_| ()).boxed())
        .collect();
    if waits.is_empty() {
        return Some(futures::future::pending().boxed());
    }
    tx.commit().await.ok()?;
    Some(futures::future::select_all(waits).map(|_| ()).boxed())
}

/// Why a pass failed.
#[derive(Debug, thiserror::Error)]
enum ForwardError {
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error(transparent)]
    Log(#[from] LogError),
    #[error(transparent)]
    Port(#[from] crate::port::KafkaPortError),
    #[error(transparent)]
    Store(#[from] ferry_store::StoreError),
    #[error(transparent)]
    Share(#[from] super::partition::ShareError),
}

impl ferry_store::TransactionError for ForwardError {
    fn store_error(&self) -> Option<&ferry_store::StoreError> {
        match self {
            Self::Store(e) | Self::Stage(StageError::Store(e)) | Self::Log(LogError::Store(e)) => {
                Some(e)
            }
            _ => None,
        }
    }
}

/// Copies up to [`BATCH`] of `sp`'s archived records to its group's dead-letter topic (or
/// drops them without one), in one transaction; returns how many it took.
async fn forward(
    ctx: &Context,
    port: &KafkaPort,
    sp: &SharePartition,
) -> Result<usize, ForwardError> {
    // Not the default on a failure: that has no dead-letter topic, and would drop records.
    let config = ctx.share.config(&sp.group).await?;
    let target = match &config.dead_letter_topic {
        Some(topic) => {
            let partitions = port.open_topic(topic).await?;
            let index = usize::try_from(sp.log.index).unwrap_or(0) % partitions.len().max(1);
            partitions.into_iter().nth(index)
        }
        None => None,
    };
    let max_decompressed = ctx.config.max_request_size;
    let taken = ctx
        .share
        .inner
        .db
        .run(|tx| {
            let target = target.as_ref();
            async move {
                let now = now_ms();
                let dead: Vec<Delivery> = sp.dead.pop_in(&tx, BATCH, now).await?;
                let Some(target) = target else {
                    return Ok::<_, ForwardError>(dead.len());
                };
                // A rejected record's delivery count is its dead letter's why; one archived
                // at the limit was delivered exactly that often.
                let ids: Vec<_> = dead.iter().map(|d| d.id).collect();
                let whys = sp.dead.refusals(&ids).await?;
                let limit = sp.stage.meta().max_deliveries;
                let mut records = Vec::with_capacity(dead.len());
                for (d, why) in dead.iter().zip(whys) {
                    let count = why.and_then(|w| w.parse().ok()).unwrap_or(limit);
                    let Ok(offset) = d.body.as_ref().try_into().map(i64::from_be_bytes) else {
                        continue;
                    };
                    let read = Log::new(&sp.log.keys)
                        .read(&tx, offset, offset + 1, READ_BYTES, true)
                        .await?
                        .fill(ctx.large.spills())
                        .await?;
                    let mut found = None;
                    decode_committed_with(&read.bytes, offset, &[], max_decompressed, |o, r| {
                        if o == offset {
                            found = Some(r);
                        }
                    })?;
                    // A record retention or compaction removed meanwhile has nothing to copy.
                    let Some(record) = found else { continue };
                    records.push(labelled(record, sp, offset, d, count));
                }
                port.append_in(&tx, target, records, now).await?;
                Ok(dead.len())
            }
        })
        .await?;
    if taken > 0 {
        debug!(group = sp.group, topic = %sp.log.topic, partition = sp.log.index, taken, "archived share records forwarded");
    }
    Ok(taken)
}

/// `record` of `sp` at `offset`, archived as `dead` says after `deliveries`, with the
/// dead-letter headers.
fn labelled(
    mut record: KafkaRecord,
    sp: &SharePartition,
    offset: i64,
    dead: &Delivery,
    deliveries: u32,
) -> KafkaRecord {
    let reason = dead
        .envelope
        .dead_letter
        .map_or("archived", |d| d.reason.as_str());
    let header = |name: &str, value: String| (name.to_owned(), Some(value.into_bytes()));
    record.headers.extend([
        header(headers::GROUP, sp.group.clone()),
        header(headers::TOPIC, sp.log.topic.to_string()),
        header(headers::PARTITION, sp.log.index.to_string()),
        header(headers::OFFSET, offset.to_string()),
        header(headers::DELIVERY_COUNT, deliveries.to_string()),
        header(headers::REASON, reason.to_owned()),
    ]);
    record
}

impl ShareGroups {
    /// Every share-partition this instance has opened.
    pub(crate) fn opened(&self) -> Vec<SharePartition> {
        self.inner.partitions.lock().values().cloned().collect()
    }
}
