//! The `ferry` binary's amqps listener (`amqp.tls_listen`) with certificates made for the
//! test: lapin, pika (with a client certificate, by password and by SASL EXTERNAL) and
//! amqp-tools over TLS beside the plaintext port; a user who requires TLS (`require_tls`)
//! let in over amqps and refused on the plaintext port; mutual TLS
//! (`tls.verify_peer = required`) refusing a client without a certificate, with one from
//! another CA, an expired one or one only for servers, and accepting a good one whose
//! subject the log names; lapin's SASL EXTERNAL named by an e-mail SAN, and refused for a
//! certificate without one; bad input on either port closing only its own connection,
//! each failure counted by reason.

use crate::common::amqp::{
    WAIT, connect, connect_tls, declare, drain, publish_confirmed, reply_code, reply_text,
};
use crate::common::daemon::{Daemon, Setup};
use crate::common::process::free_port;
use crate::common::tls::{Authority, TlsFiles, client_config, handshake, write_pair};
use crate::common::wait;
use ferry_auth::GUEST_PASSWORD_HASH;
use lapin::types::FieldTable;
use rcgen::{ExtendedKeyUsagePurpose, SanType};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Upper bound on a client process's run.
const CLIENT: Duration = Duration::from_secs(60);

/// A daemon with the shipped config, `amqp.tls_listen` on a free port, the certificates of
/// `files` and the `extra` overrides; returns it with the amqps port.
fn start(dir: &Path, files: &TlsFiles, extra: &[(&str, &str)]) -> (Daemon, u16) {
    start_with(dir, files, extra, "")
}

/// [`start`] with `toml` appended to the shipped config.
fn start_with(dir: &Path, files: &TlsFiles, extra: &[(&str, &str)], toml: &str) -> (Daemon, u16) {
    let port = free_port();
    let setup = if toml.is_empty() {
        Setup::shipped(dir)
    } else {
        Setup::shipped_with(dir, toml)
    };
    let mut setup = setup.env("FERRY__AMQP__TLS_LISTEN", &format!("127.0.0.1:{port}"));
    for (k, v) in files.env() {
        setup = setup.env(&k, &v);
    }
    for (k, v) in extra {
        setup = setup.env(k, v);
    }
    (setup.start(), port)
}

/// The amqps URI of vhost `/` as guest on `port`.
fn amqps(port: u16) -> String {
    format!("amqps://guest:guest@127.0.0.1:{port}/%2f")
}

/// The sum of the handshake failures of `front` for `reason`.
fn failures(daemon: &Daemon, front: &str, reason: &str) -> f64 {
    daemon.metric(
        "ferry_tls_handshake_failures_total",
        &[
            &format!("front=\"{front}\""),
            &format!("reason=\"{reason}\""),
        ],
    )
}

