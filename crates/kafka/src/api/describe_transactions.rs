//! DescribeTransactions (API 65, v0, KIP-664): each transactional id's producer, epoch,
//! timeout, state and, while a transaction is open, when it began and its partitions —
//! what `kafka-transactions.sh describe` shows. An id the principal may not Describe is
//! `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`, an unknown one `TRANSACTIONAL_ID_NOT_FOUND`, as
//! Kafka answers.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::coordinator::transactions::TxnState;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use std::collections::BTreeMap;
use std::sync::Arc;
use tracing::warn;

/// Describes the transactional ids asked for.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: DescribeTransactionsRequest,
) -> ResponseKind {
    let access = session.access(ctx);
    let mut states = Vec::with_capacity(request.transactional_ids.len());
    for id in request.transactional_ids {
        let answer = TransactionState::default().with_transactional_id(id.clone());
        let answer = if !access.transactional_id(Operation::Describe, id.as_str()) {
            answer.with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code())
        } else {
            match ctx.transactions.describe(id.as_str()).await {
                Ok(Some(state)) => described(answer, &state),
                Ok(None) => answer.with_error_code(ResponseError::TransactionalIdNotFound.code()),
                Err(e) => {
                    warn!(transactional_id = %id.as_str(), error = %e, "cannot describe a transaction");
                    answer.with_error_code(e.code())
                }
            }
        };
        states.push(answer);
    }
    ResponseKind::DescribeTransactions(
        DescribeTransactionsResponse::default().with_transaction_states(states),
    )
}

/// `answer` filled from `state`.
fn described(answer: TransactionState, state: &TxnState) -> TransactionState {
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in &state.partitions {
        topics.entry(topic).or_default().push(*partition);
    }
    answer
        .with_transaction_state(StrBytes::from_static_str(state.kafka_state()))
        .with_transaction_timeout_ms(state.timeout_ms)
        .with_transaction_start_time_ms(if state.is_open() {
            i64::try_from(state.started_ms).unwrap_or(i64::MAX)
        } else {
            -1
        })
        .with_producer_id(ProducerId(state.producer_id))
        .with_producer_epoch(state.epoch)
        .with_topics(
            topics
                .into_iter()
                .map(|(topic, partitions)| {
                    TopicData::default()
                        .with_topic(TopicName(str_bytes(topic)))
                        .with_partitions(partitions)
                })
                .collect(),
        )
}
