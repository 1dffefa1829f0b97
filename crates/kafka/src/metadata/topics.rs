//! Topics: their metadata in the store, the settings Ferry supports, and a cache every
//! request reads instead of the store.
//!
//! A topic has a numeric id (never reused, so a recreated topic never meets its
//! predecessor's keys), a UUID for the protocol versions that name topics by id, a
//! partition count, and its overrides of the broker's defaults. Each partition owns a
//! stage (`kafka/<id>/<partition>`) that producers append to and a log its sequencer
//! writes. Every change bumps `(P,"k","topic","version")`, which every instance's cache
//! watches, so all instances see a new topic without polling. The cache remembers the
//! version it was read at and never goes back to an older one: refreshes run concurrently
//! (the one following changes, and the one after each change made here), and the one that
//! read first may finish last.

use crate::keys::{KafkaKeys, PartitionKeys, stage_name};
use crate::metadata::format_settings::{CompressionType, TimestampType};
use crate::metadata::inert_settings;
use ferry_config::KafkaConfig;
use ferry_stage::Stage;
use ferry_stage::{StageError, StageOptions, Stages};
use ferry_store::{Database, RangeOption, StoreError, Transaction, TransactionError};
use foundationdb_tuple::{pack, unpack};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Format version of [`TopicMeta`] values: 2 adds the compaction settings to format 1's
/// fields, 3 `message.timestamp.type` and `compression.type` to format 2's (an older value
/// decodes with the settings it lacks unset).
const FORMAT: u16 = 3;
/// Longest topic name Kafka allows.
const MAX_NAME_LEN: usize = 249;
/// Most partitions a topic may have.
pub const MAX_PARTITIONS: i32 = 10_000;

/// The topic settings Ferry implements, as Kafka names them.
pub const RETENTION_MS: &str = "retention.ms";
/// See [`RETENTION_MS`].
pub const RETENTION_BYTES: &str = "retention.bytes";
/// See [`RETENTION_MS`].
pub const MAX_MESSAGE_BYTES: &str = "max.message.bytes";
/// See [`RETENTION_MS`]: `delete`, `compact`, or both (`compact,delete`).
pub const CLEANUP_POLICY: &str = "cleanup.policy";
/// See [`RETENTION_MS`]; how long a compacted topic keeps a tombstone.
pub const DELETE_RETENTION_MS: &str = "delete.retention.ms";
/// See [`RETENTION_MS`]; how old a record must be before compaction may remove it.
pub const MIN_COMPACTION_LAG_MS: &str = "min.compaction.lag.ms";
/// See [`RETENTION_MS`]; the share of a log not yet compacted that starts a compaction.
pub const MIN_CLEANABLE_DIRTY_RATIO: &str = "min.cleanable.dirty.ratio";
/// See [`RETENTION_MS`]: `CreateTime` (the producer's) or `LogAppendTime` (the broker's).
pub const MESSAGE_TIMESTAMP_TYPE: &str = "message.timestamp.type";
/// See [`RETENTION_MS`]: `producer` (the producer's codec) or the codec batches are
/// compressed with again.
pub const COMPRESSION_TYPE: &str = "compression.type";
/// Kafka's default `delete.retention.ms`: one day.
pub const DEFAULT_DELETE_RETENTION_MS: i64 = 86_400_000;
/// Kafka's default `min.cleanable.dirty.ratio` (0.5), in ten-thousandths.
pub const DEFAULT_MIN_CLEANABLE_DIRTY_RATIO: u16 = 5_000;
/// `min.cleanable.dirty.ratio` is kept in ten-thousandths: 1 is this.
const RATIO_ONE: u16 = 10_000;

/// Why a topic operation failed; each maps to a Kafka error code.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TopicError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A partition's stage could not be created.
    #[error("cannot create the partition stage: {0}")]
    Stage(String),
    /// The topic exists already.
    #[error("topic '{0}' already exists")]
    Exists(String),
    /// No topic has this name.
    #[error("topic '{0}' does not exist")]
    Unknown(String),
    /// The name is not a legal Kafka topic name.
    #[error(
        "'{0}' is not a valid topic name: use 1 to 249 of a-z, A-Z, 0-9, '.', '_', '-' (not '.' or '..')"
    )]
    InvalidName(String),
    /// The partition count is out of range or does not grow.
    #[error("{0}")]
    InvalidPartitions(String),
    /// A setting is unknown or its value is invalid.
    #[error("{key}: {message}")]
    InvalidConfig {
        /// The setting.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// The principal's Kafka ACLs do not allow the operation on the topic.
    #[error("Authorization failed: the ACLs do not allow this on topic '{0}'")]
    NotAuthorized(String),
    /// A stored value does not decode.
    #[error("the store holds a topic value this ferry cannot decode ({0})")]
    Corrupt(String),
}

