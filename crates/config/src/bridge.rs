//! `[sources.NAME]`, `[sinks.NAME]` and `[[routes]]`: the bridge's external brokers and
//! the routes that connect a source (an external broker or one of Ferry's fronts) to one
//! or more destinations.
//!
//! An endpoint is a small table naming exactly one of: `source` (from only), `sink` (to
//! only), `amqp_exchange` (an exchange on Ferry's AMQP front, with `vhost` and a
//! `binding_key` on the way in or a `routing_key` on the way out) or `kafka_topic` (a
//! topic on Ferry's Kafka front). [`RouteConfig::from_endpoint`] and
//! [`RouteConfig::destinations`] give the checked form, [`Endpoint`].

use super::ConfigError;
use super::checks::{at_least, between};
use super::remote::{AmqpTlsConfig, KafkaSecurityConfig};
use super::secret::{AmqpUri, KafkaProperties};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Default for `sources.NAME.prefetch`.
pub const DEFAULT_PREFETCH: u16 = 1_000;
/// Default for `sources.NAME.dedup_window_ms`: ten minutes.
pub const DEFAULT_DEDUP_WINDOW_MS: u64 = 600_000;
/// Default for `sinks.NAME.partitioner`: Java Kafka's, so keys land where Java producers
/// would put them.
pub const DEFAULT_PARTITIONER: &str = "murmur2_random";
/// The partitioners librdkafka knows.
pub const PARTITIONERS: [&str; 6] = [
    "random",
    "consistent",
    "consistent_random",
    "murmur2",
    "murmur2_random",
    "fnv1a_random",
];
/// Default for `routes[i].max_attempts`.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 10;
/// Default for `routes[i].retry_initial_ms`.
pub const DEFAULT_RETRY_INITIAL_MS: u64 = 100;
/// Default for `routes[i].retry_max_ms`.
pub const DEFAULT_RETRY_MAX_MS: u64 = 30_000;
/// Default for `routes[i].batch`.
pub const DEFAULT_BATCH: usize = 256;
/// Largest `routes[i].batch`: one batch stays well inside a store transaction.
pub const MAX_BATCH: usize = 4_096;

/// A named external source: where messages come from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SourceConfig {
    /// A queue on an external RabbitMQ, consumed with lapin.
    Rabbitmq {
        /// AMQP URI, e.g. `amqp://user:pass@host:5672/%2f`, or `amqps://` for TLS.
        uri: AmqpUri,
        /// The queue to consume (it must exist).
        queue: String,
        /// Unacknowledged deliveries the source may hold (basic.qos prefetch count).
        #[serde(default = "default_prefetch")]
        prefetch: u16,
        /// How long a message-id is remembered, so an upstream redelivery of a message
        /// already staged is dropped (and counted) instead of staged twice.
        #[serde(default = "default_dedup_window_ms")]
        dedup_window_ms: u64,
        /// `ca_file`, `cert_file`, `key_file`, `server_name`: TLS with an `amqps://` URI.
        #[serde(flatten)]
        tls: AmqpTlsConfig,
    },
    /// Topics on an external Kafka cluster, consumed with rdkafka in a consumer group.
    Kafka {
        /// `bootstrap.servers`.
        bootstrap_servers: String,
        /// The topics to consume.
        topics: Vec<String>,
        /// The consumer group (offsets are also committed there, for standard tooling).
        group_id: String,
        /// Extra librdkafka properties (e.g. `fetch.min.bytes`).
        #[serde(default)]
        properties: KafkaProperties,
        /// `security_protocol`, `sasl_mechanism`, `username`, `password_file` or
        /// `password_env`, `ca_file`, `cert_file`, `key_file`: TLS and SASL.
        #[serde(flatten)]
        security: KafkaSecurityConfig,
    },
}

