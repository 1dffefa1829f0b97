//! Produce: each partition's record batch is validated (format v2, CRC-32C, size, no
//! control batch; for a compacted topic, a key on every record), then the accepted batches
//! are appended to their partitions' stages in conflict-free transactions: as sent, unless
//! the topic's `compression.type` or `message.timestamp.type=LogAppendTime` changes them
//! ([`crate::partition::append_format`]). Produce v0–v2 carry message sets of the old message
//! formats v0 and v1, converted into a v2 batch first ([`crate::wire::legacy`]). A
//! transactional batch is staged only if its partition is in its producer's open
//! transaction at its epoch, read in the same transaction
//! ([`crate::coordinator::transactions::Transactions::stage_produced`]). The answer waits until each
//! partition's sequencer has written its batch to the log (`acks` 1 and -1 both answer
//! after that durable commit) and carries the offset the batch got; `acks=0` is not
//! answered.
//!
//! ACLs: a transactional request needs Write on its transactional id (else every
//! partition is `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`), and each topic Write (else
//! `TOPIC_AUTHORIZATION_FAILED`), as Kafka.
//!
//! A connection hands over every produce request already buffered behind the first one
//! (a client pipelines them) as one burst: their batches are staged together, in request
//! order, in transactions of at most [`STAGE_BYTES`], so one commit — one fsync — serves
//! several requests. While the memory high-water mark is exceeded the connection asks for a
//! throttle, which every answer of the burst carries as `throttle_time_ms` (KIP-219: the
//! client waits that long before its next request, and the connection is not read
//! meanwhile).
//!
//! A batch larger than one store transaction carries ([`crate::partition::large`]) is written
//! to a spill first, in several transactions, and staged as its header naming the spill;
//! the staging commit lets go of the front's hold on the spill.

use super::{Reply, str_bytes};
use crate::Context;
use crate::acls::{Access, Operation};
use crate::coordinator::transactions::{ProducedBatch, TxnError};
use crate::metadata::topics::{Partition, Topic};
use crate::partition::append_format;
use crate::partition::compaction::records;
use crate::partition::large::LargeBatches;
use crate::partition::staged;
use crate::partition::waiters::{BatchOutcome, Waiters};
use crate::wire::batch;
use crate::wire::legacy;
use bytes::Bytes;
use ferry_stage::{NewMessage, now_ms};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, ResponseKind, TopicName};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tracing::warn;

/// Most staged bytes per append transaction (FoundationDB's limit is 10 MB).
const STAGE_BYTES: usize = 4 * 1024 * 1024;

/// How one partition of a request will be answered.
enum Answer {
    /// With this error, now.
    Refused(i16),
    /// With `INVALID_RECORD`, now, naming the records at these indexes of the batch (Produce
    /// v8+ `record_errors`) and saying why.
    InvalidRecords(Vec<i32>, String),
    /// With what the sequencer reports for this token, and the batch's append time when
    /// the topic stamps one (`LogAppendTime`).
    Waiting(u64, oneshot::Receiver<BatchOutcome>, Option<i64>),
    /// `acks=0`: staged, nobody waits.
    Staged,
}

/// One request, validated.
struct Prepared {
    /// `acks=0`: no answer.
    unanswered: bool,
    /// How long the answer may wait for the log.
    timeout: Duration,
    /// The answer's `throttle_time_ms`.
    throttle_ms: i32,
    /// The answer of every partition, by topic, in request order.
    answers: Vec<(TopicName, Vec<(i32, Answer)>)>,
}

/// A batch to stage, and the answer it belongs to (request, topic, partition).
struct Append {
    /// Where its answer is in the burst.
    answer: (usize, usize, usize),
    /// Its partition.
    partition: Partition,
    /// The staged record (for a large batch, its head, naming its spill once written).
    message: NewMessage,
    /// A large batch, until it is written to its spill.
    large: Option<Bytes>,
    /// The batch's header, when it belongs to a transaction.
    transactional: Option<batch::BatchHeader>,
}

