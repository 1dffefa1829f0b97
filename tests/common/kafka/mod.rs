//! Shared scaffolding of the Kafka tests: a Ferry Kafka front running in the test's own
//! runtime on a fresh embedded store (bound to 127.0.0.1:0), peers on the same store (more
//! instances), and rdkafka clients pointed at them.
#![allow(dead_code)]

pub mod raw;

use ferry::config::KafkaConfig;
use ferry::config::StoreConfig;
use ferry::config::users::default_users;
use ferry::kafka::KafkaFront;
use ferry::stage::Stages;
use ferry::store::Database;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use rdkafka::{ClientConfig, Message};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
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

/// A second Kafka front on a [`TestBroker`]'s store, as another Ferry instance sharing
/// the same cluster would be.
pub struct Peer {
    /// Where clients connect.
    pub addr: SocketAddr,
    /// Stops the front.
    shutdown: CancellationToken,
    /// The front's task.
    task: JoinHandle<()>,
}

impl TestBroker {
    /// Starts another front on this broker's store with node id `node`.
    pub async fn peer(&self, node: i32) -> Peer {
        let mut config = self.config.clone();
        config.node_id = node;
        let (addr, shutdown, task) = serve(self.db.clone(), &self.store, &config).await;
        Peer {
            addr,
            shutdown,
            task,
        }
    }
}

impl Peer {
    /// `host:port` for `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.addr.to_string()
    }

    /// Stops the front (it releases its leases as it goes).
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.task.await.unwrap();
    }
}

async fn launch(
    store: &StoreConfig,
    config: &KafkaConfig,
) -> (SocketAddr, Database, CancellationToken, JoinHandle<()>) {
    let db = Database::open(store).await.unwrap();
    let (addr, shutdown, task) = serve(db.clone(), store, config).await;
    (addr, db, shutdown, task)
}

/// Starts a Kafka front on `db`.
async fn serve(
    db: Database,
    store: &StoreConfig,
    config: &KafkaConfig,
) -> (SocketAddr, CancellationToken, JoinHandle<()>) {
    let stages = Stages::new(db, &store.prefix);
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
    (addr, shutdown, tokio::spawn(front.run()))
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

/// Sends records `from..to` to `topic`, keyed so they spread over the partitions; each
/// record's value is its number.
pub async fn send_range(p: &FutureProducer, topic: &str, from: usize, to: usize) {
    let sends = (from..to).map(|i| async move {
        let key = format!("key-{i}");
        let value = format!("{i}");
        p.send(
            FutureRecord::to(topic)
                .key(key.as_bytes())
                .payload(value.as_bytes()),
            Timeout::After(PATIENCE),
        )
        .await
        .expect("acknowledged");
    });
    futures::future::join_all(sends).await;
}

/// Runs `consumer` as member `member` until the channel closes, reporting (member,
/// partition, value) for every record of [`send_range`] it reads, and committing each
/// record it reads when `commit`.
pub fn drive(
    member: usize,
    c: Arc<StreamConsumer>,
    commit: bool,
    tx: mpsc::UnboundedSender<(usize, i32, usize)>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tx.closed() => return,
                m = c.recv() => {
                    // Transient errors (a broker restarting) are the client's to recover.
                    let Ok(m) = m else { continue };
                    let value = std::str::from_utf8(m.payload().unwrap()).unwrap().parse().unwrap();
                    if commit {
                        let _ = c.commit_message(&m, CommitMode::Async);
                    }
                    if tx.send((member, m.partition(), value)).is_err() {
                        return;
                    }
                }
            }
        }
    })
}
