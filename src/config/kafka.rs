//! `[kafka]`: the Kafka wire front.

use serde::Deserialize;

/// The key path of [`KafkaConfig::listen`].
pub const LISTEN_KEY: &str = "kafka.listen";

/// Default for `kafka.listen`.
pub const DEFAULT_KAFKA_LISTEN: &str = "0.0.0.0:9092";

/// `[kafka]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KafkaConfig {
    /// `host:port` the Kafka front listens on.
    pub listen: String,
}

impl Default for KafkaConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_KAFKA_LISTEN.to_owned(),
        }
    }
}
