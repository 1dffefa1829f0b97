//! A topic on Ferry's own Kafka front as a route's source.
//!
//! One task per partition reads the partition's log directly from the offset the route
//! stored under `(P, "bridge", route, "front-offset", topic, partition)` and, in ONE
//! store transaction, hands the records read to the route (written straight to a
//! destination on a front, or staged: [`crate::route`]) and advances that offset. The offset is
//! read without snapshot in that transaction, so two attempts (a retry after an unknown
//! commit result, or a second instance) cannot both stage the same records: the move is
//! exactly once. Records are read as a `read_committed` consumer reads them: up to the
//! last stable offset, without the batches of aborted transactions. An idle partition
//! sleeps on a watch of its high watermark, which the partition's sequencer writes when
//! it appends.
//!
//! A read holding a record whose body the route's stages cannot copy in one transaction
//! (a large record, [`spill::spills`]) stages nothing in that transaction: the body is
//! written to a spill held by the route's lease holder first ([`RouteStages::prepare`]),
//! then one transaction checks the offset is still where the read began, stages the read
//! by reference to the spill, advances the offset and lets go of the hold.
//!
//! A missing topic is created when `kafka.auto_create_topics` allows it; otherwise it is
//! logged, shown as down in `/readyz`, and retried with backoff. Partitions added while the
//! route runs (CreatePartitions on any instance) are read from when the topic cache sees
//! them.

use crate::mapping::kafka_to_amqp;
use crate::route::{Bridged, Direct, RouteStages};
use crate::sink::{Backoff, endpoint_label};
use crate::{BridgeError, RouteContext};
use ferry_config::Endpoint;
use ferry_kafka::port::{CommittedRead, KafkaPort, KafkaPortError, PartitionRef};
use ferry_stage::{Spill, StageError, now_ms, spill};
use ferry_store::{StoreError, TransactionError};
use ferry_telemetry::bridge as metric;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

/// Log bytes read per transaction.
const READ_BYTES: usize = 1024 * 1024;

/// Why one move failed.
#[derive(Debug, thiserror::Error)]
enum MoveError {
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error(transparent)]
    Port(#[from] KafkaPortError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl TransactionError for MoveError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Stage(e) => e.store_error(),
            Self::Port(e) => e.store_error(),
            Self::Store(e) => Some(e),
        }
    }
}

impl From<MoveError> for BridgeError {
    fn from(e: MoveError) -> Self {
        match e {
            MoveError::Stage(e) => e.into(),
            MoveError::Store(e) => e.into(),
            MoveError::Port(e) => BridgeError::Config(e.to_string()),
        }
    }
}