/// Validates and stages a burst of produce requests in request order, then waits for the
/// log; one reply per request.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    access: &Access,
    requests: Vec<(i16, ProduceRequest)>,
    throttle: Duration,
) -> Vec<Reply> {
    let mut appends = Vec::new();
    let throttle_ms = i32::try_from(throttle.as_millis()).unwrap_or(i32::MAX);
    let mut prepared: Vec<Prepared> = requests
        .into_iter()
        .enumerate()
        .map(|(i, (version, r))| prepare(ctx, access, i, version, r, &mut appends))
        .map(|p| Prepared { throttle_ms, ..p })
        .collect();
    // While the store's free-disk alarm is raised nothing is staged (nor spilled): producers
    // get the retriable KAFKA_STORAGE_ERROR, and retry until space returns (the engine
    // logged why).
    let disk_full = ctx.disk_full();
    if !disk_full {
        for answer in spill(ctx, &mut appends).await {
            refuse(
                ctx,
                &mut prepared,
                answer,
                ResponseError::KafkaStorageError.code(),
            );
        }
    }
    for group in transactions(&appends) {
        let staged = if disk_full {
            Ok(group
                .iter()
                .enumerate()
                .map(|(i, _)| (i, ResponseError::KafkaStorageError.code()))
                .collect())
        } else {
            stage(ctx, group).await
        };
        let refused: Vec<(&Append, i16)> = match staged {
            Ok(refused) => refused
                .into_iter()
                .map(|(i, code)| (&group[i], code))
                .collect(),
            Err(e) => {
                warn!(error = %e, "cannot stage produced batches");
                for spill in group.iter().filter_map(|a| a.message.spill) {
                    ctx.large.abandon(spill).await;
                }
                let code = ResponseError::KafkaStorageError.code();
                group.iter().map(|a| (a, code)).collect()
            }
        };
        for (a, code) in refused {
            refuse(ctx, &mut prepared, a.answer, code);
        }
    }
    prepared
        .into_iter()
        .map(|p| {
            if p.unanswered {
                Reply::Nothing
            } else {
                let waiters = ctx.waiters.clone();
                Reply::Later(Box::pin(answer(waiters, p)))
            }
        })
        .collect()
}

/// Answers the batch whose answer is at `(request, topic, partition)` with `code`; nobody
/// waits for its log outcome any more.
fn refuse(ctx: &Context, prepared: &mut [Prepared], (r, t, p): (usize, usize, usize), code: i16) {
    let answer = &mut prepared[r].answers[t].1[p].1;
    if let Answer::Waiting(token, ..) = answer {
        ctx.waiters.forget(*token);
    }
    *answer = Answer::Refused(code);
}

/// Writes the large batches of `appends` to their spills (each message then names its
/// own); returns where the answers of those that could not be written are, removing them
/// from `appends`.
async fn spill(ctx: &Context, appends: &mut Vec<Append>) -> Vec<(usize, usize, usize)> {
    let mut failed = Vec::new();
    for a in appends.iter_mut() {
        let Some(records) = a.large.take() else {
            continue;
        };
        match ctx.large.write(&records).await {
            Ok(spill) => a.message.spill = Some(spill),
            Err(e) => {
                warn!(topic = %a.partition.topic, partition = a.partition.index, error = %e, "cannot write a large batch to its spill");
                failed.push(a.answer);
            }
        }
    }
    appends.retain(|a| !failed.contains(&a.answer));
    failed
}

