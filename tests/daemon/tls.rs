//! `ferry run` with `[tls]` as an operator meets it: certificates replaced on disk (by a
//! file change, or with SIGHUP) are used by new handshakes while open connections go on; a
//! broken replacement keeps the previous certificate and says which file is at fault; the
//! operations endpoint over HTTPS (`metrics.tls`), read with curl.

use crate::common::amqp::{WAIT, connect_tls, declare, drain, publish_confirmed};
use crate::common::daemon::{Daemon, Setup};
use crate::common::process::{Ferry, Ports, free_port};
use crate::common::tls::{Authority, TlsFiles, write_atomically};
use crate::common::wait;
use lapin::types::FieldTable;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// A daemon with the shipped config, `amqp.tls_listen` on a free port, the certificates of
/// `files`, and `extra` overrides; with its amqps URI.
fn start(dir: &Path, files: &TlsFiles, extra: &[(&str, &str)]) -> (Daemon, String) {
    let port = free_port();
    let mut setup =
        Setup::shipped(dir).env("FERRY__AMQP__TLS_LISTEN", &format!("127.0.0.1:{port}"));
    for (k, v) in files.env().iter().chain(
        extra
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<Vec<_>>()
            .iter(),
    ) {
        setup = setup.env(k, v);
    }
    (
        setup.start(),
        format!("amqps://guest:guest@127.0.0.1:{port}/%2f"),
    )
}

/// Reloads counted with `outcome`.
fn reloads(daemon: &Daemon, outcome: &str) -> f64 {
    daemon.metric(
        "ferry_tls_reloads_total",
        &[&format!("outcome=\"{outcome}\"")],
    )
}

/// Waits until the daemon counted at least `n` reloads with `outcome`.
fn wait_reloads(daemon: &Daemon, outcome: &str, n: f64) {
    daemon.wait_for(&format!("{n} '{outcome}' reloads"), WAIT, |d| {
        reloads(d, outcome) >= n
    });
}

