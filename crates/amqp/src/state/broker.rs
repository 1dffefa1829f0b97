//! The state every AMQP connection of one Ferry instance shares: configuration, users,
//! the store and stages, the virtual hosts, the resource alarm, and this instance's lease
//! holder (the owner of its transient exchanges and queues), and the registry of live
//! connections.

use super::direct_reply::DirectReplies;
use super::expiry::ExpiryHints;
use super::registry::Connections;
use super::vhosts::VHosts;
use ferry_auth::Authenticator;
use ferry_config::AmqpConfig;
use ferry_stage::Liveness;
use ferry_stage::{Holders, Stages};
use ferry_store::Database;
use tokio::sync::watch;

/// Shared by every connection.
pub struct Broker {
    /// `[amqp]`.
    pub config: AmqpConfig,
    /// Who may log in.
    pub users: Authenticator,
    /// The store.
    pub db: Database,
    /// The stages queues live in.
    pub stages: Stages,
    /// Lease holders of channels, consumers and connections.
    pub holders: Holders,
    /// How long a holder lives without renewal (`stage.lease_ttl_ms`), and how often it
    /// is renewed.
    pub liveness: Liveness,
    /// The virtual hosts: configured and made at runtime.
    pub vhosts: VHosts,
    /// This instance's holder: owner of its transient (non-durable) exchanges and queues.
    pub instance: u64,
    /// `Some(reason)` while a resource limit blocks publishers.
    pub blocked: watch::Receiver<Option<String>>,
    /// Tells the expiry sweeper when a queue's head may expire.
    pub expiry: ExpiryHints,
    /// The live connections, for the management API.
    pub connections: Connections,
    /// The reply addresses of this instance's channels (direct reply-to).
    pub direct_replies: DirectReplies,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("vhosts", &self.vhosts)
            .field("instance", &self.instance)
            .finish()
    }
}
