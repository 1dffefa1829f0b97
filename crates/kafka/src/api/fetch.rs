//! Fetch: whole batches from each partition's log, bounded by the partition's and the
//! request's byte limits (the first partition with data may exceed them by its first
//! batch, as Kafka's KIP-74 says), with the
//! high watermark and log start offset; an offset outside the log is
//! `OFFSET_OUT_OF_RANGE`. When less than `min_bytes` is there, the request long-polls:
//! it sleeps on store watches of the partitions' high watermarks — which the sequencer
//! writes when it appends — until one moves or `max_wait_ms` passes. No polling loop.
//!
//! A batch kept in a spill ([`crate::partition::large`]) is found by the pass's transaction
//! and read, in pieces, after it: the final pass fills it in before the answer goes.
//!
//! `read_committed` (isolation level 1) reads stop at the last stable offset and name the
//! aborted transactions in what they return, so the client drops their batches.
//!
//! A topic the principal may not Read is `TOPIC_AUTHORIZATION_FAILED` in every partition.
//! A partition whose `current_leader_epoch` (v9+) is not the partition's leader epoch is
//! `FENCED_LEADER_EPOCH` or `UNKNOWN_LEADER_EPOCH` (KIP-320, [`leader_epochs`]).
//!
//! Fetch sessions (KIP-227, v7+; `kafka::fetch_sessions`): a full fetch at epoch 0 opens
//! one, and the incremental fetches after it name only the partitions whose position
//! changed, the session supplying the rest; their answers hold only the partitions with
//! something new.

use super::{Reply, Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::metadata::topics::Partition;
use crate::partition::fetch_sessions::{
    Answered, PartitionId, Plan, Position, Reported, SessionError,
};
use crate::partition::leader_epochs;
use crate::partition::log::{LogError, Readable, SpilledBatch};
use crate::partition::reads::Snapshot;
use ferry_telemetry::kafka as m;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, PartitionData,
};
use kafka_protocol::messages::{FetchRequest, FetchResponse, ProducerId, ResponseKind, TopicName};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
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
    /// The leader epoch the client knows (-1: none).
    leader_epoch: i32,
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
    /// Batches kept in spills that the answer is to hold, by (topic, partition) index in
    /// `topics`: read after the pass.
    spilled: Vec<(usize, usize, SpilledBatch)>,
}

/// Answers a Fetch, long-polling in the returned future.
pub(super) fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    version: i16,
    request: FetchRequest,
) -> Reply {
    let requested: Vec<(PartitionId, Position)> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| {
                let position = Position {
                    offset: p.fetch_offset,
                    max_bytes: p.partition_max_bytes,
                    leader_epoch: p.current_leader_epoch,
                };
                ((t.topic.0.to_string(), p.partition), position)
            })
        })
        .collect();
    let plan = if version < 7 {
        Plan::Full { session: 0 }
    } else {
        let forgotten: Vec<PartitionId> = request
            .forgotten_topics_data
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.0.to_string(), *p)))
            .collect();
        let began = ctx.fetch_sessions.begin(
            request.session_id,
            request.session_epoch,
            requested.clone(),
            &forgotten,
            Instant::now(),
        );
        metrics::gauge!(m::FETCH_SESSIONS).set(ctx.fetch_sessions.len() as f64);
        match began {
            Ok(plan) => plan,
            Err(e) => {
                let code = match e {
                    SessionError::NotFound(_) => ResponseError::FetchSessionIdNotFound,
                    SessionError::InvalidEpoch { .. } => ResponseError::InvalidFetchSessionEpoch,
                };
                return Reply::Now(ResponseKind::Fetch(
                    FetchResponse::default().with_error_code(code.code()),
                ));
            }
        }
    };
    let partitions = match &plan {
        Plan::Full { .. } => requested,
        Plan::Incremental { partitions, .. } => partitions.clone(),
    };
    let limits = Limits {
        wait: Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0)),
        min_bytes: usize::try_from(request.min_bytes).unwrap_or(0),
        max_bytes: if version >= 3 {
            usize::try_from(request.max_bytes).unwrap_or(0)
        } else {
            usize::MAX
        },
        read_committed: request.isolation_level == READ_COMMITTED,
    };
    let access = session.access(ctx);
    let readable = move |topic: &str| access.topic(Operation::Read, topic);
    let ctx = ctx.clone();
    Reply::Later(Box::pin(async move {
        match long_poll(&ctx, &readable, &limits, partitions).await {
            Ok(pass) => answer(&ctx, &plan, pass),
            Err(e) => storage_error(&e),
        }
    }))
}

