//! Running the real `ferry` binary from tests: bounded waits, captured output, and a child
//! that is always killed (by its PID) when the test ends.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};
use tempfile::NamedTempFile;

/// A loopback port that was free a moment ago, chosen at random below the kernel's
/// ephemeral range: a port bound to 0 and released comes from that range, where any
/// outgoing connection (a client of the machine's RabbitMQ, say) may take it before
/// Ferry binds it.
pub fn free_port() -> u16 {
    let below = ephemeral_start().max(FIRST_TEST_PORT + 1_000);
    for _ in 0..1_000 {
        let port = fastrand::u16(FIRST_TEST_PORT..below);
        if std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {FIRST_TEST_PORT}..{below} after 1,000 tries");
}

/// The lowest port tests pick (above the well-known and the machine's service ports).
const FIRST_TEST_PORT: u16 = 10_000;

/// The first port of the kernel's ephemeral range (Linux's default when unreadable).
fn ephemeral_start() -> u16 {
    fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// The ports of one `ferry run`: every listener on loopback, never a standard port (5672
/// belongs to the machine's RabbitMQ).
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    /// `amqp.listen`.
    pub amqp: u16,
    /// `kafka.listen`.
    pub kafka: u16,
    /// `metrics.listen`.
    pub metrics: u16,
}

impl Ports {
    /// Free ports for every listener.
    pub fn free() -> Self {
        Self {
            amqp: free_port(),
            kafka: free_port(),
            metrics: free_port(),
        }
    }
}

/// A running `ferry` process.
pub struct Ferry {
    /// The process.
    child: Child,
    /// Where its standard output goes; read back after it exits.
    stdout: NamedTempFile,
    /// Where its standard error goes.
    stderr: NamedTempFile,
}

/// How a `ferry` process ended.
pub struct Outcome {
    /// Its exit status.
    pub status: ExitStatus,
    /// Everything it wrote to standard output.
    pub stdout: String,
    /// Everything it wrote to standard error.
    pub stderr: String,
}

impl Ferry {
    /// Starts `ferry run` with the shipped config, its listeners on `ports`, its store in
    /// `dir/data`, a 5 s shutdown drain, and `extra` overrides.
    pub fn run_daemon(dir: &Path, ports: Ports, extra: &[(&str, &str)]) -> Self {
        let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/ferry.toml");
        Self::run_daemon_with(dir, &config, ports, extra)
    }

    /// [`Ferry::run_daemon`] with the config file `config` instead of the shipped one.
    pub fn run_daemon_with(
        dir: &Path,
        config: &Path,
        ports: Ports,
        extra: &[(&str, &str)],
    ) -> Self {
        let listen = |port: u16| format!("127.0.0.1:{port}");
        let (amqp, kafka, metrics) = (
            listen(ports.amqp),
            listen(ports.kafka),
            listen(ports.metrics),
        );
        let data = dir.join("data");
        let mut env = vec![
            ("FERRY__AMQP__LISTEN", amqp.as_str()),
            ("FERRY__KAFKA__LISTEN", kafka.as_str()),
            ("FERRY__METRICS__LISTEN", metrics.as_str()),
            ("FERRY__STORE__PATH", data.to_str().unwrap()),
            ("FERRY__DAEMON__SHUTDOWN_TIMEOUT_MS", "5000"),
        ];
        env.extend_from_slice(extra);
        Self::spawn(dir, &["run", "--config", config.to_str().unwrap()], &env)
    }

    /// Starts `ferry ARGS` in `cwd` with `env` added to this process's environment, minus any
    /// `FERRY__*` and `RUST_LOG` variables the test runner itself has.
    pub fn spawn(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let stdout = NamedTempFile::new().unwrap();
        let stderr = NamedTempFile::new().unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_ferry"));
        command
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(stdout.reopen().unwrap())
            .stderr(stderr.reopen().unwrap());
        for (name, _) in std::env::vars_os() {
            let inherited = name.to_string_lossy().to_ascii_uppercase();
            if inherited.starts_with("FERRY__") || inherited == "RUST_LOG" {
                command.env_remove(&name);
            }
        }
        command.envs(env.iter().copied());
        let child = command.spawn().unwrap();
        Self {
            child,
            stdout,
            stderr,
        }
    }

    /// Sends `signal` to the process by its PID.
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) has no memory-safety preconditions; the PID is our own child's,
        // which stays reserved until we reap it.
        unsafe { libc::kill(pid, signal) };
    }

    /// Whether the process has exited.
    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits up to `timeout` for the process to exit; kills it and panics with its output
    /// when it does not.
    pub fn wait(&mut self, timeout: Duration) -> Outcome {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Outcome {
                    status,
                    stdout: fs::read_to_string(self.stdout.path()).unwrap(),
                    stderr: fs::read_to_string(self.stderr.path()).unwrap(),
                };
            }
            if Instant::now() >= deadline {
                self.signal(libc::SIGKILL);
                let stderr = fs::read_to_string(self.stderr.path()).unwrap();
                panic!("ferry did not exit within {timeout:?}; stderr:\n{stderr}");
            }
            sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Ferry {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.signal(libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}
