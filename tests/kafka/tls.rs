//! The `ferry` binary's Kafka listeners (`kafka.listeners`) with certificates made for
//! the test: librdkafka over SSL and SASL_SSL (PLAIN) beside the PLAINTEXT listener, each
//! client told the brokers' addresses on its own listener; kcat over SSL; SASL_SSL with
//! SCRAM — rdkafka (SHA-256), kcat (SHA-512) and kafka-python (SHA-256) — as a user who
//! requires TLS and is refused on the plaintext listener; a client certificate on the SSL
//! listener named by `kafka.ssl_principal_mapping_rules`; SASL_SSL refusing requests
//! before authentication; a TLS client on the plaintext port told which key to use.

use crate::common::clients::{kcat_through, python_script, run};
use crate::common::daemon::{Daemon, Setup};
use crate::common::kafka::{PATIENCE, client_config, consumer, producer};
use crate::common::process::free_port;
use crate::common::tls::{TlsFiles, client_config as tls_client, handshake, write_pair};
use crate::scram::authentication_error;
use ferry_auth::scram::{DEFAULT_ITERATIONS, Mechanism, ScramCredential};
use rdkafka::Message;
use rdkafka::consumer::Consumer;
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;
use std::path::Path;
use std::time::Duration;

/// The listeners' ports besides `kafka.listen`.
struct Ports {
    ssl: u16,
    sasl_ssl: u16,
}

/// A user with only SCRAM credentials (SHA-256 and SHA-512) who must connect over TLS
/// (`require_tls`).
const TLS_SCRAM_USER: (&str, &str) = ("tls-scram", "tls-scram-pass");

/// The `[[users]]` entry of [`TLS_SCRAM_USER`].
fn tls_scram_user() -> String {
    let (name, password) = TLS_SCRAM_USER;
    let credential = |m| ScramCredential::new(m, password, DEFAULT_ITERATIONS).to_string();
    format!(
        "[[users]]\nname = \"{name}\"\nscram_sha_256 = \"{}\"\nscram_sha_512 = \"{}\"\n\
         vhosts = [\"/\"]\nrequire_tls = true\n",
        credential(Mechanism::Sha256),
        credential(Mechanism::Sha512),
    )
}

/// A daemon with `kafka.listeners` SSL and SASL_SSL on free ports beside the PLAINTEXT
/// `kafka.listen`, with the certificates of `files` and the user [`TLS_SCRAM_USER`].
fn start(dir: &Path, files: &TlsFiles) -> (Daemon, Ports) {
    start_with(dir, files, &[])
}

