//! Large messages: a body above [`SPILL_ABOVE`] bytes does not travel through the store in
//! one transaction but in pieces, kept in a spill ([`crate::stage::spill`]) beside the
//! small stage entry that holds the rest of the message (exchange, routing key,
//! properties).
//!
//! **Publishing.** Content assembly ([`super::channel`]) hands the body on in segments as
//! its frames arrive; the channel writes each to the message's spill in a transaction of
//! its own, held by the channel's lease holder, so at most one segment of the body is in
//! memory. The message is then routed and stored like any other, by the publish's ordinary
//! commit, which also lets go of the channel's hold: no reader sees the message before
//! that commit, and the publisher's confirm follows it. A publish cut short (the channel
//! closed, the process killed) leaves a spill only its holder references; releasing the
//! holder drops that reference and the collector frees it.
//!
//! **Delivering.** [`send_content`] sends the content header, then reads the body from the
//! spill one piece at a time and sends each as it is read; the delivery's lease (or a
//! hold) keeps the spill until the body is sent.

use super::codec;
use super::context::ConnectionContext;
use super::errors::AmqpError;
use crate::stage::Spill;
use crate::store::chunked;

/// Bodies larger than this many bytes are spilled: 4 MiB, the largest message Ferry's
/// default accepted before large messages, so every message it accepted then still takes
/// the one-transaction path.
pub const SPILL_ABOVE: u64 = 4 * 1024 * 1024;
/// Bytes of a spill read (and sent) at a time.
const PIECE: u64 = 10 * chunked::CHUNK as u64;

/// Sends `out` (the method that carries the content), then a content header with
/// `properties` and the body kept in `spill`, read one piece at a time.
///
/// # Errors
/// 541 when the store fails or the connection's socket is closed.
pub async fn send_content(
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

async fn send(ctx: &ConnectionContext, out: Vec<u8>) -> Result<(), AmqpError> {
    ctx.writer
        .send(out)
        .await
        .map_err(|e| AmqpError::internal(e.to_string()))
}
