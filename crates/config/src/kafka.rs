//! `[kafka]`: the Kafka wire front — where it listens, what it tells clients, its limits,
//! topic defaults, consumer group timeouts and the partition sequencers' lease.

use super::ConfigError;
use super::checks::{at_least, between, is_host};
use super::listeners::{ListenerSpec, SecurityProtocol, parse_list};
use serde::Deserialize;
use std::time::Duration;

/// The key path of [`KafkaConfig::listen`].
pub const LISTEN_KEY: &str = "kafka.listen";
/// The key path of [`KafkaConfig::listeners`].
pub const LISTENERS_KEY: &str = "kafka.listeners";
/// The key path of [`KafkaConfig::advertised_listeners`].
pub const ADVERTISED_LISTENERS_KEY: &str = "kafka.advertised_listeners";

/// Default for `kafka.listen`.
pub const DEFAULT_KAFKA_LISTEN: &str = "0.0.0.0:9092";
/// Default for `kafka.max_connections`: high enough that the open-file limit (which
/// `ferry run` raises to its hard limit) is the bound in practice, as Kafka's
/// `max.connections` is unlimited by default.
pub const DEFAULT_MAX_CONNECTIONS: usize = 65_536;
/// Default for `kafka.max_request_size`: Kafka's `socket.request.max.bytes` (100 MiB).
pub const DEFAULT_MAX_REQUEST_SIZE: usize = 104_857_600;
/// Default for `kafka.max_message_bytes`: Kafka's `message.max.bytes`.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 1_048_588;
/// The largest `kafka.max_message_bytes` (and topic `max.message.bytes`): 128 MiB, as
/// AMQP's limit. A batch larger than one store transaction is kept in a spill written in
/// several ([`ferry_stage::spill`]); the request holding it must still fit
/// `kafka.max_request_size`.
pub const MAX_MESSAGE_BYTES_LIMIT: usize = super::limits::MAX_MESSAGE_SIZE_LIMIT as usize;
/// Default for `kafka.retention_ms`: Kafka's seven days.
pub const DEFAULT_RETENTION_MS: i64 = 7 * 24 * 60 * 60 * 1000;
/// Default for `kafka.retention_check_interval_ms`: Kafka's five minutes.
pub const DEFAULT_RETENTION_CHECK_INTERVAL_MS: u64 = 300_000;
/// Default for `kafka.compaction_check_interval_ms`: Kafka's `log.cleaner.backoff.ms`.
pub const DEFAULT_COMPACTION_CHECK_INTERVAL_MS: u64 = 15_000;
/// Default for `kafka.group_min_session_timeout_ms`: Kafka's.
pub const DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS: i32 = 6_000;
/// Default for `kafka.group_max_session_timeout_ms`: Kafka's 30 minutes.
pub const DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS: i32 = 1_800_000;
/// Default for `kafka.group_initial_rebalance_delay_ms`: Kafka's.
pub const DEFAULT_GROUP_INITIAL_REBALANCE_DELAY_MS: u64 = 3_000;
/// Default for `kafka.group_consumer_session_timeout_ms`: Kafka's
/// `group.consumer.session.timeout.ms`.
pub const DEFAULT_GROUP_CONSUMER_SESSION_TIMEOUT_MS: u64 = 45_000;
/// Default for `kafka.group_consumer_heartbeat_interval_ms`: Kafka's
/// `group.consumer.heartbeat.interval.ms`.
pub const DEFAULT_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS: u64 = 5_000;
/// Default for `kafka.sequencer_lease_ms`.
pub const DEFAULT_SEQUENCER_LEASE_MS: u64 = 10_000;
/// Default for `kafka.sequencer_batch`.
pub const DEFAULT_SEQUENCER_BATCH: usize = 1_024;

