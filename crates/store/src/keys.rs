//! Key arithmetic shared by every layer: the key right after a key, the end of a prefix,
//! and versionstamp placement in keys and values.

/// The first key after `key` in byte order (`key` followed by `0x00`): `[key, key_after(key))`
/// is the range holding exactly `key`.
pub fn key_after(key: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(key.len() + 1);
    k.extend_from_slice(key);
    k.push(0);
    k
}

/// The first key that does not start with `prefix` (FoundationDB's `strinc`): strip
/// trailing `0xff` bytes and increment the last byte.
///
/// # Panics
/// Panics when `prefix` is empty or all `0xff`: such a prefix has no end.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let keep = prefix
        .iter()
        .rposition(|b| *b != 0xff)
        .expect("a prefix of only 0xff bytes has no end key");
    let mut end = prefix[..=keep].to_vec();
    end[keep] += 1;
    end
}

/// The end of FoundationDB's normal keyspace, `\xff` (keys from there on are its system
/// keys, and Ferry writes none on either engine): `["", keyspace_end())` is the whole
/// store.
pub fn keyspace_end() -> Vec<u8> {
    vec![0xff]
}

/// The range of every key that starts with `prefix`.
pub fn prefix_range(prefix: &[u8]) -> (Vec<u8>, Vec<u8>) {
    (prefix.to_vec(), prefix_end(prefix))
}

/// Length of a completed transaction versionstamp: 8-byte commit version, 2-byte order
/// within the commit batch.
pub const VERSIONSTAMP_LEN: usize = 10;

/// Splits a versionstamped key or value as FoundationDB takes it (the template followed
/// by a 4-byte little-endian offset of the 10-byte placeholder) into template and offset.
/// Returns `None` when it is too short or the placeholder does not fit.
pub fn split_versionstamp_offset(bytes: &[u8]) -> Option<(&[u8], usize)> {
    let split = bytes.len().checked_sub(4)?;
    let (template, offset) = bytes.split_at(split);
    let offset = u32::from_le_bytes(offset.try_into().ok()?) as usize;
    (offset + VERSIONSTAMP_LEN <= template.len()).then_some((template, offset))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_last_byte_below_ff() {
        assert_eq!(prefix_end(b"ab"), b"ac");
        assert_eq!(prefix_end(b"a\xff\xff"), b"b");
    }

    #[test]
    fn key_after_is_the_immediate_successor() {
        assert_eq!(key_after(b"k"), b"k\x00");
        assert!(b"k".as_slice() < key_after(b"k").as_slice());
    }

    #[test]
    fn versionstamp_offset_must_leave_room_for_ten_bytes() {
        let mut k = vec![0u8; 12];
        k.extend_from_slice(&2u32.to_le_bytes());
        assert_eq!(split_versionstamp_offset(&k).map(|(_, o)| o), Some(2));
        let mut k = vec![0u8; 12];
        k.extend_from_slice(&3u32.to_le_bytes());
        assert!(split_versionstamp_offset(&k).is_none());
    }
}
