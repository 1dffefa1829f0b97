//! A topic on Ferry's own Kafka front as a route's source.
//!
//! One task per partition reads the partition's log directly from the offset the route
//! stored under `(P, "bridge", route, "front-offset", topic, partition)` and, in ONE
//! store transaction, stages the records read and advances that offset. The offset is
//! read without snapshot in that transaction, so two attempts (a retry after an unknown
//! commit result, or a second instance) cannot both stage the same records: the move is
//! exactly once. Records are read as a `read_committed` consumer reads them: up to the
//! last stable offset, without the batches of aborted transactions. An idle partition
//! sleeps on a watch of its high watermark, which the partition's sequencer writes when
//! it appends.
//!
//! A missing topic is created when `kafka.auto_create_topics` allows it; otherwise it is
//! logged, shown as down in `/readyz`, and retried with backoff. Partitions added while the
//! route runs (CreatePartitions on any instance) are read from when the topic cache sees
//! them.

use crate::bridge::mapping::KafkaRecord;
use crate::bridge::sink::{Backoff, endpoint_label};
use crate::bridge::{BridgeError, RouteContext, staged};
use crate::config::Endpoint;
use crate::kafka::Context;
use crate::kafka::batch::BatchHeader;
use crate::kafka::keys::{decode_i64, encode_i64};
use crate::kafka::log::{Aborted, Log, LogError};
use crate::kafka::topics::Partition;
use crate::stage::{NewMessage, StageError, now_ms};
use crate::store::{StoreError, TransactionError};
use crate::telemetry::bridge as metric;
use kafka_protocol::records::RecordBatchDecoder;
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
    Log(#[from] LogError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl TransactionError for MoveError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Stage(e) => e.store_error(),
            Self::Log(e) => e.store_error(),
            Self::Store(e) => Some(e),
        }
    }
}

impl From<MoveError> for BridgeError {
    fn from(e: MoveError) -> Self {
        match e {
            MoveError::Stage(e) => e.into(),
            MoveError::Store(e) => e.into(),
            MoveError::Log(e) => BridgeError::Config(format!("the Kafka front's log: {e}")),
        }
    }
}

