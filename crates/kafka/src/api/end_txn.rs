//! EndTxn: commits or aborts the producer's open transaction — its markers staged for
//! every partition and its pending offsets committed or dropped, in one store
//! transaction, before the answer. Needs Write on the transactional id (else
//! `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`).

use super::{Session, logged};
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ResponseKind};
use std::sync::Arc;

/// Ends the transaction.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: EndTxnRequest,
) -> ResponseKind {
    let transactional_id = request.transactional_id.0.as_str();
    if !session
        .access(ctx)
        .transactional_id(Operation::Write, transactional_id)
    {
        return ResponseKind::EndTxn(
            EndTxnResponse::default()
                .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code()),
        );
    }
    let outcome = ctx
        .transactions
        .end(
            transactional_id,
            (request.producer_id.0, request.producer_epoch),
            request.committed,
        )
        .await;
    let code = logged(transactional_id, "EndTxn", outcome);
    ResponseKind::EndTxn(EndTxnResponse::default().with_error_code(code))
}
