//! ShareAcknowledge (KIP-932), and the acknowledgements ShareFetch carries: each batch of
//! offsets settled as ACCEPT, RELEASE or REJECT (a GAP, an offset with no record, as
//! ACCEPT), or kept with its lock started again (RENEW, KIP-1222: only in a v2 request
//! with `IsRenewAck`), one type for the batch or one per offset. A record the member does
//! not hold is `INVALID_RECORD_STATE` for its partition; a malformed batch, or a RENEW in a
//! request without `IsRenewAck`, `INVALID_REQUEST`. The request moves the member's share
//! session on; epoch -1 closes it. The answer (v2) carries the group's lock duration.
//! Needs Read on the group and on each topic, as Kafka.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::share::partition::Settle;
use crate::share::sessions::{self, SessionPartition};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::share_acknowledge_response::{
    PartitionData, ShareAcknowledgeTopicResponse,
};
use kafka_protocol::messages::{ResponseKind, ShareAcknowledgeRequest, ShareAcknowledgeResponse};
use std::sync::Arc;
use uuid::Uuid;

/// Kafka's acknowledge types.
const GAP: i8 = 0;
const ACCEPT: i8 = 1;
const RELEASE: i8 = 2;
const REJECT: i8 = 3;
const RENEW: i8 = 4;

/// One acknowledgement batch as it comes: first and last offsets, and the types.
pub(super) type AckBatch<'a> = (i64, i64, &'a [i8]);

/// The records `batches` settle, or why they are malformed; RENEW only when `renew` (the
/// request's `IsRenewAck`).
pub(super) fn settles(batches: &[AckBatch<'_>], renew: bool) -> Result<Vec<(i64, Settle)>, String> {
    let mut out = Vec::new();
    for &(first, last, types) in batches {
        let span = last - first + 1;
        if span < 1 || !(types.len() == 1 || types.len() as i64 == span) {
            return Err(format!(
                "acknowledgement batch {first}..{last} with {} types",
                types.len()
            ));
        }
        for offset in first..=last {
            let t = if types.len() == 1 {
                types[0]
            } else {
                types[(offset - first) as usize]
            };
            let how = match t {
                GAP | ACCEPT => Settle::Accept,
                RELEASE => Settle::Release,
                REJECT => Settle::Reject,
                RENEW if renew => Settle::Renew,
                RENEW => return Err("a RENEW acknowledgement needs IsRenewAck".to_owned()),
                other => return Err(format!("unknown acknowledge type {other}")),
            };
            out.push((offset, how));
        }
    }
    Ok(out)
}

/// Settles one partition's acknowledgements for `member` (RENEW among them when
/// `renew`); the error code and message answering them.
pub(super) async fn acknowledge(
    ctx: &Context,
    session: &Session,
    (group, member): (&str, &str),
    (topic_id, partition): SessionPartition,
    (batches, renew): (&[AckBatch<'_>], bool),
) -> (i16, Option<String>) {
    let Some(topic) = ctx.topics.by_uuid(topic_id) else {
        return (ResponseError::UnknownTopicId.code(), None);
    };
    if !session.access(ctx).topic(Operation::Read, &topic.meta.name) {
        return (ResponseError::TopicAuthorizationFailed.code(), None);
    }
    let acks = match settles(batches, renew) {
        Ok(acks) => acks,
        Err(why) => return (ResponseError::InvalidRequest.code(), Some(why)),
    };
    let config = match ctx.share.config(group).await {
        Ok(c) => c,
        Err(e) => {
            return (
                ResponseError::UnknownServerError.code(),
                Some(e.to_string()),
            );
        }
    };
    let sp = match ctx
        .share
        .partition(group, &topic.meta.name, partition, &config)
        .await
    {
        Ok(sp) => sp,
        Err(_) => return (ResponseError::UnknownTopicOrPartition.code(), None),
    };
    match ctx
        .share
        .acknowledge(group, member, &sp, &acks, config.lock)
        .await
    {
        Ok(()) => (0, None),
        Err((e, why)) => (e.code(), Some(why)),
    }
}

/// Why a share request of `member` to `group` at share session `epoch` is refused before
/// anything else, if it is: only a member of the group may open a session (checked where
/// this instance coordinates the group: with several instances, a partition's records may
/// be fetched from another); a later request needs only the session (a member that left
/// still settles and closes it).
pub(super) fn refusal(
    ctx: &Context,
    session: &Session,
    group: &str,
    member: &str,
    epoch: i32,
) -> Option<(ResponseError, String)> {
    if !session.access(ctx).group(Operation::Read, group) {
        return Some((ResponseError::GroupAuthorizationFailed, String::new()));
    }
    if group.is_empty() || member.is_empty() {
        return Some((
            ResponseError::InvalidRequest,
            "GroupId and MemberId must be set.".to_owned(),
        ));
    }
    let stranger = ctx.share.serves(group) && !ctx.share.is_member(group, member);
    (epoch == sessions::OPEN && stranger).then(|| {
        (
            ResponseError::UnknownMemberId,
            format!("Member {member} is not a member of share group {group}."),
        )
    })
}

/// Answers a ShareAcknowledge.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: ShareAcknowledgeRequest,
) -> ResponseKind {
    let group = request
        .group_id
        .map(|g| g.0.to_string())
        .unwrap_or_default();
    let member = request.member_id.map(|m| m.to_string()).unwrap_or_default();
    let epoch = request.share_session_epoch;
    let refused = refusal(ctx, session, &group, &member, epoch).or_else(|| {
        if epoch == sessions::OPEN {
            return Some((
                ResponseError::InvalidShareSessionEpoch,
                "ShareAcknowledge cannot open a share session (epoch 0).".to_owned(),
            ));
        }
        ctx.share
            .sessions()
            .advance(&group, &member, epoch, &[], &[])
            .err()
    });
    if let Some((e, why)) = refused {
        return ResponseKind::ShareAcknowledge(
            ShareAcknowledgeResponse::default()
                .with_error_code(e.code())
                .with_error_message((!why.is_empty()).then(|| str_bytes(why))),
        );
    }
    let mut responses = Vec::with_capacity(request.topics.len());
    for t in &request.topics {
        let mut partitions = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
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
            let (code, why) = acknowledge(ctx, session, (&group, &member), place, acks).await;
            partitions.push(
                PartitionData::default()
                    .with_partition_index(p.partition_index)
                    .with_error_code(code)
                    .with_error_message(why.map(str_bytes))
                    .with_current_leader(
                        kafka_protocol::messages::share_acknowledge_response::LeaderIdAndEpoch::default()
                            .with_leader_id(-1)
                            .with_leader_epoch(-1),
                    ),
            );
        }
        responses.push(
            ShareAcknowledgeTopicResponse::default()
                .with_topic_id(Uuid::from_bytes(*t.topic_id.as_bytes()))
                .with_partitions(partitions),
        );
    }
    if epoch == sessions::CLOSE {
        ctx.share.close_session(&group, &member).await;
    }
    let lock = ctx.share.config(&group).await.unwrap_or_default().lock;
    ResponseKind::ShareAcknowledge(
        ShareAcknowledgeResponse::default()
            .with_acquisition_lock_timeout_ms(lock_ms(lock))
            .with_responses(responses),
    )
}

/// A lock duration as the answers' `AcquisitionLockTimeoutMs`.
pub(super) fn lock_ms(lock: std::time::Duration) -> i32 {
    i32::try_from(lock.as_millis()).unwrap_or(i32::MAX)
}
