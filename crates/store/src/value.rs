//! [`Value`]: the bytes a write hands the store.
//!
//! A value is a [`Bytes`], so a message body that arrives as `Bytes` (from a socket's read
//! buffer) travels into the store without being copied: the embedded engine keeps it
//! through its mutation log, read-your-writes overlay and committer until redb writes it.
//! Borrowed bytes (`&[u8]`, `&Vec<u8>`, `b"..."`) are copied once, into a new `Bytes`, as
//! the store always copied them; an owned `Vec<u8>` is taken over without copying.

use bytes::Bytes;
use std::ops::Deref;

/// A value to write; see the module documentation for which conversions copy.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Value(Bytes);

impl Value {
    /// The bytes, without copying.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }
}

impl Deref for Value {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.0
    }
}

/// Zero-copy: the store keeps this `Bytes` (a reference count, not the data).
impl From<Bytes> for Value {
    fn from(bytes: Bytes) -> Self {
        Self(bytes)
    }
}

/// Zero-copy: the store takes over the vector's buffer.
impl From<Vec<u8>> for Value {
    fn from(bytes: Vec<u8>) -> Self {
        Self(Bytes::from(bytes))
    }
}

/// Copies the borrowed bytes.
impl From<&[u8]> for Value {
    fn from(bytes: &[u8]) -> Self {
        Self(Bytes::copy_from_slice(bytes))
    }
}

/// Copies the borrowed bytes.
impl From<&Vec<u8>> for Value {
    fn from(bytes: &Vec<u8>) -> Self {
        Self::from(bytes.as_slice())
    }
}

/// Copies the borrowed bytes (`b"..."`, `&n.to_be_bytes()`).
impl<const N: usize> From<&[u8; N]> for Value {
    fn from(bytes: &[u8; N]) -> Self {
        Self::from(bytes.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_vectors_are_kept_and_borrowed_bytes_copied() {
        let body = Bytes::from(vec![7u8; 64]);
        assert_eq!(
            Value::from(body.clone()).into_bytes().as_ptr(),
            body.as_ptr()
        );
        let vector = vec![7u8; 64];
        let at = vector.as_ptr();
        assert_eq!(Value::from(vector).as_ptr(), at);
        let array = [7u8; 64];
        let copied = Value::from(&array);
        assert_ne!(copied.as_ptr(), array.as_ptr());
        assert_eq!(&copied[..], &array[..]);
    }
}
