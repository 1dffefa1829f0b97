//! `ferry bench amqp` and `ferry bench kafka` against `ferry run`'s TLS listeners, as
//! scripts/bench-tls.sh runs them: an amqps URI with `--ca-file`, an SSL listener with
//! `--property security.protocol=SSL`; a CA that did not sign the server's certificate is
//! refused, and the error names the broker without its password.

use crate::common::daemon::{Daemon, Setup};
use crate::common::process::free_port;
use crate::common::tls::{Authority, TlsFiles};
use std::path::Path;
use std::process::{Command, Output};

/// A daemon with an amqps listener and an SSL Kafka listener on free ports, the
/// certificates of `files`; with its amqps URI and the SSL listener's address.
fn start(dir: &Path, files: &TlsFiles) -> (Daemon, String, String) {
    let (amqps, ssl) = (free_port(), free_port());
    let mut setup = Setup::shipped(dir)
        .env("FERRY__AMQP__TLS_LISTEN", &format!("127.0.0.1:{amqps}"))
        .env("FERRY__KAFKA__LISTENERS", &format!("SSL://127.0.0.1:{ssl}"));
    for (k, v) in files.env() {
        setup = setup.env(&k, &v);
    }
    (
        setup.start(),
        format!("amqps://guest:guest@127.0.0.1:{amqps}/%2f"),
        format!("127.0.0.1:{ssl}"),
    )
}

/// `ferry bench ARGS`, to its end.
fn bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .arg("bench")
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn bench_amqp_loads_the_amqps_listener_with_a_private_ca_and_refuses_another_ca() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (_daemon, uri, _) = start(dir.path(), &files);
    let ca = files.ca_file.to_str().unwrap();
    let out = bench(&[
        "amqp",
        "--uri",
        &uri,
        "--ca-file",
        ca,
        "--messages",
        "300",
        "--latency-messages",
        "20",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("publish+confirm:"), "{stdout}");
    assert!(stdout.contains("consume+ack:"), "{stdout}");

    let other = dir.path().join("other-ca.pem");
    std::fs::write(&other, Authority::new("Another CA").pem).unwrap();
    let out = bench(&[
        "amqp",
        "--uri",
        &uri,
        "--ca-file",
        other.to_str().unwrap(),
        "--messages",
        "1",
    ]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "a server of another CA was trusted");
    assert!(
        stderr.contains("cannot connect to amqps://guest:"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("guest:guest@"),
        "the password is shown: {stderr}"
    );
}

#[test]
fn bench_kafka_loads_the_ssl_listener_with_librdkafka_properties() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (_daemon, _, ssl) = start(dir.path(), &files);
    let ca = format!("ssl.ca.location={}", files.ca_file.display());
    let out = bench(&[
        "kafka",
        "--bootstrap",
        &ssl,
        "--records",
        "300",
        "--latency-seconds",
        "1",
        "--property",
        "security.protocol=SSL",
        "--property",
        &ca,
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("produce:"), "{stdout}");
    assert!(stdout.contains("fetch:"), "{stdout}");
}
