//! The AMQP 0-9-1 front: a RabbitMQ-compatible server over the stage.
//!
//! An AMQP queue *is* a stage; exchanges and bindings live in the front's own subspace.
//! Folders, by job, from the wire inwards: [`wire`] (the frame codec, sans-io; reply
//! codes; the socket's writer), [`state`] (what the instance's connections share: the
//! broker, virtual hosts and their topology, live connections, direct reply-to, a
//! connection's context for its channels and which of them consume which queues, and the upkeep of queues), [`authorize`] (RabbitMQ's permissions on each operation),
//! [`message`] (a message's stored form and large bodies in spills), [`connection`] (the
//! handshake, heartbeats, the per-connection loop, users changed in the store),
//! [`channel`] (the per-channel state machine), [`publishing`] (publishes, storing into
//! queues, confirms in order with the connection's own deliveries, delayed-message
//! exchanges, dead-lettering) and [`consuming`] (consumers,
//! basic.get, acknowledgements, single active consumer). Seams, the only public modules:
//! [`admin`] (what the management API may use of the front) and [`port`] (what the bridge
//! may use of it); the root re-exports the few items the load tools, tests and fuzz
//! targets need besides.
//!
//! [`start`] loads the topology, then [`Started::run`] serves until shutdown, then drains:
//! every connection is closed with 320 CONNECTION_FORCED after its channels stored what
//! they had accepted and returned their unacknowledged deliveries.

pub mod admin;
mod authorize;
mod channel;
mod connection;
mod consuming;
#[doc(hidden)]
pub mod fuzzing;
mod message;
pub mod port;
mod publishing;
mod state;
mod wire;

// Beside the seams (`admin`, `port`) and what starts the front (below), what others need:
/// How many messages one lease takes at most (the tests bound redeliveries with it).
pub use consuming::consumers::LEASE_BATCH;
/// A header value read as an integer, as the front reads `x-delivery-count`.
pub use state::topology::args::integer;
/// The virtual hosts over a store, with their topology's keys: the tests import
/// definitions into them without a running front.
pub use state::{topology::records::TopologyKeys, vhosts::VHosts};
/// The frame codec, free of I/O: the load tools (`ferry bench`) and the fuzz targets speak
/// AMQP with it.
pub use wire::codec;
// The stored forms and models the fuzz targets (`fuzz/`) decode and build.
#[doc(hidden)]
pub use {
    message::stored::StoredMessage,
    publishing::publish::Incoming,
    state::topology::args::{QueueArgs, decode_table, encode_table},
    state::topology::exchange::delay_of,
    state::topology::records::{QueueRecord, decode_exchange, encode_exchange, entity_name},
    state::topology::{Binding, Destination, Exchange, ExchangeKind},
};

use ferry_auth::Authenticator;
use ferry_config::AmqpConfig;
use ferry_stage::Liveness;
use ferry_stage::{Holders, StageError, Stages, now_ms};
use ferry_store::{Database, StoreError};
use ferry_telemetry::memory_watermark::MemoryWatermark;
use ferry_tls::server::Listener;
use state::broker::Broker;
use state::expiry::{self, ExpiryHints};
use state::topology::{self, VHost};
use state::{janitor, registry, resources, vhosts};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::warn;
use wire::errors::{self, AmqpError};

/// Pause before watching a virtual host's version key again after the store failed.
const WATCH_RETRY: Duration = Duration::from_secs(1);

/// What the front needs from the daemon.
#[derive(Clone)]
pub struct Front {
    /// `[amqp]`.
    pub config: AmqpConfig,
    /// Who may log in.
    pub users: Authenticator,
    /// The store.
    pub db: Database,
    /// The stages (under `store.prefix`).
    pub stages: Stages,
    /// `store.prefix`, under which the front keeps its topology.
    pub prefix: String,
    /// `stage.lease_ttl_ms`.
    pub lease_ttl: Duration,
    /// The memory high-water mark, which blocks publishers while it is exceeded.
    pub memory: MemoryWatermark,
}

