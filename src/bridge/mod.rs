//! The bridge: routes that carry messages between Ferry's fronts and external brokers
//! through durable stages, and the one mapping between AMQP and Kafka messages.
//!
//! A route (`[[routes]]`) has one source and one or more destinations. Its source stages
//! every message into one stage per destination ([`route`]) in a store transaction that
//! also records the source's progress (a Kafka offset, a seen message-id, an acknowledged
//! lease), so nothing is staged twice; only after that commit is the upstream broker told
//! (basic.ack, offset commit). A worker per destination ([`sink`]) drains its stage and
//! removes a message only after the destination confirmed it.
//!
//! Modules: [`mapping`] (AMQP ↔ Kafka), [`staged`] (the stage body of a bridged message),
//! [`route`] (a route's stages), [`sources`] and [`sinks`] (one module per kind of
//! endpoint), [`rabbitmq_link`] and [`kafka_client`] (how the external ones connect, with
//! TLS and SASL), [`sink`] (the delivery worker), [`keys`] (source and sink progress),
//! [`status`] (connection states for `/readyz`), [`replay`] (dead-letters back to their
//! stage).

pub mod kafka_client;
pub mod keys;
pub mod mapping;
pub mod rabbitmq_link;
pub mod replay;
pub mod route;
pub mod sink;
pub mod sinks;
pub mod sources;
pub mod staged;
pub mod status;

use crate::amqp::port::AmqpPort;
use crate::config::{Config, RouteConfig, SinkConfig, SourceConfig};
use crate::kafka::port::KafkaPort;
use crate::liveness::Liveness;
use crate::stage::{Holders, StageError, Stages};
use crate::store::{Database, StoreError};
use keys::RouteKeys;
use route::RouteStages;
use sink::{Backoff, Worker};
use status::Status;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{error, info};

/// Why the bridge stopped.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// A route's stages could not be used.
    #[error("route '{route}': {error}")]
    Stage {
        /// The route.
        route: String,
        /// What failed.
        error: StageError,
    },
    /// The store failed.
    #[error("the bridge's store failed: {0}")]
    Store(#[from] StoreError),
    /// The config names something the running daemon does not have.
    #[error("{0}")]
    Config(String),
}

impl From<StageError> for BridgeError {
    fn from(error: StageError) -> Self {
        Self::Stage {
            route: String::new(),
            error,
        }
    }
}

/// The ports of Ferry's own fronts, for routes that start or end at them; `None` for a
/// front this process does not run (then such routes fail to start, naming the front).
/// The bridge reaches the fronts through these ports only.
#[derive(Clone, Default)]
pub struct Fronts {
    /// The AMQP front's port.
    pub amqp: Option<AmqpPort>,
    /// The Kafka front's port.
    pub kafka: Option<KafkaPort>,
}

/// Everything one route's source and sinks share.
pub struct RouteContext {
    /// The route as configured.
    pub config: RouteConfig,
    /// Its stages, one per destination.
    pub stages: RouteStages,
    /// Its progress records.
    pub keys: RouteKeys,
    /// The store.
    pub db: Database,
    /// The lease holders, and the bridge's own holder (kept alive by [`run`]).
    pub holders: Holders,
    /// The bridge's holder.
    pub holder: u64,
    /// Connection states.
    pub status: Status,
    /// Ferry's fronts.
    pub fronts: Fronts,
}

/// The bridge's inputs.
pub struct Setup {
    /// The whole config (routes, sources, sinks, store prefix, lease ttl).
    pub config: Config,
    /// The store's stages.
    pub stages: Stages,
    /// Ferry's fronts.
    pub fronts: Fronts,
    /// Connection states, shared with `/readyz`.
    pub status: Status,
}

