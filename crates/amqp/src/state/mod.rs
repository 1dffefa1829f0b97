//! What the connections of one Ferry instance share, and its upkeep: the [`broker`]
//! (configuration, users, store, stages, lease holder), the virtual hosts ([`vhosts`]) with
//! their exchanges, queues and bindings ([`topology`]), the live connections, channels and
//! consumers ([`registry`]), which queues a connection's channels consume ([`consumed`]), direct reply-to addresses ([`direct_reply`]), and what one
//! connection's channels share with it ([`context`]); the background work that keeps it:
//! head expiry without consumers ([`expiry`]), `x-expires` and transient entities of dead
//! owners ([`janitor`]), queue-depth gauges and the publisher alarm ([`resources`]).

pub(crate) mod broker;
pub(crate) mod consumed;
pub(crate) mod context;
pub(crate) mod direct_reply;
pub(crate) mod expiry;
pub(crate) mod janitor;
pub(crate) mod registry;
pub(crate) mod resources;
pub(crate) mod topology;
pub(crate) mod vhosts;