/// Moves topic `topic`'s records into the route's stages until `shutdown`.
///
/// # Errors
/// [`BridgeError`] when the store fails.
pub async fn run(
    ctx: Arc<RouteContext>,
    kafka: Arc<Context>,
    topic: String,
    shutdown: CancellationToken,
) -> Result<(), BridgeError> {
    let label = endpoint_label(&Endpoint::KafkaTopic(topic.clone()));
    let mut backoff = Backoff::new(
        Duration::from_millis(ctx.config.retry_initial_ms),
        Duration::from_millis(ctx.config.retry_max_ms),
    );
    let found = loop {
        match kafka
            .topic_or_create(&topic, kafka.config.auto_create_topics)
            .await
        {
            Ok(t) => break t,
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
    info!(route = %ctx.config.name, topic = %topic, partitions = found.partitions.len(), "reading from the Kafka front");
    let mut changes = kafka.topics.changes();
    let mut tasks = JoinSet::new();
    let spawn = |tasks: &mut JoinSet<_>, p: &Partition| {
        tasks.spawn(partition(
            ctx.clone(),
            p.clone(),
            label.clone(),
            shutdown.clone(),
        ));
    };
    for p in &found.partitions {
        spawn(&mut tasks, p);
    }
    let mut reading = found.partitions.len();
    let mut result = Ok(());
    loop {
        tokio::select! {
            changed = changes.changed(), if result.is_ok() => {
                if changed.is_err() {
                    break;
                }
                // Partitions added since: read them too.
                let Some(t) = kafka.topics.get(&topic) else { continue };
                for p in t.partitions.iter().skip(reading) {
                    info!(route = %ctx.config.name, topic = %topic, partition = p.index, "reading a new partition");
                    spawn(&mut tasks, p);
                }
                reading = reading.max(t.partitions.len());
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

/// Moves one partition's records until `shutdown`.
async fn partition(
    ctx: Arc<RouteContext>,
    p: Partition,
    label: String,
    shutdown: CancellationToken,
) -> Result<(), MoveError> {
    let key = offset_key(&ctx, &p.topic, p.index);
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
                let (ctx, p, key) = (&ctx, &p, &key);
                async move {
                    let log = Log::new(&p.keys);
                    let bounds = log.bounds(&tx, true).await?;
                    let stable = log.last_stable(&tx, bounds.high_watermark).await?;
                    // Not a snapshot read: a concurrent move of the same records conflicts.
                    let mut from = decode_i64(tx.get(key, false).await?.as_deref());
                    if from > bounds.high_watermark {
                        // The topic was deleted and recreated: its log starts over.
                        from = bounds.start;
                    }
                    from = from.max(bounds.start);
                    if from >= stable {
                        return Ok(None);
                    }
                    let read = log.read(&tx, from, stable, READ_BYTES).await?;
                    let aborted = log.aborted(&tx, from, stable).await?;
                    let decoded = decode(&read.bytes, from, &aborted)?;
                    ctx.stages.stage_in(&tx, &decoded.messages, now).await?;
                    tx.set(key, &encode_i64(decoded.next.max(from)));
                    Ok::<_, MoveError>(Some(decoded))
                }
            })
            .await?;
        match moved {
            Some(decoded) => {
                let bytes: usize = decoded.messages.iter().map(|m| m.body.len()).sum();
                metrics::counter!(metric::MESSAGES_IN_TOTAL, &labels)
                    .increment(decoded.messages.len() as u64);
                metrics::counter!(metric::BYTES_IN_TOTAL, &labels).increment(bytes as u64);
                metrics::counter!(metric::MAPPING_FALLBACKS_TOTAL, &labels)
                    .increment(decoded.fallbacks as u64);
                for (first, last, why) in &decoded.undecodable {
                    error!(route = %ctx.config.name, topic = %p.topic, partition = p.index, first, last, error = %why, "skipping a record batch that does not decode; it stays in the topic");
                    metrics::counter!(metric::UNDECODABLE_RECORDS_TOTAL, &labels)
                        .increment((last - first + 1) as u64);
                }
            }
            None => {
                let watch = {
                    let tx = ctx.db.begin()?;
                    let hw = decode_i64(tx.get(&p.keys.high_watermark(), false).await?.as_deref());
                    let stable = Log::new(&p.keys).last_stable(&tx, hw).await?;
                    let at = decode_i64(tx.get(&key, false).await?.as_deref());
                    if stable > at {
                        continue;
                    }
                    let watch = tx.watch(&p.keys.high_watermark());
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

/// What one read of a partition log yields for the route.
#[derive(Debug, Default)]
struct Decoded {
    /// The stage messages of the records at or after the offset read from.
    messages: Vec<NewMessage>,
    /// The offset after the last record read.
    next: i64,
    /// Header values that followed the fallback rule.
    fallbacks: usize,
    /// Batches that do not decode: their first and last offsets and why. They are skipped
    /// (they stay in the topic), so one malformed batch cannot stop the route.
    undecodable: Vec<(i64, i64, String)>,
}

/// Decodes the batches of `bytes` (a read of the log) from offset `from`, batch by batch,
/// passing over control batches and the batches of `aborted` transactions.
///
/// # Errors
/// [`LogError::Corrupt`] when the log's own framing (a batch header) is broken.
fn decode(bytes: &[u8], from: i64, aborted: &[Aborted]) -> Result<Decoded, LogError> {
    let mut out = Decoded {
        next: from,
        ..Decoded::default()
    };
    let mut rest = bytes;
    while !rest.is_empty() {
        let header = BatchHeader::parse(rest)
            .map_err(|e| LogError::Corrupt(format!("a batch header in the log: {e}")))?;
        let (batch, tail) = rest.split_at(header.size.min(rest.len()));
        rest = tail;
        let last = header.base_offset + header.offset_span() - 1;
        out.next = out.next.max(last + 1);
        let aborted_batch = header.is_transactional()
            && aborted
                .iter()
                .any(|a| a.covers(header.producer_id, header.base_offset));
        if header.is_control() || aborted_batch {
            continue;
        }
        let records = match RecordBatchDecoder::decode(&mut bytes::Bytes::copy_from_slice(batch)) {
            Ok(set) => set.records,
            Err(e) => {
                out.undecodable
                    .push((header.base_offset, last, e.to_string()));
                continue;
            }
        };
        for record in records {
            if record.offset < from || record.control {
                continue;
            }
            let mapped = staged::from_kafka(&KafkaRecord {
                key: record.key.as_ref().map(|k| k.to_vec()),
                value: record.value.as_ref().map(|v| v.to_vec()),
                headers: record
                    .headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.as_ref().map(|v| v.to_vec())))
                    .collect(),
                timestamp_ms: Some(record.timestamp),
            });
            out.fallbacks += mapped.fallbacks.len();
            out.messages.push(mapped.message);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::batch::tests::batch;
    use kafka_protocol::records::Compression;

    /// Rewrites the only record of `b` (no headers) to declare `i32::MAX` headers, with the
    /// lengths and the CRC fixed up so that only the count is wrong.
    fn with_huge_header_count(mut b: Vec<u8>) -> Vec<u8> {
        assert_eq!(b.pop(), Some(0), "the record ends with its header count, 0");
        b.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]); // zigzag varint of i32::MAX
        b[61] += 8; // the record's length (zigzag: +4 bytes)
        let length = i32::from_be_bytes(b[8..12].try_into().unwrap()) + 4;
        b[8..12].copy_from_slice(&length.to_be_bytes());
        let crc = crc32c::crc32c(&b[21..]);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        b
    }

    #[test]
    fn a_batch_declaring_more_headers_than_its_bytes_is_skipped_not_allocated() {
        let good = batch(1, Compression::None, None);
        let mut bad = with_huge_header_count(batch(1, Compression::None, None));
        bad[0..8].copy_from_slice(&1i64.to_be_bytes()); // the log's offset for it
        let mut log = good.clone();
        log.extend_from_slice(&bad);
        let decoded = decode(&log, 0, &[]).unwrap();
        assert_eq!(decoded.messages.len(), 1, "the good batch is read");
        assert_eq!(decoded.next, 2, "the bad one is passed over");
        assert_eq!(decoded.undecodable.len(), 1);
        assert_eq!(decoded.undecodable[0].0..=decoded.undecodable[0].1, 1..=1);
    }
}
