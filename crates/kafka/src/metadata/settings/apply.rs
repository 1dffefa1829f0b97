//! Kafka's (name, value) pairs applied to a topic's settings ([`TopicConfig`]) as the table
//! ([`SETTINGS`]) says: CreateTopics and AlterConfigs set them, IncrementalAlterConfigs
//! changes them (lists included), and a refusal is an [`InvalidSetting`].

use super::table::{self, SETTINGS};
use super::topic_config::TopicConfig;

/// A setting Ferry does not take, or a value it refuses (Kafka's `INVALID_CONFIG`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct InvalidSetting {
    /// The setting.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl TopicConfig {
    /// This config with the items of `items` added to (`append`: IncrementalAlterConfigs
    /// APPEND) or taken from (SUBTRACT) the list setting `key` — `cleanup.policy`, the only
    /// list Ferry has.
    ///
    /// # Errors
    /// [`InvalidSetting`] for another setting, an unknown item, or a list left
    /// empty.
    pub fn edit_list(self, key: &str, items: &str, append: bool) -> Result<Self, InvalidSetting> {
        let invalid = |message: String| InvalidSetting {
            key: key.to_owned(),
            message,
        };
        if !table::lists().any(|s| s.name == key) {
            return Err(invalid(format!(
                "APPEND and SUBTRACT apply to list settings only ({})",
                table::lists()
                    .map(|s| s.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        let policy = self.cleanup_policy().edit(items, append).ok_or_else(|| {
            invalid("the items must be delete or compact, and leave at least one".into())
        })?;
        Ok(Self {
            cleanup_policy: Some(policy),
            ..self
        })
    }

    /// Settings from Kafka's (name, value) pairs, as CreateTopics and AlterConfigs carry
    /// them; a `None` value restores the default.
    ///
    /// # Errors
    /// [`InvalidSetting`] for an unknown setting or a bad value.
    pub fn parse<'a>(
        pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Self, InvalidSetting> {
        Self::default().with(pairs)
    }

    /// These settings with the (name, value) pairs applied (a `None` value restores the
    /// default), the settings not named kept, as IncrementalAlterConfigs changes them.
    /// A setting Kafka has and Ferry takes with no effect is checked, then dropped.
    ///
    /// # Errors
    /// As [`TopicConfig::parse`].
    pub fn with<'a>(
        self,
        pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Self, InvalidSetting> {
        let mut config = self;
        for (key, value) in pairs {
            let checked = match table::setting(key) {
                Some(setting) => setting.value.set(&mut config, value),
                None if table::is_inert(key) => table::check_inert(key, value),
                None => Err(format!(
                    "is not a setting Ferry supports ({}; Kafka's segment, flush, replica and format settings are taken with no effect)",
                    SETTINGS
                        .iter()
                        .map(|s| s.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
            };
            checked.map_err(|message| InvalidSetting {
                key: key.to_owned(),
                message,
            })?;
        }
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::settings::{CleanupPolicy, CompressionType, TimestampType};

    #[test]
    fn supported_settings_parse_and_others_are_named() {
        let c = TopicConfig::parse([
            ("retention.ms", Some("1000")),
            ("retention.bytes", Some("-1")),
            ("cleanup.policy", Some("delete")),
        ])
        .unwrap();
        assert_eq!(c.retention_ms, Some(1000));
        assert_eq!(c.retention_bytes, Some(-1));
        assert_eq!(
            TopicConfig::parse([("retention.ms", Some("soon"))])
                .unwrap_err()
                .to_string(),
            "retention.ms: 'soon' must be an integer from -1 to 9223372036854775807"
        );
        assert_eq!(
            TopicConfig::parse([("max.message.bytes", Some("134217728"))])
                .unwrap()
                .max_message_bytes,
            Some(128 << 20),
            "a topic may take batches of up to 128 MiB"
        );
        assert_eq!(
            TopicConfig::parse([("max.message.bytes", Some("134217729"))])
                .unwrap_err()
                .to_string(),
            "max.message.bytes: '134217729' must be an integer from 0 to 134217728"
        );
        for (value, policy) in [
            ("compact", CleanupPolicy::Compact),
            ("compact,delete", CleanupPolicy::CompactDelete),
            ("delete, compact", CleanupPolicy::CompactDelete),
            ("delete", CleanupPolicy::Delete),
        ] {
            let c = TopicConfig::parse([("cleanup.policy", Some(value))]).unwrap();
            assert_eq!(c.cleanup_policy(), policy, "{value}");
        }
        assert_eq!(
            TopicConfig::parse([("cleanup.policy", Some("compress"))])
                .unwrap_err()
                .to_string(),
            "cleanup.policy: 'compress' must be delete, compact, or compact,delete"
        );
        let c = TopicConfig::parse([
            ("delete.retention.ms", Some("100")),
            ("min.compaction.lag.ms", Some("5")),
            ("min.cleanable.dirty.ratio", Some("0.01")),
        ])
        .unwrap();
        assert_eq!(
            (c.delete_retention_ms(), c.min_compaction_lag_ms()),
            (100, 5)
        );
        assert!((c.min_cleanable_dirty_ratio() - 0.01).abs() < 1e-9);
        assert_eq!(
            TopicConfig::default().min_cleanable_dirty_ratio(),
            0.5,
            "Kafka's default"
        );
        assert!(TopicConfig::parse([("min.cleanable.dirty.ratio", Some("1.5"))]).is_err());
        assert!(
            TopicConfig::parse([("segment.bytez", Some("1"))])
                .unwrap_err()
                .to_string()
                .starts_with("segment.bytez: is not a setting")
        );
        assert_eq!(
            TopicConfig::parse([("segment.bytes", Some("1"))])
                .unwrap_err()
                .to_string(),
            "segment.bytes: '1' must be an integer of at least 14"
        );
        assert_eq!(
            TopicConfig::parse([
                ("segment.bytes", Some("20000")),
                ("retention.ms", Some("5"))
            ])
            .unwrap(),
            TopicConfig {
                retention_ms: Some(5),
                ..TopicConfig::default()
            },
            "taken, with no effect"
        );
    }

    #[test]
    fn timestamp_and_compression_types_parse_and_bad_values_are_named() {
        let c = TopicConfig::parse([
            ("message.timestamp.type", Some("LogAppendTime")),
            ("compression.type", Some("lz4")),
        ])
        .unwrap();
        assert_eq!(
            (c.message_timestamp_type(), c.compression_type()),
            (TimestampType::LogAppendTime, CompressionType::Lz4)
        );
        assert_eq!(
            TopicConfig::parse([("message.timestamp.type", Some("NowTime"))])
                .unwrap_err()
                .to_string(),
            "message.timestamp.type: 'NowTime' must be CreateTime or LogAppendTime"
        );
        assert_eq!(
            TopicConfig::parse([("compression.type", Some("brotli"))])
                .unwrap_err()
                .to_string(),
            "compression.type: 'brotli' must be producer, uncompressed, gzip, snappy, lz4 or zstd"
        );
    }
}
