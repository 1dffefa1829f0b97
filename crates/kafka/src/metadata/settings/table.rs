//! The tables of the settings Ferry takes, one row per setting, with the type of their
//! values ([`Kind`]): [`SETTINGS`], the topic settings Ferry implements, each with its
//! broker synonym, `[kafka]` key and value (what adding one takes is
//! [`crate::metadata::settings`]'s header); and the settings Kafka has that Ferry accepts
//! with no effect, for topics and for brokers.
//!
//! Inert topic settings: they tune Kafka's segment files, index, flushing, replicas, message
//! format, or when its log cleaner must run at the latest (`max.compaction.lag.ms`:
//! Ferry's compactor runs on its own interval), none of which Ferry's store has (a
//! partition is a log of batches in transactional keys, durable once acknowledged, with one
//! copy per store). Tools and tests set them routinely (librdkafka's own tests create
//! topics with `segment.bytes`; old clients set `message.format.version`), so CreateTopics
//! and AlterConfigs take them, checked as Kafka checks their type and range, and then drop
//! them: they are neither stored nor described.
//!
//! Inert broker settings: Kafka's dynamically updatable broker settings for the same things
//! and for its thread pools, SASL Kerberos logins and replica fetchers. AlterConfigs of a
//! broker takes them, checked the same way, and [`super::broker`] stores them, so
//! DescribeConfigs shows them back as set; they change nothing.

use super::choices::{CleanupPolicy, CompressionType, TimestampType};
use super::topic_config::{
    DEFAULT_DELETE_RETENTION_MS, DEFAULT_MIN_CLEANABLE_DIRTY_RATIO, DEFAULT_MIN_COMPACTION_LAG_MS,
};
use super::value::{Field, Value};
use ferry_config::kafka::{
    DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_RETENTION_MS, MAX_MESSAGE_BYTES_LIMIT,
};

/// A topic setting Ferry implements: one row of [`SETTINGS`].
#[derive(Debug)]
pub struct Setting {
    /// The topic setting, as Kafka names it.
    pub name: &'static str,
    /// The dynamic broker setting that is its default (Kafka's synonym), as Kafka names it.
    pub broker: &'static str,
    /// The `[kafka]` key that sets its default in `ferry.toml`, if one does (its value is
    /// [`super::TopicDefaults::from_config`]'s to read).
    pub ferry_key: Option<&'static str>,
    /// How Kafka types it, for describing it (values are checked as `value` says).
    pub kind: Kind,
    /// How a value is read and checked, where [`super::TopicConfig`] keeps it, and its
    /// Kafka default.
    pub value: Value,
}

/// Kafka's default `retention.bytes`: no limit.
pub(super) const DEFAULT_RETENTION_BYTES: i64 = -1;

/// Every topic setting Ferry implements, in the order errors list them and DescribeConfigs
/// describes them.
pub(crate) const SETTINGS: &[Setting] = &[
    Setting {
        name: "retention.ms",
        broker: "log.retention.ms",
        ferry_key: Some("kafka.retention_ms"),
        kind: Kind::Long(-1),
        value: Value::Integer {
            min: -1,
            max: i64::MAX,
            field: Field {
                at: |c| &mut c.retention_ms,
                default: DEFAULT_RETENTION_MS,
            },
        },
    },
    Setting {
        name: "retention.bytes",
        broker: "log.retention.bytes",
        ferry_key: Some("kafka.retention_bytes"),
        kind: Kind::Long(-1),
        value: Value::Integer {
            min: -1,
            max: i64::MAX,
            field: Field {
                at: |c| &mut c.retention_bytes,
                default: DEFAULT_RETENTION_BYTES,
            },
        },
    },
    Setting {
        name: "max.message.bytes",
        broker: "message.max.bytes",
        ferry_key: Some("kafka.max_message_bytes"),
        kind: Kind::Int(0),
        value: Value::Integer {
            min: 0,
            max: MAX_MESSAGE_BYTES_LIMIT as i64,
            field: Field {
                at: |c| &mut c.max_message_bytes,
                default: DEFAULT_MAX_MESSAGE_BYTES as i64,
            },
        },
    },
    Setting {
        name: "cleanup.policy",
        broker: "log.cleanup.policy",
        ferry_key: None,
        kind: Kind::List,
        value: Value::CleanupPolicy(Field {
            at: |c| &mut c.cleanup_policy,
            default: CleanupPolicy::Delete,
        }),
    },
    Setting {
        name: "delete.retention.ms",
        broker: "log.cleaner.delete.retention.ms",
        ferry_key: None,
        kind: Kind::Long(0),
        value: Value::Integer {
            min: 0,
            max: i64::MAX,
            field: Field {
                at: |c| &mut c.delete_retention_ms,
                default: DEFAULT_DELETE_RETENTION_MS,
            },
        },
    },
    Setting {
        name: "min.compaction.lag.ms",
        broker: "log.cleaner.min.compaction.lag.ms",
        ferry_key: None,
        kind: Kind::Long(0),
        value: Value::Integer {
            min: 0,
            max: i64::MAX,
            field: Field {
                at: |c| &mut c.min_compaction_lag_ms,
                default: DEFAULT_MIN_COMPACTION_LAG_MS,
            },
        },
    },
    Setting {
        name: "min.cleanable.dirty.ratio",
        broker: "log.cleaner.min.cleanable.ratio",
        ferry_key: None,
        kind: Kind::Double,
        value: Value::Ratio(Field {
            at: |c| &mut c.min_cleanable_dirty_ratio,
            default: DEFAULT_MIN_CLEANABLE_DIRTY_RATIO,
        }),
    },
    Setting {
        name: "message.timestamp.type",
        broker: "log.message.timestamp.type",
        ferry_key: None,
        kind: Kind::Text,
        value: Value::TimestampType(Field {
            at: |c| &mut c.message_timestamp_type,
            default: TimestampType::CreateTime,
        }),
    },
    Setting {
        name: "compression.type",
        broker: "compression.type",
        ferry_key: None,
        kind: Kind::Text,
        value: Value::CompressionType(Field {
            at: |c| &mut c.compression_type,
            default: CompressionType::Producer,
        }),
    },
];

