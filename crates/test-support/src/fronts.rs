//! Ferry's fronts inside the test process: an AMQP or a Kafka front on a fresh embedded
//! store in a temporary directory, bound to a free loopback port.
//!
//! One launcher, [`InProcess`], serves both protocols ([`Amqp`], [`Kafka`] say how each
//! front starts): it opens the store, serves the front until [`InProcess::stop`], restarts
//! it on the same store and port (as a process restart would), and starts peers — more
//! fronts on the same store, as more Ferry instances over one cluster are. Tests use it
//! where they reach into the store (fault injection) or start many fronts cheaply; tests
//! of the daemon as a whole use [`super::daemon`].

use super::store::embedded;
use ferry_auth::Authenticator;
use ferry_auth::password::PasswordHash;
use ferry_auth::scram::{DEFAULT_ITERATIONS, Mechanism, ScramCredential};
use ferry_auth::store::UserStore;
use ferry_auth::{PermissionConfig, TopicPermissionConfig, UserConfig};
use ferry_config::{AmqpConfig, KafkaConfig};
use ferry_kafka::{KafkaFront, KafkaListener};
use ferry_stage::{Incarnation, Scope};
use ferry_stage::{RootKeys, Stages};
use ferry_store::StoreConfig;
use ferry_store::{Database, RangeOption};
use ferry_telemetry::memory_watermark::MemoryWatermark;
use std::net::SocketAddr;
use std::time::Duration;
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Upper bound on a front's drain when it stops.
const STOP: Duration = Duration::from_secs(30);
/// Upper bound on the wait for the spills to hold a given number of bytes.
const SPILLS_SETTLE: Duration = Duration::from_secs(30);

/// A user besides `guest` that may open only the vhost `other`.
pub const OTHER_USER: (&str, &str) = ("other-user", "other-pass");

/// A user with only SCRAM credentials (SHA-256 and SHA-512), vhost `/`.
pub const SCRAM_USER: (&str, &str) = ("scram-user", "scram-pass");

/// A user who may log in only over TLS (`require_tls`), vhost `/`.
pub const TLS_USER: (&str, &str) = ("tls-user", "tls-pass");

/// A user with restricted permissions on `/`: configure, write and read `^perm-` (write
/// also on `amq.topic`), and on `amq.topic` topic write `^{username}\.`.
pub const PERM_USER: (&str, &str) = ("perm-user", "perm-pass");

/// The users of every front: `guest` (vhost `/`, loopback only), [`OTHER_USER`],
/// [`SCRAM_USER`], [`TLS_USER`] and [`PERM_USER`].
fn users() -> Vec<UserConfig> {
    let user = |(name, password): (&str, &str), vhost: &str| UserConfig {
        name: name.into(),
        password_hash: Some(PasswordHash::new(password).to_string()),
        scram_sha_256: None,
        vhosts: Some(vec![vhost.into()]),
        ..UserConfig::default()
    };
    let scram = |m| Some(ScramCredential::new(m, SCRAM_USER.1, DEFAULT_ITERATIONS).to_string());
    vec![
        UserConfig {
            loopback_only: true,
            ..user(("guest", "guest"), "/")
        },
        user(OTHER_USER, "other"),
        UserConfig {
            password_hash: None,
            scram_sha_256: scram(Mechanism::Sha256),
            scram_sha_512: scram(Mechanism::Sha512),
            ..user(SCRAM_USER, "/")
        },
        UserConfig {
            require_tls: true,
            ..user(TLS_USER, "/")
        },
        UserConfig {
            vhosts: None,
            permissions: vec![PermissionConfig {
                vhost: "/".into(),
                configure: "^perm-".into(),
                write: "^(perm-|amq\\.topic$)".into(),
                read: "^perm-".into(),
            }],
            topic_permissions: vec![TopicPermissionConfig {
                vhost: "/".into(),
                exchange: "amq.topic".into(),
                write: "^{username}\\.".into(),
                read: ".*".into(),
            }],
            ..user(PERM_USER, "/")
        },
    ]
}

/// The users of [`users`] in the user store of `stages`.
async fn authenticator(stages: &Stages) -> Authenticator {
    Authenticator::start(
        stages.db().clone(),
        &StoreConfig::default().prefix,
        &users(),
    )
    .await
    .unwrap()
}

/// How one protocol's front starts.
pub trait Front {
    /// The front's config section.
    type Config: Clone;

    /// The settings tests start from.
    fn test_config() -> Self::Config;

