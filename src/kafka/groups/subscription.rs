//! The topics a member of a `consumer` group subscribes to, read from its metadata for the
//! chosen protocol: Kafka's ConsumerProtocolSubscription (every version begins with the
//! version and the topic names), which OffsetDelete consults as Kafka's coordinator does.

/// The topic names of a consumer protocol subscription; `None` when `metadata` is not one.
pub fn topics(metadata: &[u8]) -> Option<Vec<String>> {
    let mut rest = metadata.get(2..)?; // the version: every one starts with the topics
    let count = i32::from_be_bytes(take(&mut rest, 4)?.try_into().ok()?);
    let mut topics = Vec::with_capacity(usize::try_from(count).ok()?.min(rest.len() / 2));
    for _ in 0..count {
        let len = i16::from_be_bytes(take(&mut rest, 2)?.try_into().ok()?);
        let name = take(&mut rest, usize::try_from(len).ok()?)?;
        topics.push(String::from_utf8(name.to_vec()).ok()?);
    }
    Some(topics)
}

/// The next `n` bytes of `rest`, which moves past them.
fn take<'a>(rest: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    let (head, tail) = (rest.get(..n)?, rest.get(n..)?);
    *rest = tail;
    Some(head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_topics_of_a_subscription_are_read_and_anything_else_is_none() {
        // Version 1: topics ["a", "bc"], no user data, no owned partitions.
        let v1 = [
            &[0, 1][..],
            &[0, 0, 0, 2],
            &[0, 1, b'a'],
            &[0, 2, b'b', b'c'],
            &[255, 255, 255, 255],
            &[0, 0, 0, 0],
        ]
        .concat();
        assert_eq!(topics(&v1), Some(vec!["a".to_owned(), "bc".to_owned()]));
        assert_eq!(topics(&v1[..8]), None, "truncated");
        assert_eq!(topics(b""), None);
    }
}
