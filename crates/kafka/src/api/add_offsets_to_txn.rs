//! AddOffsetsToTxn: the group's offsets may be committed in the producer's open
//! transaction (TxnOffsetCommit follows, to the group's coordinator). Needs Write on the
//! transactional id (else `TRANSACTIONAL_ID_AUTHORIZATION_FAILED`) and Read on the group
//! (else `GROUP_AUTHORIZATION_FAILED`).

use super::{Session, logged};
use crate::Context;
use crate::acls::Operation;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ResponseKind};
use std::sync::Arc;

/// Adds the group.
pub(super) async fn handle(
    ctx: &Arc<Context>,
    session: &Session,
    request: AddOffsetsToTxnRequest,
) -> ResponseKind {
    let transactional_id = request.transactional_id.0.as_str();
    let access = session.access(ctx);
    let refused = if !access.transactional_id(Operation::Write, transactional_id) {
        Some(ResponseError::TransactionalIdAuthorizationFailed)
    } else if !access.group(Operation::Read, request.group_id.0.as_str()) {
        Some(ResponseError::GroupAuthorizationFailed)
    } else {
        None
    };
    if let Some(e) = refused {
        return ResponseKind::AddOffsetsToTxn(
            AddOffsetsToTxnResponse::default().with_error_code(e.code()),
        );
    }
    let outcome = ctx
        .transactions
        .add_group(
            transactional_id,
            (request.producer_id.0, request.producer_epoch),
            request.group_id.0.as_str(),
        )
        .await;
    let code = logged(transactional_id, "AddOffsetsToTxn", outcome);
    ResponseKind::AddOffsetsToTxn(AddOffsetsToTxnResponse::default().with_error_code(code))
}
