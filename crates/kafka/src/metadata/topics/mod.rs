//! Topics: what a topic is in the store (`stored`: [`TopicMeta`] and its three formats)
//! and the cache every request reads instead of the store (`cache`: [`Topics`]). Their
//! settings are [`crate::metadata::settings`]'s.
//!
//! A topic has a numeric id (never reused, so a recreated topic never meets its
//! predecessor's keys), a UUID for the protocol versions that name topics by id, a
//! partition count, and its overrides of the broker's defaults. Each partition owns a
//! stage (`kafka/<id>/<partition>`) that producers append to and a log its sequencer
//! writes.

mod cache;
mod stored;

pub(crate) use cache::{Partition, Topic, Topics};
pub(crate) use stored::TopicMeta;

use crate::metadata::settings::InvalidSetting;
use ferry_stage::StageError;
use ferry_store::{StoreError, TransactionError};

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

impl From<InvalidSetting> for TopicError {
    fn from(InvalidSetting { key, message }: InvalidSetting) -> Self {
        Self::InvalidConfig { key, message }
    }
}

/// What the tests of this crate share about topics.
#[cfg(test)]
pub(crate) mod tests {
    use super::Topics;
    use crate::keys::KafkaKeys;
    use ferry_stage::Stages;
    use ferry_store::Database;

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
}
