//! The stream protocol's encoding (RabbitMQ's `deps/rabbitmq_stream/docs/PROTOCOL.adoc`):
//! big-endian integers, `string` (int16 length, -1 for null, UTF-8), `bytes` (int32 length,
//! -1 for null) and arrays (int32 count); a frame is a uint32 size and a command whose key
//! has the high bit set in a response ([`frame`], [`commands`]).
//!
//! Every field type is a [`Wire`] value: it writes itself and reads itself back, refusing
//! what does not fit (a length past the frame's end, a negative count, text that is not
//! UTF-8) with a [`WireError`] rather than panicking or allocating what the frame cannot
//! hold.

pub(crate) mod commands;
pub(crate) mod frame;

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Why bytes do not decode as a frame.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The frame ends inside a field.
    #[error("the frame ends inside {0}")]
    Truncated(&'static str),
    /// A length or count below -1, or -1 where null is not allowed.
    #[error("invalid length {length} for {what}")]
    Length {
        /// What was being read.
        what: &'static str,
        /// The length read.
        length: i64,
    },
    /// A string that is not UTF-8.
    #[error("a string that is not UTF-8")]
    Utf8,
    /// Bytes left over after the command's last field.
    #[error("{0} bytes after the end of the command")]
    Trailing(usize),
    /// A key no command has (the protocol's `UNKNOWN_FRAME`).
    #[error("unknown command key {0:#06x}")]
    UnknownKey(u16),
    /// A version of a command this codec does not read.
    #[error("version {version} of command {key:#06x} is not supported")]
    UnsupportedVersion {
        /// The command's key.
        key: u16,
        /// The version asked.
        version: u16,
    },
    /// A frame larger than the negotiated maximum (`FRAME_TOO_LARGE`).
    #[error("a frame of {size} bytes is larger than the maximum of {max}")]
    TooLarge {
        /// Its size.
        size: usize,
        /// The maximum.
        max: usize,
    },
}

/// What a frame's fields are read from: the bytes left of it.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    /// `n` bytes, or [`WireError::Truncated`] naming `what`.
    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        if self.rest.len() < n {
            return Err(WireError::Truncated(what));
        }
        let (taken, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(taken)
    }

    /// Everything left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }

    /// Fails unless every byte was read.
    pub(crate) fn finish(&self) -> Result<(), WireError> {
        match self.rest.len() {
            0 => Ok(()),
            n => Err(WireError::Trailing(n)),
        }
    }

    /// A length or count of `what` (`-1`: null), no larger than the bytes left could hold
    /// with `min_size` bytes per element.
    fn length(
        &mut self,
        raw: i64,
        min_size: usize,
        what: &'static str,
    ) -> Result<Option<usize>, WireError> {
        if raw == -1 {
            return Ok(None);
        }
        let fits = usize::try_from(raw)
            .ok()
            .filter(|&n| n.saturating_mul(min_size) <= self.rest.len());
        match fits {
            Some(n) => Ok(Some(n)),
            None if raw >= 0 => Err(WireError::Truncated(what)),
            None => Err(WireError::Length { what, length: raw }),
        }
    }
}

/// A field type of the protocol.
pub(crate) trait Wire: Sized {
    /// Appends the encoded value.
    fn put(&self, out: &mut BytesMut);
    /// Reads one value.
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError>;
}

macro_rules! integers {
    ($($t:ty => $put:ident, $get:ident;)*) => {$(
        impl Wire for $t {
            fn put(&self, out: &mut BytesMut) {
                out.$put(*self);
            }
            fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
                let mut bytes = r.take(std::mem::size_of::<$t>(), stringify!($t))?;
                Ok(bytes.$get())
            }
        }
    )*};
}

integers! {
    u8 => put_u8, get_u8;
    u16 => put_u16, get_u16;
    u32 => put_u32, get_u32;
    u64 => put_u64, get_u64;
    i16 => put_i16, get_i16;
    i32 => put_i32, get_i32;
    i64 => put_i64, get_i64;
}