/// Moves topic `topic`'s records into the route's stages until `shutdown`.
///
/// # Errors
/// [`BridgeError`] when the store fails.
pub(crate) async fn run(
    ctx: Arc<RouteContext>,
    kafka: KafkaPort,
    topic: String,
    shutdown: CancellationToken,
) -> Result<(), BridgeError> {
    let label = endpoint_label(&Endpoint::KafkaTopic(topic.clone()));
    let mut backoff = Backoff::new(
        Duration::from_millis(ctx.config.retry_initial_ms),
        Duration::from_millis(ctx.config.retry_max_ms),
    );
    let found = loop {
        match kafka.open_topic(&topic).await {
            Ok(partitions) => break partitions,
            Err(e) => {
                warn!(route = %ctx.config.name, source = %label, error = %e, "cannot read from the Kafka front; retrying");
                ctx.status.down(&label, e.to_string());
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            () = tokio::time::sleep(backoff.next_delay()) => {}
        }
    };
    ctx.status.up(&label);
    info!(route = %ctx.config.name, topic = %topic, partitions = found.len(), "reading from the Kafka front");
    let mut changes = kafka.topic_changes();
    let mut tasks = JoinSet::new();
    let spawn = |tasks: &mut JoinSet<_>, p: &PartitionRef| {
        tasks.spawn(partition(
            ctx.clone(),
            kafka.clone(),
            p.clone(),
            label.clone(),
            shutdown.clone(),
        ));
    };
    for p in &found {
        spawn(&mut tasks, p);
    }
    let mut reading = found.len();
    let mut result = Ok(());
    loop {
        tokio::select! {
            changed = changes.changed(), if result.is_ok() => {
                if changed.is_err() {
                    break;
                }
                // Partitions added since: read them too.
                let Some(partitions) = kafka.partitions(&topic) else { continue };
                for p in partitions.iter().skip(reading) {
                    info!(route = %ctx.config.name, topic = %topic, partition = p.index(), "reading a new partition");
                    spawn(&mut tasks, p);
                }
                reading = reading.max(partitions.len());
            }
            r = tasks.join_next() => match r {
                None => break,
                Some(Ok(Err(e))) if result.is_ok() => {
                    shutdown.cancel();
                    result = Err(e.into());
                }
                Some(_) => {}
            },
        }
    }
    while tasks.join_next().await.is_some() {}
    result
}

/// The key of the next offset the route reads from `topic`'s partition `index`.
fn offset_key(ctx: &RouteContext, topic: &str, index: i32) -> Vec<u8> {
    ctx.keys.space().pack(&("front-offset", topic, index))
}

/// An offset as stored under [`offset_key`]: 8 bytes, little-endian.
fn encode_offset(offset: i64) -> [u8; 8] {
    offset.to_le_bytes()
}

/// A stored offset; a missing (or malformed) one is 0, the start of the log.
fn decode_offset(stored: Option<&[u8]>) -> i64 {
    stored
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, i64::from_le_bytes)
}

/// Moves one partition's records until `shutdown`.
async fn partition(
    ctx: Arc<RouteContext>,
    kafka: KafkaPort,
    p: PartitionRef,
    label: String,
    shutdown: CancellationToken,
) -> Result<(), MoveError> {
    let key = offset_key(&ctx, p.topic(), p.index());
    let labels = [
        (metric::LABEL_ROUTE, ctx.config.name.clone()),
        (metric::LABEL_ENDPOINT, label),
    ];
    loop {
        if shutdown.is_cancelled() {
            return Ok(());
        }
        let now = now_ms();
        let moved = ctx
            .db
            .run(|tx| {
                let (ctx, kafka, p, key) = (&ctx, &kafka, &p, &key);
                async move {
                    // Not a snapshot read: a concurrent move of the same records conflicts.
                    let from = decode_offset(tx.get(key, false).await?.as_deref());
                    let Some(read) = kafka.read_committed_in(&tx, p, from, READ_BYTES).await?
                    else {
                        return Ok(Move::Idle);
                    };
                    if read.records.iter().any(|r| too_large(&ctx.stages, r)) {
                        return Ok(Move::Large { from, read });
                    }
                    let mut staged = Staged::of(read);
                    let messages: Vec<&Bridged> = staged.messages.iter().collect();
                    staged.direct = ctx.stages.stage_in(&tx, &messages, now).await?;
                    tx.set(key, &encode_offset(staged.next));
                    Ok::<_, MoveError>(Move::Staged(staged))
                }
            })
            .await?;
        let staged = match moved {
            Move::Idle => None,
            Move::Staged(staged) => Some(staged),
            Move::Large { from, read } => match stage_large(&ctx, &key, from, read, now).await? {
                Some(staged) => Some(staged),
                // Another attempt moved these records meanwhile: read again.
                None => continue,
            },
        };
        match staged {
            Some(staged) => {
                ctx.stages.count_direct(&staged.direct);
                let bytes: u64 = staged.messages.iter().map(Bridged::len).sum();
                metrics::counter!(metric::MESSAGES_IN_TOTAL, &labels)
                    .increment(staged.messages.len() as u64);
                metrics::counter!(metric::BYTES_IN_TOTAL, &labels).increment(bytes);
                metrics::counter!(metric::MAPPING_FALLBACKS_TOTAL, &labels)
                    .increment(staged.fallbacks as u64);
                for (first, last, why) in &staged.undecodable {
                    error!(route = %ctx.config.name, topic = %p.topic(), partition = p.index(), first, last, error = %why, "skipping a record batch that does not decode; it stays in the topic");
                    metrics::counter!(metric::UNDECODABLE_RECORDS_TOTAL, &labels)
                        .increment((last - first + 1) as u64);
                }
            }
            None => {
                let watch = {
                    let tx = ctx.db.begin()?;
                    let (stable, watch) = kafka.watch_in(&tx, &p).await?;
                    let at = decode_offset(tx.get(&key, false).await?.as_deref());
                    if stable > at {
                        continue;
                    }
                    tx.commit().await?;
                    watch
                };
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(()),
                    _ = watch => {}
                }
            }
        }
    }
}

