//! Settling deliveries: acknowledging them, returning them to their place, or
//! dead-lettering them, inside a caller's store transaction. Consumers settle what their
//! clients acknowledge; tx.commit settles what a transactional channel held.

use crate::state::topology::Queue;
use ferry_stage::{MessageId, Release, StageError};
use ferry_store::Transaction;
use std::sync::Arc;

/// What to do with settled deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum How {
    /// Acknowledged: removed for good.
    Ack,
    /// Back to its original position (nack/reject with requeue, recover).
    Requeue,
    /// Dead-lettered, or dropped without a dead-letter exchange.
    Reject,
}

/// Deliveries of one queue and holder, settled the same way.
#[derive(Debug, Clone)]
pub(crate) struct Settlement {
    /// The queue.
    pub queue: Arc<Queue>,
    /// The holder they are leased to.
    pub holder: u64,
    /// The deliveries.
    pub ids: Vec<MessageId>,
    /// What to do.
    pub how: How,
    /// Bytes settling them may copy into the queue's dead-letter stage (0 for acks):
    /// settle commits keep their sum within [`ferry_stage::spill::RUN_BYTES`].
    pub copies: u64,
}

/// Applies a settlement within `tx`.
///
/// # Errors
/// The stage's error.
pub(crate) async fn settle_in(
    tx: &Transaction,
    s: &Settlement,
    now: u64,
) -> Result<(), StageError> {
    let stage = &s.queue.stage;
    match s.how {
        How::Ack => stage.ack_in(tx, s.holder, &s.ids).await.map(|_| ()),
        How::Requeue => stage
            .release_in(tx, s.holder, &s.ids, Release::Requeue, now)
            .await
            .map(|_| ()),
        How::Reject => stage
            .release_in(tx, s.holder, &s.ids, Release::Reject, now)
            .await
            .map(|_| ()),
    }
}