    /// Starts the front on `stages` and `listener`; the task serves until `shutdown`, then
    /// drains.
    #[allow(
        async_fn_in_trait,
        reason = "only the tests implement and await it, on their own runtime"
    )]
    async fn serve(
        config: &Self::Config,
        stages: Stages,
        memory: MemoryWatermark,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> JoinHandle<()>;
}

/// The AMQP 0-9-1 front.
pub struct Amqp;

impl Front for Amqp {
    type Config = AmqpConfig;

    /// The default `[amqp]` with the vhosts `/` and `other`.
    fn test_config() -> AmqpConfig {
        AmqpConfig {
            vhosts: vec!["/".into(), "other".into()],
            ..AmqpConfig::default()
        }
    }

    async fn serve(
        config: &AmqpConfig,
        stages: Stages,
        memory: MemoryWatermark,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> JoinHandle<()> {
        let front = ferry_amqp::Front {
            config: config.clone(),
            users: authenticator(&stages).await,
            db: stages.db().clone(),
            stages,
            prefix: StoreConfig::default().prefix,
            lease_ttl: Duration::from_secs(30),
            memory,
        };
        tokio::spawn(async move {
            let listener = ferry_tls::server::Listener {
                tcp: listener,
                key: "amqp.listen".to_owned(),
                tls: None,
            };
            ferry_amqp::run(front, vec![listener], shutdown)
                .await
                .unwrap();
        })
    }
}

/// The Kafka front.
pub struct Kafka;

impl Front for Kafka {
    type Config = KafkaConfig;

    /// No initial rebalance delay and a short minimum session timeout, so groups form fast.
    fn test_config() -> KafkaConfig {
        KafkaConfig {
            listen: "127.0.0.1:0".into(),
            group_initial_rebalance_delay_ms: 0,
            group_min_session_timeout_ms: 500,
            ..KafkaConfig::default()
        }
    }

    async fn serve(
        config: &KafkaConfig,
        stages: Stages,
        memory: MemoryWatermark,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> JoinHandle<()> {
        let prefix = StoreConfig::default().prefix;
        // Shared: tests run several instances in this process over one embedded store.
        let incarnation = Incarnation::begin(stages.db(), &prefix, config.node_id, Scope::Shared)
            .await
            .unwrap();
        let front = KafkaFront::start(
            config,
            authenticator(&stages).await,
            memory,
            stages,
            &prefix,
            vec![KafkaListener::plaintext(listener)],
            &incarnation,
            shutdown,
        )
        .await
        .unwrap();
        tokio::spawn(front.run())
    }
}

/// An AMQP front in this process.
pub type AmqpServer = InProcess<Amqp>;
/// A Kafka front in this process.
pub type KafkaServer = InProcess<Kafka>;

/// A front of protocol `F` serving in this process on its own store.
pub struct InProcess<F: Front> {
    /// Where clients connect.
    pub addr: SocketAddr,
    /// The store under it.
    pub db: Database,
    /// The front's settings (kept for restarts and peers).
    config: F::Config,
    /// The memory high-water mark of the front (and its peers), raised by hand.
    memory: MemoryWatermark,
    /// Raises and clears its alarm.
    memory_alarm: watch::Sender<Option<String>>,
    /// The serving front.
    serving: Serving,
    /// The store's directory, kept for the test's life.
    dir: TempDir,
}

/// One serving front: its stop switch and its task.
struct Serving {
    shutdown: CancellationToken,
    task: JoinHandle<()>,
}

impl Serving {
    /// Binds `addr`, starts the front on `db` and returns it with its address.
    async fn start<F: Front>(
        db: &Database,
        config: &F::Config,
        memory: &MemoryWatermark,
        addr: SocketAddr,
    ) -> (Self, SocketAddr) {
        let stages = Stages::new(db.clone(), &StoreConfig::default().prefix);
        stages.ensure_schema().await.unwrap();
        let listener = TcpListener::bind(addr).await.unwrap();
        let bound = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let task = F::serve(config, stages, memory.clone(), listener, shutdown.clone()).await;
        (Self { shutdown, task }, bound)
    }

