//! What the connections of one Ferry instance share, and its upkeep: the [`broker`]
//! (configuration, users, store, stages, lease holder), the virtual hosts ([`vhosts`]) with
//! their exchanges, queues and bindings ([`topology`]), the live connections, channels and
//! consumers ([`registry`]), direct reply-to addresses ([`direct_reply`]), and what one
//! connection's channels share with it ([`context`]); the background work that keeps it:
//! head expiry without consumers ([`expiry`]), `x-expires` and transient entities of dead
//! owners ([`janitor`]), queue-depth gauges and the publisher alarm ([`resources`]).

pub mod broker;
pub mod context;
pub mod direct_reply;
pub mod expiry;
pub mod janitor;
pub mod registry;
pub mod resources;
pub mod topology;
pub mod vhosts;