/// A fetch's waiting and byte limits.
struct Limits {
    /// The longest to wait for `min_bytes`.
    wait: Duration,
    /// The bytes worth answering.
    min_bytes: usize,
    /// The most bytes to answer (all partitions).
    max_bytes: usize,
    /// Whether reads stop at the last stable offset.
    read_committed: bool,
}

/// Reads `partitions`, waiting on their high watermarks until `min_bytes` are there or
/// the request's time is up; `readable` says which topics the caller may read.
async fn long_poll(
    ctx: &Context,
    readable: &impl Fn(&str) -> bool,
    limits: &Limits,
    partitions: Vec<(PartitionId, Position)>,
) -> Result<Pass, LogError> {
    let deadline = tokio::time::Instant::now() + limits.wait;
    let Limits {
        min_bytes,
        max_bytes,
        read_committed,
        ..
    } = *limits;
    let mut wanted: Vec<(TopicName, Vec<Wanted>)> = Vec::new();
    for ((name, index), position) in partitions {
        let topic = readable(&name)
            .then(|| ctx.topics.get(&name))
            .ok_or(ResponseError::TopicAuthorizationFailed.code());
        let w = Wanted {
            index,
            partition: topic.and_then(|topic| {
                topic
                    .and_then(|topic| topic.partition(index).cloned())
                    .ok_or(ResponseError::UnknownTopicOrPartition.code())
            }),
            offset: position.offset,
            max_bytes: usize::try_from(position.max_bytes).unwrap_or(0),
            leader_epoch: position.leader_epoch,
        };
        match wanted.iter_mut().find(|(t, _)| t.0.as_str() == name) {
            Some((_, ps)) => ps.push(w),
            None => wanted.push((TopicName(str_bytes(name)), vec![w])),
        }
    }
    loop {
        let snapshot = ctx.reads.snapshot()?;
        let pass = read_pass(&snapshot, &wanted, max_bytes, read_committed).await;
        let done = pass.bytes >= min_bytes
            || pass.errors
            || tokio::time::Instant::now() >= deadline
            || ctx.shutdown.is_cancelled();
        if done {
            return Ok(fill_spilled(ctx, pass).await);
        }
        let watched = wanted
            .iter()
            .flat_map(|(_, ps)| ps.iter())
            .filter_map(|w| w.partition.as_ref().ok());
        let Some(moved) = snapshot.watch_high_watermarks(watched).await else {
            return Ok(pass);
        };
        tokio::select! {
            () = moved => {}
            () = tokio::time::sleep_until(deadline) => {}
            () = ctx.shutdown.cancelled() => {}
        }
    }
}