impl TransactionError for TopicError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) => Some(e),
            _ => None,
        }
    }
}

impl From<StageError> for TopicError {
    fn from(e: StageError) -> Self {
        match e {
            StageError::Store(s) => Self::Store(s),
            other => Self::Stage(other.to_string()),
        }
    }
}

impl TopicError {
    /// The Kafka error code for an answer.
    pub fn code(&self) -> i16 {
        use kafka_protocol::ResponseError as E;
        match self {
            Self::Store(_) | Self::Stage(_) | Self::Corrupt(_) => E::UnknownServerError.code(),
            Self::Exists(_) => E::TopicAlreadyExists.code(),
            Self::Unknown(_) => E::UnknownTopicOrPartition.code(),
            Self::InvalidName(_) => E::InvalidTopicException.code(),
            Self::InvalidPartitions(_) => E::InvalidPartitions.code(),
            Self::InvalidConfig { .. } => E::InvalidConfig.code(),
            Self::NotAuthorized(_) => E::TopicAuthorizationFailed.code(),
        }
    }
}

/// A topic's overrides of the broker defaults; `None` follows the `[kafka]` default.
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

/// What becomes of a topic's old records: Kafka's `cleanup.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupPolicy {
    /// `delete`: retention deletes them by age and size.
    Delete,
    /// `compact`: compaction keeps the newest record of each key; no retention.
    Compact,
    /// `compact,delete`: both.
    CompactDelete,
}

impl CleanupPolicy {
    /// Parses Kafka's list (`compact,delete` in any order, spaces allowed).
    fn parse(value: &str) -> Option<Self> {
        Self::edited((false, false), value, true)
    }

    /// This policy with the items of the list `items` added (`add`) or taken away; `None`
    /// when an item is neither `compact` nor `delete`, or no policy is left.
    fn edit(self, items: &str, add: bool) -> Option<Self> {
        Self::edited((self.compacts(), self.deletes()), items, add)
    }

    /// The policy of the flags (compact, delete) with `items` added or taken away.
    fn edited((mut compact, mut delete): (bool, bool), items: &str, add: bool) -> Option<Self> {
        for item in items.split(',').map(str::trim) {
            match item {
                "compact" => compact = add,
                "delete" => delete = add,
                _ => return None,
            }
        }
        match (compact, delete) {
            (true, true) => Some(Self::CompactDelete),
            (true, false) => Some(Self::Compact),
            (false, true) => Some(Self::Delete),
            (false, false) => None,
        }
    }

    /// Kafka's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delete => "delete",
            Self::Compact => "compact",
            Self::CompactDelete => "compact,delete",
        }
    }

    /// Whether compaction applies.
    pub fn compacts(self) -> bool {
        self != Self::Delete
    }

    /// Whether retention (by age and size) applies.
    pub fn deletes(self) -> bool {
        self != Self::Compact
    }

    fn code(self) -> i64 {
        match self {
            Self::Delete => 0,
            Self::Compact => 1,
            Self::CompactDelete => 2,
        }
    }

    fn from_code(code: i64) -> Option<Self> {
        [Self::Delete, Self::Compact, Self::CompactDelete]
            .into_iter()
            .find(|p| p.code() == code)
    }
}

impl TopicConfig {
    /// The topic's `cleanup.policy`.
    pub fn cleanup_policy(&self) -> CleanupPolicy {
        self.cleanup_policy.unwrap_or(CleanupPolicy::Delete)
    }

    /// This config with the items of `items` added to (`append`: IncrementalAlterConfigs
    /// APPEND) or taken from (SUBTRACT) the list setting `key` — `cleanup.policy`, the only
    /// list Ferry has.
    ///
    /// # Errors
    /// [`TopicError::InvalidConfig`] for another setting, an unknown item, or a list left
    /// empty.
    pub fn edit_list(self, key: &str, items: &str, append: bool) -> Result<Self, TopicError> {
        let invalid = |message: &str| TopicError::InvalidConfig {
            key: key.to_owned(),
            message: message.to_owned(),
        };
        if key != CLEANUP_POLICY {
            return Err(invalid(
                "APPEND and SUBTRACT apply to list settings only (cleanup.policy)",
            ));
        }
        let policy = self.cleanup_policy().edit(items, append).ok_or_else(|| {
            invalid("the items must be delete or compact, and leave at least one")
        })?;
        Ok(Self {
            cleanup_policy: Some(policy),
            ..self
        })
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
        self.min_compaction_lag_ms.unwrap_or(0)
    }

