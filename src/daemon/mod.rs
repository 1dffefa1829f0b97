//! The daemon: the long-running `ferry run` process.
//!
//! Startup: logging, the metrics recorder, signal handlers, the TLS certificates when a
//! listener needs them (reloaded on SIGHUP and file changes from then on), the listen
//! sockets (metrics, management, AMQP and amqps, every Kafka listener, so a busy port fails fast,
//! before the store is opened), the store, a new incarnation of this instance (freeing at
//! once what its earlier incarnations held, [`recovery`]), the
//! fronts ([`crate::amqp`], [`crate::kafka`]), the bridge's routes ([`crate::bridge`]), then the background loops, the management API
//! ([`crate::management`]) and the operations HTTP server. Shutdown (SIGTERM or SIGINT): `/readyz` turns 503, the fronts stop accepting
//! and finish the answers they owe (connections drained), the loops stop, the store closes,
//! and the HTTP server stops last — all within
//! `daemon.shutdown_timeout_ms`, after which what is left is aborted and named in the log.
//!
//! Modules: [`logging`], [`recorder`] (Prometheus), [`listener`] (binding with clear errors,
//! shared by every server), [`http`] (`/metrics`, `/healthz`, `/readyz`), [`store_metrics`]
//! (the periodic store watch), [`recovery`] (returns the leases of this instance's earlier
//! incarnations at start), [`lease_reaper`] (returns the leases of dead holders),
//! [`tasks`] (named background tasks), [`shutdown`] (signals and
//! the bounded drain).

pub mod http;
pub mod lease_reaper;
pub mod listener;
pub mod logging;
pub mod recorder;
pub mod recovery;
pub mod shutdown;
pub mod store_metrics;
pub mod tasks;

use ferry_config::{
    Config, amqp::LISTEN_KEY as AMQP_LISTEN_KEY, amqp::TLS_LISTEN_KEY as AMQP_TLS_LISTEN_KEY,
    env_var, kafka::LISTEN_KEY as KAFKA_LISTEN_KEY, kafka::LISTENERS_KEY as KAFKA_LISTENERS_KEY,
    management::LISTEN_KEY as MANAGEMENT_LISTEN_KEY, metrics::LISTEN_KEY,
};
use ferry_kafka::{KafkaError, KafkaFront, KafkaListener};
use ferry_stage::{Holders, StageError, Stages};
use ferry_stage::{Incarnation, Scope};
use ferry_store::{Database, StoreError};
use ferry_telemetry::memory_watermark::MemoryWatermark;
use ferry_tls::server::Listener;
use ferry_tls::{Acceptor, Certificates, TlsSetupError};
use shutdown::Drain;
use tasks::Tasks;
use tokio_util::sync::CancellationToken;
use tracing::info;

