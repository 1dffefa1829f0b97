//! The real `ferry` binary as a child process: any command (`validate`, `hash-password`,
//! `run`), captured output, bounded waits, and a child that is always killed (by its PID)
//! when the test ends. Loopback ports for its listeners are chosen here too.

#![allow(unsafe_code, reason = "signals are sent with libc::kill")]

use super::wait;
use std::fs;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;
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
/// and the like belong to the machine's services).
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    /// `amqp.listen`.
    pub amqp: u16,
    /// `kafka.listen`.
    pub kafka: u16,
    /// `metrics.listen`.
    pub metrics: u16,
    /// `management.listen`.
    pub management: u16,
}

impl Ports {
    /// Free ports for every listener.
    pub fn free() -> Self {
        Self {
            amqp: free_port(),
            kafka: free_port(),
            metrics: free_port(),
            management: free_port(),
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
    /// Starts `ferry ARGS` in `cwd` with `env` added to this process's environment, minus any
    /// `FERRY__*` and `RUST_LOG` variables the test runner itself has.
    pub fn spawn(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let stdout = NamedTempFile::new().unwrap();
        let stderr = NamedTempFile::new().unwrap();
        let mut command = Command::new(crate::ferry_binary());
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

    /// The process's PID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` to the process by its PID.
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) has no memory-safety preconditions; the PID is our own child's,
        // which stays reserved until we reap it.
        unsafe { libc::kill(pid, signal) };
    }

    /// Everything the process has written so far: standard output, then standard error.
    pub fn log(&self) -> String {
        let read = |file: &NamedTempFile| fs::read_to_string(file.path()).unwrap_or_default();
        read(&self.stdout) + &read(&self.stderr)
    }

    /// Whether the process has exited.
    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Waits up to `timeout` for the process to exit; kills it and panics with its output
    /// when it does not.
    pub fn wait(&mut self, timeout: Duration) -> Outcome {
        let child = &mut self.child;
        let Some(status) = wait::try_until_blocking(timeout, || child.try_wait().unwrap()) else {
            self.signal(libc::SIGKILL);
            let stderr = fs::read_to_string(self.stderr.path()).unwrap();
            panic!("ferry did not exit within {timeout:?}; stderr:\n{stderr}");
        };
        Outcome {
            status,
            stdout: fs::read_to_string(self.stdout.path()).unwrap(),
            stderr: fs::read_to_string(self.stderr.path()).unwrap(),
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
