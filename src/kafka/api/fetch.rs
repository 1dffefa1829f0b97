//! Fetch: whole batches from each partition's log, bounded by the partition's and the
//! request's byte limits (the first batch always fits, as Kafka's KIP-74 says), with the
//! high watermark and log start offset; an offset outside the log is
//! `OFFSET_OUT_OF_RANGE`. When less than `min_bytes` is there, the request long-polls:
//! it sleeps on store watches of the partitions' high watermarks — which the sequencer
//! writes when it appends — until one moves or `max_wait_ms` passes. No polling loop.
//!
//! `read_committed` (isolation level 1) reads stop at the last stable offset and name the
//! aborted transactions in what they return, so the client drops their batches.
//!
//! A topic the principal may not Read is `TOPIC_AUTHORIZATION_FAILED` in every partition.
//!
//! Fetch sessions (KIP-227) are not kept: every answer has session id 0, which tells
//! clients to send full requests.

use super::{Reply, Session};
use crate::kafka::Context;
use crate::kafka::acls::Operation;
use crate::kafka::log::{Aborted, Log, LogError, Read, Readable};
use crate::kafka::topics::Partition;
use crate::store::{Transaction, Watch};
use crate::telemetry::kafka as m;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProducerId, ResponseKind, TopicName};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tracing::warn;

/// Fetch's isolation level for `read_committed` consumers.
const READ_COMMITTED: i8 = 1;

/// One partition asked for.
struct Wanted {
    /// Its index.
    index: i32,
    /// The partition, or the error code answering it (unknown, not authorized).
    partition: Result<Partition, i16>,
    /// The offset to read from.
    offset: i64,
    /// The most bytes to return from it.
    max_bytes: usize,
}

/// One pass over the partitions.
struct Pass {
    /// The answer as it stands.
    topics: Vec<FetchableTopicResponse>,
    /// Record bytes in it.
    bytes: usize,
    /// Whether some partition has an error (answered at once).
    errors: bool,
    /// Bytes and records per topic, for the metrics.
    per_topic: HashMap<String, (u64, u64)>,
}

/// Answers a Fetch, long-polling in the returned future.
pub fn handle(ctx: &Arc<Context>, session: &Session, version: i16, request: FetchRequest) -> Reply {
    if request.session_id != 0 {
        return Reply::Now(ResponseKind::Fetch(
            FetchResponse::default().with_error_code(ResponseError::FetchSessionIdNotFound.code()),
        ));
    }
    let access = session.access(ctx);
    let readable = move |topic: &str| access.topic(Operation::Read, topic);
    let ctx = ctx.clone();
    Reply::Later(Box::pin(async move {
        long_poll(&ctx, &readable, version, request).await
    }))
}

/// Reads the partitions, waiting on their high watermarks until `min_bytes` are there or
/// the request's time is up; `readable` says which topics the caller may read.
async fn long_poll(
    ctx: &Context,
    readable: &impl Fn(&str) -> bool,
    version: i16,
    request: FetchRequest,
) -> ResponseKind {
    let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let deadline = tokio::time::Instant::now() + wait;
    let min_bytes = usize::try_from(request.min_bytes).unwrap_or(0);
    let read_committed = request.isolation_level == READ_COMMITTED;
    let max_bytes = if version >= 3 {
        usize::try_from(request.max_bytes).unwrap_or(0)
    } else {
        usize::MAX
    };
    let wanted: Vec<(TopicName, Vec<Wanted>)> = request
        .topics
        .into_iter()
        .map(|t| {
            let name = t.topic.0.as_str();
            let topic = readable(name)
                .then(|| ctx.topics.get(name))
                .ok_or(ResponseError::TopicAuthorizationFailed.code());
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| Wanted {
                    index: p.partition,
                    partition: topic.clone().and_then(|topic| {
                        topic
                            .and_then(|topic| topic.partition(p.partition).cloned())
                            .ok_or(ResponseError::UnknownTopicOrPartition.code())
                    }),
                    offset: p.fetch_offset,
                    max_bytes: usize::try_from(p.partition_max_bytes).unwrap_or(0),
                })
                .collect();
            (t.topic, partitions)
        })
        .collect();
    loop {
        let tx = match ctx.db.begin() {
            Ok(tx) => tx,
            Err(e) => return storage_error(&e),
        };
        let pass = read_pass(&tx, &wanted, max_bytes, read_committed).await;
        let done = pass.bytes >= min_bytes
            || pass.errors
            || tokio::time::Instant::now() >= deadline
            || ctx.shutdown.is_cancelled();
        if done {
            return answer(pass);
        }
        let watches: Vec<Watch> = wanted
            .iter()
            .flat_map(|(_, ps)| ps.iter())
            .filter_map(|w| w.partition.as_ref().ok())
            .map(|p| tx.watch(&p.keys.high_watermark()))
            .collect();
        if watches.is_empty() || tx.commit().await.is_err() {
            return answer(pass);
        }
        tokio::select! {
            _ = futures::future::select_all(watches) => {}
            () = tokio::time::sleep_until(deadline) => {}
            () = ctx.shutdown.cancelled() => {}
        }
    }
}