    /// The topic's `min.cleanable.dirty.ratio`, from 0 to 1.
    pub fn min_cleanable_dirty_ratio(&self) -> f64 {
        f64::from(
            self.min_cleanable_dirty_ratio
                .unwrap_or(DEFAULT_MIN_CLEANABLE_DIRTY_RATIO),
        ) / f64::from(RATIO_ONE)
    }

    /// Settings from Kafka's (name, value) pairs, as CreateTopics and AlterConfigs carry
    /// them; a `None` value restores the default.
    ///
    /// # Errors
    /// [`TopicError::InvalidConfig`] for an unknown setting or a bad value.
    pub fn parse<'a>(
        pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Self, TopicError> {
        Self::default().with(pairs)
    }

    /// These settings with the (name, value) pairs applied (a `None` value restores the
    /// default), the settings not named kept, as IncrementalAlterConfigs changes them.
    ///
    /// # Errors
    /// As [`TopicConfig::parse`].
    pub fn with<'a>(
        self,
        pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<Self, TopicError> {
        let mut config = self;
        for (key, value) in pairs {
            let number = |min: i64, max: i64| -> Result<Option<i64>, TopicError> {
                value
                    .map(|v| {
                        v.trim()
                            .parse::<i64>()
                            .ok()
                            .filter(|n| (min..=max).contains(n))
                            .ok_or_else(|| TopicError::InvalidConfig {
                                key: key.to_owned(),
                                message: format!("'{v}' must be an integer from {min} to {max}"),
                            })
                    })
                    .transpose()
            };
            match key {
                RETENTION_MS => config.retention_ms = number(-1, i64::MAX)?,
                RETENTION_BYTES => config.retention_bytes = number(-1, i64::MAX)?,
                MAX_MESSAGE_BYTES => {
                    config.max_message_bytes =
                        number(0, ferry_config::kafka::MAX_MESSAGE_BYTES_LIMIT as i64)?;
                }
                CLEANUP_POLICY => {
                    config.cleanup_policy = value
                        .map(|v| {
                            CleanupPolicy::parse(v).ok_or_else(|| TopicError::InvalidConfig {
                                key: key.to_owned(),
                                message: format!(
                                    "'{v}' must be delete, compact, or compact,delete"
                                ),
                            })
                        })
                        .transpose()?;
                }
                DELETE_RETENTION_MS => config.delete_retention_ms = number(0, i64::MAX)?,
                MIN_COMPACTION_LAG_MS => config.min_compaction_lag_ms = number(0, i64::MAX)?,
                MIN_CLEANABLE_DIRTY_RATIO => {
                    config.min_cleanable_dirty_ratio = value
                        .map(|v| {
                            v.trim()
                                .parse::<f64>()
                                .ok()
                                .filter(|r| (0.0..=1.0).contains(r))
                                .map(|r| (r * f64::from(RATIO_ONE)).round() as u16)
                                .ok_or_else(|| TopicError::InvalidConfig {
                                    key: key.to_owned(),
                                    message: format!("'{v}' must be a number from 0 to 1"),
                                })
                        })
                        .transpose()?;
                }
                MESSAGE_TIMESTAMP_TYPE => {
                    config.message_timestamp_type = one_of(
                        key,
                        value,
                        TimestampType::parse,
                        "CreateTime or LogAppendTime",
                    )?;
                }
                COMPRESSION_TYPE => {
                    config.compression_type = one_of(
                        key,
                        value,
                        CompressionType::parse,
                        "producer, uncompressed, gzip, snappy, lz4 or zstd",
                    )?;
                }
                _ if inert_settings::is_inert(key) => {
                    inert_settings::check(key, value).map_err(|message| {
                        TopicError::InvalidConfig {
                            key: key.to_owned(),
                            message,
                        }
                    })?;
                }
                _ => {
                    return Err(TopicError::InvalidConfig {
                        key: key.to_owned(),
                        message: format!(
                            "is not a setting Ferry supports ({RETENTION_MS}, {RETENTION_BYTES}, {MAX_MESSAGE_BYTES}, {CLEANUP_POLICY}, {DELETE_RETENTION_MS}, {MIN_COMPACTION_LAG_MS}, {MIN_CLEANABLE_DIRTY_RATIO}, {MESSAGE_TIMESTAMP_TYPE}, {COMPRESSION_TYPE}; Kafka's segment, flush, replica and format settings are taken with no effect)"
                        ),
                    });
                }
            }
        }
        Ok(config)
    }
}

