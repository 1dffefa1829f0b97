//! Settings Kafka has and Ferry accepts with no effect, for topics and for brokers.
//!
//! Topic settings: they tune Kafka's segment files, index, flushing, replicas, message
//! format, or when its log cleaner must run at the latest (`max.compaction.lag.ms`:
//! Ferry's compactor runs on its own interval), none of which Ferry's store has (a
//! partition is a log of batches in transactional keys, durable once acknowledged, with one
//! copy per store). Tools and tests set them routinely (librdkafka's own tests create
//! topics with `segment.bytes`; old clients set `message.format.version`), so CreateTopics
//! and AlterConfigs take them, checked as Kafka checks their type and range, and then drop
//! them: they are neither stored nor described.
//!
//! Broker settings: Kafka's dynamically updatable broker settings for the same things and
//! for its thread pools, SASL Kerberos logins and replica fetchers. AlterConfigs of a
//! broker takes them, checked the same way, and [`crate::metadata::broker_settings`] stores them, so
//! DescribeConfigs shows them back as set; they change nothing.

/// How Kafka types a setting's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An INT (32 bits) of at least this.
    Int(i32),
    /// A LONG of at least this.
    Long(i64),
    /// A DOUBLE: any finite number.
    Double,
    /// `true` or `false`, in any case.
    Boolean,
    /// A Kafka version (`0.10.0`, `2.8-IV1`, `3.0`).
    Version,
    /// A list (of replicas, `partition:broker,…` or `*`; of mapping rules), not checked.
    List,
    /// A string, not checked.
    Text,
}

impl Kind {
    /// Checks `value` as Kafka checks a value of this kind: the message naming what is
    /// wrong, without the key.
    ///
    /// # Errors
    /// Why the value is not one Kafka takes.
    pub fn check(self, value: &str) -> Result<(), String> {
        let v = value.trim();
        let integer = v.parse::<i64>().ok();
        let fits = match self {
            Self::Int(min) => {
                integer.is_some_and(|n| (i64::from(min)..=i64::from(i32::MAX)).contains(&n))
            }
            Self::Long(min) => integer.is_some_and(|n| n >= min),
            Self::Double => v.parse::<f64>().is_ok_and(f64::is_finite),
            Self::Boolean => v.eq_ignore_ascii_case("true") || v.eq_ignore_ascii_case("false"),
            Self::Version => {
                v.starts_with(|c: char| c.is_ascii_digit())
                    && v.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
            }
            Self::List | Self::Text => true,
        };
        if fits {
            return Ok(());
        }
        Err(match self {
            Self::Int(_) if integer.is_some_and(|n| n > i64::from(i32::MAX)) => {
                format!("'{value}' must be an integer of at most {}", i32::MAX)
            }
            Self::Int(min) => format!("'{value}' must be an integer of at least {min}"),
            Self::Long(min) => format!("'{value}' must be an integer of at least {min}"),
            Self::Double => format!("'{value}' must be a number"),
            Self::Boolean => format!("'{value}' must be true or false"),
            Self::Version => format!("'{value}' is not a Kafka version"),
            Self::List | Self::Text => unreachable!("every list and string is taken"),
        })
    }
}

/// Every inert topic setting, as Kafka names it, with its type.
const TOPIC: &[(&str, Kind)] = &[
    ("segment.bytes", Kind::Int(14)),
    ("segment.ms", Kind::Long(1)),
    ("segment.jitter.ms", Kind::Long(0)),
    ("segment.index.bytes", Kind::Int(4)),
    ("index.interval.bytes", Kind::Int(0)),
    ("flush.messages", Kind::Long(1)),
    ("flush.ms", Kind::Long(0)),
    ("file.delete.delay.ms", Kind::Long(0)),
    ("preallocate", Kind::Boolean),
    ("min.insync.replicas", Kind::Int(1)),
    ("unclean.leader.election.enable", Kind::Boolean),
    ("leader.replication.throttled.replicas", Kind::List),
    ("follower.replication.throttled.replicas", Kind::List),
    ("message.format.version", Kind::Version),
    ("message.downconversion.enable", Kind::Boolean),
    ("max.compaction.lag.ms", Kind::Long(1)),
];