/// Validates request number `index` of the burst (a Produce request of `version`),
/// registering a waiter per accepted batch and adding the batch to `appends`; what
/// `access` does not allow is refused.
fn prepare(
    ctx: &Context,
    access: &Access,
    index: usize,
    version: i16,
    request: ProduceRequest,
    appends: &mut Vec<Append>,
) -> Prepared {
    let acks = request.acks;
    let now = now_ms() as i64;
    let transactional_id_refused = request
        .transactional_id
        .as_ref()
        .is_some_and(|id| !access.transactional_id(Operation::Write, id.0.as_str()));
    let mut answers = Vec::with_capacity(request.topic_data.len());
    for (t, topic_data) in request.topic_data.into_iter().enumerate() {
        let name = topic_data.name.0.as_str();
        let refusal = if transactional_id_refused {
            Some(ResponseError::TransactionalIdAuthorizationFailed.code())
        } else if !access.topic(Operation::Write, name) {
            Some(ResponseError::TopicAuthorizationFailed.code())
        } else {
            None
        };
        let topic = ctx.topics.get(name);
        let mut partitions = Vec::with_capacity(topic_data.partition_data.len());
        for (p, data) in topic_data.partition_data.into_iter().enumerate() {
            if let Some(code) = refusal {
                partitions.push((data.index, Answer::Refused(code)));
                continue;
            }
            let partition = topic.as_ref().and_then(|t| t.partition(data.index));
            let answer = match (&topic, partition) {
                (Some(topic), Some(partition)) => {
                    let records = data.records.unwrap_or_default();
                    match accept(ctx, topic, partition, version, records, now) {
                        Err(refused) => refused,
                        Ok((records, header, log_append_time)) => {
                            let (waiter, answer) = if acks == 0 {
                                (ctx.waiters.unwaited(), Answer::Staged)
                            } else {
                                let (waiter, rx) = ctx.waiters.register();
                                (waiter, Answer::Waiting(waiter.token, rx, log_append_time))
                            };
                            let (body, large) = if LargeBatches::is_large(&records) {
                                (LargeBatches::head(&records), Some(records))
                            } else {
                                (records, None)
                            };
                            appends.push(Append {
                                answer: (index, t, p),
                                partition: partition.clone(),
                                message: NewMessage::new(staged::encode(waiter, &body)),
                                large,
                                transactional: header.is_transactional().then_some(header),
                            });
                            answer
                        }
                    }
                }
                _ => Answer::Refused(ResponseError::UnknownTopicOrPartition.code()),
            };
            partitions.push((data.index, answer));
        }
        answers.push((topic_data.name, partitions));
    }
    Prepared {
        unanswered: acks == 0,
        timeout: Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0)),
        throttle_ms: 0,
        answers,
    }
}

/// The records of one partition of a Produce request of `version` as they will be staged
/// (converted from message format v0/v1, conformed to the topic's settings at `now`), with
/// the batch's header and append time; or the answer refusing them.
fn accept(
    ctx: &Context,
    topic: &Topic,
    partition: &Partition,
    version: i16,
    records: Bytes,
    now: i64,
) -> Result<(Bytes, batch::BatchHeader, Option<i64>), Answer> {
    let refuse = |why: &dyn std::fmt::Display, code: i16| {
        warn!(topic = %partition.topic, partition = partition.index, error = %why, "refusing a produced batch");
        Answer::Refused(code)
    };
    let corrupt = ResponseError::CorruptMessage.code();
    let bound = ctx.config.max_request_size;
    let records = if version < legacy::PRODUCE_WITH_MESSAGE_SETS_BELOW {
        legacy::to_batch(&records, bound).map_err(|e| refuse(&e, corrupt))?
    } else {
        records
    };
    // The topic's settings, each it does not set from the broker's: read once per batch.
    let defaults = ctx.defaults();
    let config = defaults.resolve(&topic.meta.config);
    let max = defaults.max_message_bytes(&topic.meta.config);
    let header = batch::validate(&records, max).map_err(|e| refuse(&e, e.code()))?;
    if !ctx.sequencers.is_local(partition.topic_id, partition.index) {
        return Err(Answer::Refused(ResponseError::NotLeaderOrFollower.code()));
    }
    if config.cleanup_policy().compacts()
        && let Some(refused) = keyless(ctx, partition, &records)
    {
        return Err(refused);
    }
    let (records, log_append_time) =
        append_format::conform(records, &config, now, bound).map_err(|e| refuse(&e, corrupt))?;
    Ok((records, header, log_append_time))
}

