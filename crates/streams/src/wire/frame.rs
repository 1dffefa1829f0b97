//! Frames on the byte stream: a uint32 size, then that many bytes of one command. A reader
//! takes whole frames off its buffer and refuses one larger than the negotiated
//! `frame_max` before reading its body; a writer puts the size in front of a command.

use super::WireError;
use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Takes the next whole frame (without its size) off `buffer`, `None` while it is not all
/// there.
///
/// # Errors
/// [`WireError::TooLarge`] for a frame of more than `max` bytes (size included, as
/// `frame_max` counts it); the buffer is left as it was.
pub fn next_frame(buffer: &mut BytesMut, max: usize) -> Result<Option<Bytes>, WireError> {
    let Some(size) = buffer.get(..4) else {
        return Ok(None);
    };
    let size = u32::from_be_bytes(size.try_into().expect("four bytes")) as usize;
    if size.saturating_add(4) > max {
        return Err(WireError::TooLarge {
            size: size.saturating_add(4),
            max,
        });
    }
    if buffer.len() < 4 + size {
        buffer.reserve(4 + size - buffer.len());
        return Ok(None);
    }
    buffer.advance(4);
    Ok(Some(buffer.split_to(size).freeze()))
}

/// `write` (which appends one command) as a frame.
pub fn framed(write: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut out = BytesMut::with_capacity(64);
    out.put_u32(0);
    write(&mut out);
    let size = u32::try_from(out.len() - 4).unwrap_or(u32::MAX);
    out[..4].copy_from_slice(&size.to_be_bytes());
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_off_whole_and_an_oversized_one_is_refused_before_its_body() {
        let a = framed(|out| out.put_slice(b"\0\x17\0\x01"));
        let b = framed(|out| out.put_slice(b"abc"));
        assert_eq!(&a[..4], &[0, 0, 0, 4]);
        let mut buffer = BytesMut::new();
        buffer.put_slice(&a);
        buffer.put_slice(&b[..5]);
        assert_eq!(
            next_frame(&mut buffer, 64).unwrap().as_deref(),
            Some(&b"\0\x17\0\x01"[..])
        );
        assert_eq!(next_frame(&mut buffer, 64).unwrap(), None);
        buffer.put_slice(&b[5..]);
        assert_eq!(
            next_frame(&mut buffer, 64).unwrap().as_deref(),
            Some(&b"abc"[..])
        );
        assert_eq!(next_frame(&mut buffer, 64).unwrap(), None);
        buffer.put_u32(u32::MAX);
        assert_eq!(
            next_frame(&mut buffer, 8192),
            Err(WireError::TooLarge {
                size: u32::MAX as usize + 4,
                max: 8192
            })
        );
        assert_eq!(buffer.len(), 4);
    }
}
