//! The layered defaults of topic settings ([`TopicDefaults`]): a topic's own setting over
//! this instance's dynamic broker settings, over the cluster's ([`super::broker`]), over
//! `[kafka]`'s value in `ferry.toml`, over Kafka's default (the row's, in
//! [`super::SETTINGS`]). Every setting is layered alike, row by row.

use super::table::{DEFAULT_RETENTION_BYTES, SETTINGS, Setting};
use super::topic_config::TopicConfig;
use ferry_config::KafkaConfig;
use ferry_config::kafka::{DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_RETENTION_MS};

/// The broker-wide defaults a topic follows unless it overrides them: the dynamic broker
/// settings ([`super::broker`]) — this instance's own, then the cluster's — over
/// `[kafka]`'s values and Kafka's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicDefaults {
    /// `[kafka]`'s values (`kafka.retention_ms`, …), as the topic settings they default:
    /// those of the rows with a `ferry_key`.
    pub kafka: TopicConfig,
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
    /// `[kafka]` in `ferry.toml`.
    Config,
}

impl TopicDefaults {
    /// The defaults `[kafka]` sets, with no dynamic broker settings.
    pub fn from_config(config: &KafkaConfig) -> Self {
        Self {
            kafka: TopicConfig {
                retention_ms: Some(config.retention_ms),
                retention_bytes: Some(config.retention_bytes),
                max_message_bytes: Some(config.max_message_bytes as i64),
                ..TopicConfig::default()
            },
            broker: TopicConfig::default(),
            cluster: TopicConfig::default(),
        }
    }

    /// A topic's settings `t`, each it does not set taken from the dynamic broker
    /// settings where they set it: what its `cleanup.policy()`, `delete.retention.ms()`
    /// and the other accessors answer.
    pub fn resolve(&self, t: &TopicConfig) -> TopicConfig {
        over(t, &[&self.broker, &self.cluster])
    }

    /// Which of the topic's settings `t`, the dynamic broker settings and `[kafka]` sets
    /// `setting`, the topic's first; `None`: none does, the value is Kafka's default.
    pub fn layer(&self, setting: &Setting, t: &TopicConfig) -> Option<Layer> {
        [
            (t, Layer::Topic),
            (&self.broker, Layer::Broker),
            (&self.cluster, Layer::Cluster),
            (&self.kafka, Layer::Config),
        ]
        .into_iter()
        .find_map(|(config, layer)| setting.value.is_set(config).then_some(layer))
    }

    /// A topic's effective value of `setting` (its settings `t` over every default), as
    /// Kafka spells it.
    pub fn describe(&self, setting: &Setting, t: &TopicConfig) -> String {
        setting.value.describe(&self.effective(t))
    }

    /// A topic's effective `retention.ms`.
    pub fn retention_ms(&self, t: &TopicConfig) -> i64 {
        self.effective(t)
            .retention_ms
            .unwrap_or(DEFAULT_RETENTION_MS)
    }

    /// A topic's effective `retention.bytes`.
    pub fn retention_bytes(&self, t: &TopicConfig) -> i64 {
        self.effective(t)
            .retention_bytes
            .unwrap_or(DEFAULT_RETENTION_BYTES)
    }

    /// A topic's effective `max.message.bytes`.
    pub fn max_message_bytes(&self, t: &TopicConfig) -> usize {
        let bytes = self.effective(t).max_message_bytes;
        usize::try_from(bytes.unwrap_or(DEFAULT_MAX_MESSAGE_BYTES as i64)).unwrap_or(0)
    }

    /// A topic's settings `t`, each it does not set taken from the dynamic broker settings
    /// or `[kafka]`, where they set it.
    fn effective(&self, t: &TopicConfig) -> TopicConfig {
        over(t, &[&self.broker, &self.cluster, &self.kafka])
    }
}

/// `t`, each setting it does not set taken from the first of `layers` that sets it.
fn over(t: &TopicConfig, layers: &[&TopicConfig]) -> TopicConfig {
    let mut config = *t;
    for setting in SETTINGS {
        for layer in layers {
            setting.value.inherit(&mut config, layer);
        }
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_section_sets_the_settings_whose_rows_name_a_ferry_key() {
        let kafka = TopicDefaults::from_config(&KafkaConfig::default()).kafka;
        for setting in SETTINGS {
            assert_eq!(
                setting.value.is_set(&kafka),
                setting.ferry_key.is_some(),
                "{}",
                setting.name
            );
        }
    }

    #[test]
    fn a_topic_setting_overrides_this_instance_which_overrides_the_cluster_and_kafka() {
        let retention = super::super::table::setting("retention.ms").unwrap();
        let mut d = TopicDefaults::from_config(&KafkaConfig::default());
        let topic = TopicConfig {
            retention_ms: Some(1),
            ..TopicConfig::default()
        };
        d.cluster.retention_ms = Some(3);
        assert_eq!(d.retention_ms(&TopicConfig::default()), 3);
        assert_eq!(
            d.layer(retention, &TopicConfig::default()),
            Some(Layer::Cluster)
        );
        d.broker.retention_ms = Some(2);
        assert_eq!(d.describe(retention, &TopicConfig::default()), "2");
        assert_eq!(d.layer(retention, &topic), Some(Layer::Topic));
        assert_eq!(d.retention_ms(&topic), 1);
        assert_eq!(d.resolve(&TopicConfig::default()).retention_ms, Some(2));
    }
}
