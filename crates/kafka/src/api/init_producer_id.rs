//! InitProducerId: without a transactional id, a new idempotent producer id (epoch 0), or
//! — when a producer asks with its current id and epoch (KIP-360) — the same id with the
//! next epoch. With a transactional id, the transaction coordinator
//! ([`crate::coordinator::transactions`]) answers: the id's producer at its next epoch, older
//! epochs fenced and their open transaction aborted. An empty transactional id is
//! `INVALID_REQUEST`, as Kafka answers it (it is neither an id nor its absence).
//!
//! ACLs: a transactional id needs Write on it (else
//! `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`); an idempotent producer needs IdempotentWrite
//! on the cluster or Write on some topic (KIP-679; else `CLUSTER_AUTHORIZATION_FAILED`).

use super::{Session, logged};
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, ResponseKind,
};
use std::sync::Arc;
use tracing::warn;

/// Hands out a producer id and epoch.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: InitProducerIdRequest,
) -> ResponseKind {
    let response = InitProducerIdResponse::default();
    let access = session.access(ctx);
    let refused = match &request.transactional_id {
        Some(id) if !access.transactional_id(Operation::Write, id.0.as_str()) => {
            Some(ResponseError::TransactionalIdAuthorizationFailed)
        }
        None if !access.idempotent_write() => Some(ResponseError::ClusterAuthorizationFailed),
        _ => None,
    };
    if let Some(e) = refused {
        return ResponseKind::InitProducerId(
            response
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_error_code(e.code()),
        );
    }
    let (id, epoch) = (request.producer_id.0, request.producer_epoch);
    let current = (id >= 0).then_some((id, epoch));
    if let Some(transactional_id) = &request.transactional_id {
        let transactional_id = transactional_id.0.as_str();
        if transactional_id.is_empty() {
            return ResponseKind::InitProducerId(
                response
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
                    .with_error_code(ResponseError::InvalidRequest.code()),
            );
        }
        let outcome = ctx
            .transactions
            .init(transactional_id, request.transaction_timeout_ms, current)
            .await;
        let (id, epoch) = outcome
            .as_ref()
            .map_or((-1, -1), |&(id, epoch)| (id, epoch));
        let code = logged(transactional_id, "InitProducerId", outcome.map(|_| ()));
        return ResponseKind::InitProducerId(
            response
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(epoch)
                .with_error_code(code),
        );
    }
    if current.is_some() && (0..i16::MAX).contains(&epoch) {
        return ResponseKind::InitProducerId(
            response
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(epoch + 1),
        );
    }
    ResponseKind::InitProducerId(match ctx.transactions.allocate_producer_id().await {
        Ok(id) => response
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            warn!(error = %e, "cannot allocate a producer id");
            response
                .with_producer_id(ProducerId(-1))
                .with_error_code(ResponseError::CoordinatorNotAvailable.code())
        }
    })
}
