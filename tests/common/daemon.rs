//! Running `ferry run` with bridge routes: a config file made of the test's `[sources]`,
//! `[sinks]` and `[[routes]]`, every listener on a free loopback port, the store in the
//! test's directory (so a restart on the same directory resumes), and helpers that read
//! `/readyz` and `/metrics`.

use super::http::get;
use super::process::{Ferry, Ports};
use std::path::Path;
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Upper bound on startup, until `/healthz` answers.
pub const STARTUP: Duration = Duration::from_secs(30);

/// A running daemon with bridge routes.
pub struct BridgeDaemon {
    /// The process (killed by PID when dropped).
    pub ferry: Ferry,
    /// Its listeners.
    pub ports: Ports,
}

impl BridgeDaemon {
    /// Writes `bridge` (TOML: sources, sinks, routes) as `dir/ferry.toml` and starts
    /// `ferry run` on it with its store in `dir/data`; waits until `/healthz` answers. A
    /// listener port taken between choosing and binding it is chosen again (twice at most).
    pub fn start(dir: &Path, bridge: &str) -> Self {
        let config = dir.join("ferry.toml");
        std::fs::write(&config, bridge).unwrap();
        for _ in 0..3 {
            let mut daemon = Self::spawn(dir, &config, Ports::free());
            let deadline = Instant::now() + STARTUP;
            while Instant::now() < deadline && !daemon.ferry.has_exited() {
                if let Ok((200, _)) = get(daemon.ports.metrics, "/healthz") {
                    return daemon;
                }
                sleep(Duration::from_millis(50));
            }
            daemon.ferry.signal(libc::SIGKILL);
            let outcome = daemon.ferry.wait(Duration::from_secs(10));
            if !outcome.stderr.contains("is in use") {
                panic!("ferry did not start; stderr:\n{}", outcome.stderr);
            }
        }
        panic!("ferry found its listener ports taken three times");
    }

    /// Starts `ferry run` with `config` and every listener on `ports`.
    fn spawn(dir: &Path, config: &Path, ports: Ports) -> Self {
        let listen = |port: u16| format!("127.0.0.1:{port}");
        let (amqp, kafka, metrics) = (
            listen(ports.amqp),
            listen(ports.kafka),
            listen(ports.metrics),
        );
        let data = dir.join("data");
        let env = [
            ("FERRY__AMQP__LISTEN", amqp.as_str()),
            ("FERRY__KAFKA__LISTEN", kafka.as_str()),
            ("FERRY__METRICS__LISTEN", metrics.as_str()),
            ("FERRY__STORE__PATH", data.to_str().unwrap()),
            ("FERRY__STAGE__LEASE_TTL_MS", "2000"),
            ("FERRY__DAEMON__SHUTDOWN_TIMEOUT_MS", "5000"),
        ];
        let ferry = Ferry::spawn(dir, &["run", "--config", config.to_str().unwrap()], &env);
        Self { ferry, ports }
    }

    /// The `/readyz` body.
    pub fn readyz(&self) -> String {
        get(self.ports.metrics, "/readyz")
            .map(|(_, b)| b)
            .unwrap_or_default()
    }

    /// The sum of metric `name` over its series whose labels contain every one of
    /// `labels` (e.g. `route="r"`); 0 when there is none.
    pub fn metric(&self, name: &str, labels: &[&str]) -> f64 {
        let Ok((200, body)) = get(self.ports.metrics, "/metrics") else {
            return 0.0;
        };
        body.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
            .filter(|l| labels.iter().all(|x| l.contains(x)))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Polls `check` every 100 ms until it holds or `timeout` passes; panics with the
    /// daemon's `/readyz` when it never holds.
    pub fn wait_for(&self, what: &str, timeout: Duration, mut check: impl FnMut(&Self) -> bool) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if check(self) {
                return;
            }
            sleep(Duration::from_millis(100));
        }
        panic!(
            "{what} did not happen within {timeout:?}; /readyz:\n{}",
            self.readyz()
        );
    }
}
