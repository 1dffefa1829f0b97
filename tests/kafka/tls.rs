//! The `ferry` binary's Kafka listeners (`kafka.listeners`) with certificates made for
//! the test: librdkafka over SSL and SASL_SSL (PLAIN) beside the PLAINTEXT listener, each
//! client told the brokers' addresses on its own listener; kcat over SSL; SASL_SSL
//! refusing requests before authentication; a TLS client on the plaintext port told
//! which key to use.

use crate::common::daemon::{Daemon, Setup};
use crate::common::kafka::{PATIENCE, client_config, consumer, producer};
use crate::common::process::free_port;
use crate::common::tls::{TlsFiles, client_config as tls_client, handshake};
use rdkafka::Message;
use rdkafka::consumer::Consumer;
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// The listeners' ports besides `kafka.listen`.
struct Ports {
    ssl: u16,
    sasl_ssl: u16,
}

/// A daemon with `kafka.listeners` SSL and SASL_SSL on free ports beside the PLAINTEXT
/// `kafka.listen`, with the certificates of `files`.
fn start(dir: &Path, files: &TlsFiles) -> (Daemon, Ports) {
    let ports = Ports {
        ssl: free_port(),
        sasl_ssl: free_port(),
    };
    let listeners = format!(
        "SSL://127.0.0.1:{},SASL_SSL://127.0.0.1:{}",
        ports.ssl, ports.sasl_ssl
    );
    let mut setup = Setup::shipped(dir).env("FERRY__KAFKA__LISTENERS", &listeners);
    for (k, v) in files.env() {
        setup = setup.env(&k, &v);
    }
    (setup.start(), ports)
}