/// `[kafka]` section.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct KafkaConfig {
    /// `host:port` of a PLAINTEXT listener of the Kafka front (with `advertised_host`,
    /// `advertised_port` and `require_sasl`); empty: none, when `listeners` has them all.
    pub listen: String,
    /// More listeners, as Kafka's `listeners`: `PROTOCOL://host:port` with PLAINTEXT, SSL,
    /// SASL_PLAINTEXT or SASL_SSL, each protocol at most once (and no PLAINTEXT here
    /// while `listen` is set). SSL and SASL_SSL use `[tls]`; SASL_* listeners require SASL
    /// authentication before other requests.
    pub listeners: Vec<String>,
    /// Where clients are told to connect for each listener of `listeners`, as Kafka's
    /// `advertised.listeners`: `PROTOCOL://host:port`. A listener not named here is
    /// advertised at its bound address (this machine's hostname for `0.0.0.0`).
    pub advertised_listeners: Vec<String>,
    /// This instance's id: its broker id in Metadata answers and the instance whose earlier
    /// incarnations' leases a restart frees at once. Every Ferry instance sharing a store
    /// needs its own, kept across its restarts.
    pub node_id: i32,
    /// The host clients are told to connect to. Empty: the listen host, or this machine's
    /// hostname when listening on every interface.
    pub advertised_host: String,
    /// The port clients are told to connect to. 0: the port actually bound.
    pub advertised_port: u16,
    /// Most client connections at once; further clients wait in the kernel's backlog. Each
    /// takes a file descriptor, so the process's open-file limit bounds them too.
    pub max_connections: usize,
    /// Milliseconds a connection may send no request, or leave an answer unread, before it
    /// is closed (Kafka's `connections.max.idle.ms`; clients reconnect when they need to).
    pub connections_max_idle_ms: u64,
    /// Milliseconds a SASL login lasts before the client must authenticate again on its
    /// connection (KIP-368, Kafka's `connections.max.reauth.ms`); a connection that sends
    /// another request after that is closed. 0: logins last as long as their connection.
    pub connections_max_reauth_ms: u64,
    /// Largest request, in bytes, a client may send; a larger declared size closes the
    /// connection before anything is allocated for it.
    pub max_request_size: usize,
    /// Largest record batch, in bytes, a topic accepts unless its `max.message.bytes`
    /// says otherwise; at most 128 MiB and `max_request_size`.
    pub max_message_bytes: usize,
    /// Whether a Metadata request naming an unknown topic creates it (Kafka's
    /// `auto.create.topics.enable`).
    pub auto_create_topics: bool,
    /// Partitions of an auto-created topic, and of a created one that asks for the default.
    pub default_partitions: i32,
    /// How long a topic keeps records unless its `retention.ms` says otherwise; -1: forever.
    pub retention_ms: i64,
    /// How many bytes a partition keeps unless its topic's `retention.bytes` says
    /// otherwise; -1: no limit.
    pub retention_bytes: i64,
    /// How often each partition's sequencer deletes records past retention.
    pub retention_check_interval_ms: u64,
    /// How often each partition of a compacted topic (`cleanup.policy` `compact`) is
    /// checked for a compaction pass (run when its `min.cleanable.dirty.ratio` is reached).
    pub compaction_check_interval_ms: u64,
    /// Whether clients of the PLAINTEXT listeners (`listen`, and a `PLAINTEXT://` entry of
    /// `listeners`) must authenticate with SASL (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, as a
    /// user of the user store) before any request other than ApiVersions and the SASL
    /// handshake; SASL_* listeners always require it.
    pub require_sasl: bool,
    /// Shortest session timeout a consumer group member may ask for.
    pub group_min_session_timeout_ms: i32,
    /// Longest session timeout a consumer group member may ask for.
    pub group_max_session_timeout_ms: i32,
    /// How long the first rebalance of an empty group waits for more members to join.
    pub group_initial_rebalance_delay_ms: u64,
    /// How long a member of a consumer-protocol group (KIP-848) may go without a
    /// heartbeat before it is removed.
    pub group_consumer_session_timeout_ms: u64,
    /// How often members of consumer-protocol groups are told to heartbeat (below the
    /// session timeout).
    pub group_consumer_heartbeat_interval_ms: u64,
    /// How long a lease (a partition's sequencer, a group's coordinator, a broker
    /// registration) lasts without renewal; after that another instance may take over.
    pub sequencer_lease_ms: u64,
    /// Most staged batches a sequencer moves into the log in one transaction.
    pub sequencer_batch: usize,
    /// How a client certificate's subject becomes the principal of a connection on a TLS
    /// listener without SASL: Kafka's `ssl.principal.mapping.rules`, the subset
    /// `RULE:pattern/replacement/[LU]` and `DEFAULT` (the subject itself), comma-separated,
    /// first match wins. See `docs/security.md`, "Principals from certificates".
    pub ssl_principal_mapping_rules: String,
    /// Principals Kafka ACLs never restrict (Kafka's `super.users`): `User:name` each.
    pub super_users: Vec<String>,
    /// Whether a resource no Kafka ACL applies to is open to every principal (Kafka's
    /// `allow.everyone.if.no.acl.found`). Ferry's default is `true` so that nothing changes
    /// until the first ACL is created; production sets it to `false`, Kafka's default.
    pub allow_everyone_if_no_acl_found: bool,
}

