//! Topic settings Kafka has and Ferry accepts with no effect: they tune Kafka's segment
//! files, index, flushing, replicas, message format, or when its log cleaner must run at
//! the latest (`max.compaction.lag.ms`: Ferry's compactor runs on its own interval), none
//! of which Ferry's store has (a partition is a log of batches in transactional keys, durable once
//! acknowledged, with one copy per store). Tools and tests set them routinely (librdkafka's
//! own tests create topics with `segment.bytes`; old clients set
//! `message.format.version`), so CreateTopics and AlterConfigs take them, checked as
//! Kafka checks their type and range, and then drop them: they are neither stored nor
//! described.

/// How Kafka types a setting's value.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// An integer of at least this.
    AtLeast(i64),
    /// `true` or `false`, in any case.
    Boolean,
    /// A Kafka version (`0.10.0`, `2.8-IV1`, `3.0`).
    Version,
    /// A list of replicas (`partition:broker,…` or `*`), not checked.
    List,
}

/// Every inert setting, as Kafka names it, with its type.
const INERT: &[(&str, Kind)] = &[
    ("segment.bytes", Kind::AtLeast(14)),
    ("segment.ms", Kind::AtLeast(1)),
    ("segment.jitter.ms", Kind::AtLeast(0)),
    ("segment.index.bytes", Kind::AtLeast(4)),
    ("index.interval.bytes", Kind::AtLeast(0)),
    ("flush.messages", Kind::AtLeast(1)),
    ("flush.ms", Kind::AtLeast(0)),
    ("file.delete.delay.ms", Kind::AtLeast(0)),
    ("preallocate", Kind::Boolean),
    ("min.insync.replicas", Kind::AtLeast(1)),
    ("unclean.leader.election.enable", Kind::Boolean),
    ("leader.replication.throttled.replicas", Kind::List),
    ("follower.replication.throttled.replicas", Kind::List),
    ("message.format.version", Kind::Version),
    ("message.downconversion.enable", Kind::Boolean),
    ("max.compaction.lag.ms", Kind::AtLeast(1)),
];

/// Whether `key` is an inert setting.
pub fn is_inert(key: &str) -> bool {
    INERT.iter().any(|(name, _)| *name == key)
}

/// Checks `value` for inert setting `key` as Kafka would (`None`, restoring the default,
/// always passes): the message naming what is wrong, without the key.
///
/// # Errors
/// Why the value is not one Kafka takes.
pub fn check(key: &str, value: Option<&str>) -> Result<(), String> {
    let (Some(kind), Some(value)) = (
        INERT.iter().find(|(name, _)| *name == key).map(|(_, k)| *k),
        value,
    ) else {
        return Ok(());
    };
    let v = value.trim();
    let fits = match kind {
        Kind::AtLeast(min) => v.parse::<i64>().is_ok_and(|n| n >= min),
        Kind::Boolean => v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false"),
        Kind::Version => {
            v.starts_with(|c: char| c.is_ascii_digit())
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
        }
        Kind::List => true,
    };
    if fits {
        return Ok(());
    }
    Err(match kind {
        Kind::AtLeast(min) => format!("'{value}' must be an integer of at least {min}"),
        Kind::Boolean => format!("'{value}' must be true or false"),
        Kind::Version => format!("'{value}' is not a Kafka version"),
        Kind::List => unreachable!("every list is taken"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_as_kafka_types_them() {
        assert!(check("segment.bytes", Some("20000")).is_ok());
        assert!(check("segment.bytes", None).is_ok());
        assert_eq!(
            check("segment.bytes", Some("13")).unwrap_err(),
            "'13' must be an integer of at least 14"
        );
        assert!(check("preallocate", Some("TRUE")).is_ok());
        assert!(check("preallocate", Some("yes")).is_err());
        assert!(check("message.format.version", Some("0.10.0.0")).is_ok());
        assert!(check("message.format.version", Some("2.8-IV1")).is_ok());
        assert!(check("message.format.version", Some("latest")).is_err());
        assert!(check("max.compaction.lag.ms", Some("0")).is_err());
        assert!(check("follower.replication.throttled.replicas", Some("*")).is_ok());
        assert!(is_inert("flush.ms") && !is_inert("retention.ms"));
    }
}
