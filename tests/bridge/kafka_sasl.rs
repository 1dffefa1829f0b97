//! A Kafka source and a Kafka sink with the typed SASL keys (`security_protocol`,
//! `sasl_mechanism`, `username`, `password_file` / `password_env`, `ca_file`), against
//! Ferry's own Kafka front (librdkafka's mock cluster has neither TLS nor SASL):
//! - SASL PLAIN over plaintext with `kafka.require_sasl`: records go topic → source →
//!   sink → topic, authenticated both ways; a source whose password is wrong is shown down
//!   in `/readyz` and its refused login in the log, and the password appears in neither;
//! - SASL_SSL with SCRAM (SHA-512 in, SHA-256 out) on the daemon's own SASL_SSL listener,
//!   as a user who requires TLS: every record arrives exactly once; a source asking for
//!   SCRAM-SHA-256 as a user with only a SHA-512 credential is refused, so the mechanism
//!   key is what the login used;
//! - SSL with a client certificate (`cert_file`, `key_file`) on an SSL listener that
//!   requires one: records cross, and the daemon names the bridge by its certificate.

use crate::common::daemon::{Daemon, Setup};
use crate::common::kafka::client_config;
use crate::common::process::{Ports, free_port};
use crate::common::tls::{TlsFiles, write_pair};
use ferry_auth::scram::{DEFAULT_ITERATIONS, Mechanism, ScramCredential};
use rdkafka::Message;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::time::{Duration, Instant};

/// SASL PLAIN as the shipped config's guest.
const SASL: [(&str, &str); 4] = [
    ("security.protocol", "SASL_PLAINTEXT"),
    ("sasl.mechanism", "PLAIN"),
    ("sasl.username", "guest"),
    ("sasl.password", "guest"),
];

