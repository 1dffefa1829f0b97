//! Ferry: a broker bridge.
//!
//! Producers speak AMQP 0-9-1 or Kafka to Ferry's fronts; every accepted message is staged
//! durably in versionstamped queues (the `ferry-stage` crate) inside a FoundationDB-shaped
//! transactional store (`ferry-store`), and delivered from there to its consumers exactly
//! once. Users and what they may do are `ferry-auth`'s, TLS and the listeners `ferry-tls`'s. This crate holds the layers above
//! those; docs/architecture.md draws them.
//!
//! Layout: [`config`] loads and validates `ferry.toml`; [`amqp`] is the AMQP 0-9-1 front
//! and [`kafka`] the Kafka wire front, each reached by the bridge through its `port`;
//! [`bridge`] connects them and external brokers; [`http_server`] serves HTTP on the accept
//! loop every front shares (`ferry-tls`, with TLS on every listener);
//! [`daemon`] runs the long-lived process; [`management`] is the RabbitMQ-compatible
//! management HTTP API and its web UI; [`memory_watermark`] holds publishers back while the
//! process's memory is above its mark. The `ferry` binary (`src/cli/`) is the command line
//! over this library, and holds the `ferry bench` load tools.

// The library is documented for Ferry's own engineers, whose docs link private items (a
// module's constants, its private submodules); read them with
// `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]
// What other crates use is `pub`; everything else says how far it reaches.
#![warn(unreachable_pub)]

pub mod amqp;
pub mod bridge;
pub mod config;
pub mod daemon;
#[doc(hidden)]
pub mod fuzzing;
pub mod http_server;
pub mod kafka;
pub mod management;
pub mod memory_watermark;
