//! What a topic is as stored: [`TopicMeta`] under `(P,"k","topic","meta",id)`, packed as
//! a tuple whose first element is its format (`docs/keyspace.md`), and the id under
//! `(P,"k","topic","by_name",name)`. Three formats exist; a value of an older one decodes
//! with the settings it lacks unset, and every write is of the newest ([`FORMAT`]). A
//! tuple packs at most 12 elements, so format 3's last settings are a nested tuple.

use super::TopicError;
use crate::metadata::settings::{CleanupPolicy, CompressionType, TimestampType, TopicConfig};
use foundationdb_tuple::{pack, unpack};

/// Format version of [`TopicMeta`] values: 2 adds the compaction settings to format 1's
/// fields, 3 `message.timestamp.type` and `compression.type` to format 2's (an older value
/// decodes with the settings it lacks unset).
const FORMAT: u16 = 3;

/// What a topic is, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicMeta {
    /// The numeric id (keys use it).
    pub id: u64,
    /// The topic id of protocol versions that name topics by UUID.
    pub uuid: [u8; 16],
    /// The name.
    pub name: String,
    /// How many partitions it has.
    pub partitions: i32,
    /// Its overrides of the broker defaults.
    pub config: TopicConfig,
}

/// A format 1 [`TopicMeta`] value.
type MetaTuple = (
    u16,
    String,
    Vec<u8>,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// A format 2 [`TopicMeta`] value: format 1's fields, then the cleanup policy's code,
/// `delete.retention.ms`, `min.compaction.lag.ms` and `min.cleanable.dirty.ratio` in
/// ten-thousandths.
type MetaTuple2 = (
    u16,
    String,
    Vec<u8>,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

/// A format 3 [`TopicMeta`] value: format 2's, then a tuple of the codes of
/// `message.timestamp.type` and `compression.type` (a tuple packs at most 12 elements).
type MetaTuple3 = (
    u16,
    String,
    Vec<u8>,
    i64,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    (Option<i64>, Option<i64>),
);

impl TopicMeta {
    /// The stored value, in format [`FORMAT`].
    pub(super) fn encode(&self) -> Vec<u8> {
        let c = &self.config;
        pack(&(
            FORMAT,
            self.name.as_str(),
            self.uuid.to_vec(),
            i64::from(self.partitions),
            c.retention_ms,
            c.retention_bytes,
            c.max_message_bytes,
            c.cleanup_policy.map(CleanupPolicy::code),
            c.delete_retention_ms,
            c.min_compaction_lag_ms,
            c.min_cleanable_dirty_ratio.map(i64::from),
            (
                c.message_timestamp_type.map(TimestampType::code),
                c.compression_type.map(CompressionType::code),
            ),
        ))
    }

    /// Topic `id`'s stored value `bytes`, of any format.
    ///
    /// # Errors
    /// [`TopicError::Corrupt`] when it decodes as none.
    pub(crate) fn decode(id: u64, bytes: &[u8]) -> Result<Self, TopicError> {
        let (fields, compaction, format) = if let Ok(t) = unpack::<MetaTuple3>(bytes) {
            let (v, name, uuid, partitions, rms, rbytes, mmb, policy, drms, lag, ratio, format) = t;
            (
                (v, name, uuid, partitions, rms, rbytes, mmb),
                (policy, drms, lag, ratio),
                format,
            )
        } else if let Ok(t) = unpack::<MetaTuple2>(bytes) {
            let (v, name, uuid, partitions, rms, rbytes, mmb, policy, drms, lag, ratio) = t;
            (
                (v, name, uuid, partitions, rms, rbytes, mmb),
                (policy, drms, lag, ratio),
                (None, None),
            )
        } else {
            (
                unpack::<MetaTuple>(bytes).map_err(|e| TopicError::Corrupt(format!("{e:?}")))?,
                (None, None, None, None),
                (None, None),
            )
        };
        let (_, name, uuid, partitions, retention_ms, retention_bytes, max_message_bytes) = fields;
        let (policy, delete_retention_ms, min_compaction_lag_ms, ratio) = compaction;
        let (timestamp_type, compression_type) = format;
        Ok(Self {
            id,
            uuid: uuid
                .try_into()
                .map_err(|_| TopicError::Corrupt("topic uuid".into()))?,
            name,
            partitions: i32::try_from(partitions)
                .map_err(|_| TopicError::Corrupt("partition count".into()))?,
            config: TopicConfig {
                retention_ms,
                retention_bytes,
                max_message_bytes,
                cleanup_policy: policy.and_then(CleanupPolicy::from_code),
                delete_retention_ms,
                min_compaction_lag_ms,
                min_cleanable_dirty_ratio: ratio.and_then(|r| u16::try_from(r).ok()),
                message_timestamp_type: timestamp_type.and_then(TimestampType::from_code),
                compression_type: compression_type.and_then(CompressionType::from_code),
            },
        })
    }
}

/// The topic id a topic's name maps to, as stored.
pub(super) fn decode_id(bytes: &[u8]) -> Result<u64, TopicError> {
    unpack::<(u64,)>(bytes)
        .map(|(id,)| id)
        .map_err(|e| TopicError::Corrupt(format!("topic id: {e:?}")))
}

/// A random (version 4) UUID for a new topic.
pub(super) fn new_uuid() -> [u8; 16] {
    let mut bytes = fastrand::u128(..).to_be_bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_round_trips() {
        let m = TopicMeta {
            id: 7,
            uuid: new_uuid(),
            name: "t".into(),
            partitions: 3,
            config: TopicConfig {
                retention_ms: Some(5),
                retention_bytes: None,
                max_message_bytes: Some(2048),
                cleanup_policy: Some(CleanupPolicy::CompactDelete),
                delete_retention_ms: Some(1000),
                min_compaction_lag_ms: None,
                min_cleanable_dirty_ratio: Some(100),
                message_timestamp_type: Some(TimestampType::LogAppendTime),
                compression_type: Some(CompressionType::Zstd),
            },
        };
        assert_eq!(TopicMeta::decode(7, &m.encode()).unwrap(), m);
    }

    #[test]
    fn format_2_meta_decodes_without_format_settings() {
        let v2 = pack(&(
            2u16,
            "t",
            new_uuid().to_vec(),
            3i64,
            None::<i64>,
            None::<i64>,
            None::<i64>,
            Some(1i64),
            Some(100i64),
            None::<i64>,
            None::<i64>,
        ));
        let m = TopicMeta::decode(7, &v2).unwrap();
        assert_eq!(m.config.cleanup_policy(), CleanupPolicy::Compact);
        assert_eq!(m.config.delete_retention_ms(), 100);
        assert_eq!(m.config.message_timestamp_type(), TimestampType::CreateTime);
        assert_eq!(m.config.compression_type(), CompressionType::Producer);
    }

    #[test]
    fn format_1_meta_decodes_without_compaction_settings() {
        let uuid = new_uuid();
        let v1 = pack(&(
            1u16,
            "t",
            uuid.to_vec(),
            3i64,
            Some(5i64),
            None::<i64>,
            None::<i64>,
        ));
        let m = TopicMeta::decode(7, &v1).unwrap();
        assert_eq!(m.config.retention_ms, Some(5));
        assert_eq!(m.config.cleanup_policy(), CleanupPolicy::Delete);
    }
}