/// librdkafka settings, owned so they can move to a blocking task.
type Settings = Vec<(&'static str, String)>;

/// `settings` borrowed as the helpers take them.
fn borrowed(settings: &Settings) -> Vec<(&str, &str)> {
    settings.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// librdkafka settings for SSL trusting `files`' CA.
fn ssl(files: &TlsFiles) -> Settings {
    vec![
        ("security.protocol", "SSL".to_owned()),
        (
            "ssl.ca.location",
            files.ca_file.to_str().unwrap().to_owned(),
        ),
    ]
}

/// Produces `values` to `topic` and reads them back with a new group, both with
/// `settings`, through `bootstrap`.
async fn round_trip(bootstrap: &str, settings: &[(&str, &str)], topic: &str, values: &[&str]) {
    let p = producer(bootstrap, settings);
    for v in values {
        p.send(
            FutureRecord::<(), _>::to(topic).payload(*v),
            Timeout::After(PATIENCE),
        )
        .await
        .unwrap_or_else(|(e, _)| panic!("producing to {topic} through {bootstrap}: {e}"));
    }
    let c = consumer(bootstrap, &format!("{topic}-readers"), settings);
    c.subscribe(&[topic]).unwrap();
    let mut got = Vec::new();
    while got.len() < values.len() {
        let m = tokio::time::timeout(PATIENCE, c.recv())
            .await
            .expect("a record within the patience")
            .unwrap();
        got.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
    }
    assert_eq!(got, values);
}

/// The brokers' ports Metadata names to a client with `settings` on `bootstrap`.
fn metadata_ports(bootstrap: &str, settings: &[(&str, &str)]) -> Vec<i32> {
    let c: rdkafka::consumer::BaseConsumer = client_config(bootstrap, settings).create().unwrap();
    let metadata = c.fetch_metadata(None, Timeout::After(PATIENCE)).unwrap();
    metadata.brokers().iter().map(|b| b.port()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_produces_and_consumes_over_ssl_and_sasl_ssl_each_on_its_own_listener() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (daemon, ports) = start(dir.path(), &files);
    let ssl = ssl(&files);
    let mut sasl_ssl = ssl.clone();
    sasl_ssl[0] = ("security.protocol", "SASL_SSL".to_owned());
    sasl_ssl.extend([
        ("sasl.mechanisms", "PLAIN".to_owned()),
        ("sasl.username", "guest".to_owned()),
        ("sasl.password", "guest".to_owned()),
    ]);
    let ssl_bootstrap = format!("127.0.0.1:{}", ports.ssl);
    let sasl_bootstrap = format!("127.0.0.1:{}", ports.sasl_ssl);

    // Metadata answers each client with the address of the listener it came in on.
    let (plain, ssl_ports, sasl_ports) = tokio::task::spawn_blocking({
        let (plain, ssl, sasl_ssl) = (daemon.kafka_bootstrap(), ssl.clone(), sasl_ssl.clone());
        let (ssl_bootstrap, sasl_bootstrap) = (ssl_bootstrap.clone(), sasl_bootstrap.clone());
        move || {
            (
                metadata_ports(&plain, &[]),
                metadata_ports(&ssl_bootstrap, &borrowed(&ssl)),
                metadata_ports(&sasl_bootstrap, &borrowed(&sasl_ssl)),
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(plain, [i32::from(daemon.ports().kafka)]);
    assert_eq!(ssl_ports, [i32::from(ports.ssl)]);
    assert_eq!(sasl_ports, [i32::from(ports.sasl_ssl)]);

    round_trip(&ssl_bootstrap, &borrowed(&ssl), "over-ssl", &["s1", "s2"]).await;
    round_trip(
        &sasl_bootstrap,
        &borrowed(&sasl_ssl),
        "over-sasl-ssl",
        &["a1", "a2"],
    )
    .await;
    // The plaintext listener reads what came in over TLS.
    round_trip(&daemon.kafka_bootstrap(), &[], "over-ssl", &["s1", "s2"]).await;
    assert!(daemon.metric("ferry_tls_handshakes_total", &["front=\"kafka\""]) >= 2.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sasl_ssl_refuses_requests_before_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (daemon, ports) = start(dir.path(), &files);
    let ssl = ssl(&files);
    // An SSL client without SASL on the SASL_SSL listener: Metadata comes before
    // authentication, so Ferry closes the connection and librdkafka never gets an answer.
    let bootstrap = format!("127.0.0.1:{}", ports.sasl_ssl);
    let refused = tokio::task::spawn_blocking(move || {
        let c: rdkafka::consumer::BaseConsumer =
            client_config(&bootstrap, &borrowed(&ssl)).create().unwrap();
        c.fetch_metadata(None, Timeout::After(Duration::from_secs(5)))
            .map(|_| ())
    })
    .await
    .unwrap();
    assert!(refused.is_err(), "metadata without SASL on SASL_SSL");
    daemon.wait_for("the refusal in the log", PATIENCE, |d| {
        d.log()
            .contains("Metadata before SASL authentication (the SASL_SSL listener requires it)")
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_produces_and_consumes_over_ssl() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (_daemon, ports) = start(dir.path(), &files);
    let b = format!("127.0.0.1:{}", ports.ssl);
    let ca = format!("ssl.ca.location={}", files.ca_file.display());
    let tls = ["-X", "security.protocol=SSL", "-X", ca.as_str()];
    kcat(
        &[&["-b", &b, "-P", "-t", "kc-ssl", "-K", ":"], &tls[..]].concat(),
        b"k:over kcat\n",
    )
    .await;
    let out = kcat(
        &[
            &[
                "-b",
                &b,
                "-C",
                "-t",
                "kc-ssl",
                "-o",
                "beginning",
                "-e",
                "-q",
                "-f",
                "%k %s\\n",
            ],
            &tls[..],
        ]
        .concat(),
        b"",
    )
    .await;
    assert_eq!(out, "k over kcat\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_on_the_plaintext_port_is_told_which_listener_to_use() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (daemon, ports) = start(dir.path(), &files);
    let on_plaintext = handshake(daemon.ports().kafka, tls_client(&files.ca.pem, None)).await;
    assert!(on_plaintext.is_err(), "TLS on the plaintext port completed");
    daemon.wait_for("the ClientHello named in the log", PATIENCE, |d| {
        d.log().contains(
            "a TLS ClientHello arrived on a plaintext listener; TLS clients connect to an SSL or \
             SASL_SSL listener of kafka.listeners",
        )
    });
    assert_eq!(
        daemon.metric(
            "ferry_kafka_connections_refused_total",
            &["reason=\"tls_client_hello\""]
        ),
        1.0
    );
    // And the SSL listener next to it serves.
    handshake(ports.ssl, tls_client(&files.ca.pem, None))
        .await
        .expect("the SSL listener completes the handshake");
}

/// Runs kcat with `args` and `stdin` within [`PATIENCE`] times three; its stdout.
async fn kcat(args: &[&str], stdin: &[u8]) -> String {
    use tokio::io::AsyncWriteExt;
    let mut child = Command::new("kcat")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("kcat runs (scripts/setup.sh installs it)");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).await.unwrap();
    drop(input);
    let out = tokio::time::timeout(PATIENCE * 3, child.wait_with_output())
        .await
        .expect("kcat finished")
        .unwrap();
    assert!(
        out.status.success(),
        "kcat {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}
