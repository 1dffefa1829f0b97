//! The state every AMQP connection of one Ferry instance shares: configuration, users,
//! the store and stages, the virtual hosts, the resource alarm, and this instance's lease
//! holder (the owner of its transient exchanges and queues).

use super::expiry::ExpiryHints;
use super::topology::VHost;
use crate::auth::Users;
use crate::config::AmqpConfig;
use crate::stage::{Holders, Stages};
use crate::store::Database;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Shared by every connection.
pub struct Broker {
    /// `[amqp]`.
    pub config: AmqpConfig,
    /// Who may log in.
    pub users: Users,
    /// The store.
    pub db: Database,
    /// The stages queues live in.
    pub stages: Stages,
    /// Lease holders of channels, consumers and connections.
    pub holders: Holders,
    /// How long a holder lives without renewal (`stage.lease_ttl_ms`).
    pub lease_ttl: Duration,
    /// The configured virtual hosts.
    pub vhosts: HashMap<String, Arc<VHost>>,
    /// This instance's holder: owner of its transient (non-durable) exchanges and queues.
    pub instance: u64,
    /// `Some(reason)` while a resource limit blocks publishers.
    pub blocked: watch::Receiver<Option<String>>,
    /// Tells the expiry sweeper when a queue's head may expire.
    pub expiry: ExpiryHints,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker")
            .field("vhosts", &self.vhosts.keys().collect::<Vec<_>>())
            .field("instance", &self.instance)
            .finish()
    }
}

impl Broker {
    /// How often holders are renewed: a third of their life, so two renewals can fail
    /// before their leases are taken back.
    pub fn renew_period(&self) -> Duration {
        (self.lease_ttl / 3).max(Duration::from_millis(1))
    }
}