    /// Stops the front and waits for its drain.
    async fn stop(&mut self) {
        self.shutdown.cancel();
        tokio::time::timeout(STOP, &mut self.task)
            .await
            .expect("the front drained within the limit")
            .unwrap();
    }
}

/// The loopback address with a port the system chooses.
fn any_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

impl<F: Front> InProcess<F> {
    /// A front with [`Front::test_config`].
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// A front with [`Front::test_config`] changed by `edit`.
    pub async fn start_with(edit: impl FnOnce(&mut F::Config)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = F::test_config();
        edit(&mut config);
        let db = Database::open(&embedded(dir.path())).await.unwrap();
        let (memory_alarm, memory) = MemoryWatermark::manual();
        let (serving, addr) = Serving::start::<F>(&db, &config, &memory, any_port()).await;
        Self {
            addr,
            db,
            config,
            memory,
            memory_alarm,
            serving,
            dir,
        }
    }

    /// Raises the memory alarm with `reason`, or clears it (`None`), as the monitor does
    /// when the resident memory crosses `daemon.max_memory_mb`.
    pub fn memory_alarm(&self, reason: Option<&str>) {
        self.memory_alarm.send_replace(reason.map(str::to_owned));
    }

    /// The user store the front logs users in from (changes apply to new connections).
    pub fn users(&self) -> UserStore {
        UserStore::new(self.db.clone(), &StoreConfig::default().prefix)
    }

    /// `host:port` of the front (Kafka's `bootstrap.servers`).
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    /// The bytes kept in spills once the collector has run (the daemon runs it on every
    /// dropped reference; the in-process front does not, so the test does).
    pub async fn spilled_bytes(&self) -> i64 {
        let spills = Stages::new(self.db.clone(), &StoreConfig::default().prefix).spills();
        spills.collect().await.unwrap();
        spills.bytes().await.unwrap()
    }

    /// Waits (bounded) until the spills hold `bytes`; then, at 0, checks no chunk is left.
    pub async fn spills_hold(&self, bytes: i64) {
        let deadline = tokio::time::Instant::now() + SPILLS_SETTLE;
        while self.spilled_bytes().await != bytes {
            assert!(
                tokio::time::Instant::now() < deadline,
                "spills hold {} bytes, not {bytes}",
                self.spilled_bytes().await
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if bytes == 0 {
            let (b, e) = RootKeys::new(&StoreConfig::default().prefix).all_spill_chunks();
            let tx = self.db.begin().unwrap();
            let left = tx.get_range(&RangeOption::new(b, e), true).await.unwrap();
            assert!(left.is_empty(), "{} spill chunks are left", left.len());
        }
    }

    /// Stops the front (draining its connections) and closes the store, then starts both
    /// again on the same store and port, as a restart of the process would.
    pub async fn restart(&mut self) {
        self.serving.stop().await;
        self.db.close().await;
        self.db = Database::open(&embedded(self.dir.path())).await.unwrap();
        let (serving, addr) =
            Serving::start::<F>(&self.db, &self.config, &self.memory, self.addr).await;
        (self.serving, self.addr) = (serving, addr);
    }

    /// Stops the front (draining its connections) and closes the store.
    pub async fn stop(mut self) {
        self.serving.stop().await;
        self.db.close().await;
    }

    /// Starts another front on this one's store, with this one's settings changed by
    /// `edit`, as another Ferry instance over the same cluster.
    pub async fn peer_with(&self, edit: impl FnOnce(&mut F::Config)) -> Peer {
        let mut config = self.config.clone();
        edit(&mut config);
        let (serving, addr) =
            Serving::start::<F>(&self.db, &config, &self.memory, any_port()).await;
        Peer { addr, serving }
    }
}

impl AmqpServer {
    /// The URI of vhost `/` as guest.
    pub fn uri(&self) -> String {
        format!("amqp://guest:guest@{}/%2f", self.addr)
    }

    /// A new lapin connection as guest to vhost `/`.
    pub async fn connect(&self) -> lapin::Connection {
        super::amqp::connect(&self.uri()).await
    }

    /// A new channel on a new connection.
    pub async fn channel(&self) -> (lapin::Connection, lapin::Channel) {
        super::amqp::channel(&self.uri()).await
    }
}

impl KafkaServer {
    /// Another Kafka front on this one's store with node id `node`.
    pub async fn peer(&self, node: i32) -> Peer {
        self.peer_with(|c| c.node_id = node).await
    }
}

/// Another front on an [`InProcess`] front's store.
pub struct Peer {
    /// Where clients connect.
    pub addr: SocketAddr,
    /// The serving front.
    serving: Serving,
}

impl Peer {
    /// `host:port` of the front (Kafka's `bootstrap.servers`).
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    /// Stops the front (a Kafka front releases its leases as it goes).
    pub async fn stop(mut self) {
        self.serving.stop().await;
    }
}