/// Why the daemon could not start, or stopped with a failure.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Logging could not be set up.
    #[error(transparent)]
    Logging(#[from] logging::LoggingError),
    /// The metrics recorder could not be installed.
    #[error(transparent)]
    Recorder(#[from] recorder::RecorderError),
    /// A listen socket could not be bound.
    #[error(transparent)]
    Listen(#[from] listener::ListenError),
    /// The TLS certificate, key or CA of `[tls]` cannot be used.
    #[error(transparent)]
    Tls(TlsSetupError),
    /// The SIGTERM or SIGINT handler could not be installed.
    #[error("cannot install the SIGTERM and SIGINT handlers: {0}")]
    Signals(std::io::Error),
    /// The store did not open.
    #[error("cannot open the store: {0}")]
    StoreOpen(StoreError),
    /// The Kafka front could not start.
    #[error(transparent)]
    Kafka(#[from] KafkaError),
    /// The store failed while running and accepts no more transactions.
    #[error("{0}")]
    StoreFailed(StoreError),
    /// This start could not be recorded as a new incarnation of the instance.
    #[error("cannot record this start as a new incarnation of the instance in the store: {0}")]
    Incarnation(StoreError),
    /// The keyspace in the store is not one this ferry can use.
    #[error("cannot use the keyspace: {0}")]
    Keyspace(StageError),
    /// The operations HTTP server stopped with an error.
    #[error("the metrics server failed: {0}")]
    Http(std::io::Error),
    /// The management HTTP API stopped with an error.
    #[error("the management API server failed: {0}")]
    Management(std::io::Error),
    /// The users in `[[users]]` cannot be used or written to the user store.
    #[error("{0}")]
    Users(#[from] ferry_auth::AuthSetupError),
    /// The AMQP front could not start.
    #[error(transparent)]
    Amqp(#[from] ferry_amqp::FrontError),
    /// The bridge stopped with a failure.
    #[error(transparent)]
    Bridge(#[from] ferry_bridge::BridgeError),
    /// A background task panicked.
    #[error("background task '{task}' panicked")]
    Panicked {
        /// The task's name.
        task: &'static str,
    },
}

/// Runs Ferry with a validated `config` until SIGTERM or SIGINT, then drains and returns.
///
/// # Errors
/// A [`DaemonError`] when startup fails (port in use, store not opening) or when a
/// background task fails; a shutdown that had to abort work still returns `Ok` after
/// logging what it aborted.
pub async fn run(config: Config) -> Result<(), DaemonError> {
    let started = std::time::Instant::now();
    logging::init(&config.log)?;
    let metrics = recorder::install()?;
    let rabbitmq_node = recorder::rabbitmq_node(&config);
    // The management API names this instance as the metrics' identity labels do.
    let node_name = rabbitmq_node.node.clone();
    ferry_telemetry::compat::rabbitmq::state::set_node(rabbitmq_node);
    let shutdown = CancellationToken::new();
    shutdown::cancel_on_signal(shutdown.clone()).map_err(DaemonError::Signals)?;
    ferry_telemetry::process::raise_fd_limit();

    let certificates = if config.listen_addresses().iter().any(|l| l.tls) {
        Some(Certificates::load(&config.tls).map_err(DaemonError::Tls)?)
    } else {
        None
    };
    let acceptor = certificates
        .as_ref()
        .map(|c| Acceptor::new(c.clone(), config.tls.handshake_timeout()));
    let tls_if = |on: bool| acceptor.clone().filter(|_| on);

    let metrics_listener = bind(LISTEN_KEY, LISTEN_KEY, &config.metrics.listen, None).await?;
    let metrics_addr = metrics_listener
        .tcp
        .local_addr()
        .map_or_else(|_| config.metrics.listen.clone(), |addr| addr.to_string());
    let metrics_tls = tls_if(config.metrics.tls);
    let management_listener = if config.management.listen.is_empty() {
        None
    } else {
        let tls = tls_if(config.tls.has_certificate());
        Some(
            bind(
                MANAGEMENT_LISTEN_KEY,
                MANAGEMENT_LISTEN_KEY,
                &config.management.listen,
                tls,
            )
            .await?,
        )
    };
    let mut amqp_listeners = Vec::new();
    for (key, addr, tls) in [
        (AMQP_LISTEN_KEY, &config.amqp.listen, None),
        (
            AMQP_TLS_LISTEN_KEY,
            &config.amqp.tls_listen,
            acceptor.clone(),
        ),
    ] {
        if !addr.is_empty() {
            amqp_listeners.push(bind(key, key, addr, tls).await?);
        }
    }
    let amqp_addr = addresses(&amqp_listeners);
    let mut kafka_listeners = Vec::new();
    if !config.kafka.listen.is_empty() {
        let socket = bind(
            KAFKA_LISTEN_KEY,
            KAFKA_LISTEN_KEY,
            &config.kafka.listen,
            None,
        )
        .await?;
        kafka_listeners.push(KafkaListener::plaintext(socket.tcp));
    }
    let specs = config
        .kafka
        .listener_specs()
        .expect("validation parsed kafka.listeners");
    for (i, spec) in specs.into_iter().enumerate() {
        let key = format!("{KAFKA_LISTENERS_KEY}[{i}]");
        let tls = tls_if(spec.protocol.is_tls());
        let socket = bind(&key, KAFKA_LISTENERS_KEY, &spec.addr, tls).await?;
        kafka_listeners.push(KafkaListener {
            protocol: spec.protocol,
            socket,
        });
    }
    let management_addr = management_listener
        .as_ref()
        .and_then(|l| l.tcp.local_addr().ok())
        .map_or_else(String::new, |addr| addr.to_string());
    let db = Database::open(&config.store)
        .await
        .map_err(DaemonError::StoreOpen)?;
    let incarnation = Incarnation::begin(
        &db,
        &config.store.prefix,
        config.kafka.node_id,
        Scope::of(&db),
    )
    .await
    .map_err(DaemonError::Incarnation)?;
    let stages = Stages::new(db.clone(), &config.store.prefix).owned_by(incarnation.owner());
    stages
        .ensure_schema()
        .await
        .map_err(DaemonError::Keyspace)?;
    recovery::release_holders(&stages, &incarnation).await;
    let users = ferry_auth::Authenticator::start(db.clone(), &config.store.prefix, &config.users)
        .await
        .map_err(DaemonError::Users)?;
    if let Some(warning) = config.memory_mark_warning() {
        tracing::warn!("{warning}");
    }
    let memory = MemoryWatermark::monitor(config.daemon.max_memory_mb, shutdown.clone());
    let kafka = KafkaFront::start(
        &config.kafka,
        users.clone(),
        memory.clone(),
        stages.clone(),
        &config.store.prefix,
        kafka_listeners,
        &incarnation,
        shutdown.clone(),
    )
    .await?;
    let kafka_addr = kafka
        .local_addrs()
        .iter()
        .map(|(name, addr)| format!("{name}://{addr}"))
        .collect::<Vec<_>>()
        .join(" ");
    info!(
        version = env!("CARGO_PKG_VERSION"),
        engine = db.engine_name(),
        store_path = %config.store.path.display(),
        metrics = %metrics_addr,
        amqp = %amqp_addr,
        kafka = %kafka_addr,
        management = %management_addr,
        "ferry started"
    );

    let mut loops = Tasks::default();
    if let Some(certificates) = certificates {
        let token = shutdown.clone();
        loops.spawn("tls reload", async move {
            certificates.watch(token).await;
            Ok(())
        });
    }
    let (watch_db, prefix, token) = (db.clone(), config.store.prefix.clone(), shutdown.clone());
    loops.spawn("store metrics", async move {
        store_metrics::run(watch_db, prefix, token)
            .await
            .map_err(DaemonError::StoreFailed)
    });
    let (holders, ttl, token) = (
        Holders::new(&stages),
        config.stage.lease_ttl(),
        shutdown.clone(),
    );
    loops.spawn("lease reaper", async move {
        lease_reaper::run(holders, ttl, token).await;
        Ok(())
    });
    let (spills, token) = (stages.spills(), shutdown.clone());
    loops.spawn("spill collector", async move {
        spills.run(token).await;
        Ok(())
    });
    let kafka_port = kafka.port();
    let kafka_admin = kafka.admin();
    let kafka_listening = kafka.local_addrs();
    loops.spawn("kafka front", async move {
        kafka.run().await;
        Ok(())
    });
    let front = ferry_amqp::Front {
        config: config.amqp.clone(),
        users: users.clone(),
        db: db.clone(),
        stages: stages.clone(),
        prefix: config.store.prefix.clone(),
        lease_ttl: config.stage.lease_ttl(),
        memory: memory.clone(),
    };
    let amqp = ferry_amqp::start(front).await?;
    let mut listening = Vec::new();
    for l in &amqp_listeners {
        let protocol = if l.tls.is_some() { "amqp/ssl" } else { "amqp" };
        listening.extend(
            l.tcp
                .local_addr()
                .ok()
                .map(|addr| (protocol.to_owned(), addr)),
        );
    }
    for (name, addr) in kafka_listening {
        listening.push((format!("kafka/{}", name.to_ascii_lowercase()), addr));
    }
    listening.extend(
        metrics_listener
            .tcp
            .local_addr()
            .ok()
            .map(|a| ("prometheus".to_owned(), a)),
    );
    if let Some(l) = &management_listener {
        let protocol = if l.tls.is_some() { "https" } else { "http" };
        listening.extend(
            l.tcp
                .local_addr()
                .ok()
                .map(|addr| (protocol.to_owned(), addr)),
        );
    }
    let fronts = ferry_bridge::Fronts {
        amqp: Some(amqp.port()),
        kafka: Some(kafka_port),
    };
    let bridge_status = ferry_bridge::status::Status::default();
    let route_states = ferry_bridge::States::default();
    let management_api = ferry_management::Api::new(ferry_management::Shared {
        users: users.clone(),
        amqp: amqp.admin(),
        kafka: kafka_admin,
        listeners: listening
            .into_iter()
            .map(|(protocol, addr)| ferry_management::Listening { protocol, addr })
            .collect(),
        node: node_name.clone(),
        https: management_listener
            .as_ref()
            .is_some_and(|l| l.tls.is_some()),
        rates: Default::default(),
        routes: ferry_bridge::admin::RouteAdmin::new(
            config.clone(),
            stages.clone(),
            route_states.clone(),
            bridge_status.clone(),
            fronts.clone(),
        ),
        resources: ferry_management::Resources {
            started,
            memory,
            store: db.clone(),
            disk_free_limit_bytes: config.store.min_free_disk_mb.saturating_mul(1 << 20),
            nodes: ferry_management::node_registry::NodeRegistry::new(
                db.clone(),
                &config.store.prefix,
                node_name,
            ),
        },
    });
    let token = shutdown.clone();
    loops.spawn("amqp front", async move {
        amqp.run(amqp_listeners, token).await;
        Ok(())
    });
    let bridge = ferry_bridge::Setup {
        config: config.clone(),
        stages: stages.clone(),
        fronts,
        status: bridge_status.clone(),
        states: route_states,
    };
    let (token, failed) = (shutdown.clone(), shutdown.clone());
    loops.spawn("bridge", async move {
        let result = ferry_bridge::run(bridge, token).await;
        if result.is_err() {
            failed.cancel();
        }
        result.map_err(DaemonError::from)
    });
    if let Some(listener) = management_listener {
        let server = ferry_tls::http::Server {
            name: "management",
            key: MANAGEMENT_LISTEN_KEY,
            tls: listener.tls,
        };
        let (sampled, token) = (management_api.clone(), shutdown.clone());
        loops.spawn("rates sampler", async move {
            ferry_management::sampler::run(sampled, token).await;
            Ok(())
        });
        let (published, token) = (management_api.clone(), shutdown.clone());
        loops.spawn("node publisher", async move {
            ferry_management::nodes::publish(published, token).await;
            Ok(())
        });
        let (router, token) = (ferry_management::router(management_api), shutdown.clone());
        loops.spawn("management server", async move {
            server
                .serve(listener.tcp, router, token)
                .await
                .map_err(DaemonError::Management)
        });
    }
    let (handle, token) = (metrics.clone(), shutdown.clone());
    loops.spawn("metrics upkeep", async move {
        recorder::upkeep(handle, token).await;
        Ok(())
    });

    let stop_http = CancellationToken::new();
    let endpoints = http::Endpoints {
        metrics,
        db: db.clone(),
        shutdown: shutdown.clone(),
        bridge: bridge_status,
    };
    let mut server = Tasks::default();
    let (stop, failed) = (stop_http.clone(), shutdown.clone());
    server.spawn("metrics server", async move {
        let result = http::serve(metrics_listener.tcp, metrics_tls, endpoints, stop).await;
        // The server only ends early on a failure; the rest of the daemon then stops too.
        failed.cancel();
        result.map_err(DaemonError::Http)
    });

    shutdown.cancelled().await;
    let mut drain = Drain::start(&config.daemon);
    drain.tasks(loops).await;
    drain.step("store close", db.close()).await;
    ferry_store::stop_engines();
    stop_http.cancel();
    drain.tasks(server).await;
    drain.finish()
}

/// Binds `addr`, the value of config key `key` (whose environment override is that of
/// `env_key`: a list's entries share their list's), as a listener with `tls` as its
/// handshake.
async fn bind(
    key: &str,
    env_key: &str,
    addr: &str,
    tls: Option<Acceptor>,
) -> Result<Listener, DaemonError> {
    let tcp = listener::bind(key, &env_var(env_key), addr).await?;
    Ok(Listener {
        tcp,
        key: key.to_owned(),
        tls,
    })
}

/// The bound addresses of `listeners`, for the startup log (`amqps://` marks TLS).
fn addresses(listeners: &[Listener]) -> String {
    listeners
        .iter()
        .filter_map(|l| {
            let addr = l.tcp.local_addr().ok()?;
            Some(if l.tls.is_some() {
                format!("amqps://{addr}")
            } else {
                addr.to_string()
            })
        })
        .collect::<Vec<_>>()
        .join(" ")
}
