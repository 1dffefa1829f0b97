//! The support of Ferry's integration tests (`tests/`), shared by every test binary.
//!
//! - [`daemon`]: the real `ferry run` process on free loopback ports (start, wait for
//!   `/healthz`, kill -9, restart on the same data, read `/metrics` and `/readyz`);
//!   [`process`] and [`http`] are what it is made of.
//! - [`fronts`]: an AMQP or Kafka front inside the test process on a temporary store, for
//!   tests that reach into the store or start many fronts cheaply.
//! - [`rabbitmq`]: the test run's private RabbitMQ node (never the machine's), and nodes
//!   with a TLS listener.
//! - [`store`]: a store per test on every engine, and [`for_each_engine`](crate::for_each_engine).
//! - [`amqp`], [`kafka`]: the lapin and rdkafka (and raw socket) client helpers the tests share.
//! - [`tls`]: certificates made at test time (rcgen) for Ferry and for external brokers,
//!   the `[tls]` overrides, a rustls client.
//! - [`sockets`]: how a server ended a raw connection (closed in order, or reset).
//! - [`clients`]: command-line clients (kcat, Python scripts) run as bounded processes.
//! - [`browser`]: headless Chromium's chromedriver, for the web UI's selenium script.
//! - [`wait`]: bounded waits on a condition; [`crash`]: where kill -9 runs strike, and the
//!   publisher and producer that send each message until confirmed across them.
//!
//! [`repository`] and [`ferry_binary`] find the files and the binary the tests run.
//!
//! Every wait here is bounded, and every process a test starts is stopped by its PID when
//! its fixture drops, also when the test fails.

pub mod amqp;
pub mod browser;
pub mod clients;
pub mod crash;
pub mod daemon;
pub mod fronts;
pub mod http;
pub mod kafka;
pub mod process;
pub mod rabbitmq;
pub mod sockets;
pub mod store;
pub mod tls;
pub mod wait;

use std::path::{Path, PathBuf};

/// The repository's root folder, where `config/`, `scripts/` and `tests/` are.
pub fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("this crate is crates/test-support of the repository")
}

/// The `ferry` binary cargo built for this test run: `CARGO_BIN_EXE_ferry` where the test
/// runner sets it at run time (nextest does), otherwise the one beside the test binary's
/// `deps/` folder, where cargo puts a package's binaries for its integration tests.
pub fn ferry_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_ferry") {
        return PathBuf::from(path);
    }
    let test_binary = std::env::current_exe().expect("the test binary has a path");
    test_binary
        .parent()
        .and_then(Path::parent)
        .map(|profile| profile.join("ferry"))
        .expect("the test binary is in target/PROFILE/deps/")
}
