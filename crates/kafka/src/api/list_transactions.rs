//! ListTransactions (API 66, v0–2, KIP-664, KIP-994, KIP-1152): the transactional ids the
//! principal may Describe, with their producer and state — only those in the states asked
//! for (names Kafka does not know come back in `unknown_state_filters`), of the producer
//! ids asked for, running longer than `duration_filter` ms (v1+), and whose id matches
//! `transactional_id_pattern` (v2+, a regular expression over the whole id) — what
//! `kafka-transactions.sh list` and `find-hanging` read.

use super::{Session, str_bytes};
use crate::Context;
use crate::acls::Operation;
use crate::coordinator::transactions::TxnState;
use ferry_stage::now_ms;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, ResponseKind, TransactionalId,
};
use regex::Regex;
use std::sync::Arc;
use tracing::warn;

/// The states Kafka's transaction coordinator names (Ferry's are `Empty` and `Ongoing`).
const KAFKA_STATES: [&str; 8] = [
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
];

/// Lists the transactional ids.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: ListTransactionsRequest,
) -> ResponseKind {
    let response = ListTransactionsResponse::default().with_unknown_state_filters(
        request
            .state_filters
            .iter()
            .filter(|s| !KAFKA_STATES.contains(&s.as_str()))
            .cloned()
            .collect(),
    );
    let pattern = match request.transactional_id_pattern.as_deref().map(whole) {
        Some(Err(e)) => {
            warn!(error = %e, "ListTransactions with a pattern that does not parse");
            return ResponseKind::ListTransactions(
                response.with_error_code(ResponseError::InvalidRegularExpression.code()),
            );
        }
        Some(Ok(p)) => Some(p),
        None => None,
    };
    let filter = Filter {
        states: request.state_filters.iter().map(|s| s.as_str()).collect(),
        producer_ids: request.producer_id_filters.iter().map(|p| p.0).collect(),
        running_longer_than_ms: request.duration_filter,
        pattern,
        now_ms: now_ms(),
    };
    let access = session.access(ctx);
    let response = match ctx.transactions.list().await {
        Ok(states) => response.with_transaction_states(
            states
                .iter()
                .filter(|s| access.transactional_id(Operation::Describe, &s.transactional_id))
                .filter(|s| filter.admits(s))
                .map(|s| {
                    TransactionState::default()
                        .with_transactional_id(TransactionalId(str_bytes(
                            s.transactional_id.clone(),
                        )))
                        .with_producer_id(ProducerId(s.producer_id))
                        .with_transaction_state(str_bytes(s.kafka_state()))
                })
                .collect(),
        ),
        Err(e) => {
            warn!(error = %e, "cannot list the transactions");
            response.with_error_code(e.code())
        }
    };
    ResponseKind::ListTransactions(response)
}

/// `pattern` matching whole ids only, as Kafka's (Java's `matches`).
fn whole(pattern: &str) -> Result<Regex, regex::Error> {
    Regex::new(&format!("^(?:{pattern})$"))
}

/// What a ListTransactions request selects.
struct Filter<'a> {
    /// States asked for; empty: every state.
    states: Vec<&'a str>,
    /// Producer ids asked for; empty: every producer.
    producer_ids: Vec<i64>,
    /// Only transactions open longer than this; negative: no such filter.
    running_longer_than_ms: i64,
    /// Only ids matching this.
    pattern: Option<Regex>,
    /// Now, ms since the epoch.
    now_ms: u64,
}

impl Filter<'_> {
    fn admits(&self, state: &TxnState) -> bool {
        let running_ms =
            i64::try_from(self.now_ms.saturating_sub(state.started_ms)).unwrap_or(i64::MAX);
        (self.states.is_empty() || self.states.contains(&state.kafka_state()))
            && (self.producer_ids.is_empty() || self.producer_ids.contains(&state.producer_id))
            && (self.running_longer_than_ms < 0
                || (state.is_open() && running_ms > self.running_longer_than_ms))
            && self
                .pattern
                .as_ref()
                .is_none_or(|p| p.is_match(&state.transactional_id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn state(id: &str, producer_id: i64, started_ms: u64) -> TxnState {
        TxnState {
            transactional_id: id.to_owned(),
            producer_id,
            epoch: 0,
            timeout_ms: 60_000,
            started_ms,
            partitions: BTreeSet::new(),
            groups: BTreeSet::new(),
        }
    }

    fn filter<'a>(
        states: Vec<&'a str>,
        producer_ids: Vec<i64>,
        longer: i64,
        pattern: Option<&str>,
    ) -> Filter<'a> {
        Filter {
            states,
            producer_ids,
            running_longer_than_ms: longer,
            pattern: pattern.map(|p| whole(p).unwrap()),
            now_ms: 100_000,
        }
    }

    #[test]
    fn every_filter_narrows_the_list() {
        let open = state("orders-1", 7, 40_000);
        let idle = state("orders-2", 8, 0);
        let everything = filter(vec![], vec![], -1, None);
        assert!(everything.admits(&open) && everything.admits(&idle));
        let ongoing = filter(vec!["Ongoing"], vec![], -1, None);
        assert!(ongoing.admits(&open) && !ongoing.admits(&idle));
        let by_producer = filter(vec![], vec![8], -1, None);
        assert!(!by_producer.admits(&open) && by_producer.admits(&idle));
        // Open for 60 s: longer than 59 s, not longer than 60 s; an idle id is never.
        assert!(filter(vec![], vec![], 59_999, None).admits(&open));
        assert!(!filter(vec![], vec![], 60_000, None).admits(&open));
        assert!(!filter(vec![], vec![], 0, None).admits(&idle));
        // The pattern matches whole ids.
        assert!(filter(vec![], vec![], -1, Some("orders-.")).admits(&open));
        assert!(!filter(vec![], vec![], -1, Some("orders")).admits(&open));
        assert!(whole("(").is_err());
    }
}