/// For a batch of a compacted topic, the refusal of it when it holds records without a
/// key, as Kafka refuses them (`INVALID_RECORD`, each keyless record named); `None` to
/// accept it.
fn keyless(ctx: &Context, partition: &Partition, records: &[u8]) -> Option<Answer> {
    let why = match records::keyless(records, ctx.config.max_request_size) {
        Ok(keyless) if keyless.is_empty() => return None,
        Ok(keyless) => {
            let message = format!(
                "Compacted topic cannot accept message without key in topic partition {}-{}.",
                partition.topic, partition.index
            );
            return Some(Answer::InvalidRecords(keyless, message));
        }
        Err(e) => e.to_string(),
    };
    warn!(topic = %partition.topic, partition = partition.index, error = %why, "refusing a produced batch");
    Some(Answer::Refused(ResponseError::InvalidRecord.code()))
}

/// Splits `appends` into consecutive groups of at most [`STAGE_BYTES`] (a batch larger
/// than that alone in its group).
fn transactions(appends: &[Append]) -> Vec<&[Append]> {
    let mut groups = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (i, a) in appends.iter().enumerate() {
        let size = a.message.body.len();
        if i > start && bytes + size > STAGE_BYTES {
            groups.push(&appends[start..i]);
            (start, bytes) = (i, 0);
        }
        bytes += size;
    }
    if start < appends.len() {
        groups.push(&appends[start..]);
    }
    groups
}

/// Appends a group of batches to their stages in one transaction, in which the front lets
/// go of the spills of its large batches; returns the transactional batches their
/// transactions refused (by index in `appends`, with the error code), which are not
/// staged.
async fn stage(ctx: &Context, appends: &[Append]) -> Result<Vec<(usize, i16)>, TxnError> {
    let batches: Vec<ProducedBatch<'_>> = appends
        .iter()
        .map(|a| ProducedBatch {
            partition: &a.partition,
            message: &a.message,
            transactional: a.transactional.as_ref(),
        })
        .collect();
    ctx.transactions.stage_produced(&ctx.large, &batches).await
}

/// The answer of one request, once every partition's batch is in the log (or its timeout
/// passed).
async fn answer(waiters: Arc<Waiters>, prepared: Prepared) -> ResponseKind {
    let deadline = tokio::time::Instant::now() + prepared.timeout;
    let mut responses = Vec::with_capacity(prepared.answers.len());
    for (name, partitions) in prepared.answers {
        let mut out = Vec::with_capacity(partitions.len());
        for (index, answer) in partitions {
            // An answer without an offset says -1, as Kafka's does.
            let response = PartitionProduceResponse::default()
                .with_index(index)
                .with_base_offset(-1);
            out.push(match answer {
                Answer::Refused(code) => response.with_error_code(code),
                Answer::InvalidRecords(indexes, message) => response
                    .with_error_code(ResponseError::InvalidRecord.code())
                    .with_record_errors(
                        indexes
                            .into_iter()
                            .map(|i| {
                                BatchIndexAndErrorMessage::default()
                                    .with_batch_index(i)
                                    .with_batch_index_error_message(Some(str_bytes(
                                        message.clone(),
                                    )))
                            })
                            .collect(),
                    )
                    .with_error_message(Some(str_bytes(message))),
                // Only `acks=0` stages without waiting, and it is not answered.
                Answer::Staged => response,
                Answer::Waiting(token, rx, log_append_time) => {
                    match tokio::time::timeout_at(deadline, rx).await {
                        Ok(Ok(BatchOutcome::Appended(base) | BatchOutcome::Duplicate(base))) => {
                            response
                                .with_base_offset(base)
                                .with_log_append_time_ms(log_append_time.unwrap_or(-1))
                        }
                        Ok(Ok(BatchOutcome::Refused(e))) => response.with_error_code(e.code()),
                        Ok(Err(_)) | Err(_) => {
                            waiters.forget(token);
                            response.with_error_code(ResponseError::RequestTimedOut.code())
                        }
                    }
                }
            });
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(name)
                .with_partition_responses(out),
        );
    }
    ResponseKind::Produce(
        ProduceResponse::default()
            .with_responses(responses)
            .with_throttle_time_ms(prepared.throttle_ms),
    )
}