/// Setting `key`'s `value` (`None`: the default) as `parse` reads it.
///
/// # Errors
/// [`TopicError::InvalidConfig`] saying the value must be one of `expected`.
fn one_of<T>(
    key: &str,
    value: Option<&str>,
    parse: fn(&str) -> Option<T>,
    expected: &str,
) -> Result<Option<T>, TopicError> {
    value
        .map(|v| {
            parse(v).ok_or_else(|| TopicError::InvalidConfig {
                key: key.to_owned(),
                message: format!("'{v}' must be {expected}"),
            })
        })
        .transpose()
}

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
    fn encode(&self) -> Vec<u8> {
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

/// One partition of a cached topic.
#[derive(Debug, Clone)]
pub struct Partition {
    /// The topic's name (for metric labels and answers).
    pub topic: Arc<str>,
    /// The topic's id.
    pub topic_id: u64,
    /// Its index in the topic.
    pub index: i32,
    /// Its keys.
    pub keys: PartitionKeys,
    /// The stage producers append to.
    pub stage: Stage,
}

/// A cached topic.
#[derive(Debug)]
pub struct Topic {
    /// What the store says about it.
    pub meta: TopicMeta,
    /// Its partitions, by index.
    pub partitions: Vec<Partition>,
}

impl Topic {
    /// Partition `index`, if the topic has it.
    pub fn partition(&self, index: i32) -> Option<&Partition> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.get(i))
    }
}

/// The broker-wide defaults a topic follows unless it overrides them: the dynamic broker
/// settings ([`crate::metadata::broker_settings`]) — this instance's own, then the cluster's — over
/// `[kafka]`'s values and Kafka's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicDefaults {
    /// `kafka.retention_ms`.
    pub retention_ms: i64,
    /// `kafka.retention_bytes`.
    pub retention_bytes: i64,
    /// `kafka.max_message_bytes`.
    pub max_message_bytes: i64,
    /// This instance's dynamic broker settings, as the topic settings they default.
    pub broker: TopicConfig,
    /// The cluster's dynamic broker settings, as the topic settings they default.
    pub cluster: TopicConfig,
}

/// Which settings set a topic's value of a setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    /// The topic's own.
    Topic,
    /// This instance's dynamic broker settings.
    Broker,
    /// The cluster's dynamic broker settings.
    Cluster,
}

impl TopicDefaults {
    /// The defaults `[kafka]` sets, with no dynamic broker settings.
    pub fn from_config(config: &KafkaConfig) -> Self {
        Self {
            retention_ms: config.retention_ms,
            retention_bytes: config.retention_bytes,
            max_message_bytes: config.max_message_bytes as i64,
            broker: TopicConfig::default(),
            cluster: TopicConfig::default(),
        }
    }

    /// A topic's settings `t`, each it does not set taken from the dynamic broker
    /// settings where they set it: what its `cleanup.policy()`, `delete.retention.ms()`
    /// and the other accessors answer.
    pub fn resolve(&self, t: &TopicConfig) -> TopicConfig {
        let (b, c) = (&self.broker, &self.cluster);
        TopicConfig {
            retention_ms: t.retention_ms.or(b.retention_ms).or(c.retention_ms),
            retention_bytes: t
                .retention_bytes
                .or(b.retention_bytes)
                .or(c.retention_bytes),
            max_message_bytes: t
                .max_message_bytes
                .or(b.max_message_bytes)
                .or(c.max_message_bytes),
            cleanup_policy: t.cleanup_policy.or(b.cleanup_policy).or(c.cleanup_policy),
            delete_retention_ms: t
                .delete_retention_ms
                .or(b.delete_retention_ms)
                .or(c.delete_retention_ms),
            min_compaction_lag_ms: t
                .min_compaction_lag_ms
                .or(b.min_compaction_lag_ms)
                .or(c.min_compaction_lag_ms),
            min_cleanable_dirty_ratio: t
                .min_cleanable_dirty_ratio
                .or(b.min_cleanable_dirty_ratio)
                .or(c.min_cleanable_dirty_ratio),
            message_timestamp_type: t
                .message_timestamp_type
                .or(b.message_timestamp_type)
                .or(c.message_timestamp_type),
            compression_type: t
                .compression_type
                .or(b.compression_type)
                .or(c.compression_type),
        }
    }