/// Waits until the daemon counted a handshake failure of `front` for `reason`.
fn wait_failure(daemon: &Daemon, front: &str, reason: &str) {
    daemon.wait_for(
        &format!("a counted {front} handshake failure '{reason}'"),
        WAIT,
        |d| failures(d, front, reason) >= 1.0,
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn lapin_publishes_and_consumes_over_amqps_beside_the_plaintext_port() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (daemon, port) = start(dir.path(), &files, &[]);

    let tls = connect_tls(&amqps(port), &files.ca.pem, None)
        .await
        .unwrap_or_else(|e| panic!("{e}: {}", daemon.log()));
    let ch = tls.create_channel().await.unwrap();
    declare(&ch, "over-tls", FieldTable::default()).await;
    publish_confirmed(&ch, "", "over-tls", &["one", "two"]).await;
    // The plaintext port serves the same broker: it sees what came in over TLS.
    let plain = connect(&daemon.amqp_uri()).await;
    let plain_ch = plain.create_channel().await.unwrap();
    assert_eq!(drain(&plain_ch, "over-tls").await, ["one", "two"]);
    publish_confirmed(&plain_ch, "", "over-tls", &["three"]).await;
    assert_eq!(drain(&ch, "over-tls").await, ["three"]);
    assert!(daemon.metric("ferry_tls_handshakes_total", &["front=\"amqp\""]) >= 1.0);
}

#[tokio::test(flavor = "multi_thread")]
async fn required_client_certificates_refuse_missing_foreign_expired_and_server_only_ones() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (daemon, port) = start(
        dir.path(),
        &files,
        &[("FERRY__TLS__VERIFY_PEER", "required")],
    );
    let uri = amqps(port);

    let refused = connect_tls(&uri, &files.ca.pem, None).await;
    assert!(refused.is_err(), "a client without a certificate got in");
    wait_failure(&daemon, "amqp", "no_certificate");

    let stranger = Authority::new("Another CA").client("mallory");
    let identity = (stranger.cert_pem.as_str(), stranger.key_pem.as_str());
    let refused = connect_tls(&uri, &files.ca.pem, Some(identity)).await;
    assert!(refused.is_err(), "a certificate of another CA got in");
    wait_failure(&daemon, "amqp", "untrusted_certificate");

    let expired = files.ca.expired_client("old-timer");
    let identity = (expired.cert_pem.as_str(), expired.key_pem.as_str());
    let refused = connect_tls(&uri, &files.ca.pem, Some(identity)).await;
    assert!(refused.is_err(), "an expired certificate got in");
    wait_failure(&daemon, "amqp", "expired_certificate");

    // Signed by the right CA, but for servers only (extended key usage serverAuth).
    let server_only = files.ca.issue("server-only", |p| {
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    });
    let identity = (server_only.cert_pem.as_str(), server_only.key_pem.as_str());
    let refused = connect_tls(&uri, &files.ca.pem, Some(identity)).await;
    assert!(refused.is_err(), "a server-only certificate got in");
    wait_failure(&daemon, "amqp", "bad_certificate");

    let alice = files.ca.client("alice");
    let identity = (alice.cert_pem.as_str(), alice.key_pem.as_str());
    let conn = connect_tls(&uri, &files.ca.pem, Some(identity))
        .await
        .expect("a certificate of tls.ca_file is accepted");
    let ch = conn.create_channel().await.unwrap();
    declare(&ch, "mtls", FieldTable::default()).await;
    publish_confirmed(&ch, "", "mtls", &["signed"]).await;
    assert_eq!(drain(&ch, "mtls").await, ["signed"]);
    let log = daemon.log();
    assert!(
        log.contains("subject=CN=alice,O=Ferry Tests"),
        "the verified subject is logged in Kafka's order:\n{log}"
    );
    // The plaintext port is not affected by verify_peer.
    connect(&daemon.amqp_uri()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_user_who_requires_tls_logs_in_over_amqps_and_is_refused_on_the_plaintext_port() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let users = format!(
        "[[users]]\nname = \"secure\"\npassword_hash = \"{GUEST_PASSWORD_HASH}\"\nrequire_tls = true\n"
    );
    let (daemon, port) = start_with(dir.path(), &files, &[], &users);

    let tls = connect_tls(
        &format!("amqps://secure:guest@127.0.0.1:{port}/%2f"),
        &files.ca.pem,
        None,
    )
    .await
    .unwrap_or_else(|e| panic!("require_tls user over amqps: {e}"));
    let ch = tls.create_channel().await.unwrap();
    declare(&ch, "secure-only", FieldTable::default()).await;
    publish_confirmed(&ch, "", "secure-only", &["kept"]).await;
    assert_eq!(drain(&ch, "secure-only").await, ["kept"]);

    let plain = daemon
        .amqp_uri()
        .replacen("guest:guest@", "secure:guest@", 1);
    let refused = tokio::time::timeout(
        WAIT,
        lapin::Connection::connect(&plain, lapin::ConnectionProperties::default()),
    )
    .await
    .expect("the refusal within the wait");
    let e = refused.expect_err("a require_tls user got in on plaintext");
    assert_eq!(reply_code(&e), Some(403), "{e}");
    assert!(
        reply_text(&e).contains("user 'secure' must connect over TLS (its require_tls is set)"),
        "{e}"
    );
    daemon.wait_for("the refusal counted", WAIT, |d| {
        d.metric(
            "ferry_auth_failures_total",
            &["front=\"amqp\"", "reason=\"tls_required\""],
        ) >= 1.0
    });
    // The TLS connection is not affected.
    publish_confirmed(&ch, "", "secure-only", &["still"]).await;
    assert_eq!(drain(&ch, "secure-only").await, ["still"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn lapin_external_takes_the_email_san_and_refuses_a_certificate_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let users = format!(
        "[[users]]\nname = \"alice@ferry.test\"\npassword_hash = \"{GUEST_PASSWORD_HASH}\"\n"
    );
    let (daemon, port) = start_with(
        dir.path(),
        &files,
        &[
            ("FERRY__TLS__VERIFY_PEER", "required"),
            (
                "FERRY__AMQP__SSL_CERT_LOGIN_FROM",
                "subject_alternative_name",
            ),
            ("FERRY__AMQP__SSL_CERT_LOGIN_SAN_TYPE", "email"),
        ],
        &users,
    );
    // No user name or password in the URI that matters: EXTERNAL sends neither.
    let uri = format!("amqps://nobody:nothing@127.0.0.1:{port}/%2f?auth_mechanism=external");

    let named = files.ca.issue("alice", |p| {
        p.subject_alt_names = vec![SanType::Rfc822Name("alice@ferry.test".try_into().unwrap())];
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    });
    let conn = connect_tls(&uri, &files.ca.pem, Some((&named.cert_pem, &named.key_pem)))
        .await
        .unwrap_or_else(|e| panic!("EXTERNAL with an e-mail SAN: {e}\n{}", daemon.log()));
    let ch = conn.create_channel().await.unwrap();
    declare(&ch, "by-san", FieldTable::default()).await;

    // Verified, but without the name ssl_cert_login_from asks for.
    let unnamed = files.ca.client("alice");
    let e = connect_tls(
        &uri,
        &files.ca.pem,
        Some((&unnamed.cert_pem, &unnamed.key_pem)),
    )
    .await
    .expect_err("a certificate without an e-mail SAN logged in");
    assert_eq!(reply_code(&e), Some(403), "{e}");
    daemon.wait_for("the refusal counted", WAIT, |d| {
        d.metric(
            "ferry_auth_failures_total",
            &["front=\"amqp\"", "reason=\"no_certificate_name\""],
        ) >= 1.0
    });
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_closes_only_its_own_connection_and_is_counted_by_reason() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (daemon, port) = start(
        dir.path(),
        &files,
        &[("FERRY__TLS__HANDSHAKE_TIMEOUT_MS", "500")],
    );
    let survivor = connect_tls(&amqps(port), &files.ca.pem, None)
        .await
        .unwrap();
    let ch = survivor.create_channel().await.unwrap();
    declare(&ch, "survivor", FieldTable::default()).await;

    // Plaintext AMQP to the TLS port.
    let mut plain = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    plain.write_all(b"AMQP\x00\x00\x09\x01").await.unwrap();
    assert_closed(&mut plain).await;
    wait_failure(&daemon, "amqp", "not_tls");

    // A handshake record that is no ClientHello.
    let mut garbage = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    garbage
        .write_all(b"\x16\x03\x01\x00\x08garbage!")
        .await
        .unwrap();
    assert_closed(&mut garbage).await;
    wait_failure(&daemon, "amqp", "malformed");

    // The first bytes of a ClientHello, then the client leaves.
    let mut truncated = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    truncated
        .write_all(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        .await
        .unwrap();
    truncated.shutdown().await.unwrap();
    assert_closed(&mut truncated).await;
    wait_failure(&daemon, "amqp", "closed");

    // A client that connects and never speaks is closed after tls.handshake_timeout_ms.
    let mut stalled = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    assert_closed(&mut stalled).await;
    wait_failure(&daemon, "amqp", "timeout");

    // A TLS client on the plaintext port is told where to go.
    let on_plaintext = handshake(daemon.ports().amqp, client_config(&files.ca.pem, None)).await;
    assert!(on_plaintext.is_err(), "TLS on the plaintext port completed");
    wait_failure(&daemon, "amqp", "client_hello_on_plaintext");
    let log = daemon.log();
    assert!(
        log.contains("a TLS ClientHello arrived on the plaintext AMQP port; amqps clients connect to amqp.tls_listen"),
        "{log}"
    );

    // The open connection and everything it stored are untouched.
    publish_confirmed(&ch, "", "survivor", &["still here"]).await;
    assert_eq!(drain(&ch, "survivor").await, ["still here"]);
}

/// Reads until the server closes `stream` (end of stream or reset), within [`WAIT`].
async fn assert_closed(stream: &mut tokio::net::TcpStream) {
    let mut buf = [0u8; 1024];
    let closed = wait::try_until(WAIT, async || match stream.read(&mut buf).await {
        Ok(0) | Err(_) => Some(()),
        Ok(_) => None,
    })
    .await;
    assert!(closed.is_some(), "the server did not close the connection");
}

/// Runs a client command to completion within [`CLIENT`]; its stdout, after asserting it
/// succeeded.
fn run_client(command: &mut Command) -> String {
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the client runs (scripts/setup.sh installs it)");
    let out: Output = wait_output(child);
    assert!(
        out.status.success(),
        "client failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The output of `child`, killed when it runs past [`CLIENT`].
fn wait_output(mut child: std::process::Child) -> Output {
    let finished = wait::try_until_blocking(CLIENT, || child.try_wait().unwrap());
    if finished.is_none() {
        let _ = child.kill();
    }
    child.wait_with_output().unwrap()
}

#[test]
fn pika_with_a_client_certificate_and_amqp_tools_with_ssl_talk_amqps() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (daemon, port) = start(
        dir.path(),
        &files,
        &[("FERRY__TLS__VERIFY_PEER", "optional")],
    );
    let (cert, key) = write_pair(dir.path(), "pika", &files.ca.client("pika-client"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/amqp_pika_tls.py");
    let out = run_client(
        Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .arg(&files.ca_file)
            .arg(&cert)
            .arg(&key),
    );
    assert_eq!(out.trim(), "pika over TLS");
    drop(daemon);

    // SASL EXTERNAL: the certificate's CN names the user, no password is sent.
    let users =
        format!("[[users]]\nname = \"pika-client\"\npassword_hash = \"{GUEST_PASSWORD_HASH}\"\n");
    let (daemon, port) = start_with(
        dir.path(),
        &files,
        &[("FERRY__TLS__VERIFY_PEER", "optional")],
        &users,
    );
    let out = run_client(
        Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/amqp_pika_tls.py"))
            .arg(port.to_string())
            .arg(&files.ca_file)
            .arg(&cert)
            .arg(&key)
            .arg("external"),
    );
    assert_eq!(out.trim(), "pika over TLS");
    let log = daemon.log();
    assert!(log.contains("tls=true user=pika-client"), "{log}");

    // librabbitmq checks the server's name against its DNS names: `localhost`.
    let url = format!("amqps://guest:guest@localhost:{port}/%2f");
    let cacert = format!("--cacert={}", files.ca_file.display());
    let tls = ["--ssl", cacert.as_str()];
    run_client(
        Command::new("amqp-declare-queue")
            .args(["-u", &url, "-q", "tools-tls", "-d"])
            .args(tls),
    );
    run_client(
        Command::new("amqp-publish")
            .args([
                "-u",
                &url,
                "-r",
                "tools-tls",
                "-p",
                "-b",
                "from amqp-publish\n",
            ])
            .args(tls),
    );
    let got = run_client(
        Command::new("amqp-get")
            .args(["-u", &url, "-q", "tools-tls"])
            .args(tls),
    );
    assert_eq!(got, "from amqp-publish\n");
}
