//! TxnOffsetCommit: offsets a transactional producer commits for a group, pending until
//! its transaction commits (visible to OffsetFetch only then) or dropped when it aborts.
//! From v3 a request naming a group member and generation (KIP-447: the consumer's group
//! metadata) is checked against the group first, so a zombie of an older generation is
//! refused; one naming neither (generation -1) is not checked, as in Kafka.
//! Every partition of a request gets the request's outcome; unknown partitions get
//! `UNKNOWN_TOPIC_OR_PARTITION` and are not written.
//!
//! ACLs: Write on the transactional id (else every partition is
//! `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`), Read on the group (else
//! `GROUP_AUTHORIZATION_FAILED`), Read on each topic (else its partitions are
//! `TOPIC_AUTHORIZATION_FAILED` and not written), as Kafka.

use super::offset_commit::{partition_codes, requested_offsets, writable};
use super::{Session, logged};
use crate::Context;
use crate::acls::Operation;
use crate::coordinator::groups::state::MemberRef;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ResponseKind, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use std::sync::Arc;

/// Writes the pending offsets.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: TxnOffsetCommitRequest,
) -> ResponseKind {
    let transactional_id = request.transactional_id.0.as_str();
    let access = session.access(ctx);
    let requested = requested_offsets!(request.topics);
    let (own, offsets) = writable(ctx, &access, requested);
    let group = request.group_id.0.as_str();
    let member = MemberRef::new(&request.member_id, request.group_instance_id.as_deref());
    let denied = if !access.transactional_id(Operation::Write, transactional_id) {
        ResponseError::TransactionalIdAuthorizationFailed.code()
    } else if !access.group(Operation::Read, group) {
        ResponseError::GroupAuthorizationFailed.code()
    } else {
        0
    };
    let own = partition_codes(denied, own);
    let refused = if denied != 0 {
        denied
    } else if request.generation_id >= 0 || !member.id.is_empty() {
        ctx.coordinator
            .check_member(group, member, request.generation_id)
            .await
    } else {
        0
    };
    let code = if refused != 0 {
        refused
    } else {
        let outcome = ctx
            .transactions
            .commit_offsets(
                transactional_id,
                (request.producer_id.0, request.producer_epoch),
                group,
                &offsets,
            )
            .await;
        logged(transactional_id, "TxnOffsetCommit", outcome)
    };
    let topics = request
        .topics
        .into_iter()
        .zip(own)
        .map(|(t, own)| {
            let partitions = t
                .partitions
                .iter()
                .zip(own)
                .map(|(p, own)| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(if own == 0 { code } else { own })
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    ResponseKind::TxnOffsetCommit(TxnOffsetCommitResponse::default().with_topics(topics))
}
