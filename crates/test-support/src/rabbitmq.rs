//! The test run's private RabbitMQ node, started by `scripts/rabbitmq-node.sh` (its own node
//! name, ports, epmd, Erlang cookie, data and logs; never the machine's RabbitMQ).
//!
//! `scripts/test.sh` starts one node for the whole run and names its directory in
//! `FERRY_TEST_RABBITMQ_DIR`; tests then share it (each uses queue and exchange names of
//! its own, from [`unique`]). Without that variable (`cargo nextest run` by hand) the first
//! test of a process that asks for a node starts one for the process, with the process as
//! its owner, so the script's watcher stops it if the process is killed; otherwise it is
//! stopped when the last test using it drops it. Every node also runs RabbitMQ's management,
//! Prometheus and stream plugins on ports of its own ([`RabbitNode::http_uri`],
//! [`RabbitNode::prometheus_uri`], [`RabbitNode::stream_addr`]).
//!
//! [`RabbitNode::start_tls`] starts a node of the test's own with a TLS listener that
//! requires client certificates, or only checks those presented ([`ClientCerts`]), with
//! certificates from [`super::tls::Pki`]; it is stopped when the test drops it.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex, Weak};

/// Names the directory of the run's node, set by `scripts/test.sh`.
pub const NODE_DIR_VAR: &str = "FERRY_TEST_RABBITMQ_DIR";

/// A name unique to one test run: `ferry-test-WHAT-RANDOM`.
pub fn unique(what: &str) -> String {
    format!("ferry-test-{what}-{:08x}", fastrand::u32(..))
}

/// Whether a node's TLS listener requires client certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientCerts {
    /// Every TLS client presents one signed by the node's CA (`fail_if_no_peer_cert`).
    Required,
    /// A client may connect without one; one presented must verify.
    Optional,
}

/// A running private RabbitMQ node.
pub struct RabbitNode {
    /// The node's directory (its environment, data, logs).
    dir: PathBuf,
    /// Its AMQP URI: guest/guest on 127.0.0.1, vhost `/`.
    uri: String,
    /// Its amqps URI, for a node with a TLS listener.
    amqps_uri: Option<String>,
    /// The directory of a node this process started (and stops on drop); `None` for the
    /// run's node.
    owned: Option<tempfile::TempDir>,
}

/// The node this process's tests share while any holds it.
static SHARED: Mutex<Weak<RabbitNode>> = Mutex::new(Weak::new());

impl RabbitNode {
    /// The run's node, or one started for this process when there is none.
    pub fn get() -> Arc<Self> {
        let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(node) = shared.upgrade() {
            return node;
        }
        let node = Arc::new(match std::env::var_os(NODE_DIR_VAR) {
            Some(dir) => Self::existing(PathBuf::from(dir)),
            None => Self::start(),
        });
        *shared = Arc::downgrade(&node);
        node
    }

    /// The node in `dir`, started by someone else.
    fn existing(dir: PathBuf) -> Self {
        let uri = stdout_of(script(&["uri", dir.to_str().unwrap()]));
        Self {
            dir,
            uri,
            amqps_uri: None,
            owned: None,
        }
    }

    /// Starts a node owned by this process.
    fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a node of the caller's own that also listens for TLS with the server
    /// certificate `certs/server.pem` (key `certs/server.key`) and verifies client
    /// certificates against `certs/ca.pem`, requiring them or not as `client_certs` says.
    pub fn start_tls(certs: &Path, client_certs: ClientCerts) -> Self {
        let mode = match client_certs {
            ClientCerts::Required => "required",
            ClientCerts::Optional => "optional",
        };
        let mut node =
            Self::start_with(&["--tls", certs.to_str().unwrap(), "--tls-client-certs", mode]);
        node.amqps_uri = Some(stdout_of(script(&[
            "amqps-uri",
            node.dir.to_str().unwrap(),
        ])));
        node
    }

    /// Starts a node owned by this process, with `options` for the script's `start`.
    fn start_with(options: &[&str]) -> Self {
        let owned = tempfile::Builder::new()
            .prefix("ferry-rabbitmq-")
            .tempdir()
            .unwrap();
        let dir = owned.path().to_owned();
        let pid = std::process::id().to_string();
        let mut args = vec!["start", dir.to_str().unwrap(), "--owner", &pid];
        args.extend_from_slice(options);
        let uri = stdout_of(script(&args));
        Self {
            dir,
            uri,
            amqps_uri: None,
            owned: Some(owned),
        }
    }

    /// The AMQP URI: guest/guest on 127.0.0.1, vhost `/`.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The address of its AMQP listener.
    pub fn addr(&self) -> std::net::SocketAddr {
        let authority = self.uri.rsplit('@').next().expect("a URI with a user");
        let host_port = authority.split('/').next().expect("a host and port");
        host_port.parse().expect("an IP address and port")
    }

    /// The amqps URI (guest/guest): panics for a node without a TLS listener.
    pub fn amqps_uri(&self) -> &str {
        self.amqps_uri
            .as_deref()
            .expect("a node started with start_tls")
    }

    /// [`Self::uri`] with `password` instead of guest's.
    pub fn uri_with_password(&self, password: &str) -> String {
        self.uri
            .replacen("guest:guest@", &format!("guest:{password}@"), 1)
    }

    /// The base URL of the node's management API (`http://127.0.0.1:PORT`; guest/guest).
    pub fn http_uri(&self) -> String {
        stdout_of(script(&["http-uri", self.dir.to_str().unwrap()]))
    }

    /// The node's Prometheus endpoint (`http://127.0.0.1:PORT/metrics`).
    pub fn prometheus_uri(&self) -> String {
        stdout_of(script(&["prometheus-uri", self.dir.to_str().unwrap()]))
    }

    /// The address of its stream protocol listener (the `rabbitmq_stream` plugin).
    pub fn stream_addr(&self) -> std::net::SocketAddr {
        stdout_of(script(&["stream-addr", self.dir.to_str().unwrap()]))
            .parse()
            .expect("an IP address and port")
    }

    /// `rabbitmqctl ARGS` against this node; panics when it does not run.
    pub fn ctl(&self, args: &[&str]) -> Output {
        let mut all = vec!["ctl", self.dir.to_str().unwrap()];
        all.extend_from_slice(args);
        script(&all)
    }
}

impl Drop for RabbitNode {
    fn drop(&mut self) {
        if self.owned.is_some() {
            let out = script(&["stop", self.dir.to_str().unwrap()]);
            if !out.status.success() {
                eprintln!(
                    "stopping the private RabbitMQ node failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// `scripts/rabbitmq-node.sh ARGS`, run to completion.
fn script(args: &[&str]) -> Output {
    let path = crate::repository().join("scripts/rabbitmq-node.sh");
    Command::new(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()))
}

/// The trimmed standard output of a run that must have succeeded.
fn stdout_of(out: Output) -> String {
    assert!(
        out.status.success(),
        "scripts/rabbitmq-node.sh failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}
