//! ShareFetch (KIP-932): settles the acknowledgements it carries
//! ([`super::share_acknowledge`]), moves the member's share session on, then acquires
//! records from the session's partitions ([`crate::share::fetch`]), long-polling up to
//! `max_wait_ms` when there are none. Epoch -1 settles and closes the session without
//! fetching; acknowledgements at epoch 0 (a new session) are `INVALID_REQUEST`. Version 2:
//! a request with `IsRenewAck` (renewing locks, KIP-1222) settles its acknowledgements and
//! acquires nothing; `ShareAcquireMode` `batch_optimized` (0) and `record_limit` (1, KIP-1206)
//! both acquire at most `max_records` (Ferry never rounds up to a batch's end), any other
//! is `INVALID_REQUEST`. Needs Read on the group (else `GROUP_AUTHORIZATION_FAILED`) and on
//! each topic (else `TOPIC_AUTHORIZATION_FAILED` for its partitions), as Kafka.

use super::share_acknowledge::{AckBatch, acknowledge, lock_ms, refusal};
use super::{Reply, Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::share::fetch::{self, Limits, Taken};
use crate::share::sessions::{self, SessionPartition};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{ResponseKind, ShareFetchRequest, ShareFetchResponse};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

/// `ShareAcquireMode`s: `batch_optimized`, `record_limit`.
const ACQUIRE_MODES: [i8; 2] = [0, 1];

/// One partition's line in the answer.
#[derive(Default)]
struct Line {
    error: (i16, Option<String>),
    ack: (i16, Option<String>),
    taken: Taken,
}

/// Answers a ShareFetch, acquiring (and long-polling) in the returned future.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: ShareFetchRequest,
) -> Reply {
    let group = request
        .group_id
        .as_ref()
        .map(|g| g.0.to_string())
        .unwrap_or_default();
    let member = request
        .member_id
        .as_ref()
        .map(|m| m.to_string())
        .unwrap_or_default();
    let epoch = request.share_session_epoch;
    let acks_at_open = epoch == sessions::OPEN
        && request.topics.iter().any(|t| {
            t.partitions
                .iter()
                .any(|p| !p.acknowledgement_batches.is_empty())
        });
    let added: Vec<SessionPartition> = request
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (*t.topic_id.as_bytes(), p.partition_index))
        })
        .collect();
    let forgotten: Vec<SessionPartition> = request
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (*t.topic_id.as_bytes(), *p)))
        .collect();
    let refused = refusal(ctx, session, &group, &member, epoch)
        .or_else(|| {
            acks_at_open.then(|| {
                (
                    ResponseError::InvalidRequest,
                    "Acknowledgements cannot come with a new share session (epoch 0).".to_owned(),
                )
            })
        })
        .or_else(|| {
            let mode = request.share_acquire_mode;
            (!ACQUIRE_MODES.contains(&mode)).then(|| {
                (
                    ResponseError::InvalidRequest,
                    format!(
                        "ShareAcquireMode {mode} is not 0 (batch_optimized) or 1 (record_limit)."
                    ),
                )
            })
        });
    let places = refused.map_or_else(
        || {
            ctx.share
                .sessions()
                .advance(&group, &member, epoch, &added, &forgotten)
        },
        Err,
    );
    let places = match places {
        Ok(places) => places,
        Err((e, why)) => {
            return Reply::Now(ResponseKind::ShareFetch(
                ShareFetchResponse::default()
                    .with_error_code(e.code())
                    .with_error_message((!why.is_empty()).then(|| str_bytes(why))),
            ));
        }
    };
    let mut lines: BTreeMap<SessionPartition, Line> = BTreeMap::new();
    for t in &request.topics {
        for p in t
            .partitions
            .iter()
            .filter(|p| !p.acknowledgement_batches.is_empty())
        {
            let batches: Vec<AckBatch<'_>> = p
                .acknowledgement_batches
                .iter()
                .map(|b| {
                    (
                        b.first_offset,
                        b.last_offset,
                        b.acknowledge_types.as_slice(),
                    )
                })
                .collect();
            let place = (*t.topic_id.as_bytes(), p.partition_index);
            let acks = (batches.as_slice(), request.is_renew_ack);
            let ack = acknowledge(ctx, session, (&group, &member), place, acks).await;
            lines.entry(place).or_default().ack = ack;
        }
    }
    if epoch == sessions::CLOSE {
        ctx.share.close_session(&group, &member).await;
    }
    if request.is_renew_ack {
        let config = ctx.share.config(&group).await.unwrap_or_default();
        return Reply::Now(ResponseKind::ShareFetch(answer(lines, &config)));
    }
    let ctx = ctx.clone();
    let access = session.access(&ctx);
    Reply::Later(Box::pin(async move {
        // Not the default on a failure: records acquired under another lock duration,
        // delivery limit or isolation level than the group's.
        let config = match ctx.share.config(&group).await {
            Ok(config) => config,
            Err(e) => {
                tracing::warn!(group, error = %e, "cannot load a share group's settings");
                for place in places {
                    lines.entry(place).or_default().error = (
                        ResponseError::UnknownServerError.code(),
                        Some(e.to_string()),
                    );
                }
                return ResponseKind::ShareFetch(answer(lines, &Default::default()));
            }
        };
        let mut fetched = Vec::new();
        for place in places {
            let Some(topic) = ctx.topics.by_uuid(place.0) else {
                lines.entry(place).or_default().error =
                    (ResponseError::UnknownTopicId.code(), None);
                continue;
            };
            if !access.topic(Operation::Read, &topic.meta.name) {
                lines.entry(place).or_default().error =
                    (ResponseError::TopicAuthorizationFailed.code(), None);
                continue;
            }
            match ctx
                .share
                .partition(&group, &topic.meta.name, place.1, &config)
                .await
            {
                Ok(sp) => fetched.push((place, sp)),
                Err(_) => {
                    lines.entry(place).or_default().error =
                        (ResponseError::UnknownTopicOrPartition.code(), None);
                }
            }
        }
        let limits = Limits {
            max_records: usize::try_from(request.max_records).unwrap_or(0).max(1),
            max_bytes: usize::try_from(request.max_bytes).unwrap_or(0).max(1),
            wait: Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0)),
        };
        let partitions: Vec<_> = fetched.iter().map(|(_, sp)| sp.clone()).collect();
        let results = fetch::acquire(
            &ctx.share,
            &ctx.reads,
            ctx.large.spills(),
            &group,
            &member,
            &partitions,
            &config,
            limits,
            &ctx.shutdown,
        )
        .await;
        for ((place, _), result) in fetched.into_iter().zip(results) {
            let line = lines.entry(place).or_default();
            match result {
                Ok(taken) => line.taken = taken,
                Err(e) => {
                    tracing::warn!(group, error = %e, "share fetch failed");
                    line.error = (
                        ResponseError::UnknownServerError.code(),
                        Some(e.to_string()),
                    );
                }
            }
        }
        ResponseKind::ShareFetch(answer(lines, &config))
    }))
}

