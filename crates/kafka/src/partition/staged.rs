//! The record staged in a partition's stage for one batch: the one home of its format.
//!
//! Whoever appends a batch to a partition — a Produce request, the transaction
//! coordinator's commit or abort marker, a bridge route through [`crate::port`] — stages
//! it in this form; the partition's sequencer reads it back, moves the batch into the log
//! and answers its [`Waiter`].
//!
//! Layout: a format byte (1), the waiter's incarnation and token (each a u64, big-endian),
//! then the batch exactly as it was produced. The layout is also in `docs/keyspace.md`.

/// Format byte of the layout above.
const FORMAT: u8 = 1;
/// Bytes before the batch: format, incarnation, token.
pub const HEADER_LEN: usize = 17;

/// Who waits for a staged batch: the incarnation of the process that staged it and a
/// token of that process ([`crate::partition::waiters::Waiters`]); token 0 and foreign incarnations
/// are nobody this process answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Waiter {
    /// The staging process's incarnation.
    pub incarnation: u64,
    /// Its token for the batch.
    pub token: u64,
}

/// The staged record of `batch`, waited for by `waiter`.
pub fn encode(waiter: Waiter, batch: &[u8]) -> Vec<u8> {
    let mut body = Vec::with_capacity(HEADER_LEN + batch.len());
    body.push(FORMAT);
    body.extend_from_slice(&waiter.incarnation.to_be_bytes());
    body.extend_from_slice(&waiter.token.to_be_bytes());
    body.extend_from_slice(batch);
    body
}

/// The waiter of a staged record; `None` for bytes of another format.
pub fn waiter(body: &[u8]) -> Option<Waiter> {
    if body.len() < HEADER_LEN || body[0] != FORMAT {
        return None;
    }
    Some(Waiter {
        incarnation: u64::from_be_bytes(body[1..9].try_into().ok()?),
        token: u64::from_be_bytes(body[9..17].try_into().ok()?),
    })
}

/// The batch of a staged record (empty for bytes shorter than the header).
pub fn batch(body: &[u8]) -> &[u8] {
    body.get(HEADER_LEN..).unwrap_or_default()
}

/// The batch of a staged record, to rewrite in place (its base offset).
pub fn batch_mut(body: &mut [u8]) -> &mut [u8] {
    body.get_mut(HEADER_LEN..).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_staged_record_carries_its_waiter_and_batch() {
        let w = Waiter {
            incarnation: 5,
            token: 9,
        };
        let mut body = encode(w, b"batch");
        assert_eq!(waiter(&body), Some(w));
        assert_eq!(batch(&body), b"batch");
        batch_mut(&mut body)[0] = b'B';
        assert_eq!(batch(&body), b"Batch");
        assert_eq!(waiter(b"short"), None);
        assert_eq!(batch(b"short"), b"");
    }
}
