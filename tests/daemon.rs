//! `ferry run` driven as a supervisor would: health, readiness and metrics over HTTP, a
//! clean exit on SIGTERM and SIGINT, and a clear failure when the metrics or AMQP port is
//! taken.

mod support;

use std::net::{Ipv4Addr, TcpListener};
use std::thread::sleep;
use std::time::{Duration, Instant};
use support::http::get;
use support::process::{Ferry, Ports, free_port};
use tempfile::TempDir;

/// Upper bound on startup, until `/healthz` answers.
const STARTUP: Duration = Duration::from_secs(30);
/// Upper bound on exiting after a signal or a startup failure.
const EXIT: Duration = Duration::from_secs(15);

/// `ferry run` with the metrics server on `port`, every other listener on a free loopback
/// port, and the store in `dir`.
fn start(dir: &TempDir, port: u16) -> Ferry {
    Ferry::run_daemon(
        dir.path(),
        Ports {
            metrics: port,
            ..Ports::free()
        },
        &[],
    )
}

/// Polls `/healthz` until it answers 200; on timeout kills the daemon and panics with its
/// log.
fn wait_until_healthy(ferry: &mut Ferry, port: u16) {
    let deadline = Instant::now() + STARTUP;
    while Instant::now() < deadline {
        if let Ok((200, body)) = get(port, "/healthz") {
            assert_eq!(body, "ok");
            return;
        }
        sleep(Duration::from_millis(50));
    }
    ferry.signal(libc::SIGKILL);
    let outcome = ferry.wait(EXIT);
    panic!(
        "/healthz did not answer within {STARTUP:?}; stderr:\n{}",
        outcome.stderr
    );
}

#[test]
fn serves_health_readiness_and_metrics_then_exits_0_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut ferry = start(&dir, port);
    wait_until_healthy(&mut ferry, port);

    assert_eq!(get(port, "/readyz").unwrap(), (200, "ready".to_owned()));
    let (status, metrics) = get(port, "/metrics").unwrap();
    assert_eq!(status, 200);
    assert!(
        metrics.contains("# TYPE ferry_build_info gauge"),
        "{metrics}"
    );
    let build_info = format!(
        "ferry_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    assert!(metrics.contains(&build_info), "{metrics}");

    ferry.signal(libc::SIGTERM);
    let outcome = ferry.wait(EXIT);
    assert_eq!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    assert!(
        outcome.stderr.contains("ferry started"),
        "{}",
        outcome.stderr
    );
    assert!(
        outcome.stderr.contains("signal=\"SIGTERM\""),
        "{}",
        outcome.stderr
    );
    assert!(
        outcome.stderr.contains("ferry stopped"),
        "{}",
        outcome.stderr
    );
    // Logs go to standard error; standard output stays free for command results.
    assert_eq!(outcome.stdout, "");
}

#[test]
fn exits_0_on_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut ferry = start(&dir, port);
    wait_until_healthy(&mut ferry, port);

    ferry.signal(libc::SIGINT);
    let outcome = ferry.wait(EXIT);
    assert_eq!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    assert!(
        outcome.stderr.contains("signal=\"SIGINT\""),
        "{}",
        outcome.stderr
    );
}

#[test]
fn taken_metrics_port_fails_naming_key_and_variable() {
    let dir = tempfile::tempdir().unwrap();
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = taken.local_addr().unwrap().port();
    let outcome = start(&dir, port).wait(EXIT);
    assert_ne!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    let expected =
        format!("error: metrics.listen: 127.0.0.1:{port} is in use; set FERRY__METRICS__LISTEN\n");
    assert!(outcome.stderr.ends_with(&expected), "{}", outcome.stderr);
    drop(taken);
}

#[test]
fn taken_amqp_port_fails_naming_key_and_variable() {
    let dir = tempfile::tempdir().unwrap();
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let amqp = taken.local_addr().unwrap().to_string();
    let ports = Ports {
        amqp: taken.local_addr().unwrap().port(),
        ..Ports::free()
    };
    let outcome = Ferry::run_daemon(dir.path(), ports, &[]).wait(EXIT);
    assert_ne!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    let expected = format!("error: amqp.listen: {amqp} is in use; set FERRY__AMQP__LISTEN\n");
    assert!(outcome.stderr.ends_with(&expected), "{}", outcome.stderr);
    drop(taken);
}

#[test]
fn second_daemon_on_the_same_store_fails_naming_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut first = start(&dir, port);
    wait_until_healthy(&mut first, port);

    let outcome = start(&dir, free_port()).wait(EXIT);
    assert_ne!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    assert!(
        outcome
            .stderr
            .contains("is already open in another process"),
        "{}",
        outcome.stderr
    );
    assert!(
        outcome.stderr.contains("data"),
        "names the store path: {}",
        outcome.stderr
    );
    // The first daemon is unaffected.
    assert_eq!(get(port, "/readyz").unwrap(), (200, "ready".to_owned()));
    first.signal(libc::SIGTERM);
    assert_eq!(first.wait(EXIT).status.code(), Some(0));
}
