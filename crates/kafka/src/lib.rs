//! The Kafka wire front: existing Kafka producers and consumers (librdkafka, kcat,
//! kafka-python) talk to Ferry with only `bootstrap.servers` changed.
//!
//! Folders, by job: [`wire`] (the codec, record batches, old message sets, compression —
//! no I/O), [`partition`] (a partition's log and everything that writes it: sequencers,
//! leases, staging, idempotent producers, retention, compaction, leader epochs, fetch
//! sessions), [`coordinator`] (consumer groups, transactions), [`metadata`]
//! (topics and their settings, brokers, broker settings), [`acls`] (Kafka ACLs and the
//! checks every API makes) and [`api`] (one module per API). Beside them: [`connection`]
//! (one client), [`keys`] (the keyspace), [`recovery`] (freeing an earlier incarnation's
//! leases at start), [`port`] (what the bridge may use of the front) and [`admin`] (what
//! the management API may see of it).
//!
//! Only `port` and `admin` are public, with the items at this root the daemon starts the
//! front with and the constants the tests measure against (and the hidden `fuzzing` and
//! `test_fixture`); every other module is private to the crate.
//!
//! Produce path: a batch is validated and appended as sent to its partition's stage
//! (conflict-free, any instance); the partition's sequencer moves staged batches into the
//! log, assigning dense offsets in the same transaction; the producer is answered with its
//! offset after that commit. Fetchers long-poll on watches of the high watermark.

mod acls;
pub mod admin;
mod api;
pub mod clients;
mod connection;
mod coordinator;
#[doc(hidden)]
pub mod fuzzing;
mod keys;
mod metadata;
mod partition;
pub mod port;
mod recovery;
mod share;
/// An in-process front over its own store, for tests: this crate's API tests and the
/// bridge's (through the feature `test-fixture`).
#[cfg(any(test, feature = "test-fixture"))]
#[doc(hidden)]
pub mod test_fixture;
mod wire;

pub use api::SUPPORTED;
pub use connection::PRODUCE_THROTTLE;

