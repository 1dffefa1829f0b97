//! Headless Chromium for the web UI tests: Debian's chromedriver on a free loopback port,
//! driven by the selenium script `tests/python/ui_browser.py` (selenium is the WebDriver
//! client the project did not write; it brings bounded waits and screenshots).
//!
//! chromedriver runs in a process group of its own, which the Chromium it starts joins, so
//! dropping the fixture stops the driver and its browser by that group's ID (the driver's
//! PID), also when the test fails before the script ends its session. (Chromium's crash
//! handlers live in sessions of their own; they exit by themselves once Chromium is gone.)

#![allow(
    unsafe_code,
    reason = "the browser's process group is killed with libc::kill"
)]

use super::process::free_port;
use super::wait;
use std::net::{Ipv4Addr, TcpStream};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Upper bound on chromedriver's start, until it listens.
const STARTUP: Duration = Duration::from_secs(20);

/// A running chromedriver.
pub struct Chromedriver {
    /// The process, the leader of its own group.
    child: Child,
    /// Its loopback port.
    port: u16,
}

impl Chromedriver {
    /// Starts chromedriver and waits until it listens; panics with the fix when it is not
    /// installed.
    pub fn start() -> Self {
        let port = free_port();
        let child = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run chromedriver ({e}); install it with scripts/setup.sh")
            });
        let driver = Self { child, port };
        // chromedriver listens once it takes sessions. (Its /status keeps the connection
        // open despite `Connection: close`, which the tests' one-shot GET cannot read.)
        let listening = wait::try_until_blocking(STARTUP, || {
            TcpStream::connect((Ipv4Addr::LOCALHOST, port)).ok()
        });
        assert!(
            listening.is_some(),
            "chromedriver did not listen within {STARTUP:?}"
        );
        driver
    }

    /// Its WebDriver URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let group = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: kill(2) has no memory-safety preconditions; the negative PID names the
        // group our own child leads, which stays reserved until we reap the child.
        unsafe { libc::kill(-group, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}
