//! A topic's settings ([`TopicConfig`]): one typed field per setting, which the partition
//! log reads, with Kafka's defaults; `apply` sets them from Kafka's (name, value) pairs as
//! the table says.

use super::choices::{CleanupPolicy, CompressionType, TimestampType};

/// Kafka's default `delete.retention.ms`: one day.
pub(super) const DEFAULT_DELETE_RETENTION_MS: i64 = 86_400_000;
/// Kafka's default `min.compaction.lag.ms`: none.
pub(super) const DEFAULT_MIN_COMPACTION_LAG_MS: i64 = 0;
/// Kafka's default `min.cleanable.dirty.ratio` (0.5), in ten-thousandths.
pub(super) const DEFAULT_MIN_CLEANABLE_DIRTY_RATIO: u16 = 5_000;
/// `min.cleanable.dirty.ratio` is kept in ten-thousandths: 1 is this.
pub(super) const RATIO_ONE: u16 = 10_000;

/// A topic's overrides of the broker defaults; `None` follows the `[kafka]` default.
///
/// Each field is the value of one row of the settings table (`SETTINGS`); the row says how it is parsed,
/// checked, defaulted and described.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TopicConfig {
    /// `retention.ms`.
    pub retention_ms: Option<i64>,
    /// `retention.bytes`.
    pub retention_bytes: Option<i64>,
    /// `max.message.bytes`.
    pub max_message_bytes: Option<i64>,
    /// `cleanup.policy` (`None`: `delete`).
    pub cleanup_policy: Option<CleanupPolicy>,
    /// `delete.retention.ms`.
    pub delete_retention_ms: Option<i64>,
    /// `min.compaction.lag.ms`.
    pub min_compaction_lag_ms: Option<i64>,
    /// `min.cleanable.dirty.ratio`, in ten-thousandths (0.5 is 5000).
    pub min_cleanable_dirty_ratio: Option<u16>,
    /// `message.timestamp.type` (`None`: `CreateTime`).
    pub message_timestamp_type: Option<TimestampType>,
    /// `compression.type` (`None`: `producer`).
    pub compression_type: Option<CompressionType>,
}

impl TopicConfig {
    /// The topic's `cleanup.policy`.
    pub fn cleanup_policy(&self) -> CleanupPolicy {
        self.cleanup_policy.unwrap_or(CleanupPolicy::Delete)
    }

    /// The topic's `message.timestamp.type`.
    pub fn message_timestamp_type(&self) -> TimestampType {
        self.message_timestamp_type
            .unwrap_or(TimestampType::CreateTime)
    }

    /// The topic's `compression.type`.
    pub fn compression_type(&self) -> CompressionType {
        self.compression_type.unwrap_or(CompressionType::Producer)
    }

    /// The topic's `delete.retention.ms`.
    pub fn delete_retention_ms(&self) -> i64 {
        self.delete_retention_ms
            .unwrap_or(DEFAULT_DELETE_RETENTION_MS)
    }

    /// The topic's `min.compaction.lag.ms`.
    pub fn min_compaction_lag_ms(&self) -> i64 {
        self.min_compaction_lag_ms
            .unwrap_or(DEFAULT_MIN_COMPACTION_LAG_MS)
    }

    /// The topic's `min.cleanable.dirty.ratio`, from 0 to 1.
    pub fn min_cleanable_dirty_ratio(&self) -> f64 {
        ratio(
            self.min_cleanable_dirty_ratio
                .unwrap_or(DEFAULT_MIN_CLEANABLE_DIRTY_RATIO),
        )
    }
}

/// A share kept in ten-thousandths, from 0 to 1.
pub(super) fn ratio(ten_thousandths: u16) -> f64 {
    f64::from(ten_thousandths) / f64::from(RATIO_ONE)
}
