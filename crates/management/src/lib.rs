//! The management HTTP API on `management.listen`, compatible with RabbitMQ's for what
//! tools use (`rabbitmqadmin`, curl scripts, monitoring): JSON in RabbitMQ's shapes, HTTP
//! basic auth with RabbitMQ's tags, RabbitMQ's error bodies (`docs/management.md`).
//!
//! It holds no state the store does not: it is another client of the AMQP front (through
//! [`AmqpAdmin`]) and of the user store; only the message rates are computed here, from
//! the stored counters ([`rates`]).
//!
//! One module per resource family, each with its `routes()`: [`overview`] (overview,
//! whoami), [`vhosts`], [`exchanges`], [`queues`], [`messages`] (get, publish, purge),
//! [`bindings`], [`connections`] (connections, channels, consumers), [`health`] (health
//! checks, aliveness test), [`users`], [`permissions`] (and topic permissions),
//! [`definitions`] (export, import in one transaction), [`nodes`] (this instance as
//! RabbitMQ's node, with its resources and alarms; cluster name, extensions),
//! [`policies`] (policies and parameters, which Ferry has not). Around them: [`login`] (basic
//! auth), [`access`] (tags), [`administrator`] (administrators-only endpoints),
//! [`body`] (request bodies), [`tables`] (AMQP tables as JSON), [`error`] (refusals),
//! [`reply`] (JSON answers, query flags), [`sampler`] (the rates' readings every 5 s).
//! [`ui`] is the web UI, served at `/` without a
//! login of its own (the page logs in to the API).
//! [`kafka`] and [`routes`] are Ferry's own: the Kafka front's topics, groups with lag, and
//! ACLs (through [`KafkaAdmin`]); the bridge's routes with their stages, dead letters and
//! runtime changes (through [`RouteAdmin`]); [`backup`] streams the whole store at one
//! read version.

mod access;
mod administrator;
mod backup;
mod bindings;
mod body;
mod connections;
pub mod definitions;
mod error;
mod exchanges;
mod health;
mod kafka;
mod login;
mod messages;
pub mod node_registry;
pub mod nodes;
mod overview;
mod permissions;
mod policies;
mod queues;
mod rates;
mod reply;
mod routes;
pub mod sampler;
mod tables;
mod ui;
mod users;
mod vhosts;

use axum::Router;
use error::ApiError;
use ferry_amqp::admin::AmqpAdmin;
use ferry_auth::Authenticator;
use ferry_bridge::admin::RouteAdmin;
use ferry_kafka::admin::KafkaAdmin;
pub use nodes::Resources;
use rates::Rates;
use std::net::SocketAddr;
use std::ops::Deref;
use std::sync::Arc;

/// One listener of this instance, as `/api/overview` lists it and the port and protocol
/// health checks look for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listening {
    /// RabbitMQ's protocol name: `amqp`, `amqp/ssl`, `http`, `https`; Ferry's own:
    /// `kafka`, `kafka/ssl`, `prometheus`.
    pub protocol: String,
    /// The bound address.
    pub addr: SocketAddr,
}

/// What the handlers share; cheap to clone.
#[derive(Clone)]
pub struct Api {
    inner: Arc<Shared>,
}

/// The API's view of the instance.
pub struct Shared {
    /// Checks logins.
    pub users: Authenticator,
    /// The AMQP front.
    pub amqp: AmqpAdmin,
    /// The Kafka front.
    pub kafka: KafkaAdmin,
    /// Every listener of the instance (the API's own included).
    pub listeners: Vec<Listening>,
    /// The node name shown in answers (`ferry-NODE_ID@HOST`, as the metrics' identity).
    pub node: String,
    /// Whether the API is served over HTTPS (a user with `require_tls` may use it then).
    pub https: bool,
    /// Message rates.
    pub rates: Rates,
    /// The bridge's routes.
    pub routes: RouteAdmin,
    /// The process's resources and alarms (`/api/nodes`).
    pub resources: Resources,
}

impl Api {
    /// The API over `shared`.
    pub fn new(shared: Shared) -> Self {
        Self {
            inner: Arc::new(shared),
        }
    }
}

impl Deref for Api {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.inner
    }
}

/// Every route of the API and the web UI's files; anything else is RabbitMQ's 404.
pub fn router(api: Api) -> Router {
    Router::new()
        .merge(overview::routes())
        .merge(vhosts::routes())
        .merge(exchanges::routes())
        .merge(queues::routes())
        .merge(messages::routes())
        .merge(bindings::routes())
        .merge(connections::routes())
        .merge(health::routes())
        .merge(users::routes())
        .merge(permissions::routes())
        .merge(definitions::routes())
        .merge(nodes::routes())
        .merge(policies::routes())
        .merge(kafka::routes())
        .merge(routes::routes())
        .merge(backup::routes())
        .merge(ui::router())
        .fallback(|| async { ApiError::not_found() })
        .with_state(api)
}
