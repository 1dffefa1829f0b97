//! Large messages: a body above [`SPILL_ABOVE`] bytes, or one whose copies in the queues it
//! reaches would not fit one transaction together ([`ferry_stage::spill::spills`]), does
//! not travel through the store in
//! one transaction but in pieces, kept in a spill ([`ferry_stage::spill`]) beside the
//! small stage entry that holds the rest of the message (exchange, routing key,
//! properties).
//!
//! **Publishing.** Content assembly ([`crate::channel`]) hands the body on in segments as
//! its frames arrive; the channel writes each to the message's spill in a transaction of
//! its own, held by the channel's lease holder, so at most one segment of the body is in
//! memory. The message is then routed and stored like any other, by the publish's ordinary
//! commit, which also lets go of the channel's hold: no reader sees the message before
//! that commit, and the publisher's confirm follows it. A publish cut short (the channel
//! closed, the process killed) leaves a spill only its holder references; releasing the
//! holder drops that reference and the collector frees it.
//!
//! **Fanout.** A body at most [`SPILL_ABOVE`] is assembled in memory; when its last frame
//! arrives and it routes to so many queues (and delayed-message exchanges) that its copies
//! would exceed one transaction's budget, publishing hands it back and the channel writes
//! it to a spill the same way, then publishes it again, so the commit stores it once, by
//! reference. The
//! dead-letter router and the delayed-message mover do the same for a message they are
//! about to fan out ([`Prespill`]): its body is written to a spill held by a holder of its
//! own, the transaction that stores the message references it, and the holder is released
//! after that commit (or, after a crash, at the next start).
//!
//! **Delivering.** [`send_content`] sends the content header, then reads the body from the
//! spill one piece at a time and sends each as it is read; the delivery's lease (or a
//! hold) keeps the spill until the body is sent.
//!
//! [`SPILL_ABOVE`]: ferry_stage::spill::SPILL_ABOVE

use crate::state::broker::Broker;
use crate::state::context::ConnectionContext;
use crate::wire::codec;
use crate::wire::errors::AmqpError;
use bytes::Bytes;
use ferry_stage::{Spill, StageError};
use ferry_store::chunked;

/// Bytes of a spill read (and sent) at a time.
const PIECE: u64 = 10 * chunked::CHUNK as u64;

/// Sends `out` (the method that carries the content), then a content header with
/// `properties` and the body kept in `spill`, read one piece at a time.
///
/// # Errors
/// 541 when the store fails or the connection's socket is closed.
pub(crate) async fn send_content(
    ctx: &ConnectionContext,
    channel: u16,
    mut out: Vec<u8>,
    properties: &[u8],
    spill: Spill,
) -> Result<(), AmqpError> {
    codec::encode_content_header(&mut out, channel, properties, spill.len);
    send(ctx, out).await?;
    let spills = ctx.broker.stages.spills();
    let mut offset = 0;
    while offset < spill.len {
        let len = (spill.len - offset).min(PIECE);
        let piece = spills.read(spill, offset, len as usize).await?;
        let mut out = Vec::with_capacity(piece.len() + piece.len() / 4096 * 8 + 8);
        codec::encode_body(&mut out, channel, &piece, ctx.frame_max);
        send(ctx, out).await?;
        offset += len;
    }
    Ok(())
}

/// A body written to a spill before the transaction that fans its message out, held by a
/// holder registered for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prespill {
    /// The spill.
    pub spill: Spill,
    /// Its holder.
    holder: u64,
}

impl Prespill {
    /// Writes `body` (not empty) to a new spill held by a new holder of this instance.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn write(broker: &Broker, body: &Bytes) -> Result<Self, StageError> {
        let holder = broker.holders.register(broker.liveness.ttl()).await?;
        let spill = broker.stages.spills().write_all(holder, body).await?;
        Ok(Self { spill, holder })
    }

    /// Releases the holder, after the transaction that referenced the spill (or did not:
    /// then the spill is freed).
    pub(crate) async fn release(self, broker: &Broker) {
        if let Err(e) = broker.holders.release(self.holder).await {
            tracing::warn!(error = %e, "cannot release a spill's holder; it is released when this instance's incarnation ends");
        }
    }
}

async fn send(ctx: &ConnectionContext, out: Vec<u8>) -> Result<(), AmqpError> {
    ctx.writer
        .send(out)
        .await
        .map_err(|e| AmqpError::internal(e.to_string()))
}
