//! Ferry: a broker bridge.
//!
//! Producers speak AMQP 0-9-1 or Kafka to Ferry's fronts; every accepted message is staged
//! durably in versionstamped queues ([`stage`]) inside a FoundationDB-shaped transactional
//! store ([`store`]), and delivered from there to its consumers exactly once.
//!
//! Layout: [`config`] loads and validates `ferry.toml`; [`store`] is the transactional
//! key-value interface with its engines; [`stage`] is the queue layer built from
//! FoundationDB's queue recipes; [`daemon`] runs the long-lived process; [`telemetry`]
//! names every metric Ferry exports.

pub mod bench;
pub mod config;
pub mod daemon;
pub mod stage;
pub mod store;
pub mod telemetry;