/// A named external sink: where messages go.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SinkConfig {
    /// An exchange on an external RabbitMQ, published to with lapin and publisher confirms.
    Rabbitmq {
        /// AMQP URI, `amqps://` for TLS.
        uri: AmqpUri,
        /// The exchange (`""` is the default exchange).
        #[serde(default)]
        exchange: String,
        /// The routing key; absent keeps each message's own routing key (for a Kafka
        /// record: its key, see `docs/mapping.md`).
        #[serde(default)]
        routing_key: Option<String>,
        /// `ca_file`, `cert_file`, `key_file`, `server_name`: TLS with an `amqps://` URI.
        #[serde(flatten)]
        tls: AmqpTlsConfig,
    },
    /// A topic on an external Kafka cluster, produced to with rdkafka's idempotent
    /// producer.
    Kafka {
        /// `bootstrap.servers`.
        bootstrap_servers: String,
        /// The topic.
        topic: String,
        /// librdkafka's `partitioner` for keyed records.
        #[serde(default = "default_partitioner")]
        partitioner: String,
        /// Produce in Kafka transactions (transactional id `ferry.ROUTE.INDEX`), so
        /// the sink hands each message over exactly once.
        #[serde(default)]
        transactional: bool,
        /// Extra librdkafka properties.
        #[serde(default)]
        properties: KafkaProperties,
        /// `security_protocol`, `sasl_mechanism`, `username`, `password_file` or
        /// `password_env`, `ca_file`, `cert_file`, `key_file`: TLS and SASL.
        #[serde(flatten)]
        security: KafkaSecurityConfig,
    },
}

/// One end of a route as written in the file. Exactly one of `source`, `sink`,
/// `amqp_exchange` and `kafka_topic` is set. Written back (the management API's routes)
/// with only the keys that are set.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EndpointConfig {
    /// A `[sources.NAME]` (in `from`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// A `[sinks.NAME]` (in `to`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sink: Option<String>,
    /// An exchange on Ferry's AMQP front.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amqp_exchange: Option<String>,
    /// The AMQP front's vhost of `amqp_exchange`.
    #[serde(default = "default_vhost", skip_serializing_if = "is_default_vhost")]
    pub vhost: String,
    /// In `from`: the binding key that selects the exchange's messages (default `#`, for
    /// a topic exchange everything; for a direct exchange, the exact key).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binding_key: Option<String>,
    /// In `to`: the routing key to publish with; absent keeps each message's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing_key: Option<String>,
    /// A topic on Ferry's Kafka front.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kafka_topic: Option<String>,
}

impl Default for EndpointConfig {
    /// No endpoint named yet, in vhost `/` (as a table without `vhost`).
    fn default() -> Self {
        Self {
            source: None,
            sink: None,
            amqp_exchange: None,
            vhost: default_vhost(),
            binding_key: None,
            routing_key: None,
            kafka_topic: None,
        }
    }
}

/// A checked endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A named external source.
    Source(String),
    /// A named external sink.
    Sink(String),
    /// An exchange on Ferry's AMQP front: bound with `key` in `from`, published to with
    /// `key` (or the message's own routing key) in `to`.
    AmqpExchange {
        /// The vhost.
        vhost: String,
        /// The exchange.
        exchange: String,
        /// Binding key (from) or routing key override (to).
        key: Option<String>,
    },
    /// A topic on Ferry's Kafka front.
    KafkaTopic(String),
}

/// What a Kafka record's key is made from when an AMQP message goes to Kafka.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeySource {
    /// The routing key (default): records of one routing key share a partition.
    #[default]
    RoutingKey,
    /// The `message-id` property.
    MessageId,
    /// No key: records spread over partitions.
    None,
}

/// `[[routes]]`: one source to one or more destinations. The same table, as JSON, defines
/// a route at runtime (`PUT /api/ferry/routes/NAME`, kept in the store).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// Unique name; it names the route's stages (`bridge.NAME.INDEX`) and metrics.
    pub name: String,
    /// Where its messages come from.
    pub from: EndpointConfig,
    /// Where they go; each destination gets every message once, independently.
    pub to: Vec<EndpointConfig>,
    /// What a Kafka record's key is made from when an AMQP message goes to Kafka:
    /// `routing_key`, `message_id` or `none`.
    #[serde(default)]
    pub key: KeySource,
    /// Delivery attempts a destination may reject a message before it goes to the
    /// route's dead-letter stage (`bridge.NAME.INDEX.dead`), from which it can be
    /// replayed.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// First retry delay after a failed delivery; doubles per failure, with jitter.
    #[serde(default = "default_retry_initial_ms")]
    pub retry_initial_ms: u64,
    /// Longest retry delay.
    #[serde(default = "default_retry_max_ms")]
    pub retry_max_ms: u64,
    /// Messages moved per store transaction and per downstream batch.
    #[serde(default = "default_batch")]
    pub batch: usize,
}