/// The answer: the partitions with records, acknowledgement results or errors.
fn answer(
    lines: BTreeMap<SessionPartition, Line>,
    config: &crate::share::config::ShareConfig,
) -> ShareFetchResponse {
    let mut topics: BTreeMap<[u8; 16], Vec<PartitionData>> = BTreeMap::new();
    for ((topic, partition), line) in lines {
        let acquired = line
            .taken
            .ranges
            .iter()
            .map(|r| {
                AcquiredRecords::default()
                    .with_first_offset(r.first)
                    .with_last_offset(r.last)
                    .with_delivery_count(i16::try_from(r.delivery_count).unwrap_or(i16::MAX))
            })
            .collect();
        topics.entry(topic).or_default().push(
            PartitionData::default()
                .with_partition_index(partition)
                .with_error_code(line.error.0)
                .with_error_message(line.error.1.map(str_bytes))
                .with_acknowledge_error_code(line.ack.0)
                .with_acknowledge_error_message(line.ack.1.map(str_bytes))
                .with_current_leader(
                    LeaderIdAndEpoch::default()
                        .with_leader_id(-1)
                        .with_leader_epoch(-1),
                )
                .with_records(Some(line.taken.records))
                .with_acquired_records(acquired),
        );
    }
    ShareFetchResponse::default()
        .with_acquisition_lock_timeout_ms(lock_ms(config.lock))
        .with_responses(
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    ShareFetchableTopicResponse::default()
                        .with_topic_id(Uuid::from_bytes(topic))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}
