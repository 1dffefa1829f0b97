//! The bridge's supervisor: runs every route that should run, each as a unit of its own.
//!
//! The routes that should run are those of the config file and those added at runtime
//! ([`super::catalog`]), less the paused ones. The supervisor reads the catalog, starts
//! what should run and is not running, stops what runs and should not (paused or removed),
//! then sleeps on the catalog's version watch — so a change made through any instance's
//! management API reaches every instance over the store at once.
//!
//! A running route has its own lease holder (renewed while it runs, released when it stops,
//! so a paused route's leased messages return to their places at once), its own
//! cancellation token, and its tasks (the source and one delivery worker per destination).
//! When one of its tasks fails, the route stops, shows `failed` with the reason, and is
//! started again after a backoff (from the route's `retry_initial_ms` to `retry_max_ms`);
//! the daemon and its other routes go on.

use super::catalog::{Catalog, Stored};
use super::route::RouteStages;
use super::sink::{Backoff, RefusalLog, Worker};
use super::{BridgeError, Fronts, RouteContext, keys::RouteKeys, sinks, sources, status::Status};
use ferry_config::bridge::validate_route;
use ferry_config::{Config, RouteConfig, SinkConfig, SourceConfig};
use ferry_stage::Liveness;
use ferry_stage::{Holders, Stages};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

/// A route that ran this long before failing starts its backoff afresh.
const HEALTHY_RUN: Duration = Duration::from_secs(60);
/// How long the supervisor waits before reading the catalog again after the store failed.
const STORE_RETRY: Duration = Duration::from_secs(1);

/// What a route is doing on this instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunState {
    /// Its stages are being opened and its tasks started.
    Starting,
    /// Its source and delivery workers run.
    Running,
    /// Paused through the management API: nothing runs; its messages wait in its stages.
    Paused,
    /// It stopped on an error and starts again after a backoff.
    Failed(String),
}

impl RunState {
    /// The state's name: `starting`, `running`, `paused`, `failed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Starting => "starting",
            Self::Running => "running",
            Self::Paused => "paused",
            Self::Failed(_) => "failed",
        }
    }
}

/// The state of every route on this instance, shared by the supervisor (which writes it)
/// and the management API (which reads it and waits for it to change); cheap to clone.
#[derive(Debug, Clone)]
pub struct States {
    map: Arc<Mutex<BTreeMap<String, RunState>>>,
    changes: Arc<watch::Sender<u64>>,
}

impl Default for States {
    fn default() -> Self {
        Self {
            map: Arc::default(),
            changes: Arc::new(watch::channel(0).0),
        }
    }
}

impl States {
    /// Route `name`'s state, if it has one here.
    pub fn get(&self, name: &str) -> Option<RunState> {
        self.map.lock().get(name).cloned()
    }

    /// A receiver that sees every later change.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn set(&self, name: &str, state: RunState) {
        self.map.lock().insert(name.to_owned(), state);
        self.changes.send_modify(|n| *n += 1);
    }

    fn forget(&self, name: &str) {
        if self.map.lock().remove(name).is_some() {
            self.changes.send_modify(|n| *n += 1);
        }
    }
}

/// The bridge's inputs.
pub struct Setup {
    /// The whole config (routes, sources, sinks, store prefix, lease ttl).
    pub config: Config,
    /// The store's stages.
    pub stages: Stages,
    /// Ferry's fronts.
    pub fronts: Fronts,
    /// Connection states, shared with `/readyz` and the management API.
    pub status: Status,
    /// Route states, shared with the management API.
    pub states: States,
}

/// What every route run shares.
struct Shared {
    config: Config,
    stages: Stages,
    fronts: Fronts,
    status: Status,
    states: States,
    holders: Holders,
}

/// A route running on this instance.
struct Running {
    /// The definition it runs with.
    route: RouteConfig,
    /// Which start of the route this is (a finished run of an older start is ignored).
    generation: u64,
    /// Stops it.
    token: CancellationToken,
    /// Ends when it has stopped and released its leases.
    handle: JoinHandle<()>,
    /// When it started.
    since: Instant,
}

/// A failed route waiting to start again.
struct Failure {
    /// When it may start again.
    retry_at: Instant,
    /// Its delays.
    backoff: Backoff,
}