fn default_prefetch() -> u16 {
    DEFAULT_PREFETCH
}
fn default_dedup_window_ms() -> u64 {
    DEFAULT_DEDUP_WINDOW_MS
}
fn default_partitioner() -> String {
    DEFAULT_PARTITIONER.to_owned()
}
fn default_vhost() -> String {
    "/".to_owned()
}
fn is_default_vhost(vhost: &str) -> bool {
    vhost == "/"
}
fn default_max_attempts() -> u32 {
    DEFAULT_MAX_ATTEMPTS
}
fn default_retry_initial_ms() -> u64 {
    DEFAULT_RETRY_INITIAL_MS
}
fn default_retry_max_ms() -> u64 {
    DEFAULT_RETRY_MAX_MS
}
fn default_batch() -> usize {
    DEFAULT_BATCH
}

/// Checks `[sources]`, `[sinks]` and `[[routes]]` together (routes name the others).
///
/// # Errors
/// The first bad key, e.g. `routes[2].to[0]: unknown sink 'kafak-out'`.
pub fn validate(
    sources: &BTreeMap<String, SourceConfig>,
    sinks: &BTreeMap<String, SinkConfig>,
    routes: &[RouteConfig],
) -> Result<(), ConfigError> {
    for (name, source) in sources {
        name_rule(&format!("sources.{name}"), name)?;
        validate_source(name, source)?;
    }
    for (name, sink) in sinks {
        name_rule(&format!("sinks.{name}"), name)?;
        validate_sink(name, sink)?;
    }
    let mut seen = std::collections::BTreeSet::new();
    for (i, route) in routes.iter().enumerate() {
        let at = format!("routes[{i}]");
        if !seen.insert(route.name.as_str()) {
            return Err(ConfigError::invalid(
                format!("{at}.name"),
                format!("'{}' names another route too", route.name),
            ));
        }
        validate_route(&at, route, sources, sinks)?;
    }
    Ok(())
}

/// Checks one route against the sources and sinks it may name; `at` is the route's key
/// path (`routes[2]`), empty for a route given on its own (the management API's), whose
/// keys are then its fields (`to[0]`).
///
/// # Errors
/// The first bad key, e.g. `routes[2].to[0]: unknown sink 'kafak-out'`.
pub fn validate_route(
    at: &str,
    route: &RouteConfig,
    sources: &BTreeMap<String, SourceConfig>,
    sinks: &BTreeMap<String, SinkConfig>,
) -> Result<(), ConfigError> {
    name_rule(&key(at, "name"), &route.name)?;
    route.from_endpoint(at, sources)?;
    route.destinations(at, sinks)?;
    at_least(&key(at, "max_attempts"), route.max_attempts, 1)?;
    at_least(&key(at, "retry_initial_ms"), route.retry_initial_ms, 1)?;
    at_least(
        &key(at, "retry_max_ms"),
        route.retry_max_ms,
        route.retry_initial_ms,
    )?;
    between(&key(at, "batch"), route.batch, 1, MAX_BATCH)
}

/// `field` under key path `at` (`routes[2].to`), or `field` alone when `at` is empty.
fn key(at: &str, field: &str) -> String {
    if at.is_empty() {
        field.to_owned()
    } else {
        format!("{at}.{field}")
    }
}

fn validate_source(name: &str, source: &SourceConfig) -> Result<(), ConfigError> {
    let at = |key: &str| format!("sources.{name}.{key}");
    match source {
        SourceConfig::Rabbitmq {
            uri,
            queue,
            prefetch,
            dedup_window_ms,
            tls,
        } => {
            tls.validate(&at, &amqp_uri(&at("uri"), uri)?)?;
            not_empty(&at("queue"), queue)?;
            at_least(&at("prefetch"), *prefetch, 1)?;
            at_least(&at("dedup_window_ms"), *dedup_window_ms, 1)
        }
        SourceConfig::Kafka {
            bootstrap_servers,
            topics,
            group_id,
            properties,
            security,
        } => {
            security.validate(&at, properties)?;
            not_empty(&at("bootstrap_servers"), bootstrap_servers)?;
            if topics.is_empty() {
                return Err(ConfigError::invalid(at("topics"), "must name a topic"));
            }
            for (i, t) in topics.iter().enumerate() {
                not_empty(&at(&format!("topics[{i}]")), t)?;
            }
            not_empty(&at("group_id"), group_id)
        }
    }
}