/// Why the AMQP front could not start.
#[derive(Debug, thiserror::Error)]
pub enum FrontError {
    /// The front's own lease holder could not be registered.
    #[error("the AMQP front cannot register its lease holder: {0}")]
    Holder(StageError),
    /// A virtual host's stored topology could not be loaded.
    #[error("the AMQP front cannot load the topology of vhost '{vhost}': {error}")]
    Topology {
        /// The virtual host.
        vhost: String,
        /// What went wrong.
        error: AmqpError,
    },
}

/// The AMQP front with its topology loaded, ready to serve ([`Started::run`]); the
/// bridge routes through its [`Started::port`] meanwhile.
pub struct Started {
    /// Shared with every connection (and the bridge).
    broker: Arc<Broker>,
    /// Queues opened by this instance, for their background work.
    opened: mpsc::UnboundedReceiver<Arc<topology::Queue>>,
    /// Raises and clears the publisher alarm.
    alarm: watch::Sender<Option<String>>,
    /// One of the alarm's causes.
    memory: MemoryWatermark,
    /// Expiry hints, for the sweeper.
    expiry: mpsc::UnboundedReceiver<(u64, std::sync::Weak<topology::Queue>)>,
}

/// Registers the front's lease holder and loads every virtual host's topology.
///
/// # Errors
/// [`FrontError`] when the front cannot start.
pub async fn start(front: Front) -> Result<Started, FrontError> {
    errors::AmqpError::export_counters();
    let holders = Holders::new(&front.stages);
    let instance = holders
        .register(front.lease_ttl)
        .await
        .map_err(FrontError::Holder)?;
    let keys = TopologyKeys::new(&front.prefix);
    let (opened_tx, opened) = mpsc::unbounded_channel();
    let vhosts = vhosts::VHosts::open(
        front.config.vhosts.clone(),
        front.db.clone(),
        front.stages.clone(),
        keys,
        opened_tx,
    )
    .await
    .map_err(|(vhost, error)| FrontError::Topology { vhost, error })?;
    let (alarm, blocked) = watch::channel(None);
    let (expiry, expiry_rx) = ExpiryHints::new();
    let broker = Arc::new(Broker {
        config: front.config,
        users: front.users,
        db: front.db,
        stages: front.stages,
        holders,
        liveness: Liveness::new(front.lease_ttl),
        vhosts,
        instance,
        blocked,
        expiry,
        connections: registry::Connections::default(),
        direct_replies: Default::default(),
    });
    Ok(Started {
        broker,
        opened,
        alarm,
        memory: front.memory,
        expiry: expiry_rx,
    })
}

/// [`start`], then [`Started::run`]: serves AMQP on `listeners` until `shutdown`.
///
/// # Errors
/// [`FrontError`] when the front cannot start.
pub async fn run(
    front: Front,
    listeners: Vec<Listener>,
    shutdown: CancellationToken,
) -> Result<(), FrontError> {
    start(front).await?.run(listeners, shutdown).await;
    Ok(())
}

impl Started {
    /// What the management API may use of the front.
    pub fn admin(&self) -> admin::AmqpAdmin {
        admin::AmqpAdmin::new(self.broker.clone())
    }

    /// The front's port, for the bridge's routes through it.
    pub fn port(&self) -> port::AmqpPort {
        port::AmqpPort::new(self.broker.clone())
    }