/// [`start`] with the `extra` overrides.
fn start_with(dir: &Path, files: &TlsFiles, extra: &[(&str, &str)]) -> (Daemon, Ports) {
    let ports = Ports {
        ssl: free_port(),
        sasl_ssl: free_port(),
    };
    let listeners = format!(
        "SSL://127.0.0.1:{},SASL_SSL://127.0.0.1:{}",
        ports.ssl, ports.sasl_ssl
    );
    let mut setup =
        Setup::shipped_with(dir, &tls_scram_user()).env("FERRY__KAFKA__LISTENERS", &listeners);
    for (k, v) in files.env() {
        setup = setup.env(&k, &v);
    }
    for (k, v) in extra {
        setup = setup.env(k, v);
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

/// librdkafka settings for SASL_SSL with SCRAM `mechanism` as [`TLS_SCRAM_USER`],
/// trusting `files`' CA.
fn sasl_ssl_scram(files: &TlsFiles, mechanism: &str) -> Settings {
    let (user, password) = TLS_SCRAM_USER;
    let mut settings = ssl(files);
    settings[0] = ("security.protocol", "SASL_SSL".to_owned());
    settings.extend([
        ("sasl.mechanisms", mechanism.to_owned()),
        ("sasl.username", user.to_owned()),
        ("sasl.password", password.to_owned()),
    ]);
    settings
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
    let out = kcat_through(&b, "kc-ssl", &tls, b"k:over kcat\n").await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_over_sasl_ssl_with_scram_sha_256_logs_in_a_user_who_requires_tls() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (daemon, ports) = start(dir.path(), &files);
    let settings = sasl_ssl_scram(&files, "SCRAM-SHA-256");
    let bootstrap = format!("127.0.0.1:{}", ports.sasl_ssl);
    round_trip(
        &bootstrap,
        &borrowed(&settings),
        "scram-over-tls",
        &["x1", "x2", "x3"],
    )
    .await;
    assert_eq!(
        daemon.metric("ferry_auth_failures_total", &["front=\"kafka\""]),
        0.0
    );

    // The same user and password on the plaintext listener: refused for want of TLS.
    let (user, password) = TLS_SCRAM_USER;
    let plaintext = [
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanisms", "SCRAM-SHA-256"),
        ("sasl.username", user),
        ("sasl.password", password),
    ];
    let reason = authentication_error(&daemon.kafka_bootstrap(), &plaintext).await;
    assert!(
        reason.contains("user 'tls-scram' must connect over TLS (its require_tls is set)"),
        "{reason}"
    );
    daemon.wait_for("the refusal counted", PATIENCE, |d| {
        d.metric(
            "ferry_auth_failures_total",
            &["front=\"kafka\"", "reason=\"tls_required\""],
        ) >= 1.0
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_produces_and_consumes_over_sasl_ssl_with_scram_sha_512() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (daemon, ports) = start(dir.path(), &files);
    let b = format!("127.0.0.1:{}", ports.sasl_ssl);
    let settings: Vec<String> = sasl_ssl_scram(&files, "SCRAM-SHA-512")
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let tls: Vec<&str> = settings.iter().flat_map(|kv| ["-X", kv.as_str()]).collect();
    let out = kcat_through(&b, "kc-scram-tls", &tls, b"a:first\nb:second\n").await;
    assert_eq!(out, "a first\nb second\n");
    // The log says who logged in, how and where (and never with what).
    let (user, password) = TLS_SCRAM_USER;
    let log = daemon.log();
    assert!(
        log.lines().any(|l| l.contains("Kafka client authenticated")
            && l.contains("listener=SASL_SSL")
            && l.contains("tls=true")
            && l.contains(&format!("user={user}"))
            && l.contains("mechanism=\"SCRAM-SHA-512\"")),
        "no log line names the SCRAM-SHA-512 login:\n{log}"
    );
    assert!(!log.contains(password), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_produces_and_consumes_over_sasl_ssl_with_scram_sha_256() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (_daemon, ports) = start(dir.path(), &files);
    let (user, password) = TLS_SCRAM_USER;
    let out = run(
        "python3",
        &[
            &python_script("kafka_scram.py"),
            &format!("127.0.0.1:{}", ports.sasl_ssl),
            "SCRAM-SHA-256",
            user,
            password,
            "py-scram-tls",
            "5",
            &files.ca_file.to_string_lossy(),
        ],
        b"",
    )
    .await;
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "v0\nv1\nv2\nv3\nv4\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_on_the_ssl_listener_is_named_by_the_principal_mapping_rules() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let (daemon, ports) = start_with(
        dir.path(),
        &files,
        &[
            ("FERRY__TLS__VERIFY_PEER", "required"),
            (
                "FERRY__KAFKA__SSL_PRINCIPAL_MAPPING_RULES",
                "RULE:^CN=([^,]*),O=Ferry Tests$/svc-$1/L,DEFAULT",
            ),
        ],
    );
    let (cert, key) = write_pair(dir.path(), "client", &files.ca.client("Billing"));
    let mut settings = ssl(&files);
    settings.extend([
        (
            "ssl.certificate.location",
            cert.to_str().unwrap().to_owned(),
        ),
        ("ssl.key.location", key.to_str().unwrap().to_owned()),
    ]);
    round_trip(
        &format!("127.0.0.1:{}", ports.ssl),
        &borrowed(&settings),
        "by-certificate",
        &["c1"],
    )
    .await;
    let log = daemon.log();
    assert!(
        log.lines()
            .any(|l| l.contains("Kafka client identified by its certificate")
                && l.contains("listener=SSL")
                && l.contains("principal=svc-billing")),
        "no log line names the mapped principal:\n{log}"
    );
}
