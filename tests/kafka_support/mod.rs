//! Shared scaffolding of the Kafka tests: a Ferry Kafka front running in the test's own
//! runtime on a fresh embedded store (bound to 127.0.0.1:0), and rdkafka clients pointed
//! at it.
#![allow(dead_code)]

pub mod raw;

use ferry::config::KafkaConfig;
use ferry::config::StoreConfig;
use ferry::config::users::default_users;
use ferry::kafka::KafkaFront;
use ferry::stage::Stages;
use ferry::store::Database;
use rdkafka::ClientConfig;
use rdkafka::consumer::StreamConsumer;
use rdkafka::producer::FutureProducer;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Longest any single client operation in these tests may take before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A Kafka front on its own store.
pub struct TestBroker {
    /// Where clients connect.
    pub addr: SocketAddr,
    /// Its store.
    pub db: Database,
    /// The store's settings (to reopen it).
    store: StoreConfig,
    /// The front's settings (to restart it).
    config: KafkaConfig,
    /// Stops the front.
    shutdown: CancellationToken,
    /// The front's task.
    task: JoinHandle<()>,
    /// Keeps the store's directory for the test's life.
    _dir: tempfile::TempDir,
}

/// Test settings: loopback, no initial rebalance delay, short minimum session timeout.
pub fn test_config() -> KafkaConfig {
    KafkaConfig {
        listen: "127.0.0.1:0".into(),
        group_initial_rebalance_delay_ms: 0,
        group_min_session_timeout_ms: 500,
        ..KafkaConfig::default()
    }
}

impl TestBroker {
    /// A front with [`test_config`].
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// A front with [`test_config`] changed by `edit`.
    pub async fn start_with(edit: impl FnOnce(&mut KafkaConfig)) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = StoreConfig {
            path: dir.path().join("store"),
            cache_mb: 64,
            ..StoreConfig::default()
        };
        let mut config = test_config();
        edit(&mut config);
        let (addr, db, shutdown, task) = launch(&store, &config).await;
        Self {
            addr,
            db,
            store,
            config,
            shutdown,
            task,
            _dir: dir,
        }
    }

    /// `host:port` for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    /// Stops the front and closes the store, then starts both again on the same port, as
    /// a restart of the process would.
    pub async fn restart(&mut self) {
        self.shutdown.cancel();
        (&mut self.task).await.unwrap();
        self.db.close().await;
        let mut config = self.config.clone();
        config.listen = self.addr.to_string();
        let (addr, db, shutdown, task) = launch(&self.store, &config).await;
        (self.addr, self.db, self.shutdown, self.task) = (addr, db, shutdown, task);
    }

    /// Stops the front and closes the store.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap();
        self.db.close().await;
    }
}

async fn launch(
    store: &StoreConfig,
    config: &KafkaConfig,
) -> (SocketAddr, Database, CancellationToken, JoinHandle<()>) {
    let db = Database::open(store).await.unwrap();
    let stages = Stages::new(db.clone(), &store.prefix);
    stages.ensure_schema().await.unwrap();
    let listener = TcpListener::bind(&config.listen).await.unwrap();
    let shutdown = CancellationToken::new();
    let front = KafkaFront::start(
        config,
        &default_users(),
        stages,
        &store.prefix,
        listener,
        shutdown.clone(),
    )
    .await
    .unwrap();
    let addr = front.local_addr().unwrap();
    (addr, db, shutdown, tokio::spawn(front.run()))
}

/// An rdkafka client configuration for `bootstrap` with `settings` on top.
pub fn client_config(bootstrap: &str, settings: &[(&str, &str)]) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("topic.metadata.refresh.interval.ms", "1000");
    for (k, v) in settings {
        c.set(*k, *v);
    }
    c
}

/// A producer waiting for every acknowledgement.
pub fn producer(bootstrap: &str, settings: &[(&str, &str)]) -> FutureProducer {
    let mut base = vec![("acks", "all"), ("linger.ms", "5")];
    base.extend_from_slice(settings);
    client_config(bootstrap, &base).create().unwrap()
}

/// A consumer of `group` starting from the earliest offset.
pub fn consumer(bootstrap: &str, group: &str, settings: &[(&str, &str)]) -> StreamConsumer {
    let mut base = vec![
        ("group.id", group),
        ("auto.offset.reset", "earliest"),
        ("enable.auto.commit", "false"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "500"),
        ("fetch.wait.max.ms", "100"),
    ];
    base.extend_from_slice(settings);
    client_config(bootstrap, &base).create().unwrap()
}
