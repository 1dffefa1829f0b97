//! What the management API may see and change of the bridge, and nothing else of its
//! internals: every route (of the config file and added at runtime) with its state on this
//! instance, its endpoints' connection states, and each destination's stage and
//! dead-letter stage counters; adding and removing runtime routes; pausing and resuming
//! any route; and each destination's dead letters — read, replayed, purged — while the
//! daemon runs, on either engine (everything goes through store transactions).
//!
//! Changes go to the store ([`super::catalog`]); the supervisor of every instance follows
//! them. Removing a route stops it on this instance first (waiting for its leases to be
//! released), then deletes its stages, dead letters, progress records and, for a route
//! from an exchange, its `ferry.bridge.ROUTE` queue.

use super::Fronts;
use super::catalog::{Catalog, CatalogError, Stored};
use super::keys::RouteKeys;
use super::replay;
use super::route::{dead_letter_name, stage_name};
use super::sink::endpoint_label;
use super::sources::amqp_front::queue_name;
use super::status::Status;
use super::supervisor::{RunState, States};
use ferry_config::bridge::validate_route;
use ferry_config::{Config, ConfigError, Endpoint, RouteConfig};
use ferry_stage::{Delivery, Depth, Stage, StageError, Stages, now_ms};
use ferry_store::TransactionError;
use std::sync::Arc;
use std::time::Duration;

/// How long a removal waits for the route to stop on this instance before deleting its
/// stages anyway.
const STOP_WAIT: Duration = Duration::from_secs(30);

/// Why a request about routes was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum RouteAdminError {
    /// No route of that name.
    #[error("route '{0}' does not exist")]
    NotFound(String),
    /// The route has fewer destinations.
    #[error("route '{route}' has no destination {index}")]
    NoDestination {
        /// The route.
        route: String,
        /// The destination asked for.
        index: usize,
    },
    /// The route is one of the config file's, which the API does not change.
    #[error("route '{0}' is defined in the config file; change it there")]
    FromConfig(String),
    /// The definition is not a valid route.
    #[error("{0}")]
    Invalid(#[from] ConfigError),
    /// `if-empty` was asked and messages wait.
    #[error("route '{route}' holds {messages} message(s) in its stages")]
    NotEmpty {
        /// The route.
        route: String,
        /// Messages in its stages and dead-letter stages.
        messages: i64,
    },
    /// A route of that name is stored with another definition.
    #[error("route '{0}' exists with another definition; delete it first")]
    Inequivalent(String),
    /// The store failed.
    #[error("{0}")]
    Store(String),
}

impl From<CatalogError> for RouteAdminError {
    fn from(e: CatalogError) -> Self {
        match e {
            CatalogError::Inequivalent(name) => Self::Inequivalent(name),
            other => Self::Store(other.to_string()),
        }
    }
}

impl From<StageError> for RouteAdminError {
    fn from(e: StageError) -> Self {
        Self::Store(e.to_string())
    }
}

/// A failure inside a removal transaction: the catalog's or a stage's.
#[derive(Debug, thiserror::Error)]
enum RemoveError {
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error("route '{route}' holds {messages} message(s) in its stages")]
    NotEmpty { route: String, messages: i64 },
}

impl From<ferry_store::StoreError> for RemoveError {
    fn from(e: ferry_store::StoreError) -> Self {
        Self::Stage(e.into())
    }
}

impl TransactionError for RemoveError {
    fn store_error(&self) -> Option<&ferry_store::StoreError> {
        match self {
            Self::Catalog(e) => e.store_error(),
            Self::Stage(e) => e.store_error(),
            Self::NotEmpty { .. } => None,
        }
    }
}

impl From<RemoveError> for RouteAdminError {
    fn from(e: RemoveError) -> Self {
        match e {
            RemoveError::Catalog(e) => e.into(),
            RemoveError::Stage(e) => e.into(),
            RemoveError::NotEmpty { route, messages } => Self::NotEmpty { route, messages },
        }
    }
}

/// Where a route comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `[[routes]]` of this instance's config file.
    Config,
    /// Added through the management API; kept in the store.
    Runtime,
}

impl Origin {
    /// `config` or `runtime`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Config => "config",
            Self::Runtime => "runtime",
        }
    }
}

/// The connection of one endpoint of a route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connection {
    /// One of Ferry's own fronts, in this process, that reports no state of its own.
    InProcess,
    /// An external broker connected, or a source on a front reading.
    Up,
    /// An external broker not connected, or a source on a front that cannot read (its
    /// exchange is missing), and why.
    Down(String),
    /// An external broker this instance has not tried yet (the route is not running).
    Unknown,
}