/// Runs every route until `shutdown`, then returns the bridge's leases.
///
/// # Errors
/// A [`BridgeError`] when a route's stages cannot be opened or the store fails.
pub async fn run(setup: Setup, shutdown: CancellationToken) -> Result<(), BridgeError> {
    let Setup {
        config,
        stages,
        fronts,
        status,
    } = setup;
    if config.routes.is_empty() {
        return Ok(());
    }
    let holders = Holders::new(&stages);
    let ttl = config.stage.lease_ttl();
    let holder = holders.register(ttl).await?;
    let mut tasks = JoinSet::new();
    for route in &config.routes {
        let ctx = open_route(&config, &stages, route, &holders, holder, &status, &fronts)
            .await
            .map_err(|error| BridgeError::Stage {
                route: route.name.clone(),
                error,
            })?;
        start_route(ctx, &config.sources, &config.sinks, &mut tasks, &shutdown).await?;
        info!(route = %route.name, destinations = route.to.len(), "route started");
    }
    let renew = renew_holder(
        holders.clone(),
        holder,
        Liveness::new(ttl),
        shutdown.clone(),
    );
    let result = tokio::select! {
        r = renew => r,
        Some(r) = tasks.join_next() => match r {
            Ok(r) => r,
            Err(e) => {
                error!(error = %e, "a bridge task panicked");
                Err(BridgeError::Config(format!("a bridge task panicked: {e}")))
            }
        },
    };
    shutdown.cancel();
    while tasks.join_next().await.is_some() {}
    let _ = holders.release(holder).await;
    result
}

async fn open_route(
    config: &Config,
    stages: &Stages,
    route: &RouteConfig,
    holders: &Holders,
    holder: u64,
    status: &Status,
    fronts: &Fronts,
) -> Result<Arc<RouteContext>, StageError> {
    // Validation already checked every endpoint.
    let endpoints = route
        .destinations("routes", &config.sinks)
        .unwrap_or_default();
    Ok(Arc::new(RouteContext {
        config: route.clone(),
        stages: RouteStages::open(stages, route, endpoints).await?,
        keys: RouteKeys::new(&config.store.prefix, &route.name),
        db: stages.db().clone(),
        holders: holders.clone(),
        holder,
        status: status.clone(),
        fronts: fronts.clone(),
    }))
}

async fn start_route(
    ctx: Arc<RouteContext>,
    sources: &BTreeMap<String, SourceConfig>,
    sinks: &BTreeMap<String, SinkConfig>,
    tasks: &mut JoinSet<Result<(), BridgeError>>,
    shutdown: &CancellationToken,
) -> Result<(), BridgeError> {
    let route = &ctx.config;
    for destination in &ctx.stages.destinations {
        let sink = sinks::open(&ctx, destination, sinks).await?;
        let worker = Worker {
            route: route.name.clone(),
            destination: destination.clone(),
            sink,
            holders: ctx.holders.clone(),
            holder: ctx.holder,
            batch: route.batch,
            backoff: Backoff::new(
                Duration::from_millis(route.retry_initial_ms),
                Duration::from_millis(route.retry_max_ms),
            ),
        };
        let token = shutdown.clone();
        let name = route.name.clone();
        tasks.spawn(async move {
            worker
                .run(token)
                .await
                .map_err(|error| BridgeError::Stage { route: name, error })
        });
    }
    let from = route
        .from_endpoint("routes", sources)
        .map_err(|e| BridgeError::Config(e.to_string()))?;
    let source = sources::start(ctx.clone(), from, sources, shutdown.clone())?;
    tasks.spawn(source);
    Ok(())
}

/// Renews the bridge's holder until `shutdown`.
async fn renew_holder(
    holders: Holders,
    holder: u64,
    liveness: Liveness,
    shutdown: CancellationToken,
) -> Result<(), BridgeError> {
    liveness
        .renew_until(&shutdown, || async {
            if let Err(e) = holders.renew(holder, liveness.ttl()).await {
                error!(error = %e, "cannot renew the bridge's lease holder");
            }
        })
        .await;
    Ok(())
}
