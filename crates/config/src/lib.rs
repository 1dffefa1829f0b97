//! Configuration: the `Config` tree, loaded from one TOML file plus `FERRY__SECTION__KEY`
//! environment overrides, validated purely, then preflight-checked against the machine.
//!
//! One module per section (`[amqp]`, `[kafka]`, `[metrics]`, `[management]`, `[log]`,
//! `[daemon]`, and the bridge's `[sources.NAME]`, `[sinks.NAME]`, `[[routes]]` in [`bridge`])
//! declares its keys, their defaults and their meaning; `[store]`, `[stage]`, `[[users]]`
//! and `[tls]` are the sections the crates below own (`ferry_store::StoreConfig`,
//! `ferry_stage::StageConfig`, `ferry_auth::UserConfig`, `ferry_tls::TlsConfig`), embedded
//! and validated here;
//! [`load`] reads, [`validate`] checks values without I/O (with the shared [`checks`]),
//! [`preflight`] checks the machine, and [`limits`] holds the size limits values are
//! checked against; [`remote`] holds the TLS and SASL keys toward external brokers and
//! [`secret`] the values shown redacted. The shipped `config/ferry.toml` lists every key
//! with its default, and a test keeps it equal to [`Config::default`].
//!
//! Below the fronts: it uses only the crates of the layers whose sections it embeds (and
//! `ferry-auth`'s parsers, to check credentials and patterns), so every front may read it.

pub mod amqp;
pub mod bridge;
pub mod checks;
pub mod daemon;
pub mod error;
pub mod kafka;
pub mod limits;
pub mod listeners;
pub mod load;
pub mod log;
pub mod management;
pub mod metrics;
pub mod preflight;
pub mod remote;
pub mod secret;
pub mod validate;

pub use amqp::AmqpConfig;
pub use bridge::{Endpoint, EndpointConfig, KeySource, RouteConfig, SinkConfig, SourceConfig};
pub use daemon::DaemonConfig;
pub use error::ConfigError;
use ferry_auth::UserConfig;
use ferry_stage::StageConfig;
use ferry_store::StoreConfig;
use ferry_tls::TlsConfig;
pub use kafka::KafkaConfig;
pub use load::env_var;
pub use log::{LogConfig, LogFormat};
pub use management::ManagementConfig;
pub use metrics::MetricsConfig;
pub use remote::{AmqpTlsConfig, KafkaSecurityConfig, SaslMechanism, SecurityProtocol};
pub use secret::{AmqpUri, KafkaProperties};

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
    /// The management HTTP API.
    pub management: ManagementConfig,
    /// The certificate and client verification of every TLS listener.
    pub tls: TlsConfig,
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
            users: ferry_auth::default_users(),
            metrics: MetricsConfig::default(),
            management: ManagementConfig::default(),
            tls: TlsConfig::default(),
            log: LogConfig::default(),
            daemon: DaemonConfig::default(),
            sources: BTreeMap::new(),
            sinks: BTreeMap::new(),
            routes: Vec::new(),
        }
    }
}

impl Config {
    /// Every TCP address Ferry listens on, with the key that sets it (`kafka.listeners[1]`
    /// for an entry of a list) and whether it speaks TLS, so validation, preflight and
    /// error messages cover each listener the same way. Listeners that are off (empty)
    /// are left out; `kafka.listeners` entries that do not parse are too (validation
    /// reports them).
    pub fn listen_addresses(&self) -> Vec<ListenAddress<'_>> {
        let mut all = vec![
            ListenAddress::new(amqp::LISTEN_KEY.to_owned(), &self.amqp.listen, false),
            ListenAddress::new(amqp::TLS_LISTEN_KEY.to_owned(), &self.amqp.tls_listen, true),
            ListenAddress::new(kafka::LISTEN_KEY.to_owned(), &self.kafka.listen, false),
        ];
        for (i, entry) in self.kafka.listeners.iter().enumerate() {
            let key = format!("{}[{i}]", kafka::LISTENERS_KEY);
            if let Ok(spec) = listeners::ListenerSpec::parse(&key, entry) {
                let addr = &entry[entry.len() - spec.addr.len()..];
                all.push(ListenAddress::new(key, addr, spec.protocol.is_tls()));
            }
        }
        all.push(ListenAddress::new(
            metrics::LISTEN_KEY.to_owned(),
            &self.metrics.listen,
            self.metrics.tls,
        ));
        all.push(ListenAddress::new(
            management::LISTEN_KEY.to_owned(),
            &self.management.listen,
            self.tls.has_certificate(),
        ));
        all.retain(|l| !l.addr.is_empty());
        all
    }
}

impl Config {
    /// The address of the single-address listener `key` (`amqp.listen`,
    /// `amqp.tls_listen`, `kafka.listen`, `metrics.listen`, `management.listen`), to
    /// change it; `None` for any other key.
    pub fn listen_mut(&mut self, key: &str) -> Option<&mut String> {
        match key {
            amqp::LISTEN_KEY => Some(&mut self.amqp.listen),
            amqp::TLS_LISTEN_KEY => Some(&mut self.amqp.tls_listen),
            kafka::LISTEN_KEY => Some(&mut self.kafka.listen),
            metrics::LISTEN_KEY => Some(&mut self.metrics.listen),
            management::LISTEN_KEY => Some(&mut self.management.listen),
            _ => None,
        }
    }
}

/// One address Ferry listens on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenAddress<'a> {
    /// The key that sets it (`amqp.tls_listen`, `kafka.listeners[0]`).
    pub key: String,
    /// `host:port`.
    pub addr: &'a str,
    /// Whether it speaks TLS, with the certificate of `[tls]`.
    pub tls: bool,
}

impl<'a> ListenAddress<'a> {
    fn new(key: String, addr: &'a str, tls: bool) -> Self {
        Self { key, addr, tls }
    }
}

#[cfg(test)]
mod ferry_toml_tests;

/// What the fuzz targets (`fuzz/`, through `ferry::fuzzing`) load of a configuration; not
/// for Ferry's own code.
#[doc(hidden)]
pub mod fuzzing {
    /// Loads a configuration from TOML `text` with no environment overrides, as `ferry
    /// validate` loads a file.
    ///
    /// # Errors
    /// The [`crate::ConfigError`] loading reports.
    pub fn config_from_toml(text: &str) -> Result<crate::Config, crate::ConfigError> {
        crate::Config::from_toml(
            text,
            std::path::Path::new("ferry.toml"),
            &Default::default(),
        )
    }
}