    /// Which of the topic's settings `t` and the dynamic broker settings sets a setting
    /// (`set` says whether a config sets it), the topic's first; `None`: none does, the
    /// value is `[kafka]`'s or Kafka's default.
    pub fn layer(&self, t: &TopicConfig, set: impl Fn(&TopicConfig) -> bool) -> Option<Layer> {
        [
            (t, Layer::Topic),
            (&self.broker, Layer::Broker),
            (&self.cluster, Layer::Cluster),
        ]
        .into_iter()
        .find_map(|(config, layer)| set(config).then_some(layer))
    }

    /// A topic's effective `retention.ms`.
    pub fn retention_ms(&self, t: &TopicConfig) -> i64 {
        self.resolve(t).retention_ms.unwrap_or(self.retention_ms)
    }

    /// A topic's effective `retention.bytes`.
    pub fn retention_bytes(&self, t: &TopicConfig) -> i64 {
        self.resolve(t)
            .retention_bytes
            .unwrap_or(self.retention_bytes)
    }

    /// A topic's effective `max.message.bytes`.
    pub fn max_message_bytes(&self, t: &TopicConfig) -> usize {
        let bytes = self.resolve(t).max_message_bytes;
        usize::try_from(bytes.unwrap_or(self.max_message_bytes)).unwrap_or(0)
    }
}

/// Every topic in one store, cached; cheap to clone.
#[derive(Clone)]
pub struct Topics {
    /// The store.
    db: Database,
    /// The Kafka keyspace.
    keys: KafkaKeys,
    /// The stages, for each partition's staging queue.
    stages: Stages,
    /// The cache.
    cache: Arc<RwLock<Cached>>,
    /// Bumped after every refresh that installs a cache, for whoever follows topic changes.
    refreshed: Arc<tokio::sync::watch::Sender<u64>>,
}

/// The topics as read at one version of the topic list.
#[derive(Default)]
struct Cached {
    /// The value of the topics version key the topics were read with.
    version: i64,
    /// The topics, by name.
    by_name: HashMap<String, Arc<Topic>>,
}

impl Topics {
    /// The topics of `db` under the key prefix of `stages`.
    pub fn new(db: Database, keys: KafkaKeys, stages: Stages) -> Self {
        Self {
            db,
            keys,
            stages,
            cache: Arc::default(),
            refreshed: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    /// Changes (to "seen") after every refresh of the cache: a topic created, deleted,
    /// grown or reconfigured on any instance.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.refreshed.subscribe()
    }

    /// The cached topic `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.cache.read().by_name.get(name).cloned()
    }

