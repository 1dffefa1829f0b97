//! `ferry run` driven as a supervisor would: health, readiness and metrics over HTTP, a
//! clean exit on SIGTERM and SIGINT, a clear failure when the metrics or AMQP port is
//! taken, and the free-disk alarm shown in the log, `/readyz` and the metrics.

use crate::common::daemon::{EXIT, Setup};
use crate::common::http::get;
use crate::common::process::Ports;
use std::net::{Ipv4Addr, TcpListener};

#[test]
fn serves_health_readiness_and_metrics_then_exits_0_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = Setup::shipped(dir.path()).start();
    let port = ferry.ports().metrics;
    assert_eq!(get(port, "/healthz").unwrap(), (200, "ok".to_owned()));

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
    let outcome = ferry.wait_exit(EXIT);
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
fn the_free_disk_alarm_is_logged_shown_in_readyz_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    // More free space than any disk has: the alarm is raised from the start.
    let ferry = Setup::shipped(dir.path())
        .env("FERRY__STORE__MIN_FREE_DISK_MB", "1000000000000")
        .start();
    ferry.wait_for("the alarm in the metrics", EXIT, |f| {
        f.metric("ferry_store_disk_alarm", &[]) == 1.0 && f.metric("ferry_amqp_blocked", &[]) == 1.0
    });
    assert!(ferry.metric("ferry_store_disk_free_bytes", &[]) > 0.0);
    let (status, body) = get(ferry.ports().metrics, "/readyz").unwrap();
    assert_eq!(
        status, 200,
        "publishers wait; the instance stays ready: {body}"
    );
    assert!(
        body.starts_with("ready\nfree disk alarm: ")
            && body.ends_with("is below store.min_free_disk_mb (1000000000000)"),
        "{body}"
    );
    let log = ferry.log();
    assert!(
        log.contains("free disk alarm: blocking publishers")
            && log.contains("store.min_free_disk_mb"),
        "{log}"
    );
}

#[test]
fn exits_0_on_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = Setup::shipped(dir.path()).start();

    ferry.signal(libc::SIGINT);
    let outcome = ferry.wait_exit(EXIT);
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
    let ports = Ports {
        metrics: port,
        ..Ports::free()
    };
    let outcome = Setup::shipped(dir.path()).ports(ports).spawn().wait(EXIT);
    assert_ne!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    let expected =
        format!("error: metrics.listen: 127.0.0.1:{port} is in use; set FERRY__METRICS__LISTEN\n");
    assert!(outcome.stderr.ends_with(&expected), "{}", outcome.stderr);
    drop(taken);
}

#[test]
fn taken_management_port_fails_naming_key_and_variable() {
    let dir = tempfile::tempdir().unwrap();
    let taken = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = taken.local_addr().unwrap().port();
    let ports = Ports {
        management: port,
        ..Ports::free()
    };
    let outcome = Setup::shipped(dir.path()).ports(ports).spawn().wait(EXIT);
    assert_ne!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    let expected = format!(
        "error: management.listen: 127.0.0.1:{port} is in use; set FERRY__MANAGEMENT__LISTEN\n"
    );
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
    let outcome = Setup::shipped(dir.path()).ports(ports).spawn().wait(EXIT);
    assert_ne!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    let expected = format!("error: amqp.listen: {amqp} is in use; set FERRY__AMQP__LISTEN\n");
    assert!(outcome.stderr.ends_with(&expected), "{}", outcome.stderr);
    drop(taken);
}

#[test]
fn second_daemon_on_the_same_store_fails_naming_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let mut first = Setup::shipped(dir.path()).start();

    let outcome = Setup::shipped(dir.path()).spawn().wait(EXIT);
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
    let port = first.ports().metrics;
    assert_eq!(get(port, "/readyz").unwrap(), (200, "ready".to_owned()));
    first.signal(libc::SIGTERM);
    assert_eq!(first.wait_exit(EXIT).status.code(), Some(0));
}