/// Reads every wanted partition once, within `tx`.
async fn read_pass(
    tx: &Transaction,
    wanted: &[(TopicName, Vec<Wanted>)],
    max_bytes: usize,
    read_committed: bool,
) -> Pass {
    let mut pass = Pass {
        topics: Vec::with_capacity(wanted.len()),
        bytes: 0,
        errors: false,
        per_topic: HashMap::new(),
    };
    for (name, partitions) in wanted {
        let mut out = Vec::with_capacity(partitions.len());
        for w in partitions {
            let data = PartitionData::default().with_partition_index(w.index);
            let p = match &w.partition {
                Ok(p) => p,
                Err(code) => {
                    pass.errors = true;
                    out.push(data.with_error_code(*code));
                    continue;
                }
            };
            let log = Log::new(&p.keys);
            let Readable { bounds, stable } = match log.readable(tx).await {
                Ok(found) => found,
                Err(e) => {
                    warn!(topic = %p.topic, partition = w.index, error = %e, "cannot read the log bounds");
                    pass.errors = true;
                    out.push(data.with_error_code(ResponseError::KafkaStorageError.code()));
                    continue;
                }
            };
            let data = data
                .with_high_watermark(bounds.high_watermark)
                .with_last_stable_offset(stable)
                .with_log_start_offset(bounds.start);
            if w.offset < bounds.start || w.offset > bounds.high_watermark {
                pass.errors = true;
                out.push(data.with_error_code(ResponseError::OffsetOutOfRange.code()));
                continue;
            }
            let until = if read_committed {
                stable
            } else {
                bounds.high_watermark
            };
            let room = w.max_bytes.min(max_bytes.saturating_sub(pass.bytes));
            // Only the first partition to return data may exceed its room (KIP-74), as
            // Kafka's ReplicaManager reads with `minOneMessage` until one has.
            let first = pass.bytes == 0;
            if w.offset >= until || (room == 0 && !first) {
                out.push(data.with_records(Some(Default::default())));
                continue;
            }
            match read(&log, tx, w.offset, until, room, first, read_committed).await {
                Ok((read, aborted)) => {
                    let data = data.with_aborted_transactions(aborted.map(|list| {
                        list.into_iter()
                            .map(|a| {
                                AbortedTransaction::default()
                                    .with_producer_id(ProducerId(a.producer_id))
                                    .with_first_offset(a.first)
                            })
                            .collect()
                    }));
                    pass.bytes += read.bytes.len();
                    let entry = pass.per_topic.entry(p.topic.to_string()).or_default();
                    entry.0 += read.bytes.len() as u64;
                    entry.1 += read.records as u64;
                    out.push(data.with_records(Some(read.bytes)));
                }
                Err(e) => {
                    warn!(topic = %p.topic, partition = w.index, error = %e, "cannot read the log");
                    pass.errors = true;
                    out.push(data.with_error_code(ResponseError::KafkaStorageError.code()));
                }
            }
        }
        pass.topics.push(
            FetchableTopicResponse::default()
                .with_topic(name.clone())
                .with_partitions(out),
        );
    }
    pass
}

/// Batches from `offset` up to `until` within `room` bytes (the first batch however large
/// when `first`, see [`Log::read`]) and, for `read_committed`, the aborted transactions
/// among them.
async fn read(
    log: &Log<'_>,
    tx: &Transaction,
    offset: i64,
    until: i64,
    room: usize,
    first: bool,
    read_committed: bool,
) -> Result<(Read, Option<Vec<Aborted>>), LogError> {
    if read_committed {
        let (read, aborted) = log.read_committed(tx, offset, until, room, first).await?;
        Ok((read, Some(aborted)))
    } else {
        Ok((log.read(tx, offset, until, room, first).await?, None))
    }
}

/// The answer of a final pass, with its metrics recorded.
fn answer(pass: Pass) -> ResponseKind {
    for (topic, (bytes, records)) in pass.per_topic {
        metrics::counter!(m::FETCHED_BYTES_TOTAL, m::LABEL_TOPIC => topic.clone()).increment(bytes);
        metrics::counter!(m::FETCHED_RECORDS_TOTAL, m::LABEL_TOPIC => topic).increment(records);
    }
    ResponseKind::Fetch(FetchResponse::default().with_responses(pass.topics))
}

fn storage_error(e: &crate::store::StoreError) -> ResponseKind {
    warn!(error = %e, "cannot begin a fetch transaction");
    ResponseKind::Fetch(
        FetchResponse::default().with_error_code(ResponseError::KafkaStorageError.code()),
    )
}