/// Reads every wanted partition once, within `snapshot`.
async fn read_pass(
    snapshot: &Snapshot,
    wanted: &[(TopicName, Vec<Wanted>)],
    max_bytes: usize,
    read_committed: bool,
) -> Pass {
    let mut pass = Pass {
        topics: Vec::with_capacity(wanted.len()),
        bytes: 0,
        errors: false,
        per_topic: HashMap::new(),
        spilled: Vec::new(),
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
            if let Err(code) = check_leader_epoch(snapshot, p, w.leader_epoch).await {
                pass.errors = true;
                out.push(data.with_error_code(code));
                continue;
            }
            let Readable { bounds, stable } = match snapshot.readable(p).await {
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
            match snapshot
                .read(p, w.offset, until, room, first, read_committed)
                .await
            {
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
                    pass.bytes += read.size();
                    let entry = pass.per_topic.entry(p.topic.to_string()).or_default();
                    entry.0 += read.size() as u64;
                    entry.1 += read.records as u64;
                    if let Some(batch) = read.spilled {
                        pass.spilled.push((pass.topics.len(), out.len(), batch));
                    }
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

/// Whether a client that knows leader epoch `known` (-1: none) may read `partition`; the
/// error code answering it when not.
async fn check_leader_epoch(
    snapshot: &Snapshot,
    partition: &Partition,
    known: i32,
) -> Result<(), i16> {
    if known < 0 {
        return Ok(());
    }
    let current = snapshot.leader_epoch(partition).await.map_err(|e| {
        warn!(topic = %partition.topic, partition = partition.index, error = %e, "cannot read the leader epoch");
        ResponseError::KafkaStorageError.code()
    })?;
    leader_epochs::check(known, current).map_err(|e| e.code())
}

/// Reads the spilled batches `pass` found into its answer. A partition whose batch cannot
/// be read (retention deleted it meanwhile, or the store failed) answers
/// `KAFKA_STORAGE_ERROR`, which the client retries.
async fn fill_spilled(ctx: &Context, mut pass: Pass) -> Pass {
    for (t, p, batch) in std::mem::take(&mut pass.spilled) {
        let read = batch.read(ctx.large.spills()).await;
        let topic = &mut pass.topics[t];
        let data = &mut topic.partitions[p];
        match read {
            Ok(bytes) => data.records = Some(bytes),
            Err(e) => {
                warn!(topic = %topic.topic.0, partition = data.partition_index, error = %e, "cannot read a batch kept in a spill");
                data.records = None;
                data.error_code = ResponseError::KafkaStorageError.code();
            }
        }
    }
    pass
}

/// The answer of a final pass, with its metrics recorded: every partition read for a full
/// fetch, only those the session must report for an incremental one.
fn answer(ctx: &Context, plan: &Plan, mut pass: Pass) -> ResponseKind {
    for (topic, (bytes, records)) in pass.per_topic {
        metrics::counter!(m::FETCHED_BYTES_TOTAL, m::LABEL_TOPIC => topic.clone()).increment(bytes);
        metrics::counter!(m::FETCHED_RECORDS_TOTAL, m::LABEL_TOPIC => topic).increment(records);
    }
    let (session, full) = match plan {
        Plan::Full { session } => (*session, true),
        Plan::Incremental { session, .. } => (*session, false),
    };
    if session != 0 {
        let answered: Vec<Answered> = pass
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(|p| Answered {
                    id: (t.topic.0.to_string(), p.partition_index),
                    reported: Reported {
                        high_watermark: p.high_watermark,
                        last_stable: p.last_stable_offset,
                        log_start: p.log_start_offset,
                    },
                    records: p.records.as_ref().is_some_and(|r| !r.is_empty()),
                    error: p.error_code != 0,
                })
            })
            .collect();
        let mut held = ctx
            .fetch_sessions
            .finish(session, full, &answered)
            .into_iter();
        for t in &mut pass.topics {
            t.partitions.retain(|_| held.next().unwrap_or(true));
        }
        pass.topics.retain(|t| !t.partitions.is_empty());
    }
    ResponseKind::Fetch(
        FetchResponse::default()
            .with_session_id(session)
            .with_responses(pass.topics),
    )
}

fn storage_error(e: &LogError) -> ResponseKind {
    warn!(error = %e, "cannot begin a fetch transaction");
    ResponseKind::Fetch(
        FetchResponse::default().with_error_code(ResponseError::KafkaStorageError.code()),
    )
}