impl Default for KafkaConfig {
    fn default() -> Self {
        Self {
            listen: DEFAULT_KAFKA_LISTEN.to_owned(),
            listeners: Vec::new(),
            advertised_listeners: Vec::new(),
            node_id: 0,
            advertised_host: String::new(),
            advertised_port: 0,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            connections_max_idle_ms: 600_000,
            connections_max_reauth_ms: 0,
            max_request_size: DEFAULT_MAX_REQUEST_SIZE,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            auto_create_topics: true,
            default_partitions: 1,
            retention_ms: DEFAULT_RETENTION_MS,
            retention_bytes: -1,
            retention_check_interval_ms: DEFAULT_RETENTION_CHECK_INTERVAL_MS,
            compaction_check_interval_ms: DEFAULT_COMPACTION_CHECK_INTERVAL_MS,
            require_sasl: false,
            group_min_session_timeout_ms: DEFAULT_GROUP_MIN_SESSION_TIMEOUT_MS,
            group_max_session_timeout_ms: DEFAULT_GROUP_MAX_SESSION_TIMEOUT_MS,
            group_initial_rebalance_delay_ms: DEFAULT_GROUP_INITIAL_REBALANCE_DELAY_MS,
            group_consumer_session_timeout_ms: DEFAULT_GROUP_CONSUMER_SESSION_TIMEOUT_MS,
            group_consumer_heartbeat_interval_ms: DEFAULT_GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS,
            sequencer_lease_ms: DEFAULT_SEQUENCER_LEASE_MS,
            sequencer_batch: DEFAULT_SEQUENCER_BATCH,
            ssl_principal_mapping_rules: ferry_auth::principal::DEFAULT_RULES.to_owned(),
            super_users: Vec::new(),
            allow_everyone_if_no_acl_found: true,
        }
    }
}