/// New connections trust `new` and not `old`; `open` (from before) still publishes and
/// reads back.
async fn new_certificate_in_use(
    uri: &str,
    old: &Authority,
    new: &Authority,
    open: &lapin::Channel,
) {
    let fresh = connect_tls(uri, &new.pem, None)
        .await
        .expect("a client trusting the new CA connects");
    fresh.close(200, "done".into()).await.unwrap();
    assert!(
        connect_tls(uri, &old.pem, None).await.is_err(),
        "the old certificate is still served"
    );
    publish_confirmed(open, "", "kept", &["after reload"]).await;
    assert_eq!(drain(open, "kept").await, ["after reload"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn changed_files_are_used_by_new_handshakes_while_open_connections_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (daemon, uri) = start(
        dir.path(),
        &files,
        &[("FERRY__TLS__RELOAD_CHECK_MS", "200")],
    );
    let open = connect_tls(&uri, &files.ca.pem, None).await.unwrap();
    let ch = open.create_channel().await.unwrap();
    declare(&ch, "kept", FieldTable::default()).await;

    let second = Authority::new("Second CA");
    files.install(&second);
    wait_reloads(&daemon, "ok", 1.0);
    new_certificate_in_use(&uri, &files.ca, &second, &ch).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sighup_reloads_and_a_broken_replacement_keeps_the_previous_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    // Files are looked at once an hour: only SIGHUP reloads within the test.
    let (daemon, uri) = start(
        dir.path(),
        &files,
        &[("FERRY__TLS__RELOAD_CHECK_MS", "3600000")],
    );
    let open = connect_tls(&uri, &files.ca.pem, None).await.unwrap();
    let ch = open.create_channel().await.unwrap();
    declare(&ch, "kept", FieldTable::default()).await;

    let second = Authority::new("Second CA");
    files.install(&second);
    daemon.signal(libc::SIGHUP);
    wait_reloads(&daemon, "ok", 1.0);
    new_certificate_in_use(&uri, &files.ca, &second, &ch).await;

    // A key that belongs to another certificate: refused, the second CA's stays.
    write_atomically(&files.key_file, &Authority::new("Stray").server().key_pem);
    daemon.signal(libc::SIGHUP);
    wait_reloads(&daemon, "failed", 1.0);
    let log = daemon.log();
    assert!(
        log.contains(&format!(
            "tls.cert_file '{}' and tls.key_file '{}' cannot be used together",
            files.cert_file.display(),
            files.key_file.display()
        )),
        "{log}"
    );
    assert!(
        !log.contains("PRIVATE KEY"),
        "key material in the log:\n{log}"
    );
    connect_tls(&uri, &second.pem, None)
        .await
        .expect("the previous certificate is still served");
    assert!(daemon.metric("ferry_tls_certificate_not_after_seconds", &[]) > 0.0);
}

#[test]
fn healthz_and_metrics_answer_over_https_with_metrics_tls() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let ports = Ports::free();
    let mut setup = Setup::shipped(dir.path())
        .env("FERRY__METRICS__TLS", "true")
        .ports(ports);
    for (k, v) in files.env() {
        setup = setup.env(&k, &v);
    }
    let _ferry: Ferry = setup.spawn();
    let url = |path: &str| format!("https://127.0.0.1:{}{path}", ports.metrics);
    let ca = files.ca_file.to_str().unwrap().to_owned();
    let curl = |args: &[&str]| {
        Command::new("curl")
            .args(["--silent", "--show-error", "--max-time", "5"])
            .args(args)
            .output()
            .expect("curl runs")
    };
    let healthy = wait::try_until_blocking(Duration::from_secs(60), || {
        let out = curl(&["--cacert", &ca, &url("/healthz")]);
        out.status
            .success()
            .then(|| String::from_utf8(out.stdout).unwrap())
    });
    assert_eq!(healthy.as_deref(), Some("ok"), "/healthz over HTTPS");
    let metrics = curl(&["--cacert", &ca, &url("/metrics")]);
    let metrics = String::from_utf8(metrics.stdout).unwrap();
    assert!(
        metrics.contains("ferry_tls_handshakes_total{front=\"metrics\"}"),
        "{metrics}"
    );
    // Plain HTTP on the HTTPS port gets no answer.
    let plain = curl(&[&format!("http://127.0.0.1:{}/healthz", ports.metrics)]);
    assert!(
        !plain.status.success(),
        "plain HTTP answered on the HTTPS port"
    );
}

#[test]
fn handshake_counters_are_exported_at_zero_before_the_first_handshake() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (daemon, _uri) = start(dir.path(), &files, &[]);
    let metrics = daemon.metrics();
    let mut expected = vec![
        "ferry_tls_handshakes_total{front=\"amqp\"} 0".to_owned(),
        // The plaintext listeners count the TLS clients they refuse.
        "ferry_tls_handshake_failures_total{front=\"amqp\",reason=\"client_hello_on_plaintext\"} 0"
            .to_owned(),
        "ferry_tls_handshake_failures_total{front=\"kafka\",reason=\"client_hello_on_plaintext\"} 0"
            .to_owned(),
    ];
    for reason in [
        "timeout",
        "closed",
        "not_tls",
        "no_certificate",
        "untrusted_certificate",
        "expired_certificate",
        "bad_certificate",
        "malformed",
        "incompatible",
        "protocol",
    ] {
        expected.push(format!(
            "ferry_tls_handshake_failures_total{{front=\"amqp\",reason=\"{reason}\"}} 0"
        ));
    }
    let missing: Vec<&String> = expected
        .iter()
        .filter(|line| !metrics.lines().any(|l| l == line.as_str()))
        .collect();
    assert!(missing.is_empty(), "not exported at 0: {missing:?}");
    assert!(
        !metrics.contains("ferry_tls_handshakes_total{front=\"kafka\"}"),
        "a front without a TLS listener has no handshake counter"
    );
}