    /// Every cached topic, sorted by name.
    pub fn all(&self) -> Vec<Arc<Topic>> {
        let mut all: Vec<_> = self.cache.read().by_name.values().cloned().collect();
        all.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));
        all
    }

    /// The cached topic whose UUID is `uuid`.
    pub fn by_uuid(&self, uuid: [u8; 16]) -> Option<Arc<Topic>> {
        self.cache
            .read()
            .by_name
            .values()
            .find(|t| t.meta.uuid == uuid)
            .cloned()
    }

    /// Creates topic `name` with `partitions` partitions and `config`, then refreshes the
    /// cache. With `validate_only`, checks everything and creates nothing.
    ///
    /// # Errors
    /// [`TopicError::InvalidName`], [`TopicError::InvalidPartitions`],
    /// [`TopicError::Exists`], or the store's error.
    pub async fn create(
        &self,
        name: &str,
        partitions: i32,
        config: TopicConfig,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        check_name(name)?;
        check_partition_count(partitions)?;
        let meta = self
            .db
            .run(|tx| async move {
                if tx
                    .get(&self.keys.topic_by_name(name), false)
                    .await?
                    .is_some()
                {
                    return Err(TopicError::Exists(name.to_owned()));
                }
                let id = match tx.get(&self.keys.next_topic_id(), false).await? {
                    Some(v) => decode_id(&v)?,
                    None => 1,
                };
                let meta = TopicMeta {
                    id,
                    uuid: new_uuid(),
                    name: name.to_owned(),
                    partitions,
                    config,
                };
                if !validate_only {
                    tx.set(&self.keys.next_topic_id(), pack(&(id + 1,)));
                    tx.set(&self.keys.topic_by_name(name), pack(&(id,)));
                    self.write_meta(&tx, &meta);
                }
                Ok(meta)
            })
            .await?;
        if validate_only {
            return Ok(Arc::new(Topic {
                meta,
                partitions: Vec::new(),
            }));
        }
        self.refresh().await?;
        self.get(name)
            .ok_or_else(|| TopicError::Unknown(name.to_owned()))
    }

    /// Deletes topic `name`: its metadata, every partition's log (dropping the log's
    /// references to the spills of its large batches), lease and producer state, and its
    /// stages. A sequencer of the topic fails its next transaction (its lease is gone) and
    /// stops.
    ///
    /// # Errors
    /// [`TopicError::Unknown`], or the store's error.
    pub async fn delete(&self, name: &str) -> Result<(), TopicError> {
        let meta = self
            .db
            .run(|tx| async move {
                let meta = self.meta_in(&tx, name).await?;
                let spills = self.stages.spills();
                for p in 0..meta.partitions {
                    let (b, e) = self
                        .keys
                        .partition(meta.id, p)
                        .spilled_range(i64::MIN, i64::MAX);
                    for kv in tx.get_range(&RangeOption::new(b, e), false).await? {
                        let (id,) = unpack::<(u64,)>(&kv.value).map_err(|e| {
                            TopicError::Corrupt(format!("spilled batch entry: {e:?}"))
                        })?;
                        spills.drop_ref_in(&tx, id);
                    }
                }
                tx.clear(&self.keys.topic_by_name(name));
                tx.clear(&self.keys.topic_meta(meta.id));
                let (b, e) = self.keys.topic_partitions(meta.id);
                tx.clear_range(&b, &e);
                tx.atomic_add(&self.keys.topics_version(), 1);
                Ok::<_, TopicError>(meta)
            })
            .await?;
        for p in 0..meta.partitions {
            self.stages.delete(&stage_name(meta.id, p)).await?;
        }
        self.refresh().await
    }

    /// Grows topic `name` to `count` partitions.
    ///
    /// # Errors
    /// [`TopicError::InvalidPartitions`] when `count` does not grow it,
    /// [`TopicError::Unknown`], or the store's error.
    pub async fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        check_partition_count(count)?;
        self.db
            .run(|tx| async move {
                let mut meta = self.meta_in(&tx, name).await?;
                if count <= meta.partitions {
                    return Err(TopicError::InvalidPartitions(format!(
                        "topic '{name}' has {} partitions; the new count must be larger, not {count}",
                        meta.partitions
                    )));
                }
                meta.partitions = count;
                if !validate_only {
                    self.write_meta(&tx, &meta);
                }
                Ok(())
            })
            .await?;
        self.refresh().await
    }

    /// Replaces topic `name`'s overrides with what `change` makes of them, in one store
    /// transaction (only checked when `validate_only`).
    ///
    /// # Errors
    /// [`TopicError::Unknown`], `change`'s error, or the store's error.
    pub async fn set_config(
        &self,
        name: &str,
        change: impl Fn(TopicConfig) -> Result<TopicConfig, TopicError>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let change = &change;
        self.db
            .run(|tx| async move {
                let mut meta = self.meta_in(&tx, name).await?;
                meta.config = change(meta.config)?;
                if !validate_only {
                    self.write_meta(&tx, &meta);
                }
                Ok::<_, TopicError>(())
            })
            .await?;
        self.refresh().await
    }

    /// Reloads the cache from the store, keeping the cached value of every topic whose
    /// metadata did not change; a cache read at a newer version meanwhile is kept.
    ///
    /// # Errors
    /// The store's error, or a partition stage that cannot be opened.
    pub async fn refresh(&self) -> Result<(), TopicError> {
        let tx = self.db.begin()?;
        let version = tx
            .get(&self.keys.topics_version(), true)
            .await?
            .and_then(|v| v.try_into().ok())
            .map_or(0, i64::from_le_bytes);
        let (b, e) = self.keys.topic_metas();
        let kvs = tx.get_range(&RangeOption::new(b, e), true).await?;
        let mut fresh = HashMap::with_capacity(kvs.len());
        for kv in kvs {
            let id = foundationdb_tuple::unpack::<(String, String, String, String, u64)>(&kv.key)
                .map(|(.., id)| id)
                .map_err(|e| TopicError::Corrupt(format!("topic key: {e:?}")))?;
            let meta = TopicMeta::decode(id, &kv.value)?;
            let cached = self.get(&meta.name).filter(|t| t.meta == meta);
            let topic = match cached {
                Some(t) => t,
                None => Arc::new(self.load(meta).await?),
            };
            fresh.insert(topic.meta.name.clone(), topic);
        }
        if self.install(version, fresh) {
            self.refreshed.send_modify(|n| *n += 1);
        }
        Ok(())
    }

    /// Makes `by_name`, read at topics version `version`, the cache — unless the cache was
    /// read at a newer version (a refresh that began later finished first). Returns
    /// whether it did.
    fn install(&self, version: i64, by_name: HashMap<String, Arc<Topic>>) -> bool {
        let mut cache = self.cache.write();
        if version < cache.version {
            return false;
        }
        *cache = Cached { version, by_name };
        true
    }

    /// Keeps the cache fresh until `shutdown`: sleeps on a watch of the topics version
    /// and refreshes whenever any instance changes a topic.
    pub async fn follow_changes(&self, shutdown: CancellationToken) {
        loop {
            let watch = match self.db.begin() {
                Ok(tx) => {
                    let watch = tx.watch(&self.keys.topics_version());
                    match tx.get(&self.keys.topics_version(), false).await {
                        Ok(_) => tx.commit().await.map(|_| watch),
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e),
            };
            let outcome = match watch {
                Ok(watch) => tokio::select! {
                    () = shutdown.cancelled() => return,
                    fired = watch => fired,
                },
                Err(e) => Err(e),
            };
            if let Err(e) = outcome {
                warn!(error = %e, "watching the topic list failed; retrying");
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                }
            }
            if let Err(e) = self.refresh().await {
                warn!(error = %e, "refreshing the topic list failed");
            }
        }
    }

    /// Builds a cached topic, opening (or creating) each partition's stage.
    async fn load(&self, meta: TopicMeta) -> Result<Topic, TopicError> {
        let name: Arc<str> = Arc::from(meta.name.as_str());
        let mut partitions = Vec::with_capacity(meta.partitions as usize);
        for index in 0..meta.partitions {
            let stage = self
                .stages
                .create(&stage_name(meta.id, index), &StageOptions::default())
                .await?;
            partitions.push(Partition {
                topic: name.clone(),
                topic_id: meta.id,
                index,
                keys: self.keys.partition(meta.id, index),
                stage,
            });
        }
        Ok(Topic { meta, partitions })
    }

    async fn meta_in(&self, tx: &Transaction, name: &str) -> Result<TopicMeta, TopicError> {
        let id = tx
            .get(&self.keys.topic_by_name(name), false)
            .await?
            .ok_or_else(|| TopicError::Unknown(name.to_owned()))?;
        let id = decode_id(&id)?;
        let meta = tx
            .get(&self.keys.topic_meta(id), false)
            .await?
            .ok_or_else(|| TopicError::Corrupt(format!("topic '{name}' has no metadata")))?;
        TopicMeta::decode(id, &meta)
    }

    fn write_meta(&self, tx: &Transaction, meta: &TopicMeta) {
        tx.set(&self.keys.topic_meta(meta.id), meta.encode());
        tx.atomic_add(&self.keys.topics_version(), 1);
    }
}