    /// Serves AMQP on `listeners` (plaintext and amqps share `amqp.max_connections`) until
    /// `shutdown`, then drains every connection and stops the front's background tasks.
    pub async fn run(self, listeners: Vec<Listener>, shutdown: CancellationToken) {
        let Self {
            broker,
            opened,
            alarm,
            memory,
            expiry,
        } = self;
        let background = CancellationToken::new();
        let mut tasks = JoinSet::new();
        tasks.spawn(expiry::run(broker.db.clone(), expiry, background.clone()));
        tasks.spawn(resources::run(
            broker.clone(),
            memory,
            alarm,
            background.clone(),
        ));
        tasks.spawn(janitor::reap_orphans(broker.clone(), background.clone()));
        tasks.spawn(publishing::delayed::run(broker.clone(), background.clone()));
        tasks.spawn(renew_instance(broker.clone(), background.clone()));
        tasks.spawn(connection::user_changes::run(
            broker.clone(),
            background.clone(),
        ));
        let (following, token) = (broker.clone(), background.clone());
        tasks.spawn(async move {
            vhosts::follow(
                &following.vhosts,
                &following.connections,
                watch_topology,
                token,
            )
            .await;
        });
        tasks.spawn(supervise_queues(broker.clone(), opened, background.clone()));

        let limit = ferry_tls::server::limit(broker.config.max_connections);
        let serving = listeners.into_iter().map(|listener| {
            let serving = broker.clone();
            ferry_tls::server::serve(
                "amqp",
                listener,
                limit.clone(),
                shutdown.clone(),
                move |stream, peer, token| connection::serve(serving.clone(), stream, peer, token),
            )
        });
        futures::future::join_all(serving).await;
        background.cancel();
        while tasks.join_next().await.is_some() {}
        let _ = broker.holders.release(broker.instance).await;
    }
}

/// Keeps the instance's holder alive (its transient exchanges and queues live with it).
async fn renew_instance(broker: Arc<Broker>, shutdown: CancellationToken) {
    let liveness = broker.liveness;
    liveness
        .renew_until(&shutdown, || async {
            if let Err(e) = broker.holders.renew(broker.instance, liveness.ttl()).await {
                warn!(error = %e, "cannot renew the AMQP front's lease holder");
            }
        })
        .await;
}

/// Starts each opened queue's background work: its dead-letter router, its `x-expires`
/// timer, and a first expiry check of its head.
async fn supervise_queues(
    broker: Arc<Broker>,
    mut opened: mpsc::UnboundedReceiver<Arc<topology::Queue>>,
    shutdown: CancellationToken,
) {
    let mut per_queue = JoinSet::new();
    loop {
        let queue = tokio::select! {
            () = shutdown.cancelled() => break,
            queue = opened.recv() => match queue {
                Some(q) => q,
                None => break,
            },
        };
        while per_queue.try_join_next().is_some() {}
        let Some(vhost) = broker.vhosts.get(&queue.vhost) else {
            continue;
        };
        queue.export_counters();
        broker.expiry.hint(&queue, now_ms());
        if queue.dead_letter_stage.is_some() {
            per_queue.spawn(publishing::dead_letter::run(
                broker.clone(),
                vhost.clone(),
                queue.clone(),
                shutdown.clone(),
            ));
        }
        if queue.spec.args.expires.is_some() {
            per_queue.spawn(janitor::expire_unused(vhost, queue, shutdown.clone()));
        }
    }
    while per_queue.join_next().await.is_some() {}
}

/// Reloads a virtual host's topology whenever its version key changes (another instance,
/// or this one, changed it).
async fn watch_topology(vhost: Arc<VHost>, shutdown: CancellationToken) {
    let key = vhost.keys().version(&vhost.name);
    loop {
        let watch = async {
            let tx = vhost.db().begin()?;
            tx.get(&key, false).await?;
            let watch = tx.watch(&key);
            tx.commit().await?;
            Ok::<_, StoreError>(watch)
        }
        .await;
        let pause = match watch {
            Ok(watch) => {
                if let Err(e) = vhost.load().await {
                    warn!(vhost = %vhost.name, error = %e, "cannot reload the AMQP topology");
                }
                tokio::select! {
                    _ = watch => continue,
                    () = shutdown.cancelled() => return,
                }
            }
            Err(e) => {
                warn!(vhost = %vhost.name, error = %e, "cannot watch the AMQP topology");
                WATCH_RETRY
            }
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = shutdown.cancelled() => return,
        }
    }
}
