//! The topics a member of a `consumer` group subscribes to, read from its metadata for the
//! chosen protocol: Kafka's ConsumerProtocolSubscription (every version begins with the
//! version and the topic names), which OffsetDelete consults as Kafka's coordinator does.
//! And the other way: a consumer-protocol (KIP-848) group's members as DescribeGroups shows
//! them, their subscription and assignment written as a classic consumer's (version 0).

/// The topic names of a consumer protocol subscription; `None` when `metadata` is not one.
pub(crate) fn topics(metadata: &[u8]) -> Option<Vec<String>> {
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

/// A ConsumerProtocolSubscription (version 0, no user data) of `topics`.
pub(crate) fn encode_subscription<'a>(topics: impl ExactSizeIterator<Item = &'a str>) -> Vec<u8> {
    let mut out = vec![0, 0];
    put_strings(&mut out, topics);
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
}

/// A ConsumerProtocolAssignment (version 0, no user data) of `partitions` by topic name.
pub(crate) fn encode_assignment(partitions: &[(String, Vec<i32>)]) -> Vec<u8> {
    let mut out = vec![0, 0];
    put_len(&mut out, partitions.len());
    for (topic, ps) in partitions {
        put_str(&mut out, topic);
        put_len(&mut out, ps.len());
        for p in ps {
            out.extend_from_slice(&p.to_be_bytes());
        }
    }
    out.extend_from_slice(&(-1i32).to_be_bytes());
    out
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&i32::try_from(n).unwrap_or(i32::MAX).to_be_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&i16::try_from(s.len()).unwrap_or(i16::MAX).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_strings<'a>(out: &mut Vec<u8>, strings: impl ExactSizeIterator<Item = &'a str>) {
    put_len(out, strings.len());
    for s in strings {
        put_str(out, s);
    }
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

    #[test]
    fn an_encoded_subscription_reads_back_and_an_assignment_has_kafka_s_layout() {
        let encoded = encode_subscription(["a", "bc"].into_iter());
        assert_eq!(
            topics(&encoded),
            Some(vec!["a".to_owned(), "bc".to_owned()])
        );
        let assignment = encode_assignment(&[("t".to_owned(), vec![0, 2])]);
        let expected = [
            &[0, 0][..],
            &[0, 0, 0, 1],
            &[0, 1, b't'],
            &[0, 0, 0, 2],
            &[0, 0, 0, 0],
            &[0, 0, 0, 2],
            &[255, 255, 255, 255],
        ]
        .concat();
        assert_eq!(assignment, expected);
    }
}
