//! Mutations as the embedded engine buffers and applies them, and FoundationDB's atomic
//! add arithmetic.
//!
//! Values are `Bytes`: a value handed to the store as `Bytes` stays the same buffer from
//! the transaction through the committer until redb writes it.

use crate::keys::VERSIONSTAMP_LEN;
use bytes::Bytes;

/// One buffered change, applied at commit in the order the transaction made it.
#[derive(Debug, Clone)]
pub(super) enum Mutation {
    /// Set a key.
    Set { key: Vec<u8>, value: Bytes },
    /// Remove a key.
    Clear { key: Vec<u8> },
    /// Remove every key in `[begin, end)`.
    ClearRange { begin: Vec<u8>, end: Vec<u8> },
    /// Add `param` (little-endian) to the value at `key`.
    Add { key: Vec<u8>, param: Vec<u8> },
    /// Set a key whose bytes at `offset` become the commit's versionstamp.
    SetVersionstampedKey {
        key: Vec<u8>,
        offset: usize,
        value: Bytes,
    },
    /// Set a value whose bytes at `offset` become the commit's versionstamp.
    SetVersionstampedValue {
        key: Vec<u8>,
        value: Bytes,
        offset: usize,
    },
}

impl Mutation {
    /// Bytes this mutation counts towards the transaction size limit.
    pub(super) fn size(&self) -> usize {
        match self {
            Self::Set { key, value }
            | Self::SetVersionstampedKey { key, value, .. }
            | Self::SetVersionstampedValue { key, value, .. } => key.len() + value.len(),
            Self::Clear { key } => key.len(),
            Self::ClearRange { begin, end } => begin.len() + end.len(),
            Self::Add { key, param } => key.len() + param.len(),
        }
    }
}

/// FoundationDB's `ADD`: `existing` and `param` are little-endian unsigned integers; the
/// result has `param`'s length (a shorter existing value is zero-extended, a longer one
/// truncated) and wraps on overflow. A missing value counts as zero.
pub(super) fn apply_add(existing: Option<&[u8]>, param: &[u8]) -> Vec<u8> {
    let existing = existing.unwrap_or(&[]);
    let mut out = Vec::with_capacity(param.len());
    let mut carry = 0u16;
    for (i, p) in param.iter().enumerate() {
        let sum = u16::from(*existing.get(i).unwrap_or(&0)) + u16::from(*p) + carry;
        out.push(sum as u8);
        carry = sum >> 8;
    }
    out
}

/// Writes `stamp` over the 10 bytes at `offset` of `template`.
pub(super) fn fill_versionstamp(
    template: &[u8],
    offset: usize,
    stamp: &[u8; VERSIONSTAMP_LEN],
) -> Vec<u8> {
    let mut out = template.to_vec();
    out[offset..offset + VERSIONSTAMP_LEN].copy_from_slice(stamp);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_is_little_endian_with_carry_and_wraps() {
        assert_eq!(apply_add(None, &5i64.to_le_bytes()), 5i64.to_le_bytes());
        let a = apply_add(Some(&255u64.to_le_bytes()), &1i64.to_le_bytes());
        assert_eq!(a, 256u64.to_le_bytes());
        let b = apply_add(Some(&10i64.to_le_bytes()), &(-3i64).to_le_bytes());
        assert_eq!(i64::from_le_bytes(b.try_into().unwrap()), 7);
    }

    #[test]
    fn add_takes_the_length_of_its_parameter() {
        assert_eq!(apply_add(Some(&[1, 2, 3]), &[1]), vec![2]);
        assert_eq!(apply_add(Some(&[1]), &[1, 0, 0]), vec![2, 0, 0]);
    }
}