#[tokio::test(flavor = "multi_thread")]
async fn kafka_source_and_sink_authenticate_with_the_typed_sasl_keys() {
    let dir = tempfile::tempdir().unwrap();
    let ports = Ports::free();
    let bootstrap = format!("127.0.0.1:{}", ports.kafka);
    let (good, bad) = (
        dir.path().join("password"),
        dir.path().join("wrong-password"),
    );
    std::fs::write(&good, "guest\n").unwrap();
    let wrong = "not-the-password-31337";
    std::fs::write(&bad, wrong).unwrap();
    let sasl =
        "security_protocol = \"SASL_PLAINTEXT\"\nsasl_mechanism = \"PLAIN\"\nusername = \"guest\"";
    let bridge = format!(
        r#"
[sources.sasl-in]
kind = "kafka"
bootstrap_servers = "{bootstrap}"
topics = ["sasl-in"]
group_id = "ferry-sasl"
{sasl}
password_file = "{good}"

[sources.bad-in]
kind = "kafka"
bootstrap_servers = "{bootstrap}"
topics = ["sasl-in"]
group_id = "ferry-sasl-bad"
{sasl}
password_file = "{bad}"

[sinks.sasl-out]
kind = "kafka"
bootstrap_servers = "{bootstrap}"
topic = "sasl-out"
{sasl}
password_env = "FERRY_TEST_SINK_PASSWORD"

[[routes]]
name = "sasl"
from = {{ source = "sasl-in" }}
to = [{{ sink = "sasl-out" }}]

[[routes]]
name = "bad"
from = {{ source = "bad-in" }}
to = [{{ kafka_topic = "bad-out" }}]
"#,
        good = good.display(),
        bad = bad.display(),
    );
    let daemon = Setup::shipped_with(dir.path(), &bridge)
        .env("FERRY__KAFKA__REQUIRE_SASL", "true")
        .env("FERRY_TEST_SINK_PASSWORD", "guest")
        .ports(ports)
        .start();

    let admin: AdminClient<DefaultClientContext> =
        client_config(&bootstrap, &SASL).create().unwrap();
    let topics = [
        NewTopic::new("sasl-in", 1, TopicReplication::Fixed(1)),
        NewTopic::new("sasl-out", 1, TopicReplication::Fixed(1)),
    ];
    for r in admin
        .create_topics(&topics, &AdminOptions::new())
        .await
        .unwrap()
    {
        r.unwrap();
    }
    let producer: FutureProducer = client_config(&bootstrap, &SASL).create().unwrap();
    const N: usize = 20;
    for i in 0..N {
        let value = format!("sasl {i}");
        producer
            .send(
                FutureRecord::<(), _>::to("sasl-in").payload(&value),
                Duration::from_secs(10),
            )
            .await
            .unwrap();
    }
    let mut settings = SASL.to_vec();
    settings.extend([
        ("group.id", "sasl-reader"),
        ("auto.offset.reset", "earliest"),
    ]);
    let consumer: StreamConsumer = client_config(&bootstrap, &settings).create().unwrap();
    consumer.subscribe(&["sasl-out"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    while got.len() < N {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, consumer.recv()).await {
            Ok(Ok(m)) => got.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap()),
            Ok(Err(e)) => panic!("consuming sasl-out: {e}"),
            Err(_) => panic!(
                "{} of {N} arrived; /readyz:\n{}",
                got.len(),
                daemon.readyz()
            ),
        }
    }
    got.sort();
    let mut want: Vec<String> = (0..N).map(|i| format!("sasl {i}")).collect();
    want.sort();
    assert_eq!(got, want);

    // librdkafka reports the refused login, then that no broker is left: /readyz shows
    // the latest, the log both.
    daemon.wait_for(
        "the bad source's refused login",
        Duration::from_secs(30),
        |d| {
            d.readyz()
                .lines()
                .any(|l| l.starts_with("source:bad-in: down:"))
                && d.log().lines().any(|l| {
                    l.contains("source:bad-in") && l.contains("login refused for user 'guest'")
                })
        },
    );
    let (readyz, log) = (daemon.readyz(), daemon.log());
    eprintln!("/readyz:\n{readyz}");
    assert!(readyz.contains("source:sasl-in: up"), "{readyz}");
    assert!(
        !readyz.contains(wrong) && !log.contains(wrong),
        "{readyz}\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_source_and_sink_over_sasl_ssl_with_scram_move_every_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let ports = Ports::free();
    let plain = format!("127.0.0.1:{}", ports.kafka);
    let sasl_ssl = format!("127.0.0.1:{}", free_port());
    let secret = "bridge-scram-secret-4711";
    let password_file = dir.path().join("bridge-password");
    std::fs::write(&password_file, format!("{secret}\n")).unwrap();
    let credential = |m| ScramCredential::new(m, secret, DEFAULT_ITERATIONS).to_string();
    let tls = |mechanism: &str, user: &str| {
        format!(
            "security_protocol = \"SASL_SSL\"\nsasl_mechanism = \"{mechanism}\"\n\
             username = \"{user}\"\npassword_file = \"{}\"\nca_file = \"{}\"\n",
            password_file.display(),
            files.ca_file.display()
        )
    };
    let config = format!(
        r#"
[[users]]
name = "bridge"
scram_sha_256 = "{sha256}"
scram_sha_512 = "{sha512}"
vhosts = ["/"]
require_tls = true

[[users]]
name = "only-512"
scram_sha_512 = "{sha512}"
vhosts = ["/"]

[sources.scram-in]
kind = "kafka"
bootstrap_servers = "{sasl_ssl}"
topics = ["scram-in"]
group_id = "ferry-scram"
{tls_in}
[sinks.scram-out]
kind = "kafka"
bootstrap_servers = "{sasl_ssl}"
topic = "scram-out"
{tls_out}
[sources.wrong-mechanism]
kind = "kafka"
bootstrap_servers = "{sasl_ssl}"
topics = ["scram-in"]
group_id = "ferry-scram-wrong"
{tls_wrong}
[[routes]]
name = "scram"
from = {{ source = "scram-in" }}
to = [{{ sink = "scram-out" }}]

[[routes]]
name = "wrong-mechanism"
from = {{ source = "wrong-mechanism" }}
to = [{{ kafka_topic = "never" }}]
"#,
        sha256 = credential(Mechanism::Sha256),
        sha512 = credential(Mechanism::Sha512),
        tls_in = tls("SCRAM-SHA-512", "bridge"),
        tls_out = tls("SCRAM-SHA-256", "bridge"),
        tls_wrong = tls("SCRAM-SHA-256", "only-512"),
    );
    let mut setup = Setup::shipped_with(dir.path(), &config)
        .env("FERRY__KAFKA__LISTENERS", &format!("SASL_SSL://{sasl_ssl}"))
        .ports(ports);
    for (k, v) in files.env() {
        setup = setup.env(&k, &v);
    }
    let daemon = setup.start();

    records_cross_exactly_once(&daemon, &plain, "scram-in", "scram-out", 50).await;

    // The same password with SCRAM-SHA-256 for a user who has only SHA-512: refused (a
    // PLAIN login would have been let in).
    daemon.wait_for(
        "the wrong mechanism's refused login",
        Duration::from_secs(30),
        |d| {
            d.readyz()
                .lines()
                .any(|l| l.starts_with("source:wrong-mechanism: down:"))
                && d.log()
                    .lines()
                    .any(|l| l.contains("login refused") && l.contains("only-512"))
        },
    );
    // Both ends logged in over TLS with SCRAM; the password is shown nowhere.
    let (readyz, log) = (daemon.readyz(), daemon.log());
    assert!(readyz.contains("source:scram-in: up"), "{readyz}");
    assert!(readyz.contains("sink:scram-out: up"), "{readyz}");
    assert!(daemon.metric("ferry_tls_handshakes_total", &["front=\"kafka\""]) >= 2.0);
    assert!(!log.contains(secret) && !readyz.contains(secret), "{log}");
}

/// Produces `n` records to `from` through the daemon's plaintext Kafka listener `plain`
/// (creating `from` and `to`), then reads `to` until all `n` arrived and asserts that no
/// other record comes: every record crossed the route exactly once.
async fn records_cross_exactly_once(daemon: &Daemon, plain: &str, from: &str, to: &str, n: usize) {
    let admin: AdminClient<DefaultClientContext> = client_config(plain, &[]).create().unwrap();
    let topics = [
        NewTopic::new(from, 1, TopicReplication::Fixed(1)),
        NewTopic::new(to, 1, TopicReplication::Fixed(1)),
    ];
    for r in admin
        .create_topics(&topics, &AdminOptions::new())
        .await
        .unwrap()
    {
        r.unwrap();
    }
    let producer: FutureProducer = client_config(plain, &[]).create().unwrap();
    for i in 0..n {
        let value = format!("{from} {i}");
        producer
            .send(
                FutureRecord::<(), _>::to(from).payload(&value),
                Duration::from_secs(10),
            )
            .await
            .unwrap();
    }
    let reader = format!("{to}-reader");
    let consumer: StreamConsumer = client_config(
        plain,
        &[
            ("group.id", reader.as_str()),
            ("auto.offset.reset", "earliest"),
        ],
    )
    .create()
    .unwrap();
    consumer.subscribe(&[to]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    while got.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, consumer.recv()).await {
            Ok(Ok(m)) => got.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap()),
            Ok(Err(e)) => panic!("consuming {to}: {e}"),
            Err(_) => panic!(
                "{} of {n} arrived; /readyz:\n{}\n{}",
                got.len(),
                daemon.readyz(),
                daemon.log()
            ),
        }
    }
    // Exactly once: nothing more comes after the n.
    if let Ok(Ok(m)) = tokio::time::timeout(Duration::from_secs(3), consumer.recv()).await {
        panic!("a record beyond the {n}: {:?}", m.payload_view::<str>());
    }
    got.sort();
    let mut want: Vec<String> = (0..n).map(|i| format!("{from} {i}")).collect();
    want.sort();
    assert_eq!(got, want);
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_source_and_sink_over_ssl_present_their_client_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let ports = Ports::free();
    let plain = format!("127.0.0.1:{}", ports.kafka);
    let ssl = format!("127.0.0.1:{}", free_port());
    let (cert, key) = write_pair(dir.path(), "bridge", &files.ca.client("Bridge"));
    let keys = format!(
        "security_protocol = \"SSL\"\nca_file = \"{}\"\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
        files.ca_file.display(),
        cert.display(),
        key.display()
    );
    let config = format!(
        r#"
[sources.ssl-in]
kind = "kafka"
bootstrap_servers = "{ssl}"
topics = ["ssl-in"]
group_id = "ferry-ssl"
{keys}
[sinks.ssl-out]
kind = "kafka"
bootstrap_servers = "{ssl}"
topic = "ssl-out"
{keys}
[[routes]]
name = "ssl"
from = {{ source = "ssl-in" }}
to = [{{ sink = "ssl-out" }}]
"#
    );
    // The SSL listener asks every client for a certificate of the test CA.
    let mut setup = Setup::shipped_with(dir.path(), &config)
        .env("FERRY__KAFKA__LISTENERS", &format!("SSL://{ssl}"))
        .env("FERRY__TLS__VERIFY_PEER", "required")
        .env(
            "FERRY__KAFKA__SSL_PRINCIPAL_MAPPING_RULES",
            "RULE:^CN=([^,]*),O=Ferry Tests$/svc-$1/L,DEFAULT",
        )
        .ports(ports);
    for (k, v) in files.env() {
        setup = setup.env(&k, &v);
    }
    let daemon = setup.start();
    records_cross_exactly_once(&daemon, &plain, "ssl-in", "ssl-out", 20).await;
    let (readyz, log) = (daemon.readyz(), daemon.log());
    assert!(readyz.contains("source:ssl-in: up"), "{readyz}");
    assert!(readyz.contains("sink:ssl-out: up"), "{readyz}");
    assert!(
        log.lines()
            .any(|l| l.contains("Kafka client identified by its certificate")
                && l.contains("principal=svc-bridge")),
        "no connection of the bridge presented its certificate:\n{log}"
    );
}