/// Every inert broker setting: Kafka's dynamically updatable broker settings that Ferry
/// has no counterpart of, with their types.
const BROKER: &[(&str, Kind)] = &[
    ("background.threads", Kind::Int(1)),
    ("num.io.threads", Kind::Int(1)),
    ("num.network.threads", Kind::Int(1)),
    ("num.replica.fetchers", Kind::Int(1)),
    ("num.recovery.threads.per.data.dir", Kind::Int(1)),
    ("log.cleaner.threads", Kind::Int(0)),
    ("log.cleaner.dedupe.buffer.size", Kind::Long(0)),
    ("log.cleaner.io.buffer.size", Kind::Int(0)),
    ("log.cleaner.io.buffer.load.factor", Kind::Double),
    ("log.cleaner.io.max.bytes.per.second", Kind::Double),
    ("log.cleaner.backoff.ms", Kind::Long(0)),
    ("log.cleaner.max.compaction.lag.ms", Kind::Long(1)),
    ("log.segment.bytes", Kind::Int(14)),
    ("log.roll.ms", Kind::Long(1)),
    ("log.roll.jitter.ms", Kind::Long(0)),
    ("log.segment.delete.delay.ms", Kind::Long(0)),
    ("log.index.size.max.bytes", Kind::Int(4)),
    ("log.index.interval.bytes", Kind::Int(0)),
    ("log.flush.interval.messages", Kind::Long(1)),
    ("log.flush.interval.ms", Kind::Long(0)),
    ("log.preallocate", Kind::Boolean),
    ("log.message.downconversion.enable", Kind::Boolean),
    ("min.insync.replicas", Kind::Int(1)),
    ("unclean.leader.election.enable", Kind::Boolean),
    ("leader.replication.throttled.rate", Kind::Long(0)),
    ("follower.replication.throttled.rate", Kind::Long(0)),
    ("sasl.kerberos.service.name", Kind::Text),
    ("sasl.kerberos.kinit.cmd", Kind::Text),
    ("sasl.kerberos.min.time.before.relogin", Kind::Long(0)),
    ("sasl.kerberos.ticket.renew.window.factor", Kind::Double),
    ("sasl.kerberos.ticket.renew.jitter", Kind::Double),
    ("sasl.kerberos.principal.to.local.rules", Kind::List),
];

/// Whether `key` is an inert topic setting.
pub fn is_inert(key: &str) -> bool {
    TOPIC.iter().any(|(name, _)| *name == key)
}

/// Checks `value` for inert topic setting `key` as Kafka would (`None`, restoring the
/// default, always passes): the message naming what is wrong, without the key.
///
/// # Errors
/// Why the value is not one Kafka takes.
pub fn check(key: &str, value: Option<&str>) -> Result<(), String> {
    match (TOPIC.iter().find(|(name, _)| *name == key), value) {
        (Some((_, kind)), Some(value)) => kind.check(value),
        _ => Ok(()),
    }
}

/// Inert broker setting `key`, as Kafka names it, with its type; `None` when `key` is not
/// one.
pub fn broker_setting(key: &str) -> Option<(&'static str, Kind)> {
    BROKER.iter().find(|(name, _)| *name == key).copied()
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
        assert_eq!(
            check("segment.bytes", Some("2147483648")).unwrap_err(),
            "'2147483648' must be an integer of at most 2147483647",
            "an INT"
        );
        assert!(check("segment.ms", Some("2147483648")).is_ok(), "a LONG");
        assert!(check("preallocate", Some("TRUE")).is_ok());
        assert!(check("preallocate", Some("yes")).is_err());
        assert!(check("message.format.version", Some("0.10.0.0")).is_ok());
        assert!(check("message.format.version", Some("2.8-IV1")).is_ok());
        assert!(check("message.format.version", Some("latest")).is_err());
        assert!(check("max.compaction.lag.ms", Some("0")).is_err());
        assert!(check("follower.replication.throttled.replicas", Some("*")).is_ok());
        assert!(is_inert("flush.ms") && !is_inert("retention.ms"));
    }

    #[test]
    fn broker_settings_are_typed_as_kafka_types_them() {
        let (name, kind) = broker_setting("background.threads").unwrap();
        assert_eq!((name, kind), ("background.threads", Kind::Int(1)));
        assert_eq!(
            kind.check("0").unwrap_err(),
            "'0' must be an integer of at least 1"
        );
        let (_, relogin) = broker_setting("sasl.kerberos.min.time.before.relogin").unwrap();
        assert!(relogin.check("58000").is_ok());
        let (_, factor) = broker_setting("sasl.kerberos.ticket.renew.window.factor").unwrap();
        assert_eq!(factor.check("most").unwrap_err(), "'most' must be a number");
        assert!(factor.check("0.8").is_ok());
        assert!(
            broker_setting("segment.bytes").is_none(),
            "a topic setting's name"
        );
        assert!(
            broker_setting("num.partitions").is_none(),
            "not dynamic in Kafka"
        );
    }
}