use acls::store::AclStore;
use acls::{Acls, AuthorizerSettings};
use coordinator::groups::consumer::ConsumerSettings;
use coordinator::groups::state::GroupSettings;
use coordinator::groups::store::GroupStore;
use coordinator::groups::{Coordinator, Identity};
use coordinator::transactions::Transactions;
use ferry_auth::Authenticator;
use ferry_auth::principal::PrincipalRules;
use ferry_config::KafkaConfig;
use ferry_config::kafka::LISTEN_KEY;
use ferry_config::listeners::SecurityProtocol;
use ferry_stage::Incarnation;
use ferry_stage::Liveness;
use ferry_stage::{StageError, Stages};
use ferry_store::{Database, StoreError};
use ferry_telemetry::memory_watermark::MemoryWatermark;
use ferry_tls::server::Listener;
use keys::KafkaKeys;
use metadata::brokers::{Brokers, ListenerAddress, Registration};
use metadata::settings::broker::{BrokerSettings, BrokerSettingsError};
use metadata::settings::{TopicConfig, TopicDefaults};
use metadata::topics::{Topic, TopicError, Topics};
use partition::reads::Reads;
use partition::sequencer::{SequencerSettings, Sequencers};
use partition::waiters::Waiters;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// Why the Kafka front could not start.
#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    /// The store failed.
    #[error("the Kafka front cannot use the store: {0}")]
    Store(#[from] StoreError),
    /// The topics could not be loaded.
    #[error("the Kafka front cannot load its topics: {0}")]
    Topics(#[from] TopicError),
    /// The dynamic broker settings could not be loaded.
    #[error("the Kafka front cannot load the dynamic broker settings: {0}")]
    BrokerSettings(#[from] BrokerSettingsError),
    /// A listener has no local address.
    #[error("a Kafka listener has no local address: {0}")]
    Listener(std::io::Error),
    /// The front's lease holder cannot be registered.
    #[error("the Kafka front cannot register its lease holder: {0}")]
    Holder(StageError),
    /// `kafka.ssl_principal_mapping_rules` does not parse.
    #[error("kafka.ssl_principal_mapping_rules: {0}")]
    PrincipalRules(String),
}

/// What every connection and request handler shares.
pub struct Context {
    /// `[kafka]`.
    pub config: KafkaConfig,
    /// The store.
    pub db: Database,
    /// The Kafka keyspace.
    pub keys: KafkaKeys,
    /// The topics.
    pub topics: Topics,
    /// This instance's sequencers.
    pub sequencers: Sequencers,
    /// What is read of the partitions outside their sequencers.
    pub reads: Reads,
    /// Produce requests waiting for the log.
    pub waiters: Arc<Waiters>,
    /// Writes (and lets go of) the spills of large batches.
    pub large: partition::large::LargeBatches,
    /// The live brokers.
    pub brokers: Brokers,
    /// The consumer group coordinator.
    pub coordinator: Coordinator,
    /// The transaction coordinator.
    pub transactions: Transactions,
    /// Who may authenticate.
    pub users: Authenticator,
    /// What each principal may do (Kafka ACLs, cached).
    pub acls: Acls,
    /// `kafka.ssl_principal_mapping_rules`, parsed.
    pub principal_rules: PrincipalRules,
    /// The memory high-water mark: producers are throttled while it is exceeded.
    pub memory: MemoryWatermark,
    /// The dynamic broker settings, with the topic defaults they make.
    pub broker_settings: BrokerSettings,
    /// The cluster id Metadata reports.
    pub cluster_id: String,
    /// This instance's one log directory (DescribeLogDirs, a broker's `log.dirs`).
    pub(crate) log_dir: metadata::log_dir::LogDir,
    /// Each listener's bound address as Kafka's `listeners` writes it
    /// (`PLAINTEXT://127.0.0.1:9092`).
    pub(crate) bound: Vec<String>,
    /// This instance's fetch sessions (KIP-227).
    pub fetch_sessions: partition::fetch_sessions::FetchSessions,
    /// Fires when the daemon shuts down (long polls answer early).
    pub shutdown: CancellationToken,
    /// This instance's live client connections (the management API's Connections page).
    pub clients: clients::Clients,
    /// The share groups (KIP-932) this instance serves.
    pub(crate) share: share::ShareGroups,
}

impl Context {
    /// Whether the store's free-disk alarm is raised (the engine logged why): nothing is
    /// staged or spilled meanwhile.
    pub fn disk_full(&self) -> bool {
        self.db.disk_alarm().is_some()
    }

    /// The topic defaults this instance applies now: `[kafka]`'s, under the dynamic broker
    /// settings.
    pub fn defaults(&self) -> TopicDefaults {
        self.broker_settings.topic_defaults()
    }

    /// Creates a topic and takes its partitions' sequencer leases, so it is writable at
    /// once.
    ///
    /// # Errors
    /// As [`Topics::create`].
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, TopicError> {
        let topic = self.topics.create(name, partitions, config, false).await?;
        for p in &topic.partitions {
            self.sequencers.claim(p).await;
        }
        info!(topic = name, partitions, "topic created");
        Ok(topic)
    }

    /// Topic `name`, created with the default partition count when it is missing and
    /// `auto_create` allows it.
    ///
    /// # Errors
    /// [`TopicError::Unknown`] for a missing topic that may not be created, or as
    /// [`Context::create_topic`].
    pub async fn topic_or_create(
        &self,
        name: &str,
        auto_create: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        match self.topics.get(name) {
            Some(t) => Ok(t),
            None if auto_create => {
                let partitions = self.config.default_partitions;
                match self
                    .create_topic(name, partitions, TopicConfig::default())
                    .await
                {
                    Err(TopicError::Exists(_)) => self
                        .topics
                        .get(name)
                        .ok_or_else(|| TopicError::Unknown(name.to_owned())),
                    other => other,
                }
            }
            None => Err(TopicError::Unknown(name.to_owned())),
        }
    }
}

/// One bound listener of the Kafka front.
pub struct KafkaListener {
    /// Its security protocol, which also names it (as Kafka names listeners).
    pub protocol: SecurityProtocol,
    /// The socket, the key that set it, and its TLS handshake for SSL and SASL_SSL.
    pub socket: Listener,
}

impl KafkaListener {
    /// The PLAINTEXT listener of `kafka.listen` on `tcp`.
    pub fn plaintext(tcp: TcpListener) -> Self {
        Self {
            protocol: SecurityProtocol::Plaintext,
            socket: Listener {
                tcp,
                key: LISTEN_KEY.to_owned(),
                tls: None,
            },
        }
    }

    /// Where its clients are told to connect: for `kafka.listen`, `advertised_host` and
    /// `advertised_port`; for an entry of `kafka.listeners`, its entry in
    /// `advertised_listeners`; otherwise the bound address (this machine's hostname when
    /// bound to every interface).
    fn advertised(&self, config: &KafkaConfig) -> Result<ListenerAddress, KafkaError> {
        let local = self.socket.tcp.local_addr().map_err(KafkaError::Listener)?;
        let (host, port) = if self.socket.key == LISTEN_KEY {
            let port = match config.advertised_port {
                0 => local.port(),
                port => port,
            };
            (advertised_host(&config.advertised_host, local), port)
        } else {
            let named = config.advertised(self.protocol).and_then(|addr| {
                let (host, port) = addr.rsplit_once(':')?;
                Some((host.trim_matches(['[', ']']).to_owned(), port.parse().ok()?))
            });
            named.unwrap_or_else(|| (advertised_host("", local), local.port()))
        };
        Ok(ListenerAddress {
            name: self.protocol.name().to_owned(),
            host,
            port: i32::from(port),
        })
    }
}

/// The Kafka front, started and ready to serve.
pub struct KafkaFront {
    /// Shared with every connection.
    ctx: Arc<Context>,
    /// The bound listeners.
    listeners: Vec<KafkaListener>,
    /// Stops the sequencers and background loops once connections have drained.
    internal: CancellationToken,
}

impl KafkaFront {
    /// Loads the topics, frees what `incarnation`'s predecessors held ([`recovery`]),
    /// registers this instance as a broker (with every listener's advertised address),
    /// takes the sequencer leases of every partition no live instance
    /// holds, and keeps `listeners` for [`Self::run`].
    ///
    /// # Errors
    /// [`KafkaError`] when the store cannot be used or the principal mapping rules do not
    /// parse.
    #[allow(clippy::too_many_arguments)] // each is one of the front's separate inputs
    pub async fn start(
        config: &KafkaConfig,
        users: Authenticator,
        memory: MemoryWatermark,
        stages: Stages,
        prefix: &str,
        listeners: Vec<KafkaListener>,
        incarnation: &Incarnation,
        shutdown: CancellationToken,
    ) -> Result<Self, KafkaError> {
        connection::export_counters();
        coordinator::transactions::export_counters();
        let db = stages.db().clone();
        let keys = KafkaKeys::new(prefix);
        let me = Registration {
            node: config.node_id,
            listeners: listeners
                .iter()
                .map(|l| l.advertised(config))
                .collect::<Result<_, _>>()?,
        };
        let large =
            partition::large::LargeBatches::start(&stages, Liveness::new(config.sequencer_lease()))
                .await
                .map_err(KafkaError::Holder)?;
        let topics = Topics::new(db.clone(), keys.clone(), stages.clone());
        let share = share::ShareGroups::new(db.clone(), keys.clone(), topics.clone(), stages);
        topics.refresh().await?;
        let freed = recovery::release_outlived(&db, &keys, &topics, incarnation).await?;
        if freed != recovery::Freed::default() {
            info!(
                partitions = freed.partitions,
                groups = freed.groups,
                brokers = freed.brokers,
                "freed the leases and registrations of this instance's earlier incarnations"
            );
        }
        let brokers = Brokers::new(db.clone(), keys.clone(), me, config.sequencer_lease());
        brokers.register().await?;
        let internal = CancellationToken::new();
        let waiters = Arc::new(Waiters::default());
        let broker_settings = BrokerSettings::start(
            db.clone(),
            keys.clone(),
            config.node_id,
            TopicDefaults::from_config(config),
        )
        .await?;
        let sequencers = Sequencers::new(
            db.clone(),
            topics.clone(),
            waiters.clone(),
            brokers.clone(),
            broker_settings.clone(),
            SequencerSettings {
                node: config.node_id,
                lease: config.sequencer_lease(),
                batch: config.sequencer_batch,
                retention_interval: config.retention_check_interval(),
                compaction_interval: config.compaction_check_interval(),
                max_decompressed: config.max_request_size,
            },
            internal.clone(),
        );
        sequencers.balance().await;
        let coordinator = Coordinator::new(
            GroupStore::new(db.clone(), keys.clone()),
            GroupSettings {
                min_session: millis(config.group_min_session_timeout_ms),
                max_session: millis(config.group_max_session_timeout_ms),
                initial_delay: config.group_initial_rebalance_delay(),
                consumer: ConsumerSettings {
                    session_timeout: Duration::from_millis(
                        config.group_consumer_session_timeout_ms,
                    ),
                    heartbeat_interval: Duration::from_millis(
                        config.group_consumer_heartbeat_interval_ms,
                    ),
                },
            },
            Arc::new(topics.clone()),
            Identity {
                node: config.node_id,
                liveness: Liveness::new(config.sequencer_lease()),
            },
            shutdown.clone(),
        );
        let transactions =
            Transactions::new(db.clone(), keys.clone(), topics.clone(), waiters.clone());
        let acls = Acls::start(
            AclStore::new(db.clone(), keys.clone()),
            AuthorizerSettings {
                super_users: config.super_users.clone(),
                allow_everyone_if_no_acl_found: config.allow_everyone_if_no_acl_found,
            },
        )
        .await?;
        let bound = listeners
            .iter()
            .map(|l| {
                let addr = l.socket.tcp.local_addr().map_err(KafkaError::Listener)?;
                Ok(format!("{}://{addr}", l.protocol.name()))
            })
            .collect::<Result<_, KafkaError>>()?;
        let ctx = Context {
            config: config.clone(),
            log_dir: metadata::log_dir::LogDir::of(&db),
            bound,
            transactions,
            cluster_id: format!("ferry-{prefix}"),
            fetch_sessions: partition::fetch_sessions::FetchSessions::default(),
            users,
            acls,
            principal_rules: PrincipalRules::parse(&config.ssl_principal_mapping_rules)
                .map_err(KafkaError::PrincipalRules)?,
            reads: Reads::new(db.clone()),
            db,
            keys,
            topics,
            sequencers,
            waiters,
            large,
            brokers,
            coordinator,
            broker_settings,
            memory,
            shutdown,
            clients: clients::Clients::default(),
            share,
        };
        Ok(Self {
            ctx: Arc::new(ctx),
            listeners,
            internal,
        })
    }

    /// What the management API may see of the front.
    pub fn admin(&self) -> admin::KafkaAdmin {
        admin::KafkaAdmin::new(self.ctx.clone())
    }

    /// The front's port, for the bridge's routes through the front.
    pub fn port(&self) -> port::KafkaPort {
        port::KafkaPort::new(self.ctx.clone())
    }

    /// The address each listener is bound to, by name (`PLAINTEXT`, `SSL`, …).
    pub fn local_addrs(&self) -> Vec<(&'static str, SocketAddr)> {
        self.listeners
            .iter()
            .filter_map(|l| Some((l.protocol.name(), l.socket.tcp.local_addr().ok()?)))
            .collect()
    }

    /// Serves clients on every listener until the shutdown token fires; then lets open
    /// connections finish the answers they owe, stops the sequencers (releasing their
    /// leases), the group tasks and the background loops, and removes this broker's
    /// registration.
    pub async fn run(self) {
        let ctx = self.ctx;
        let background = Background::spawn(&ctx, self.internal);
        let limit = ferry_tls::server::limit(ctx.config.max_connections);
        let serving = self.listeners.into_iter().map(|listener| {
            let arrival = connection::Arrival {
                listener: listener.protocol,
                local: listener.socket.tcp.local_addr().ok(),
                require_sasl: listener.protocol.is_sasl()
                    || (listener.protocol == SecurityProtocol::Plaintext
                        && ctx.config.require_sasl),
            };
            let handler_ctx = ctx.clone();
            ferry_tls::server::serve(
                "kafka",
                listener.socket,
                limit.clone(),
                ctx.shutdown.clone(),
                move |stream, peer, stop| {
                    connection::serve(handler_ctx.clone(), stream, peer, arrival, stop)
                },
            )
        });
        futures::future::join_all(serving).await;
        background.stop(&ctx).await;
    }
}

/// The front's background loops: sequencer balancing, the broker registration, the topic
/// cache, the dynamic broker settings' cache, the ACL cache, the group leases, transaction
/// expiry, consumer lag, the share groups' lock expiry, settings, dead letters and figures, and the
/// lease holder of large batches' spills. The front's API handlers
/// rely on them (in-process tests start them without a listener).
struct Background {
    /// Stops the loops.
    internal: CancellationToken,
    /// The loops' tasks.
    tasks: Vec<JoinHandle<()>>,
}

impl Background {
    /// Spawns the loops over `ctx`; they run until `internal` fires.
    fn spawn(ctx: &Arc<Context>, internal: CancellationToken) -> Self {
        let tasks = vec![
            tokio::spawn(ctx.sequencers.clone().run()),
            tokio::spawn(ctx.brokers.clone().run(internal.clone())),
            tokio::spawn({
                let topics = ctx.topics.clone();
                let token = internal.clone();
                async move { topics.follow_changes(token).await }
            }),
            tokio::spawn(ctx.coordinator.clone().run(internal.clone())),
            tokio::spawn(ctx.acls.clone().follow_changes(internal.clone())),
            tokio::spawn(ctx.broker_settings.clone().follow_changes(internal.clone())),
            tokio::spawn(ctx.transactions.clone().expire_until(internal.clone())),
            tokio::spawn(ctx.share.clone().expire_locks(internal.clone())),
            tokio::spawn(ctx.share.clone().follow_configs(internal.clone())),
            tokio::spawn(share::dead_letters::run(ctx.clone(), internal.clone())),
            tokio::spawn(coordinator::groups::lag::run(
                ctx.db.clone(),
                ctx.topics.clone(),
                ctx.coordinator.store().clone(),
                internal.clone(),
            )),
            tokio::spawn(share::figures::run(ctx.share.clone(), internal.clone())),
            tokio::spawn({
                let (large, token) = (ctx.large.clone(), internal.clone());
                async move { large.hold_until(&token).await }
            }),
        ];
        Self { internal, tasks }
    }

    /// Stops the loops (releasing the sequencer and group leases and the broker
    /// registration) once the group tasks, which stop on `ctx.shutdown`, have.
    async fn stop(self, ctx: &Context) {
        self.internal.cancel();
        ctx.coordinator.stopped().await;
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// The host clients are told to use: `configured` when set, else the listen host, else
/// (when listening on every interface) this machine's hostname.
fn advertised_host(configured: &str, local: SocketAddr) -> String {
    if !configured.is_empty() {
        return configured.to_owned();
    }
    if !local.ip().is_unspecified() {
        return local.ip().to_string();
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}
