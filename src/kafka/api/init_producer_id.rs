//! InitProducerId: a new idempotent producer id (epoch 0), or — when a producer asks with
//! its current id and epoch (KIP-360) — the same id with the next epoch. Transactional
//! ids are refused: transactions are not supported yet.

use crate::kafka::Context;
use crate::kafka::producers::allocate_id;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, ResponseKind,
};
use std::sync::Arc;
use tracing::warn;

/// Hands out a producer id and epoch.
pub async fn handle(ctx: &Arc<Context>, request: InitProducerIdRequest) -> ResponseKind {
    let response = InitProducerIdResponse::default();
    if request.transactional_id.is_some() {
        return ResponseKind::InitProducerId(
            response
                .with_producer_id(ProducerId(-1))
                .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code()),
        );
    }
    let (id, epoch) = (request.producer_id.0, request.producer_epoch);
    if id >= 0 && (0..i16::MAX).contains(&epoch) {
        return ResponseKind::InitProducerId(
            response
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(epoch + 1),
        );
    }
    ResponseKind::InitProducerId(match allocate_id(&ctx.db, &ctx.keys).await {
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
