//! Configuration: the `Config` tree, loaded from one TOML file plus `FERRY__SECTION__KEY`
//! environment overrides, validated purely, then preflight-checked against the machine.
//!
//! One module per section (`[store]`, `[stage]`, `[amqp]`, `[kafka]`, `[[users]]`,
//! `[metrics]`, `[log]`, `[daemon]`, and the bridge's `[sources.NAME]`, `[sinks.NAME]`,
//! `[[routes]]` in [`bridge`]) declares its keys, their defaults and their meaning;
//! [`load`] reads, [`validate`] checks values without I/O (with the shared [`checks`]),
//! [`preflight`] checks the machine, and [`limits`] holds the size limits values are
//! checked against; [`remote`] holds the TLS and SASL keys toward external brokers and
//! [`secret`] the values shown redacted. The shipped `config/ferry.toml` lists every key with its default, and
//! a test keeps it equal to [`Config::default`].
//!
//! A leaf: it imports nothing of Ferry's but [`crate::password`] (to check hashes), so
//! every layer may read it.

pub mod amqp;
pub mod bridge;
pub mod checks;
pub mod daemon;
pub mod error;
pub mod kafka;
pub mod limits;
pub mod load;
pub mod log;
pub mod metrics;
pub mod preflight;
pub mod remote;
pub mod secret;
pub mod stage;
pub mod store;
pub mod users;
pub mod validate;

pub use amqp::AmqpConfig;
pub use bridge::{Endpoint, EndpointConfig, KeySource, RouteConfig, SinkConfig, SourceConfig};
pub use daemon::DaemonConfig;
pub use error::ConfigError;
pub use kafka::KafkaConfig;
pub use load::env_var;
pub use log::{LogConfig, LogFormat};
pub use metrics::MetricsConfig;
pub use remote::{AmqpTlsConfig, KafkaSecurityConfig, SaslMechanism, SecurityProtocol};
pub use secret::{AmqpUri, KafkaProperties};
pub use stage::StageConfig;
pub use store::StoreConfig;
pub use users::UserConfig;

use serde::Deserialize;
use std::collections::BTreeMap;

/// Everything `ferry.toml` can set.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The transactional store that holds every staged message.
    pub store: StoreConfig,
    /// How long leases outlive a silent holder.
    pub stage: StageConfig,
    /// The AMQP 0-9-1 front.
    pub amqp: AmqpConfig,
    /// The Kafka wire front.
    pub kafka: KafkaConfig,
    /// Who may connect to the fronts.
    pub users: Vec<UserConfig>,
    /// The HTTP endpoint for Prometheus and health probes.
    pub metrics: MetricsConfig,
    /// Log level and format.
    pub log: LogConfig,
    /// Process-wide behaviour such as the shutdown drain.
    pub daemon: DaemonConfig,
    /// The bridge's external sources, by name.
    pub sources: BTreeMap<String, SourceConfig>,
    /// The bridge's external sinks, by name.
    pub sinks: BTreeMap<String, SinkConfig>,
    /// The bridge's routes.
    pub routes: Vec<RouteConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            store: StoreConfig::default(),
            stage: StageConfig::default(),
            amqp: AmqpConfig::default(),
            kafka: KafkaConfig::default(),
            users: users::default_users(),
            metrics: MetricsConfig::default(),
            log: LogConfig::default(),
            daemon: DaemonConfig::default(),
            sources: BTreeMap::new(),
            sinks: BTreeMap::new(),
            routes: Vec::new(),
        }
    }
}

impl Config {
    /// Every TCP address Ferry listens on, with the key that sets it, so validation,
    /// preflight and error messages cover each listener the same way.
    pub fn listen_addresses(&self) -> [(&'static str, &str); 3] {
        [
            (amqp::LISTEN_KEY, self.amqp.listen.as_str()),
            (kafka::LISTEN_KEY, self.kafka.listen.as_str()),
            (metrics::LISTEN_KEY, self.metrics.listen.as_str()),
        ]
    }
}

#[cfg(test)]
mod ferry_toml_tests;