impl KafkaConfig {
    /// Checks the section's ranges and formats (the listen address is checked with every
    /// other listener). Pure: no I/O.
    ///
    /// # Errors
    /// The first [`ConfigError::Invalid`], naming the key and the bad value.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let listeners = self.listener_specs()?;
        if self.listen.is_empty() && listeners.is_empty() {
            return Err(ConfigError::invalid(
                LISTENERS_KEY,
                format!("is empty and so is {LISTEN_KEY}: the Kafka front needs a listener"),
            ));
        }
        if let Some(i) = listeners
            .iter()
            .position(|l| l.protocol == SecurityProtocol::Plaintext)
            .filter(|_| !self.listen.is_empty())
        {
            return Err(ConfigError::invalid(
                format!("{LISTENERS_KEY}[{i}]"),
                format!(
                    "a PLAINTEXT listener while {LISTEN_KEY} is one too; set {LISTEN_KEY} = \"\" to use this one"
                ),
            ));
        }
        let advertised = parse_list(ADVERTISED_LISTENERS_KEY, &self.advertised_listeners)?;
        for (i, spec) in advertised.iter().enumerate() {
            if !listeners.iter().any(|l| l.protocol == spec.protocol) {
                return Err(ConfigError::invalid(
                    format!("{ADVERTISED_LISTENERS_KEY}[{i}]"),
                    format!(
                        "advertises {}, which {LISTENERS_KEY} does not list",
                        spec.protocol
                    ),
                ));
            }
            let reachable = spec.addr.rsplit_once(':').is_some_and(|(host, port)| {
                is_host(host.trim_matches(['[', ']'])) && port.parse::<u16>().is_ok_and(|p| p > 0)
            });
            if !reachable {
                return Err(ConfigError::invalid(
                    format!("{ADVERTISED_LISTENERS_KEY}[{i}]"),
                    format!("'{}' is not a host:port clients can connect to", spec.addr),
                ));
            }
        }
        at_least("kafka.node_id", self.node_id, 0)?;
        if !self.advertised_host.is_empty() && !is_host(&self.advertised_host) {
            return Err(ConfigError::invalid(
                "kafka.advertised_host",
                format!("'{}' is not a hostname or IP address", self.advertised_host),
            ));
        }
        at_least("kafka.max_connections", self.max_connections, 1)?;
        at_least(
            "kafka.connections_max_idle_ms",
            self.connections_max_idle_ms,
            1,
        )?;
        between(
            "kafka.max_request_size",
            self.max_request_size,
            1024,
            1 << 30,
        )?;
        between(
            "kafka.max_message_bytes",
            self.max_message_bytes,
            1024,
            MAX_MESSAGE_BYTES_LIMIT.min(self.max_request_size),
        )?;
        between(
            "kafka.default_partitions",
            self.default_partitions,
            1,
            10_000,
        )?;
        at_least("kafka.retention_ms", self.retention_ms, -1)?;
        at_least("kafka.retention_bytes", self.retention_bytes, -1)?;
        at_least(
            "kafka.retention_check_interval_ms",
            self.retention_check_interval_ms,
            1,
        )?;
        at_least(
            "kafka.compaction_check_interval_ms",
            self.compaction_check_interval_ms,
            1,
        )?;
        at_least(
            "kafka.group_min_session_timeout_ms",
            self.group_min_session_timeout_ms,
            1,
        )?;
        at_least(
            "kafka.group_max_session_timeout_ms",
            self.group_max_session_timeout_ms,
            self.group_min_session_timeout_ms,
        )?;
        at_least(
            "kafka.group_consumer_heartbeat_interval_ms",
            self.group_consumer_heartbeat_interval_ms,
            1,
        )?;
        at_least(
            "kafka.group_consumer_session_timeout_ms",
            self.group_consumer_session_timeout_ms,
            self.group_consumer_heartbeat_interval_ms + 1,
        )?;
        at_least("kafka.sequencer_lease_ms", self.sequencer_lease_ms, 100)?;
        ferry_auth::principal::PrincipalRules::parse(&self.ssl_principal_mapping_rules)
            .map_err(|e| ConfigError::invalid("kafka.ssl_principal_mapping_rules", e))?;
        for (i, principal) in self.super_users.iter().enumerate() {
            let named = principal
                .strip_prefix("User:")
                .is_some_and(|name| !name.is_empty());
            if !named {
                return Err(ConfigError::invalid(
                    format!("kafka.super_users[{i}]"),
                    format!("'{principal}' is not a principal User:name"),
                ));
            }
        }
        between("kafka.sequencer_batch", self.sequencer_batch, 1, 10_000)
    }

    /// The entries of `listeners`, parsed.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the first entry that is not `PROTOCOL://host:port`
    /// or repeats a protocol.
    pub fn listener_specs(&self) -> Result<Vec<ListenerSpec>, ConfigError> {
        parse_list(LISTENERS_KEY, &self.listeners)
    }

    /// The advertised address of the listener for `protocol`, when
    /// `advertised_listeners` names one. Assumes [`KafkaConfig::validate`] passed.
    pub fn advertised(&self, protocol: SecurityProtocol) -> Option<String> {
        parse_list(ADVERTISED_LISTENERS_KEY, &self.advertised_listeners)
            .ok()?
            .into_iter()
            .find(|spec| spec.protocol == protocol)
            .map(|spec| spec.addr)
    }

    /// How long a SASL login lasts (`connections_max_reauth_ms`); `None` for as long as
    /// its connection.
    pub fn connections_max_reauth(&self) -> Option<Duration> {
        (self.connections_max_reauth_ms > 0)
            .then(|| Duration::from_millis(self.connections_max_reauth_ms))
    }

    /// `connections_max_idle_ms` as a duration.
    pub fn connections_max_idle(&self) -> Duration {
        Duration::from_millis(self.connections_max_idle_ms)
    }

    /// `sequencer_lease_ms` as a duration.
    pub fn sequencer_lease(&self) -> Duration {
        Duration::from_millis(self.sequencer_lease_ms)
    }

    /// `retention_check_interval_ms` as a duration.
    pub fn retention_check_interval(&self) -> Duration {
        Duration::from_millis(self.retention_check_interval_ms)
    }

    /// `compaction_check_interval_ms` as a duration.
    pub fn compaction_check_interval(&self) -> Duration {
        Duration::from_millis(self.compaction_check_interval_ms)
    }

    /// `group_initial_rebalance_delay_ms` as a duration.
    pub fn group_initial_rebalance_delay(&self) -> Duration {
        Duration::from_millis(self.group_initial_rebalance_delay_ms)
    }
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn error_after(edit: impl FnOnce(&mut Config)) -> String {
        let mut config = Config::default();
        edit(&mut config);
        config.validate().unwrap_err().to_string()
    }

    #[test]
    fn listeners_are_checked_against_listen_and_each_other() {
        assert_eq!(
            error_after(|c| c.kafka.listeners = vec!["PLAINTEXT://127.0.0.1:9095".into()]),
            "kafka.listeners[0]: a PLAINTEXT listener while kafka.listen is one too; set \
             kafka.listen = \"\" to use this one"
        );
        assert_eq!(
            error_after(|c| c.kafka.listen.clear()),
            "kafka.listeners: is empty and so is kafka.listen: the Kafka front needs a listener"
        );
        assert_eq!(
            error_after(|c| {
                c.kafka.listeners = vec!["SASL_PLAINTEXT://127.0.0.1:9095".into()];
                c.kafka.advertised_listeners = vec!["SSL://kafka.example.com:9093".into()];
            }),
            "kafka.advertised_listeners[0]: advertises SSL, which kafka.listeners does not list"
        );
        assert_eq!(
            error_after(|c| {
                c.kafka.listeners = vec!["SASL_PLAINTEXT://127.0.0.1:9095".into()];
                c.kafka.advertised_listeners = vec!["SASL_PLAINTEXT://0.0.0.0:0".into()];
            }),
            "kafka.advertised_listeners[0]: '0.0.0.0:0' is not a host:port clients can connect to"
        );
    }

    #[test]
    fn advertised_listeners_name_each_listeners_address() {
        let mut config = Config::default();
        config.kafka.listen.clear();
        config.kafka.listeners = vec![
            "PLAINTEXT://0.0.0.0:9092".into(),
            "SASL_PLAINTEXT://0.0.0.0:9095".into(),
        ];
        config.kafka.advertised_listeners = vec!["SASL_PLAINTEXT://[::1]:19095".into()];
        config.validate().unwrap();
        use crate::listeners::SecurityProtocol;
        assert_eq!(
            config
                .kafka
                .advertised(SecurityProtocol::SaslPlaintext)
                .as_deref(),
            Some("[::1]:19095")
        );
        assert_eq!(config.kafka.advertised(SecurityProtocol::Plaintext), None);
    }

    #[test]
    fn negative_node_id_is_rejected() {
        assert_eq!(
            error_after(|c| c.kafka.node_id = -1),
            "kafka.node_id: -1 must be at least 0"
        );
    }

    #[test]
    fn advertised_host_must_be_a_host() {
        assert_eq!(
            error_after(|c| c.kafka.advertised_host = "not a host".into()),
            "kafka.advertised_host: 'not a host' is not a hostname or IP address"
        );
    }

    #[test]
    fn message_size_may_not_exceed_the_request_size() {
        assert_eq!(
            error_after(|c| {
                c.kafka.max_request_size = 4096;
                c.kafka.max_message_bytes = 8192;
            }),
            "kafka.max_message_bytes: 8192 must be between 1024 and 4096"
        );
    }

    #[test]
    fn message_size_may_reach_128_mib_within_the_request_size() {
        let mut config = Config::default();
        config.kafka.max_request_size = 256 << 20;
        config.kafka.max_message_bytes = 128 << 20;
        config.validate().unwrap();
        assert_eq!(
            error_after(|c| {
                c.kafka.max_request_size = 256 << 20;
                c.kafka.max_message_bytes = (128 << 20) + 1;
            }),
            "kafka.max_message_bytes: 134217729 must be between 1024 and 134217728"
        );
        assert_eq!(
            error_after(|c| c.kafka.max_message_bytes = 128 << 20),
            "kafka.max_message_bytes: 134217728 must be between 1024 and 104857600",
            "the default request size bounds it"
        );
    }

    #[test]
    fn max_session_timeout_below_min_is_rejected() {
        assert_eq!(
            error_after(|c| c.kafka.group_max_session_timeout_ms = 10),
            "kafka.group_max_session_timeout_ms: 10 must be at least 6000"
        );
    }

    #[test]
    fn principal_mapping_rules_must_parse() {
        assert_eq!(
            error_after(|c| c.kafka.ssl_principal_mapping_rules = "RULE:x".into()),
            "kafka.ssl_principal_mapping_rules: rule 1: has no / after its pattern"
        );
    }

    #[test]
    fn super_users_must_be_user_principals() {
        assert_eq!(
            error_after(|c| c.kafka.super_users = vec!["User:admin".into(), "admin".into()]),
            "kafka.super_users[1]: 'admin' is not a principal User:name"
        );
        assert_eq!(
            error_after(|c| c.kafka.super_users = vec!["User:".into()]),
            "kafka.super_users[0]: 'User:' is not a principal User:name"
        );
    }

    #[test]
    fn zero_partitions_is_rejected() {
        assert_eq!(
            error_after(|c| c.kafka.default_partitions = 0),
            "kafka.default_partitions: 0 must be between 1 and 10000"
        );
    }
}