/// One endpoint of a route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointView {
    /// Its label, as in metrics: `source:NAME`, `sink:NAME`, `amqp_exchange:VHOST/NAME`,
    /// `kafka_topic:NAME`.
    pub label: String,
    /// Its connection.
    pub connection: Connection,
}

/// One destination of a route.
#[derive(Debug, Clone, PartialEq)]
pub struct DestinationView {
    /// Its place in the route's `to` list.
    pub index: usize,
    /// Where it delivers.
    pub endpoint: EndpointView,
    /// Its stage's counters (`None` before the route first ran).
    pub stage: Option<Depth>,
    /// Its dead-letter stage's counters.
    pub dead: Option<Depth>,
}

/// A route as the API shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteView {
    /// Its definition.
    pub route: RouteConfig,
    /// Where it comes from.
    pub origin: Origin,
    /// When it was paused, ms since the epoch, if it is.
    pub paused_ms: Option<u64>,
    /// What it does on this instance (`None`: not yet seen by the supervisor).
    pub state: Option<RunState>,
    /// Its source.
    pub source: EndpointView,
    /// Its destinations.
    pub destinations: Vec<DestinationView>,
}

/// The management API's handle on the bridge; cheap to clone.
#[derive(Clone)]
pub struct RouteAdmin {
    inner: Arc<Inner>,
}

struct Inner {
    config: Config,
    stages: Stages,
    catalog: Catalog,
    states: States,
    status: Status,
    fronts: Fronts,
}

impl RouteAdmin {
    /// The handle over the bridge that `config`, `stages`, `states`, `status` and
    /// `fronts` make up (the same the supervisor runs with).
    pub fn new(
        config: Config,
        stages: Stages,
        states: States,
        status: Status,
        fronts: Fronts,
    ) -> Self {
        let catalog = Catalog::new(stages.db().clone(), &config.store.prefix);
        Self {
            inner: Arc::new(Inner {
                config,
                stages,
                catalog,
                states,
                status,
                fronts,
            }),
        }
    }

    /// Every route, config file's first (in file order), then the runtime ones by name.
    ///
    /// # Errors
    /// [`RouteAdminError::Store`] when the store fails.
    pub async fn routes(&self) -> Result<Vec<RouteView>, RouteAdminError> {
        let stored = self.inner.catalog.read().await?;
        let mut views = Vec::new();
        for (route, origin) in self.defined(&stored) {
            views.push(self.view(route, origin, &stored).await?);
        }
        Ok(views)
    }

    /// Route `name`.
    ///
    /// # Errors
    /// [`RouteAdminError::NotFound`], or the store's failure.
    pub async fn route(&self, name: &str) -> Result<RouteView, RouteAdminError> {
        let stored = self.inner.catalog.read().await?;
        let (route, origin) = find(&self.defined(&stored), name)?;
        self.view(route, origin, &stored).await
    }

    /// Adds `route` at runtime, checked against this instance's sources and sinks;
    /// returns whether it existed already with the same definition.
    ///
    /// # Errors
    /// [`RouteAdminError::FromConfig`] for a config file route's name,
    /// [`RouteAdminError::Invalid`] naming the bad field, [`RouteAdminError::Inequivalent`]
    /// when it exists with another definition, or the store's failure.
    pub async fn add(&self, route: &RouteConfig) -> Result<bool, RouteAdminError> {
        let config = &self.inner.config;
        if config.routes.iter().any(|r| r.name == route.name) {
            return Err(RouteAdminError::FromConfig(route.name.clone()));
        }
        validate_route("", route, &config.sources, &config.sinks)?;
        let catalog = &self.inner.catalog;
        Ok(catalog
            .db()
            .run(|tx| async move { catalog.add_in(&tx, route).await })
            .await?)
    }