/// Topic setting `name`'s row.
pub(super) fn setting(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.name == name)
}

/// The row of the topic setting that broker setting `name` is the default of.
pub(super) fn synonym(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.broker == name)
}

/// The rows of list settings (`cleanup.policy`), which APPEND and SUBTRACT edit.
pub(super) fn lists() -> impl Iterator<Item = &'static Setting> {
    SETTINGS.iter().filter(|s| s.kind == Kind::List)
}

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
const INERT_TOPIC: &[(&str, Kind)] = &[
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
const INERT_BROKER: &[(&str, Kind)] = &[
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
pub(super) fn is_inert(key: &str) -> bool {
    INERT_TOPIC.iter().any(|(name, _)| *name == key)
}

/// Checks `value` for inert topic setting `key` as Kafka would (`None`, restoring the
/// default, always passes): the message naming what is wrong, without the key.
///
/// # Errors
/// Why the value is not one Kafka takes.
pub(super) fn check_inert(key: &str, value: Option<&str>) -> Result<(), String> {
    match (INERT_TOPIC.iter().find(|(name, _)| *name == key), value) {
        (Some((_, kind)), Some(value)) => kind.check(value),
        _ => Ok(()),
    }
}

/// Inert broker setting `key`, as Kafka names it, with its type; `None` when `key` is not
/// one.
pub(super) fn broker_setting(key: &str) -> Option<(&'static str, Kind)> {
    INERT_BROKER.iter().find(|(name, _)| *name == key).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_as_kafka_types_them() {
        assert!(check_inert("segment.bytes", Some("20000")).is_ok());
        assert!(check_inert("segment.bytes", None).is_ok());
        assert_eq!(
            check_inert("segment.bytes", Some("13")).unwrap_err(),
            "'13' must be an integer of at least 14"
        );
        assert_eq!(
            check_inert("segment.bytes", Some("2147483648")).unwrap_err(),
            "'2147483648' must be an integer of at most 2147483647",
            "an INT"
        );
        assert!(
            check_inert("segment.ms", Some("2147483648")).is_ok(),
            "a LONG"
        );
        assert!(check_inert("preallocate", Some("TRUE")).is_ok());
        assert!(check_inert("preallocate", Some("yes")).is_err());
        assert!(check_inert("message.format.version", Some("0.10.0.0")).is_ok());
        assert!(check_inert("message.format.version", Some("2.8-IV1")).is_ok());
        assert!(check_inert("message.format.version", Some("latest")).is_err());
        assert!(check_inert("max.compaction.lag.ms", Some("0")).is_err());
        assert!(check_inert("follower.replication.throttled.replicas", Some("*")).is_ok());
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

    #[test]
    fn every_setting_has_one_row_and_no_row_is_also_inert() {
        for (i, s) in SETTINGS.iter().enumerate() {
            assert!(
                SETTINGS[..i]
                    .iter()
                    .all(|o| o.name != s.name && o.broker != s.broker),
                "{}",
                s.name
            );
            assert!(
                !is_inert(s.name) && broker_setting(s.broker).is_none(),
                "{}",
                s.name
            );
        }
    }
}
