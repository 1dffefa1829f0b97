//! Scaffolding for the AMQP front's tests: the front started in-process on an embedded
//! store in a temporary directory (restartable on the same directory), lapin connections
//! to it, and helpers that read reply codes out of lapin's errors.
#![allow(dead_code)]

use ferry::amqp::{Front, run};
use ferry::auth::{PasswordHash, Users};
use ferry::config::{AmqpConfig, StoreConfig, UserConfig};
use ferry::stage::Stages;
use ferry::store::Database;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use std::net::SocketAddr;
use std::time::Duration;
use tempfile::TempDir;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Upper bound on anything a test waits for.
pub const WAIT: Duration = Duration::from_secs(10);

/// A user besides `guest` that may open only the vhost `other`.
pub const OTHER_USER: (&str, &str) = ("other-user", "other-pass");

/// An AMQP front running in this process.
pub struct Server {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The store under it.
    pub db: Database,
    shutdown: CancellationToken,
    task: JoinHandle<()>,
    config: AmqpConfig,
    dir: TempDir,
}

impl Server {
    /// A front with the default `[amqp]` settings.
    pub async fn start() -> Self {
        Self::with(|_| {}).await
    }

    /// A front with `[amqp]` changed by `edit` (vhosts `/` and `other` exist).
    pub async fn with(edit: impl FnOnce(&mut AmqpConfig)) -> Self {
        let mut config = AmqpConfig {
            vhosts: vec!["/".into(), "other".into()],
            ..AmqpConfig::default()
        };
        edit(&mut config);
        Self::on(tempfile::tempdir().unwrap(), config).await
    }

    async fn on(dir: TempDir, config: AmqpConfig) -> Self {
        let store = StoreConfig {
            path: dir.path().join("store"),
            cache_mb: 32,
            ..StoreConfig::default()
        };
        let db = Database::open(&store).await.unwrap();
        let stages = Stages::new(db.clone(), "ferry");
        stages.ensure_schema().await.unwrap();
        let users = Users::from_config(&[
            UserConfig {
                name: "guest".into(),
                password_hash: PasswordHash::new("guest").to_string(),
                vhosts: vec!["/".into()],
                loopback_only: true,
            },
            UserConfig {
                name: OTHER_USER.0.into(),
                password_hash: PasswordHash::new(OTHER_USER.1).to_string(),
                vhosts: vec!["other".into()],
                loopback_only: false,
            },
        ])
        .unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let front = Front {
            config: config.clone(),
            users,
            db: db.clone(),
            stages,
            prefix: "ferry".into(),
            lease_ttl: Duration::from_secs(30),
        };
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        let task = tokio::spawn(async move {
            run(front, listener, token).await.unwrap();
        });
        Self {
            addr,
            db,
            shutdown,
            task,
            config,
            dir,
        }
    }

    /// The URI of vhost `/` as guest.
    pub fn uri(&self) -> String {
        format!("amqp://guest:guest@{}/%2f", self.addr)
    }

    /// A new lapin connection as guest to vhost `/`.
    pub async fn connect(&self) -> Connection {
        connect(&self.uri()).await
    }

    /// A new channel on a new connection.
    pub async fn channel(&self) -> (Connection, Channel) {
        let conn = self.connect().await;
        let ch = conn.create_channel().await.unwrap();
        (conn, ch)
    }

    /// Shuts the front down (draining its connections) and closes the store.
    pub async fn stop(self) -> TempDir {
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .unwrap()
            .unwrap();
        self.db.close().await;
        self.dir
    }

    /// Stops and starts again on the same store, as a restart would.
    pub async fn restart(self) -> Self {
        let config = self.config.clone();
        let dir = self.stop().await;
        Self::on(dir, config).await
    }
}

/// A lapin connection to `uri`.
pub async fn connect(uri: &str) -> Connection {
    tokio::time::timeout(
        WAIT,
        Connection::connect(uri, ConnectionProperties::default()),
    )
    .await
    .expect("connecting took too long")
    .expect("connect")
}

/// The AMQP reply code in a lapin error, if it carries one.
pub fn reply_code(e: &lapin::Error) -> Option<u16> {
    match e.kind() {
        lapin::ErrorKind::ProtocolError(amqp) => Some(amqp.get_id()),
        _ => None,
    }
}

/// The reply text in a lapin error, if it carries one.
pub fn reply_text(e: &lapin::Error) -> String {
    match e.kind() {
        lapin::ErrorKind::ProtocolError(amqp) => amqp.get_message().to_string(),
        other => format!("{other:?}"),
    }
}

/// Declares a durable queue `name` with `args`.
pub async fn declare(ch: &Channel, name: &str, args: FieldTable) {
    ch.queue_declare(
        name.into(),
        QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        },
        args,
    )
    .await
    .unwrap();
}

/// Publishes `bodies` to `exchange` with `routing_key` under confirms, and checks every one
/// was acked.
pub async fn publish_confirmed(ch: &Channel, exchange: &str, routing_key: &str, bodies: &[&str]) {
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let mut confirms = Vec::new();
    for body in bodies {
        confirms.push(
            ch.basic_publish(
                exchange.into(),
                routing_key.into(),
                BasicPublishOptions::default(),
                body.as_bytes(),
                BasicProperties::default().with_delivery_mode(2),
            )
            .await
            .unwrap(),
        );
    }
    for confirm in confirms {
        let c = tokio::time::timeout(WAIT, confirm).await.unwrap().unwrap();
        assert!(c.is_ack(), "{c:?}");
    }
}

/// Takes every message of `queue` with basic.get (acking each), as strings.
pub async fn drain(ch: &Channel, queue: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Bounded: a queue that never empties fails the test instead of hanging it.
    for _ in 0..10_000 {
        let got = ch
            .basic_get(
                queue.into(),
                lapin::options::BasicGetOptions { no_ack: true },
            )
            .await
            .unwrap();
        match got {
            Some(m) => out.push(String::from_utf8(m.delivery.data.clone()).unwrap()),
            None => return out,
        }
    }
    panic!("queue {queue} did not empty");
}