    /// Removes runtime route `name`: stops it, then deletes its stages (with their
    /// messages and dead letters) and its records. With `if_empty`, refuses while any of
    /// its stages holds a message.
    ///
    /// # Errors
    /// [`RouteAdminError::NotFound`], [`RouteAdminError::FromConfig`],
    /// [`RouteAdminError::NotEmpty`], or the store's failure.
    pub async fn remove(&self, name: &str, if_empty: bool) -> Result<(), RouteAdminError> {
        let stored = self.inner.catalog.read().await?;
        let (route, origin) = find(&self.defined(&stored), name)?;
        if origin == Origin::Config {
            return Err(RouteAdminError::FromConfig(name.to_owned()));
        }
        let stages = self.stages_of(&route).await?;
        let mut changes = self.inner.states.subscribe();
        let catalog = &self.inner.catalog;
        catalog
            .db()
            .run(|tx| {
                let stages = &stages;
                async move {
                    if if_empty {
                        let mut messages = 0;
                        for stage in stages.iter().flatten() {
                            let d = stage.depth_in(&tx).await?;
                            messages += d.ready.max(0) + d.in_flight.max(0);
                        }
                        if messages > 0 {
                            return Err(RemoveError::NotEmpty {
                                route: name.to_owned(),
                                messages,
                            });
                        }
                    }
                    catalog.remove_in(&tx, name).await?;
                    Ok(())
                }
            })
            .await?;
        // The supervisor forgets the route once it has stopped it and released its leases.
        let _ = tokio::time::timeout(STOP_WAIT, async {
            while self.inner.states.get(name).is_some() {
                if changes.changed().await.is_err() {
                    break;
                }
            }
        })
        .await;
        self.delete_remains(&route).await
    }

    /// Pauses (`true`) or resumes route `name` on every instance; returns whether that
    /// changed anything.
    ///
    /// # Errors
    /// [`RouteAdminError::NotFound`], or the store's failure.
    pub async fn set_paused(&self, name: &str, paused: bool) -> Result<bool, RouteAdminError> {
        let stored = self.inner.catalog.read().await?;
        find(&self.defined(&stored), name)?;
        let catalog = &self.inner.catalog;
        let now = now_ms();
        Ok(catalog
            .db()
            .run(|tx| async move { catalog.set_paused_in(&tx, name, paused, now).await })
            .await?)
    }

    /// Up to `limit` dead letters of destination `index` of route `name`, oldest first,
    /// left in place, each with the destination's last refusal of it when one sent it
    /// there.
    ///
    /// # Errors
    /// [`RouteAdminError::NotFound`], [`RouteAdminError::NoDestination`], or the store's
    /// failure.
    pub async fn dead_letters(
        &self,
        name: &str,
        index: usize,
        limit: usize,
    ) -> Result<Vec<(Delivery, Option<String>)>, RouteAdminError> {
        let Some(dead) = self.dead_stage(name, index).await? else {
            return Ok(Vec::new());
        };
        let letters = dead.peek(limit).await?;
        let ids: Vec<_> = letters.iter().map(|d| d.id).collect();
        let refusals = dead.refusals(&ids).await?;
        Ok(letters.into_iter().zip(refusals).collect())
    }

    /// Moves every dead letter of destination `index` of route `name` back to the
    /// destination's stage; returns how many moved.
    ///
    /// # Errors
    /// As [`RouteAdmin::dead_letters`].
    pub async fn replay(&self, name: &str, index: usize) -> Result<u64, RouteAdminError> {
        if self.dead_stage(name, index).await?.is_none() {
            return Ok(0);
        }
        Ok(replay::replay(&self.inner.stages, name, index).await?)
    }

    /// Deletes every dead letter of destination `index` of route `name`; returns how many.
    ///
    /// # Errors
    /// As [`RouteAdmin::dead_letters`].
    pub async fn purge_dead_letters(
        &self,
        name: &str,
        index: usize,
    ) -> Result<usize, RouteAdminError> {
        match self.dead_stage(name, index).await? {
            Some(dead) => Ok(dead.purge().await?),
            None => Ok(0),
        }
    }

    /// Every route with its origin: the config file's, then the stored ones not shadowed
    /// by a config route of the same name.
    fn defined(&self, stored: &Stored) -> Vec<(RouteConfig, Origin)> {
        let config = &self.inner.config.routes;
        let mut all: Vec<(RouteConfig, Origin)> =
            config.iter().map(|r| (r.clone(), Origin::Config)).collect();
        all.extend(
            stored
                .added
                .values()
                .filter(|r| !config.iter().any(|c| c.name == r.name))
                .map(|r| (r.clone(), Origin::Runtime)),
        );
        all
    }

    async fn view(
        &self,
        route: RouteConfig,
        origin: Origin,
        stored: &Stored,
    ) -> Result<RouteView, RouteAdminError> {
        let inner = &self.inner;
        let source = route
            .from_endpoint("", &inner.config.sources)
            .map(|e| self.endpoint(&e))
            .unwrap_or_else(|e| EndpointView {
                label: e.to_string(),
                connection: Connection::Unknown,
            });
        let endpoints = route
            .destinations("", &inner.config.sinks)
            .unwrap_or_default();
        let mut destinations = Vec::with_capacity(endpoints.len());
        for (index, endpoint) in endpoints.iter().enumerate() {
            destinations.push(DestinationView {
                index,
                endpoint: self.endpoint(endpoint),
                stage: self.depth(&stage_name(&route.name, index)).await?,
                dead: self.depth(&dead_letter_name(&route.name, index)).await?,
            });
        }
        Ok(RouteView {
            paused_ms: stored.paused.get(&route.name).copied(),
            state: inner.states.get(&route.name),
            source,
            destinations,
            origin,
            route,
        })
    }