fn decode_id(bytes: &[u8]) -> Result<u64, TopicError> {
    unpack::<(u64,)>(bytes)
        .map(|(id,)| id)
        .map_err(|e| TopicError::Corrupt(format!("topic id: {e:?}")))
}

/// A random (version 4) UUID for a new topic.
fn new_uuid() -> [u8; 16] {
    let mut bytes = fastrand::u128(..).to_be_bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    bytes
}

/// Kafka's topic name rule.
fn check_name(name: &str) -> Result<(), TopicError> {
    let legal = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if legal {
        Ok(())
    } else {
        Err(TopicError::InvalidName(name.to_owned()))
    }
}

fn check_partition_count(count: i32) -> Result<(), TopicError> {
    if (1..=MAX_PARTITIONS).contains(&count) {
        Ok(())
    } else {
        Err(TopicError::InvalidPartitions(format!(
            "a topic needs 1 to {MAX_PARTITIONS} partitions, not {count}"
        )))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn kafka_topic_names_are_checked() {
        for ok in ["orders", "a.b_c-D9", &"x".repeat(249)] {
            check_name(ok).unwrap();
        }
        for bad in ["", ".", "..", "has space", "ü", &"x".repeat(250)] {
            assert!(
                matches!(check_name(bad), Err(TopicError::InvalidName(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn supported_settings_parse_and_others_are_named() {
        let c = TopicConfig::parse([
            (RETENTION_MS, Some("1000")),
            (RETENTION_BYTES, Some("-1")),
            (CLEANUP_POLICY, Some("delete")),
        ])
        .unwrap();
        assert_eq!(c.retention_ms, Some(1000));
        assert_eq!(c.retention_bytes, Some(-1));
        assert_eq!(
            TopicConfig::parse([(RETENTION_MS, Some("soon"))])
                .unwrap_err()
                .to_string(),
            "retention.ms: 'soon' must be an integer from -1 to 9223372036854775807"
        );
        assert_eq!(
            TopicConfig::parse([(MAX_MESSAGE_BYTES, Some("134217728"))])
                .unwrap()
                .max_message_bytes,
            Some(128 << 20),
            "a topic may take batches of up to 128 MiB"
        );
        assert_eq!(
            TopicConfig::parse([(MAX_MESSAGE_BYTES, Some("134217729"))])
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
            let c = TopicConfig::parse([(CLEANUP_POLICY, Some(value))]).unwrap();
            assert_eq!(c.cleanup_policy(), policy, "{value}");
        }
        assert_eq!(
            TopicConfig::parse([(CLEANUP_POLICY, Some("compress"))])
                .unwrap_err()
                .to_string(),
            "cleanup.policy: 'compress' must be delete, compact, or compact,delete"
        );
        let c = TopicConfig::parse([
            (DELETE_RETENTION_MS, Some("100")),
            (MIN_COMPACTION_LAG_MS, Some("5")),
            (MIN_CLEANABLE_DIRTY_RATIO, Some("0.01")),
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
        assert!(TopicConfig::parse([(MIN_CLEANABLE_DIRTY_RATIO, Some("1.5"))]).is_err());
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
            TopicConfig::parse([("segment.bytes", Some("20000")), (RETENTION_MS, Some("5"))])
                .unwrap(),
            TopicConfig {
                retention_ms: Some(5),
                ..TopicConfig::default()
            },
            "taken, with no effect"
        );
    }

    /// The topics of a fresh embedded store in a temporary directory (kept while it lives).
    pub(crate) async fn fresh_topics() -> (tempfile::TempDir, Database, Topics) {
        let dir = tempfile::tempdir().unwrap();
        let store = ferry_store::StoreConfig {
            path: dir.path().join("store"),
            ..ferry_store::StoreConfig::default()
        };
        let db = Database::open(&store).await.unwrap();
        let stages = Stages::new(db.clone(), &store.prefix);
        stages.ensure_schema().await.unwrap();
        let topics = Topics::new(db.clone(), KafkaKeys::new(&store.prefix), stages);
        (dir, db, topics)
    }

    #[tokio::test]
    async fn a_refresh_that_read_an_older_topic_list_does_not_replace_a_newer_cache() {
        let (_dir, db, topics) = fresh_topics().await;
        topics
            .create("first", 1, TopicConfig::default(), false)
            .await
            .unwrap();
        // What a refresh that read the list before "second" existed would install, late.
        let (version, by_name) = {
            let cache = topics.cache.read();
            (cache.version, cache.by_name.clone())
        };
        topics
            .create("second", 1, TopicConfig::default(), false)
            .await
            .unwrap();
        assert!(!topics.install(version, by_name), "older than the cache");
        assert!(
            topics.get("second").is_some(),
            "the newer topic stays visible"
        );
        topics.refresh().await.unwrap();
        assert_eq!(topics.all().len(), 2);
        db.close().await;
    }

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
    fn timestamp_and_compression_types_parse_and_bad_values_are_named() {
        let c = TopicConfig::parse([
            (MESSAGE_TIMESTAMP_TYPE, Some("LogAppendTime")),
            (COMPRESSION_TYPE, Some("lz4")),
        ])
        .unwrap();
        assert_eq!(
            (c.message_timestamp_type(), c.compression_type()),
            (TimestampType::LogAppendTime, CompressionType::Lz4)
        );
        assert_eq!(
            TopicConfig::parse([(MESSAGE_TIMESTAMP_TYPE, Some("NowTime"))])
                .unwrap_err()
                .to_string(),
            "message.timestamp.type: 'NowTime' must be CreateTime or LogAppendTime"
        );
        assert_eq!(
            TopicConfig::parse([(COMPRESSION_TYPE, Some("brotli"))])
                .unwrap_err()
                .to_string(),
            "compression.type: 'brotli' must be producer, uncompressed, gzip, snappy, lz4 or zstd"
        );
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
