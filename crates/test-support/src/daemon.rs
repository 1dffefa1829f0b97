//! The daemon fixture: the real `ferry run` process, as an operator runs it.
//!
//! A [`Setup`] names the config (the shipped `config/ferry.toml`, the shipped one plus some
//! TOML, or a file of the test's own), environment overrides and, optionally, fixed ports;
//! [`Setup::start`] starts the process on free loopback ports with its store in
//! `DIR/data` and returns once `/healthz` answers (the HTTP server starts last, so every
//! listener, the store, the fronts and the routes are up by then). A [`Daemon`] can be
//! killed with SIGKILL and restarted on the same data and the same ports (clients reconnect
//! to where they were), signalled, and read: `/metrics`, one metric, `/readyz`, its log.
//! The process is killed by its PID when the fixture drops.

use super::http::get;
use super::process::{Ferry, Outcome, Ports};
use super::wait;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Upper bound on a start, until `/healthz` answers.
pub const STARTUP: Duration = Duration::from_secs(60);
/// Upper bound on an exit after SIGKILL, SIGTERM or SIGINT.
pub const EXIT: Duration = Duration::from_secs(15);

/// The shipped config file.
pub fn shipped_config() -> PathBuf {
    crate::repository().join("config/ferry.toml")
}

/// How to start a daemon: its directory, config, environment and ports.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Holds the store (`data/`) and a written config file.
    dir: PathBuf,
    /// The config file.
    config: PathBuf,
    /// `FERRY__*` overrides on top of the listeners' and the store path's.
    env: Vec<(String, String)>,
    /// Fixed ports, or `None` for free ones chosen at start.
    ports: Option<Ports>,
}

impl Setup {
    /// The shipped config, with the store in `dir/data` and a 5 s shutdown drain.
    pub fn shipped(dir: &Path) -> Self {
        Self {
            dir: dir.to_owned(),
            config: shipped_config(),
            env: Vec::new(),
            ports: None,
        }
        .env("FERRY__DAEMON__SHUTDOWN_TIMEOUT_MS", "5000")
    }

    /// The shipped config followed by `toml` (sources, sinks, routes), written to
    /// `dir/ferry.toml`.
    pub fn shipped_with(dir: &Path, toml: &str) -> Self {
        let shipped = std::fs::read_to_string(shipped_config()).unwrap();
        Self::config(dir, &format!("{shipped}\n{toml}"))
    }

    /// `toml` alone as the config (every key not in it at its default), written to
    /// `dir/ferry.toml`.
    pub fn config(dir: &Path, toml: &str) -> Self {
        let config = dir.join("ferry.toml");
        std::fs::write(&config, toml).unwrap();
        Self {
            config,
            ..Self::shipped(dir)
        }
    }

    /// Adds the override `name=value` (e.g. `FERRY__STAGE__LEASE_TTL_MS`).
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Listens on `ports` instead of free ones chosen at start.
    pub fn ports(mut self, ports: Ports) -> Self {
        self.ports = Some(ports);
        self
    }

    /// Starts the daemon and waits until `/healthz` answers. Free ports taken by someone
    /// else between choosing and binding them are chosen again (three tries); panics with
    /// the daemon's log when it does not come up within [`STARTUP`].
    pub fn start(self) -> Daemon {
        let tries = if self.ports.is_some() { 1 } else { 3 };
        for _ in 0..tries {
            let ports = self.ports.unwrap_or_else(Ports::free);
            let mut daemon = Daemon {
                process: self.spawn_on(ports),
                ports,
                setup: self.clone(),
            };
            match daemon.wait_healthy() {
                Ok(()) => return daemon,
                Err(log) if log.contains("is in use") && self.ports.is_none() => continue,
                Err(log) => panic!("ferry did not start within {STARTUP:?}; its log:\n{log}"),
            }
        }
        panic!("ferry found its free listener ports taken three times");
    }

    /// Starts the daemon without waiting for it, for tests of a start that fails.
    pub fn spawn(self) -> Ferry {
        let ports = self.ports.unwrap_or_else(Ports::free);
        self.spawn_on(ports)
    }

    /// Starts `ferry run` with every listener on `ports`.
    fn spawn_on(&self, ports: Ports) -> Ferry {
        let listen = |port: u16| format!("127.0.0.1:{port}");
        let data = self.dir.join("data");
        let mut env = vec![
            ("FERRY__AMQP__LISTEN".to_owned(), listen(ports.amqp)),
            ("FERRY__KAFKA__LISTEN".to_owned(), listen(ports.kafka)),
            ("FERRY__METRICS__LISTEN".to_owned(), listen(ports.metrics)),
            (
                "FERRY__MANAGEMENT__LISTEN".to_owned(),
                listen(ports.management),
            ),
            (
                "FERRY__STORE__PATH".to_owned(),
                data.to_str().unwrap().to_owned(),
            ),
        ];
        env.extend(self.env.iter().cloned());
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let config = self.config.to_str().unwrap();
        Ferry::spawn(&self.dir, &["run", "--config", config], &env)
    }
}

/// A running `ferry run`.
pub struct Daemon {
    /// The process (killed by its PID when dropped).
    process: Ferry,
    /// Its listeners, kept across restarts.
    ports: Ports,
    /// How it was started, for restarts.
    setup: Setup,
}

