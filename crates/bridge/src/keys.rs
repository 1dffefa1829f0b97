//! The bridge's own keyspace, beside the route stages: per route, what its source has
//! consumed (Kafka offsets, recently seen message-ids) and what its sinks have sent
//! (Kafka transaction markers), so each survives a restart in the same transactions as
//! the messages. Layout in `docs/keyspace.md`.
//!
//! ```text
//! (P, "bridge", route, ...)    = per-source and per-sink records, see the methods
//! ```

use foundationdb_tuple::Subspace;

/// The subspace of one route.
#[derive(Debug, Clone)]
pub struct RouteKeys {
    space: Subspace,
}

impl RouteKeys {
    /// The keys of route `route` under store prefix `prefix`.
    pub fn new(prefix: &str, route: &str) -> Self {
        Self {
            space: Subspace::from_bytes(foundationdb_tuple::pack(&(prefix, "bridge", route))),
        }
    }

    /// The route's subspace, for the source and sink modules' own keys.
    pub fn space(&self) -> &Subspace {
        &self.space
    }
}
