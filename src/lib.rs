//! Ferry: a broker bridge.
//!
//! Producers speak AMQP 0-9-1 or Kafka to Ferry's fronts; every accepted message is staged
//! durably in versionstamped queues ([`stage`]) inside a FoundationDB-shaped transactional
//! store ([`store`]), and delivered from there to its consumers exactly once.
//!
//! Layout: [`config`] loads and validates `ferry.toml`; [`store`] is the transactional
//! key-value interface with its engines; [`stage`] is the queue layer built from
//! FoundationDB's queue recipes; [`group_commit`] batches items into store commits, and
//! [`liveness`] renews what lives in the store on a lease, owned by an [`incarnation`]
//! of the instance that a restart frees at once;
//! [`amqp`] is the AMQP 0-9-1 front and [`kafka`] the Kafka wire front, each reached by the
//! bridge through its `port`; [`bridge`] connects them and external brokers; [`auth`]
//! checks users for every front, with [`password`] hashes, and what they may do, with
//! [`permissions`]' patterns; [`server`] is the accept loop every front shares, and
//! [`http_server`] serves HTTP on it; [`daemon`] runs the long-lived process;
//! [`management`] is the RabbitMQ-compatible management HTTP API and its web UI;
//! [`memory_watermark`] holds publishers back while the process's memory (read by
//! [`process`]) is above its mark; [`telemetry`] names every
//! metric Ferry exports. The `ferry` binary (`src/cli/`) is the command line over this
//! library, and holds the `ferry bench` load tools.

// The library is documented for Ferry's own engineers, whose docs link private items (a
// module's constants, its private submodules); read them with
// `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

pub mod amqp;
pub mod auth;
pub mod bridge;
pub mod config;
pub mod daemon;
pub mod file_system;
#[doc(hidden)]
pub mod fuzzing;
pub mod group_commit;
pub mod http_server;
pub mod incarnation;
pub mod kafka;
pub mod liveness;
pub mod management;
pub mod memory_watermark;
pub mod password;
pub mod peer;
pub mod permissions;
pub mod principal;
pub mod process;
pub mod scram;
pub mod server;
pub mod stage;
pub mod store;
pub mod telemetry;
pub mod tls;