/// A `string` that may be null.
impl Wire for Option<String> {
    fn put(&self, out: &mut BytesMut) {
        match self {
            None => out.put_i16(-1),
            Some(s) => {
                // Longer strings are cut at 32,767 bytes (a char boundary below), never
                // written with a length that wraps.
                let mut end = s.len().min(i16::MAX as usize);
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                out.put_i16(end as i16);
                out.put_slice(&s.as_bytes()[..end]);
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let raw = i16::get(r)?;
        let Some(n) = r.length(i64::from(raw), 1, "a string")? else {
            return Ok(None);
        };
        let bytes = r.take(n, "a string")?;
        String::from_utf8(bytes.to_vec())
            .map(Some)
            .map_err(|_| WireError::Utf8)
    }
}

/// A `string` that is never null.
impl Wire for String {
    fn put(&self, out: &mut BytesMut) {
        Some(self.clone()).put(out);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Option::<String>::get(r)?.ok_or(WireError::Length {
            what: "a string",
            length: -1,
        })
    }
}

/// `bytes` that may be null.
impl Wire for Option<Bytes> {
    fn put(&self, out: &mut BytesMut) {
        match self {
            None => out.put_i32(-1),
            Some(b) => {
                out.put_i32(i32::try_from(b.len()).unwrap_or(i32::MAX));
                out.put_slice(b);
            }
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let raw = i32::get(r)?;
        let Some(n) = r.length(i64::from(raw), 1, "bytes")? else {
            return Ok(None);
        };
        Ok(Some(Bytes::copy_from_slice(r.take(n, "bytes")?)))
    }
}

/// `bytes` that are never null.
impl Wire for Bytes {
    fn put(&self, out: &mut BytesMut) {
        Some(self.clone()).put(out);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Option::<Bytes>::get(r)?.ok_or(WireError::Length {
            what: "bytes",
            length: -1,
        })
    }
}

/// An array: an int32 count, then the elements (each at least one byte on the wire, which
/// bounds the count a frame can claim).
impl<T: Wire> Wire for Vec<T> {
    fn put(&self, out: &mut BytesMut) {
        out.put_i32(i32::try_from(self.len()).unwrap_or(i32::MAX));
        for item in self {
            item.put(out);
        }
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let raw = i32::get(r)?;
        let n = r.length(i64::from(raw), 1, "an array")?.unwrap_or(0);
        (0..n).map(|_| T::get(r)).collect()
    }
}

impl<A: Wire, B: Wire> Wire for (A, B) {
    fn put(&self, out: &mut BytesMut) {
        self.0.put(out);
        self.1.put(out);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok((A::get(r)?, B::get(r)?))
    }
}

impl<A: Wire, B: Wire, C: Wire> Wire for (A, B, C) {
    fn put(&self, out: &mut BytesMut) {
        self.0.put(out);
        self.1.put(out);
        self.2.put(out);
    }
    fn get(r: &mut Reader<'_>) -> Result<Self, WireError> {
        Ok((A::get(r)?, B::get(r)?, C::get(r)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round<T: Wire + std::fmt::Debug + PartialEq>(value: T) {
        let mut out = BytesMut::new();
        value.put(&mut out);
        let mut r = Reader::new(&out);
        assert_eq!(T::get(&mut r).unwrap(), value);
        r.finish().unwrap();
    }

    #[test]
    fn fields_read_back_what_they_wrote() {
        round(7u8);
        round(u64::MAX);
        round(-5i64);
        round("vhost:é".to_owned());
        round(None::<String>);
        round(Some(Bytes::from_static(b"\0\x01")));
        round(vec![
            ("k".to_owned(), "v".to_owned()),
            (String::new(), "w".to_owned()),
        ]);
        round(vec![(1u16, 2u16, 3u16)]);
    }

    #[test]
    fn lengths_past_the_frame_negative_counts_and_bad_text_are_refused() {
        // A string of 5 bytes with 2 present.
        let mut r = Reader::new(&[0, 5, b'a', b'b']);
        assert_eq!(String::get(&mut r), Err(WireError::Truncated("a string")));
        // An array claiming two billion elements in a few bytes allocates nothing.
        let mut r = Reader::new(&[0x7f, 0xff, 0xff, 0xff, 0, 0]);
        assert_eq!(
            Vec::<u8>::get(&mut r),
            Err(WireError::Truncated("an array"))
        );
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xfe]);
        assert!(matches!(
            Vec::<u8>::get(&mut r),
            Err(WireError::Length { length: -2, .. })
        ));
        let mut r = Reader::new(&[0xff, 0xff]);
        assert!(matches!(
            String::get(&mut r),
            Err(WireError::Length { length: -1, .. })
        ));
        let mut r = Reader::new(&[0, 1, 0xff]);
        assert_eq!(String::get(&mut r), Err(WireError::Utf8));
    }

    #[test]
    fn an_overlong_string_is_cut_at_a_char_boundary() {
        let long = "é".repeat(20_000);
        let mut out = BytesMut::new();
        long.put(&mut out);
        let got = String::get(&mut Reader::new(&out)).unwrap();
        assert_eq!(got.len(), 32_766);
        assert!(long.starts_with(&got));
    }
}
