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
//! Routes come from the config file and, at runtime, from the store ([`catalog`]: routes
//! added through the management API, and paused routes); [`supervisor`] runs each route
//! that should run as a unit of its own and follows the catalog as it changes; [`admin`]
//! is what the management API sees and changes of routes.
//!
//! Modules: [`mapping`] (AMQP ↔ Kafka), [`staged`] (the stage body of a bridged message),
//! [`route`] (a route's stages), [`sources`] and [`sinks`] (one module per kind of
//! endpoint), [`rabbitmq_link`] and [`kafka_client`] (how the external ones connect, with
//! TLS and SASL), [`sink`] (the delivery worker), [`keys`] (source and sink progress),
//! [`status`] (connection states for `/readyz`), [`replay`] (dead-letters back to their
//! stage), [`catalog`], [`supervisor`], [`admin`]. Public are `admin` (the management
//! API's), `mapping`, `rabbitmq_link` (the load tools connect with it), `status`, `replay`
//! and the items at this root; the rest is private to the crate.

pub mod admin;
mod catalog;
mod kafka_client;
mod keys;
pub mod mapping;
pub mod rabbitmq_link;
pub mod replay;
mod route;
mod sink;
mod sinks;
mod sources;
mod staged;
pub mod status;
mod supervisor;

use ferry_amqp::port::AmqpPort;
use ferry_config::RouteConfig;
use ferry_kafka::port::KafkaPort;
use ferry_stage::{Holders, StageError};
use ferry_store::{Database, StoreError};
use keys::RouteKeys;
use route::RouteStages;
use status::Status;

pub use sink::IN_FLIGHT_BATCHES;
pub use sources::amqp_front::queue_name as amqp_front_queue;
pub use supervisor::{RunState, Setup, States, run};

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
    /// The lease holders.
    pub holders: Holders,
    /// The route's own holder (renewed while the route runs, released when it stops).
    pub holder: u64,
    /// Connection states.
    pub status: Status,
    /// Ferry's fronts.
    pub fronts: Fronts,
}