impl Daemon {
    /// Its listeners.
    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// The AMQP URI of vhost `/` as guest.
    pub fn amqp_uri(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.ports.amqp)
    }

    /// The base URL of the management API (`http://127.0.0.1:PORT`).
    pub fn management_uri(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports.management)
    }

    /// `PUT path` of the management API as guest with the JSON `body` (curl); panics,
    /// naming the path and curl's error, unless it answers 2xx.
    pub async fn put_as_guest(&self, path: &str, body: &str) {
        let url = format!("{}{path}", self.management_uri());
        let args = ["-sSf", "-u", "guest:guest", "-X", "PUT", "-H"];
        let json = ["content-type: application/json", "-d", body, &url];
        let out = crate::clients::run("curl", &[&args[..], &json[..]].concat(), b"").await;
        assert!(
            out.status.success(),
            "PUT {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `host:port` of the Kafka front, for `bootstrap.servers`.
    pub fn kafka_bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.ports.kafka)
    }

    /// The process's PID (the current one, after a restart).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Sends `signal` to the process.
    pub fn signal(&self, signal: libc::c_int) {
        self.process.signal(signal);
    }

    /// Waits up to `timeout` for the process to exit (after a signal); panics with its log
    /// when it does not.
    pub fn wait_exit(&mut self, timeout: Duration) -> Outcome {
        self.process.wait(timeout)
    }

    /// Kills the process with SIGKILL and waits until it is gone.
    pub fn kill(&mut self) {
        self.process.signal(libc::SIGKILL);
        let outcome = self.process.wait(EXIT);
        assert!(!outcome.status.success(), "ferry exited before the kill");
    }

    /// Starts the process again on the same data, config and ports (after [`Self::kill`]
    /// or an exit); waits until `/healthz` answers.
    pub fn restart(&mut self) {
        assert!(self.process.has_exited(), "restart of a running daemon");
        self.process = self.setup.spawn_on(self.ports);
        if let Err(log) = self.wait_healthy() {
            panic!("ferry did not restart within {STARTUP:?}; its log:\n{log}");
        }
    }

    /// Sets the override `name=value` (e.g. `FERRY__KAFKA__NODE_ID`) for the next
    /// [`Self::restart`].
    pub fn set_env(&mut self, name: &str, value: &str) {
        self.setup = self.setup.clone().env(name, value);
    }

    /// [`Self::kill`], then [`Self::restart`].
    pub fn kill_and_restart(&mut self) {
        self.kill();
        self.restart();
    }

    /// Everything the process wrote so far (for failure messages).
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// The `/readyz` body (empty when the daemon does not answer).
    pub fn readyz(&self) -> String {
        get(self.ports.metrics, "/readyz")
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    /// The `/metrics` body (empty when the daemon does not answer).
    pub fn metrics(&self) -> String {
        match get(self.ports.metrics, "/metrics") {
            Ok((200, body)) => body,
            _ => String::new(),
        }
    }

    /// The sum of metric `name` over its series whose labels contain every one of
    /// `labels` (e.g. `route="r"`); 0 when there is none.
    pub fn metric(&self, name: &str, labels: &[&str]) -> f64 {
        sum_of(&self.metrics(), name, labels)
    }

    /// Checks `check` until it holds, up to `timeout`; panics naming `what`, with the
    /// daemon's `/readyz`, when it never does.
    pub fn wait_for(&self, what: &str, timeout: Duration, mut check: impl FnMut(&Self) -> bool) {
        if wait::try_until_blocking(timeout, || check(self).then_some(())).is_none() {
            panic!(
                "{what} did not happen within {timeout:?}; /readyz:\n{}",
                self.readyz()
            );
        }
    }

    /// Waits up to [`STARTUP`] until a route's source on the AMQP front is up: its queue
    /// exists and is bound to the exchange (`/readyz` reports the source up only after both;
    /// a queue not bound yet would let publishes through unrouted).
    pub async fn wait_for_amqp_exchange_source(&self) {
        wait::until(
            "a route's AMQP exchange source bound",
            STARTUP,
            async || {
                self.readyz()
                    .lines()
                    .any(|l| l.starts_with("amqp_exchange:") && l.ends_with(": up"))
                    .then_some(())
            },
        )
        .await;
    }

    /// Waits until `/healthz` answers 200, or returns the log of a process that exited or
    /// did not answer within [`STARTUP`] (and is killed).
    fn wait_healthy(&mut self) -> Result<(), String> {
        let metrics = self.ports.metrics;
        let process = &mut self.process;
        let healthy = wait::try_until_blocking(STARTUP, || {
            if process.has_exited() {
                return Some(false);
            }
            matches!(get(metrics, "/healthz"), Ok((200, _))).then_some(true)
        });
        if healthy == Some(true) {
            return Ok(());
        }
        self.process.signal(libc::SIGKILL);
        let outcome = self.process.wait(EXIT);
        Err(outcome.stdout + &outcome.stderr)
    }
}

/// The sum of metric `name` in the Prometheus text `metrics` over its series whose labels
/// contain every one of `labels`; 0 when there is none.
pub fn sum_of(metrics: &str, name: &str, labels: &[&str]) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .filter(|l| labels.iter().all(|x| l.contains(x)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