fn validate_sink(name: &str, sink: &SinkConfig) -> Result<(), ConfigError> {
    let at = |key: &str| format!("sinks.{name}.{key}");
    match sink {
        SinkConfig::Rabbitmq { uri, tls, .. } => tls.validate(&at, &amqp_uri(&at("uri"), uri)?),
        SinkConfig::Kafka {
            bootstrap_servers,
            topic,
            partitioner,
            properties,
            security,
            ..
        } => {
            security.validate(&at, properties)?;
            not_empty(&at("bootstrap_servers"), bootstrap_servers)?;
            not_empty(&at("topic"), topic)?;
            if !PARTITIONERS.contains(&partitioner.as_str()) {
                return Err(ConfigError::invalid(
                    at("partitioner"),
                    format!("'{partitioner}' is not one of {}", PARTITIONERS.join(", ")),
                ));
            }
            Ok(())
        }
    }
}

impl RouteConfig {
    /// The checked `from` endpoint (`at` is the route's key path, `routes[i]`).
    ///
    /// # Errors
    /// The key of a bad or unknown endpoint.
    pub fn from_endpoint(
        &self,
        at: &str,
        sources: &BTreeMap<String, SourceConfig>,
    ) -> Result<Endpoint, ConfigError> {
        let at = key(at, "from");
        let e = &self.from;
        if e.sink.is_some() {
            return Err(ConfigError::invalid(
                format!("{at}.sink"),
                "a route's from names a source, an amqp_exchange or a kafka_topic",
            ));
        }
        if e.routing_key.is_some() {
            return Err(ConfigError::invalid(
                format!("{at}.routing_key"),
                "is for destinations; a source exchange takes binding_key",
            ));
        }
        let endpoint = resolve(&at, e, e.binding_key.clone().or(Some("#".to_owned())))?;
        match &endpoint {
            Endpoint::Source(name) if !sources.contains_key(name) => {
                Err(ConfigError::invalid(at, format!("unknown source '{name}'")))
            }
            Endpoint::AmqpExchange { exchange, .. } if exchange.is_empty() => {
                Err(ConfigError::invalid(
                    format!("{at}.amqp_exchange"),
                    "the default exchange cannot be bound to; name another exchange",
                ))
            }
            _ => Ok(endpoint),
        }
    }

    /// The checked `to` endpoints, in order.
    ///
    /// # Errors
    /// The key of a bad or unknown endpoint (`routes[2].to[0]: unknown sink 'kafak-out'`).
    pub fn destinations(
        &self,
        at: &str,
        sinks: &BTreeMap<String, SinkConfig>,
    ) -> Result<Vec<Endpoint>, ConfigError> {
        if self.to.is_empty() {
            return Err(ConfigError::invalid(
                key(at, "to"),
                "must name at least one destination",
            ));
        }
        let mut out = Vec::with_capacity(self.to.len());
        for (i, e) in self.to.iter().enumerate() {
            let at = key(at, &format!("to[{i}]"));
            if e.source.is_some() {
                return Err(ConfigError::invalid(
                    format!("{at}.source"),
                    "a destination names a sink, an amqp_exchange or a kafka_topic",
                ));
            }
            if e.binding_key.is_some() {
                return Err(ConfigError::invalid(
                    format!("{at}.binding_key"),
                    "is for sources; a destination exchange takes routing_key",
                ));
            }
            let endpoint = resolve(&at, e, e.routing_key.clone())?;
            if let Endpoint::Sink(name) = &endpoint
                && !sinks.contains_key(name)
            {
                return Err(ConfigError::invalid(at, format!("unknown sink '{name}'")));
            }
            if out.contains(&endpoint) {
                return Err(ConfigError::invalid(
                    at,
                    "names an earlier destination again",
                ));
            }
            out.push(endpoint);
        }
        Ok(out)
    }
}