    fn endpoint(&self, endpoint: &Endpoint) -> EndpointView {
        let label = endpoint_label(endpoint);
        let in_process = matches!(
            endpoint,
            Endpoint::AmqpExchange { .. } | Endpoint::KafkaTopic(_)
        );
        // A source on a front reports too: up once it reads (its queue bound to the
        // exchange), down while the exchange is missing.
        let connection = match (self.inner.status.get(&label), in_process) {
            (Some(Ok(())), _) => Connection::Up,
            (Some(Err(why)), _) => Connection::Down(why),
            (None, true) => Connection::InProcess,
            (None, false) => Connection::Unknown,
        };
        EndpointView { label, connection }
    }

    /// Stage `name`'s counters, `None` when it does not exist.
    async fn depth(&self, name: &str) -> Result<Option<Depth>, RouteAdminError> {
        match self.open(name).await? {
            Some(stage) => Ok(Some(stage.depth().await?)),
            None => Ok(None),
        }
    }

    async fn open(&self, name: &str) -> Result<Option<Stage>, RouteAdminError> {
        match self.inner.stages.open(name).await {
            Ok(stage) => Ok(Some(stage)),
            Err(StageError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The dead-letter stage of destination `index` of route `name` (`None` before the
    /// route first ran).
    async fn dead_stage(&self, name: &str, index: usize) -> Result<Option<Stage>, RouteAdminError> {
        let stored = self.inner.catalog.read().await?;
        let (route, _) = find(&self.defined(&stored), name)?;
        if index >= route.to.len() {
            return Err(RouteAdminError::NoDestination {
                route: name.to_owned(),
                index,
            });
        }
        self.open(&dead_letter_name(name, index)).await
    }

    /// Each destination's stage and dead-letter stage of `route` that exists.
    async fn stages_of(&self, route: &RouteConfig) -> Result<Vec<Option<Stage>>, RouteAdminError> {
        let mut stages = Vec::new();
        for index in 0..route.to.len() {
            stages.push(self.open(&stage_name(&route.name, index)).await?);
            stages.push(self.open(&dead_letter_name(&route.name, index)).await?);
        }
        Ok(stages)
    }

    /// Deletes what a removed route leaves: its stages and dead-letter stages, its
    /// progress records, and the queue a route from an exchange reads — unless a route of
    /// the same name was added again meanwhile.
    async fn delete_remains(&self, route: &RouteConfig) -> Result<(), RouteAdminError> {
        let inner = &self.inner;
        let name = route.name.as_str();
        let keys = RouteKeys::new(&inner.config.store.prefix, name);
        let deleted = inner
            .catalog
            .db()
            .run(|tx| {
                let keys = &keys;
                async move {
                    if inner
                        .catalog
                        .read_in(&tx, false)
                        .await?
                        .added
                        .contains_key(name)
                    {
                        return Ok(false);
                    }
                    for index in 0..route.to.len() {
                        // The stage first: it names its dead-letter stage.
                        inner
                            .stages
                            .delete_in(&tx, &stage_name(name, index))
                            .await?;
                        inner
                            .stages
                            .delete_in(&tx, &dead_letter_name(name, index))
                            .await?;
                    }
                    let (b, e) = keys.space().range();
                    tx.clear_range(&b, &e);
                    Ok::<_, RemoveError>(true)
                }
            })
            .await?;
        if let (true, Endpoint::AmqpExchange { vhost, .. }, Some(amqp)) = (
            deleted,
            route.from_endpoint("", &inner.config.sources)?,
            &inner.fronts.amqp,
        ) {
            amqp.delete_queue(&vhost, &queue_name(name))
                .await
                .map_err(|e| RouteAdminError::Store(e.to_string()))?;
        }
        Ok(())
    }
}

/// The route called `name` among `defined`.
fn find(
    defined: &[(RouteConfig, Origin)],
    name: &str,
) -> Result<(RouteConfig, Origin), RouteAdminError> {
    defined
        .iter()
        .find(|(r, _)| r.name == name)
        .cloned()
        .ok_or_else(|| RouteAdminError::NotFound(name.to_owned()))
}
