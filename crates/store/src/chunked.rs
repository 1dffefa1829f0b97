//! Values longer than one store value (FoundationDB allows 100,000 bytes) kept as numbered
//! chunks under keys their owner names: a stage's message bodies, a delayed-message
//! exchange's held messages. The chunk count follows from the value's length, which the
//! owner keeps beside it.

use super::{StoreError, Transaction};
use bytes::Bytes;
use futures::future::try_join_all;

/// Bytes in one chunk (the last may be shorter).
pub const CHUNK: usize = 100_000;

/// How many chunks a value of `len` bytes is stored in.
pub fn count(len: usize) -> u32 {
    len.div_ceil(CHUNK) as u32
}

/// The chunks of `value`, numbered from 0; each a slice of `value`, not a copy.
pub fn split(value: &Bytes) -> impl Iterator<Item = (u32, Bytes)> + '_ {
    (0..value.len())
        .step_by(CHUNK)
        .enumerate()
        .map(|(i, start)| {
            (
                i as u32,
                value.slice(start..(start + CHUNK).min(value.len())),
            )
        })
}

/// Reads a value of `len` bytes whose chunk `i` is at `key(i)`, one point read per chunk
/// (snapshot reads: the owner never changes a value in place). A value of one chunk is the
/// store's read buffer itself; a longer one is joined. Missing chunks make the result
/// shorter than `len`, which the caller reports.
///
/// # Errors
/// The store's error.
pub async fn read(
    tx: &Transaction,
    len: usize,
    key: impl Fn(u32) -> Vec<u8>,
) -> Result<Bytes, StoreError> {
    let reads = (0..count(len)).map(|chunk| {
        let key = key(chunk);
        async move { tx.get(&key, true).await }
    });
    let mut read: Vec<Vec<u8>> = try_join_all(reads).await?.into_iter().flatten().collect();
    Ok(if read.len() == 1 {
        Bytes::from(read.pop().unwrap_or_default())
    } else {
        Bytes::from(read.concat())
    })
}
