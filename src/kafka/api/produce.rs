//! Produce: each partition's record batch is validated (format v2, CRC-32C, size, no
//! transactional or control batch), then every accepted batch of the request is appended,
//! as sent, to its partition's stage in one conflict-free transaction. The answer waits
//! until each partition's sequencer has written its batch to the log (`acks` 1 and -1
//! both answer after that durable commit) and carries the offset the batch got; `acks=0`
//! is not answered.

use super::Reply;
use crate::kafka::Context;
use crate::kafka::batch;
use crate::kafka::sequencer::stage_record;
use crate::kafka::topics::Partition;
use crate::kafka::waiters::Outcome;
use crate::stage::{NewMessage, StageError, now_ms};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, ResponseKind, TopicName};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tracing::warn;

/// How one partition of the request will be answered.
enum Answer {
    /// With this error, now.
    Refused(i16),
    /// With what the sequencer reports for this token.
    Waiting(u64, oneshot::Receiver<Outcome>),
    /// `acks=0`: staged, nobody waits.
    Staged,
}

/// Validates and stages the request's batches (in request order), then waits for the log.
pub async fn handle(ctx: &Arc<Context>, _version: i16, request: ProduceRequest) -> Reply {
    let acks = request.acks;
    let timeout = Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
    let mut answers: Vec<(TopicName, Vec<(i32, Answer)>)> = Vec::new();
    let mut appends: Vec<(Partition, NewMessage)> = Vec::new();
    for topic_data in request.topic_data {
        let topic = ctx.topics.get(topic_data.name.0.as_str());
        let mut partitions = Vec::with_capacity(topic_data.partition_data.len());
        for data in topic_data.partition_data {
            let index = data.index;
            let partition = topic.as_ref().and_then(|t| t.partition(index));
            let answer = match (&topic, partition) {
                (Some(t), Some(p)) => {
                    let max = ctx.defaults.max_message_bytes(&t.meta.config);
                    let records = data.records.unwrap_or_default();
                    match batch::validate(&records, max) {
                        Err(e) => {
                            warn!(topic = %p.topic, partition = index, error = %e, "refusing a produced batch");
                            Answer::Refused(e.code())
                        }
                        Ok(_) if !ctx.sequencers.is_local(p.topic_id, index) => {
                            Answer::Refused(ResponseError::NotLeaderOrFollower.code())
                        }
                        Ok(_) => {
                            let (token, answer) = if acks == 0 {
                                (ctx.waiters.unwaited_token(), Answer::Staged)
                            } else {
                                let (token, rx) = ctx.waiters.register();
                                (token, Answer::Waiting(token, rx))
                            };
                            let body = stage_record(ctx.waiters.incarnation(), token, &records);
                            appends.push((p.clone(), NewMessage::new(body)));
                            answer
                        }
                    }
                }
                _ => Answer::Refused(ResponseError::UnknownTopicOrPartition.code()),
            };
            partitions.push((index, answer));
        }
        answers.push((topic_data.name, partitions));
    }
    if !appends.is_empty()
        && let Err(e) = stage(ctx, &appends).await
    {
        warn!(error = %e, "cannot stage produced batches");
        for (_, partitions) in &mut answers {
            for (_, answer) in partitions.iter_mut() {
                if let Answer::Waiting(token, _) = answer {
                    ctx.waiters.forget(*token);
                }
                if matches!(answer, Answer::Waiting(..) | Answer::Staged) {
                    *answer = Answer::Refused(ResponseError::KafkaStorageError.code());
                }
            }
        }
    }
    if acks == 0 {
        return Reply::Nothing;
    }
    let waiters = ctx.waiters.clone();
    Reply::Later(Box::pin(async move {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut responses = Vec::with_capacity(answers.len());
        for (name, partitions) in answers {
            let mut out = Vec::with_capacity(partitions.len());
            for (index, answer) in partitions {
                let response = PartitionProduceResponse::default().with_index(index);
                out.push(match answer {
                    Answer::Refused(code) => response.with_error_code(code),
                    // Only `acks=0` stages without waiting, and it is not answered.
                    Answer::Staged => response.with_base_offset(-1),
                    Answer::Waiting(token, rx) => match tokio::time::timeout_at(deadline, rx).await
                    {
                        Ok(Ok(Outcome::Appended(base) | Outcome::Duplicate(base))) => {
                            response.with_base_offset(base)
                        }
                        Ok(Ok(Outcome::Refused(e))) => response.with_error_code(e.code()),
                        Ok(Err(_)) | Err(_) => {
                            waiters.forget(token);
                            response.with_error_code(ResponseError::RequestTimedOut.code())
                        }
                    },
                });
            }
            responses.push(
                TopicProduceResponse::default()
                    .with_name(name)
                    .with_partition_responses(out),
            );
        }
        ResponseKind::Produce(ProduceResponse::default().with_responses(responses))
    }))
}

/// Appends every accepted batch to its partition's stage in one transaction.
async fn stage(ctx: &Context, appends: &[(Partition, NewMessage)]) -> Result<(), StageError> {
    let now = now_ms();
    ctx.db
        .run(|tx| async move {
            for (partition, message) in appends {
                partition
                    .stage
                    .append_in(&tx, std::slice::from_ref(message), now)
                    .await?;
            }
            Ok(())
        })
        .await
}