/// The one endpoint a table names.
fn resolve(at: &str, e: &EndpointConfig, key: Option<String>) -> Result<Endpoint, ConfigError> {
    let named: Vec<Endpoint> = [
        e.source.clone().map(Endpoint::Source),
        e.sink.clone().map(Endpoint::Sink),
        e.amqp_exchange
            .clone()
            .map(|exchange| Endpoint::AmqpExchange {
                vhost: e.vhost.clone(),
                exchange,
                key: key.clone(),
            }),
        e.kafka_topic.clone().map(Endpoint::KafkaTopic),
    ]
    .into_iter()
    .flatten()
    .collect();
    match named.as_slice() {
        [one] => {
            let exchange_only =
                e.vhost != "/" || e.binding_key.is_some() || e.routing_key.is_some();
            if exchange_only && !matches!(one, Endpoint::AmqpExchange { .. }) {
                return Err(ConfigError::invalid(
                    at,
                    "vhost, binding_key and routing_key belong with amqp_exchange",
                ));
            }
            Ok(one.clone())
        }
        [] => Err(ConfigError::invalid(
            at,
            "names no endpoint; set one of source, sink, amqp_exchange, kafka_topic",
        )),
        _ => Err(ConfigError::invalid(
            at,
            "names more than one endpoint; set exactly one of source, sink, amqp_exchange, kafka_topic",
        )),
    }
}

/// Route, source and sink names end up in stage names and metric labels.
fn name_rule(key: &str, name: &str) -> Result<(), ConfigError> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            key,
            format!("'{name}' must be 1-100 letters, digits, '-' or '_'"),
        ))
    }
}

fn not_empty(key: &str, value: &str) -> Result<(), ConfigError> {
    if value.trim().is_empty() {
        Err(ConfigError::invalid(key, "must not be empty"))
    } else {
        Ok(())
    }
}

