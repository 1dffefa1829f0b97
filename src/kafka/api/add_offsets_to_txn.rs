//! AddOffsetsToTxn: the group's offsets may be committed in the producer's open
//! transaction (TxnOffsetCommit follows, to the group's coordinator).

use super::logged;
use crate::kafka::Context;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, ResponseKind};
use std::sync::Arc;

/// Adds the group.
pub async fn handle(ctx: &Arc<Context>, request: AddOffsetsToTxnRequest) -> ResponseKind {
    let transactional_id = request.transactional_id.0.as_str();
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