/// Runs the routes that should run until `shutdown`, then stops them all and returns.
///
/// # Errors
/// None today: a route's failure stops that route only, and a store that cannot be read
/// is read again; the signature leaves room for a failure that must stop the daemon.
pub async fn run(setup: Setup, shutdown: CancellationToken) -> Result<(), BridgeError> {
    let catalog = Catalog::new(setup.stages.db().clone(), &setup.config.store.prefix);
    let shared = Arc::new(Shared {
        holders: Holders::new(&setup.stages),
        config: setup.config,
        stages: setup.stages,
        fronts: setup.fronts,
        status: setup.status,
        states: setup.states,
    });
    let mut supervisor = Supervisor {
        shared,
        running: BTreeMap::new(),
        failures: BTreeMap::new(),
        generation: 0,
        done: mpsc::unbounded_channel(),
        shutdown: shutdown.clone(),
    };
    loop {
        let stored = match catalog.read().await {
            Ok(stored) => Some(stored),
            Err(e) => {
                warn!(error = %e, "cannot read the stored routes; reading again shortly");
                None
            }
        };
        if let Some(stored) = &stored {
            supervisor.reconcile(stored).await;
        }
        let next_retry = supervisor.next_retry();
        let changed = async {
            match &stored {
                Some(s) => {
                    if let Err(e) = catalog.changed_since(s.version).await {
                        warn!(error = %e, "cannot watch the stored routes");
                        tokio::time::sleep(STORE_RETRY).await;
                    }
                }
                None => tokio::time::sleep(STORE_RETRY).await,
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = changed => {}
            Some((name, generation, result)) = supervisor.done.1.recv() => {
                supervisor.finished(&name, generation, result);
            }
            () = sleep_until(next_retry) => {}
        }
    }
    supervisor.stop_all().await;
    Ok(())
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// A finished route run: its name, generation and outcome.
type Done = (String, u64, Result<(), BridgeError>);

struct Supervisor {
    shared: Arc<Shared>,
    running: BTreeMap<String, Running>,
    failures: BTreeMap<String, Failure>,
    generation: u64,
    done: (mpsc::UnboundedSender<Done>, mpsc::UnboundedReceiver<Done>),
    shutdown: CancellationToken,
}

impl Supervisor {
    /// The routes that should run, by name: the config file's, then the stored ones (a
    /// stored route named like a config route is shadowed by it).
    fn wanted(&self, stored: &Stored) -> BTreeMap<String, RouteConfig> {
        let mut wanted: BTreeMap<String, RouteConfig> = stored.added.clone();
        for route in &self.shared.config.routes {
            if wanted.insert(route.name.clone(), route.clone()).is_some() {
                warn!(route = %route.name, "a stored route has the name of a config file route; the config file's runs");
            }
        }
        wanted
    }

    /// Starts and stops routes so that what runs is what `stored` and the config say.
    async fn reconcile(&mut self, stored: &Stored) {
        let wanted = self.wanted(stored);
        let stale: Vec<String> = self
            .running
            .iter()
            .filter(|(name, run)| {
                stored.paused.contains_key(*name) || wanted.get(*name) != Some(&run.route)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in stale {
            self.stop(&name).await;
            info!(route = %name, "route stopped");
        }
        let states = self.shared.states.clone();
        for (name, route) in &wanted {
            if stored.paused.contains_key(name) {
                self.failures.remove(name);
                states.set(name, RunState::Paused);
            } else if !self.running.contains_key(name)
                && self
                    .failures
                    .get(name)
                    .is_none_or(|f| f.retry_at <= Instant::now())
            {
                self.start(route.clone());
            }
        }
        let gone: Vec<String> = self
            .failures
            .keys()
            .filter(|n| !wanted.contains_key(*n))
            .cloned()
            .collect();
        for name in gone {
            self.failures.remove(&name);
        }
        let known: Vec<String> = self.shared.states.map.lock().keys().cloned().collect();
        for name in known.iter().filter(|n| !wanted.contains_key(*n)) {
            states.forget(name);
        }
    }

    fn start(&mut self, route: RouteConfig) {
        self.generation += 1;
        let generation = self.generation;
        let token = self.shutdown.child_token();
        let name = route.name.clone();
        self.shared.states.set(&name, RunState::Starting);
        let (shared, run_token, done) = (self.shared.clone(), token.clone(), self.done.0.clone());
        let definition = route.clone();
        let handle = tokio::spawn(async move {
            let result = run_route(&shared, &definition, &run_token).await;
            let _ = done.send((definition.name.clone(), generation, result));
        });
        self.running.insert(
            name,
            Running {
                route,
                generation,
                token,
                handle,
                since: Instant::now(),
            },
        );
    }

    /// Stops route `name` and waits until it has released its leases.
    async fn stop(&mut self, name: &str) {
        if let Some(run) = self.running.remove(name) {
            run.token.cancel();
            let _ = run.handle.await;
        }
    }

    async fn stop_all(&mut self) {
        let names: Vec<String> = self.running.keys().cloned().collect();
        for run in self.running.values() {
            run.token.cancel();
        }
        for name in names {
            self.stop(&name).await;
        }
    }

    /// Notes that a run of route `name` ended: a failure (or an end nobody asked for)
    /// schedules its restart.
    fn finished(&mut self, name: &str, generation: u64, result: Result<(), BridgeError>) {
        let Some(run) = self.running.get(name) else {
            return;
        };
        if run.generation != generation || run.token.is_cancelled() {
            return;
        }
        let run = self.running.remove(name).expect("looked up above");
        let why = match result {
            Ok(()) => "a task of the route stopped on its own".to_owned(),
            Err(e) => e.to_string(),
        };
        let route = &run.route;
        let failure = self
            .failures
            .entry(name.to_owned())
            .or_insert_with(|| Failure {
                retry_at: Instant::now(),
                backoff: route_backoff(route),
            });
        if run.since.elapsed() >= HEALTHY_RUN {
            failure.backoff = route_backoff(route);
        }
        let delay = failure.backoff.next_delay();
        failure.retry_at = Instant::now() + delay;
        error!(route = %name, error = %why, retry_in_ms = delay.as_millis() as u64, "route failed; it starts again after a backoff");
        self.shared.states.set(name, RunState::Failed(why));
    }

    fn next_retry(&self) -> Option<Instant> {
        self.failures.values().map(|f| f.retry_at).min()
    }
}

fn route_backoff(route: &RouteConfig) -> Backoff {
    Backoff::new(
        Duration::from_millis(route.retry_initial_ms),
        Duration::from_millis(route.retry_max_ms),
    )
}

/// One run of `route`: registers its lease holder, runs its tasks until `token` or a
/// failure, then releases the holder (its leased messages return to their places).
async fn run_route(
    shared: &Shared,
    route: &RouteConfig,
    token: &CancellationToken,
) -> Result<(), BridgeError> {
    let failed = |error| BridgeError::Stage {
        route: route.name.clone(),
        error,
    };
    validate_route("", route, &shared.config.sources, &shared.config.sinks)
        .map_err(|e| BridgeError::Config(e.to_string()))?;
    let ttl = shared.config.stage.lease_ttl();
    let holder = shared.holders.register(ttl).await.map_err(failed)?;
    let result = run_with_holder(shared, route, holder, token).await;
    if let Err(e) = shared.holders.release(holder).await {
        warn!(route = %route.name, error = %e, "cannot release the route's leases; they return when its holder expires");
    }
    result
}

async fn run_with_holder(
    shared: &Shared,
    route: &RouteConfig,
    holder: u64,
    token: &CancellationToken,
) -> Result<(), BridgeError> {
    let config = &shared.config;
    let failed = |error| BridgeError::Stage {
        route: route.name.clone(),
        error,
    };
    // Checked by validate_route above.
    let mut endpoints = Vec::new();
    for endpoint in route.destinations("", &config.sinks).unwrap_or_default() {
        let in_store = sinks::open_in_store(&shared.fronts, route, &endpoint).await?;
        endpoints.push((endpoint, in_store));
    }
    let ctx = Arc::new(RouteContext {
        config: route.clone(),
        stages: RouteStages::open(&shared.stages, route, endpoints)
            .await
            .map_err(failed)?,
        keys: RouteKeys::new(&config.store.prefix, &route.name),
        db: shared.stages.db().clone(),
        holders: shared.holders.clone(),
        holder,
        status: shared.status.clone(),
        fronts: shared.fronts.clone(),
    });
    let tasks_token = token.child_token();
    let mut tasks = JoinSet::new();
    let started = start_tasks(
        ctx,
        &config.sources,
        &config.sinks,
        &mut tasks,
        &tasks_token,
    )
    .await;
    if let Err(e) = started {
        tasks_token.cancel();
        while tasks.join_next().await.is_some() {}
        return Err(e);
    }
    shared.states.set(&route.name, RunState::Running);
    info!(route = %route.name, destinations = route.to.len(), "route started");
    let liveness = Liveness::new(config.stage.lease_ttl());
    let renew = liveness.renew_until(&tasks_token, || async {
        if let Err(e) = shared.holders.renew(holder, liveness.ttl()).await {
            error!(route = %route.name, error = %e, "cannot renew the route's lease holder");
        }
    });
    let result = tokio::select! {
        () = renew => Ok(()),
        Some(ended) = tasks.join_next() => match ended {
            Ok(result) => result,
            Err(e) => Err(BridgeError::Config(format!("a task of the route panicked: {e}"))),
        },
    };
    tasks_token.cancel();
    while tasks.join_next().await.is_some() {}
    result
}

/// Spawns the delivery workers of every destination of `ctx`'s route and its source.
async fn start_tasks(
    ctx: Arc<RouteContext>,
    sources: &BTreeMap<String, SourceConfig>,
    sinks: &BTreeMap<String, SinkConfig>,
    tasks: &mut JoinSet<Result<(), BridgeError>>,
    token: &CancellationToken,
) -> Result<(), BridgeError> {
    let route = &ctx.config;
    for destination in &ctx.stages.destinations {
        let worker = Worker {
            route: route.name.clone(),
            endpoint: destination.endpoint.clone(),
            stage: destination.stage.clone(),
            dead: destination.dead.clone(),
            sink: sinks::open(&ctx, destination, sinks)?,
            holders: ctx.holders.clone(),
            holder: ctx.holder,
            batch: route.batch,
            backoff: route_backoff(route),
            refusals: RefusalLog::default(),
        };
        let (token, name) = (token.clone(), route.name.clone());
        tasks.spawn(async move {
            worker
                .run(token)
                .await
                .map_err(|error| BridgeError::Stage { route: name, error })
        });
    }
    let from = route
        .from_endpoint("", sources)
        .map_err(|e| BridgeError::Config(e.to_string()))?;
    tasks.spawn(sources::start(ctx.clone(), from, sources, token.clone())?);
    Ok(())
}