/// What one transaction of [`partition`] found to do.
enum Move {
    /// Nothing to read: wait for the high watermark.
    Idle,
    /// Staged this.
    Staged(Staged),
    /// Read this from `from`, which holds a record too large to stage in the transaction
    /// ([`stage_large`]); nothing was written.
    Large {
        /// The offset the read began at.
        from: i64,
        /// What it read.
        read: CommittedRead,
    },
}

/// Whether the route's stages cannot copy record `r`'s body in one transaction.
fn too_large(stages: &RouteStages, r: &ferry_kafka::port::KafkaRecord) -> bool {
    let len = r.value.as_ref().map_or(0, |v| v.len());
    spill::spills(len as u64, stages.destinations.len())
}

/// Stages `read` (begun at offset `from`), which holds a record too large to copy in one
/// transaction: each such body is written to a spill held by the route's holder, then one
/// transaction stages the read by reference, advances the offset stored at `key` and
/// lets go of the spills — if the offset is still `from`. Otherwise (another attempt moved
/// these records) it only lets go of the spills, which are then freed; `None`.
async fn stage_large(
    ctx: &RouteContext,
    key: &[u8],
    from: i64,
    read: CommittedRead,
    now: u64,
) -> Result<Option<Staged>, MoveError> {
    let mut fallbacks = 0;
    let mut messages = Vec::with_capacity(read.records.len());
    let mut held: Vec<Spill> = Vec::new();
    for r in &read.records {
        let mapped = kafka_to_amqp(r, "");
        fallbacks += mapped.fallbacks.len();
        let prepared = ctx.stages.prepare(ctx.holder, mapped.message).await?;
        held.extend(prepared.held);
        messages.push(prepared.message);
    }
    let (messages_ref, held) = (&messages, &held);
    let staged = ctx
        .db
        .run(|tx| async move {
            let still_there = decode_offset(tx.get(key, false).await?.as_deref()) == from;
            if !still_there {
                ctx.stages.let_go_in(&tx, ctx.holder, held).await?;
                return Ok(None);
            }
            let refs: Vec<&Bridged> = messages_ref.iter().collect();
            let direct = ctx.stages.stage_in(&tx, &refs, now).await?;
            tx.set(key, &encode_offset(read.next));
            ctx.stages.let_go_in(&tx, ctx.holder, held).await?;
            Ok::<_, MoveError>(Some(direct))
        })
        .await?;
    Ok(staged.map(|direct| Staged {
        messages,
        next: read.next,
        fallbacks,
        undecodable: read.undecodable,
        direct,
    }))
}

/// What one read of a partition hands to the route.
struct Staged {
    /// The messages of the records read.
    messages: Vec<Bridged>,
    /// The offset to read from next.
    next: i64,
    /// Header values that followed the fallback rule.
    fallbacks: usize,
    /// Batches passed over because they do not decode: first and last offsets, and why.
    undecodable: Vec<(i64, i64, String)>,
    /// What went straight to destinations.
    direct: Direct,
}

impl Staged {
    /// The route's messages of the records `read` found (nothing handed over yet).
    fn of(read: CommittedRead) -> Self {
        let mut fallbacks = 0;
        let messages = read
            .records
            .iter()
            .map(|r| {
                let mapped = kafka_to_amqp(r, "");
                fallbacks += mapped.fallbacks.len();
                Bridged::inline(mapped.message)
            })
            .collect();
        Self {
            messages,
            next: read.next,
            fallbacks,
            undecodable: read.undecodable,
            direct: Direct::default(),
        }
    }
}