/// The parsed `uri`; the error shows it without its password.
fn amqp_uri(key: &str, uri: &AmqpUri) -> Result<lapin::uri::AMQPUri, ConfigError> {
    uri.expose().parse::<lapin::uri::AMQPUri>().map_err(|e| {
        ConfigError::invalid(key, format!("'{}' is not an AMQP URI: {e}", uri.redacted()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml: &str) -> Result<(), ConfigError> {
        #[derive(Deserialize)]
        struct Tree {
            #[serde(default)]
            sources: BTreeMap<String, SourceConfig>,
            #[serde(default)]
            sinks: BTreeMap<String, SinkConfig>,
            #[serde(default)]
            routes: Vec<RouteConfig>,
        }
        let t: Tree = config::Config::builder()
            .add_source(config::File::from_str(toml, config::FileFormat::Toml))
            .build()
            .and_then(config::Config::try_deserialize)
            .map_err(|e| ConfigError::invalid("toml", e.to_string()))?;
        validate(&t.sources, &t.sinks, &t.routes)
    }

    const GOOD: &str = r#"
        [sources.rabbit-in]
        kind = "rabbitmq"
        uri = "amqp://guest:guest@127.0.0.1:5672/%2f"
        queue = "orders"
        [sinks.kafka-out]
        kind = "kafka"
        bootstrap_servers = "127.0.0.1:9092"
        topic = "orders"
        [[routes]]
        name = "orders"
        from = { source = "rabbit-in" }
        to = [{ sink = "kafka-out" }, { kafka_topic = "orders" }, { amqp_exchange = "amq.topic", routing_key = "x" }]
        [[routes]]
        name = "back"
        from = { amqp_exchange = "amq.topic", binding_key = "orders.#" }
        to = [{ sink = "kafka-out" }]
    "#;

    #[test]
    fn a_good_bridge_validates() {
        parse(GOOD).unwrap();
    }

    #[test]
    fn an_unknown_sink_is_named_with_its_key() {
        let bad = GOOD.replace(
            "to = [{ sink = \"kafka-out\" }]",
            "to = [{ sink = \"kafak-out\" }]",
        );
        let err = parse(&bad).unwrap_err().to_string();
        assert_eq!(err, "routes[1].to[0]: unknown sink 'kafak-out'");
    }

    #[test]
    fn bad_endpoints_are_named() {
        let cases = [
            (
                "from = { source = \"rabbit-in\" }",
                "from = { source = \"nope\" }",
                "routes[0].from: unknown source 'nope'",
            ),
            (
                "from = { source = \"rabbit-in\" }",
                "from = { source = \"rabbit-in\", kafka_topic = \"t\" }",
                "routes[0].from: names more than one endpoint",
            ),
            (
                "from = { source = \"rabbit-in\" }",
                "from = { sink = \"kafka-out\" }",
                "routes[0].from.sink:",
            ),
            (
                "name = \"back\"",
                "name = \"orders\"",
                "routes[1].name: 'orders' names another route too",
            ),
            (
                "name = \"back\"",
                "name = \"a b\"",
                "routes[1].name: 'a b' must be",
            ),
            (
                "topic = \"orders\"",
                "topic = \"orders\"\npartitioner = \"magic\"",
                "sinks.kafka-out.partitioner: 'magic' is not one of",
            ),
            (
                "queue = \"orders\"",
                "queue = \"orders\"\nprefetch = 0",
                "sources.rabbit-in.prefetch",
            ),
            (
                "uri = \"amqp://guest:guest@127.0.0.1:5672/%2f\"",
                "uri = \"http://x\"",
                "sources.rabbit-in.uri: 'http://x' is not an AMQP URI",
            ),
        ];
        for (from, to, want) in cases {
            let bad = GOOD.replacen(from, to, 1);
            let err = parse(&bad).unwrap_err().to_string();
            assert!(err.starts_with(want), "{to}: got {err}, want {want}");
        }
    }

    #[test]
    fn a_destination_named_twice_is_refused() {
        let bad = GOOD.replace(
            "to = [{ sink = \"kafka-out\" }]",
            "to = [{ sink = \"kafka-out\" }, { sink = \"kafka-out\" }]",
        );
        let err = parse(&bad).unwrap_err().to_string();
        assert_eq!(err, "routes[1].to[1]: names an earlier destination again");
    }

    /// `GOOD` with `extra` lines added to `[sources.rabbit-in]` and `sink_extra` to
    /// `[sinks.kafka-out]`.
    fn with(extra: &str, sink_extra: &str) -> Result<(), ConfigError> {
        parse(
            &GOOD
                .replacen(
                    "queue = \"orders\"",
                    &format!("queue = \"orders\"\n{extra}"),
                    1,
                )
                .replacen(
                    "topic = \"orders\"",
                    &format!("topic = \"orders\"\n{sink_extra}"),
                    1,
                ),
        )
    }

    const AMQPS: &str = "uri = \"amqps://guest:hunter2@rabbit.example:5671/%2f\"";

    #[test]
    fn amqps_with_tls_keys_validates() {
        let tls = format!(
            "{AMQPS}\nca_file = \"/etc/ferry/ca.pem\"\ncert_file = \"/c.pem\"\nkey_file = \"/k.pem\"\nserver_name = \"rabbit.internal\""
        );
        let toml = GOOD.replacen("uri = \"amqp://guest:guest@127.0.0.1:5672/%2f\"", &tls, 1);
        parse(&toml).unwrap();
    }

    #[test]
    fn bad_tls_keys_toward_rabbitmq_are_named() {
        let amqps = |extra: &str| {
            GOOD.replacen(
                "uri = \"amqp://guest:guest@127.0.0.1:5672/%2f\"",
                &format!("{AMQPS}\n{extra}"),
                1,
            )
        };
        let cases = [
            (
                GOOD.replacen(
                    "queue = \"orders\"",
                    "queue = \"orders\"\nca_file = \"/ca.pem\"",
                    1,
                ),
                "sources.rabbit-in.ca_file: is for TLS; sources.rabbit-in.uri must then start with amqps://",
            ),
            (
                amqps("cert_file = \"/c.pem\""),
                "sources.rabbit-in.cert_file: needs key_file",
            ),
            (
                amqps("server_name = \"not a name\""),
                "sources.rabbit-in.server_name: 'not a name' is not a DNS name or an IP address",
            ),
            (amqps("ca_fle = \"/ca.pem\""), "unknown field `ca_fle`"),
        ];
        for (toml, want) in cases {
            let err = parse(&toml).unwrap_err().to_string();
            assert!(err.contains(want), "got {err}, want {want}");
        }
    }

    #[test]
    fn a_bad_uri_is_named_without_its_password() {
        let toml = GOOD.replacen(
            "uri = \"amqp://guest:guest@127.0.0.1:5672/%2f\"",
            "uri = \"amqp://guest:hunter2@127.0.0.1:notaport/%2f\"",
            1,
        );
        let err = parse(&toml).unwrap_err().to_string();
        assert!(err.starts_with("sources.rabbit-in.uri: 'amqp://guest:***@127.0.0.1:notaport/%2f' is not an AMQP URI"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }

    #[test]
    fn kafka_security_keys_validate() {
        let sasl = "security_protocol = \"SASL_SSL\"\nsasl_mechanism = \"SCRAM-SHA-256\"\nusername = \"bridge\"\npassword_env = \"KAFKA_PASSWORD\"\nca_file = \"/ca.pem\"";
        with("", sasl).unwrap();
        with("", "properties = { \"security.protocol\" = \"SASL_SSL\", \"sasl.mechanism\" = \"PLAIN\" }\nusername = \"u\"\npassword_file = \"/p\"").unwrap();
        with("", "properties = { \"security.protocol\" = \"sasl_ssl\" }").unwrap();
    }

    #[test]
    fn bad_kafka_security_keys_are_named() {
        let cases = [
            (
                "security_protocol = \"SASL_SSL\"\nproperties = { \"security.protocol\" = \"SSL\" }",
                "sinks.kafka-out.security_protocol: conflicts with sinks.kafka-out.properties.\"security.protocol\"",
            ),
            (
                "security_protocol = \"SASL_SSL\"\nsasl_mechanism = \"PLAIN\"\nusername = \"u\"\npassword_env = \"P\"\nproperties = { \"sasl.password\" = \"x\" }",
                "sinks.kafka-out.password_env: conflicts with sinks.kafka-out.properties.\"sasl.password\"",
            ),
            (
                "properties = { \"security.protocol\" = \"TLS\" }",
                "sinks.kafka-out.properties.\"security.protocol\": 'TLS' is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
            ),
            ("security_protocol = \"TLS\"", "unknown variant `TLS`"),
            (
                "sasl_mechanism = \"PLAIN\"",
                "sinks.kafka-out.sasl_mechanism: needs security_protocol SASL_PLAINTEXT or SASL_SSL, not PLAINTEXT",
            ),
            (
                "security_protocol = \"SASL_PLAINTEXT\"\nca_file = \"/ca.pem\"",
                "sinks.kafka-out.ca_file: needs security_protocol SSL or SASL_SSL, not SASL_PLAINTEXT",
            ),
            (
                "security_protocol = \"SASL_SSL\"\nsasl_mechanism = \"PLAIN\"\nusername = \"u\"",
                "sinks.kafka-out.username: needs password_file or password_env",
            ),
            (
                "security_protocol = \"SASL_SSL\"\nsasl_mechanism = \"PLAIN\"\npassword_env = \"P\"",
                "sinks.kafka-out.password_env: needs username",
            ),
            (
                "security_protocol = \"SASL_SSL\"\nsasl_mechanism = \"PLAIN\"\nusername = \"u\"\npassword_env = \"P\"\npassword_file = \"/p\"",
                "sinks.kafka-out.password_env: sinks.kafka-out.password_file is set too; keep one",
            ),
            (
                "security_protocol = \"SASL_SSL\"\nusername = \"u\"\npassword_env = \"P\"",
                "sinks.kafka-out.sasl_mechanism: must be set with username",
            ),
            (
                "security_protocol = \"SSL\"\nkey_file = \"/k.pem\"",
                "sinks.kafka-out.key_file: needs cert_file",
            ),
        ];
        for (extra, want) in cases {
            let err = with("", extra).unwrap_err().to_string();
            assert!(
                err.starts_with(want) || err.contains(want),
                "{extra}: got {err}, want {want}"
            );
        }
    }

    #[test]
    fn debug_of_sources_and_sinks_hides_secrets() {
        let source = SourceConfig::Rabbitmq {
            uri: "amqps://bridge:hunter2@rabbit:5671/%2f".into(),
            queue: "q".into(),
            prefetch: 1,
            dedup_window_ms: 1,
            tls: AmqpTlsConfig::default(),
        };
        let sink = SinkConfig::Kafka {
            bootstrap_servers: "b:9093".into(),
            topic: "t".into(),
            partitioner: DEFAULT_PARTITIONER.into(),
            transactional: false,
            properties: BTreeMap::from([("sasl.password".to_owned(), "hunter2".to_owned())]).into(),
            security: KafkaSecurityConfig::default(),
        };
        let shown = format!("{source:?} {sink:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(
            shown.contains("amqps://bridge:***@rabbit:5671/%2f"),
            "{shown}"
        );
    }
}
