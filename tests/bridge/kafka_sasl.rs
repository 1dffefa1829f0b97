//! A Kafka source and a Kafka sink with the typed SASL keys (`security_protocol`,
//! `sasl_mechanism`, `username`, `password_file` / `password_env`), against Ferry's own
//! Kafka front with `kafka.require_sasl` (SASL PLAIN over plaintext; SSL and SCRAM toward a
//! broker need a Kafka front with TLS and SCRAM, or a real Kafka — librdkafka's mock
//! cluster has neither):
//! - records go topic → source → sink → topic, authenticated both ways;
//! - a source whose password is wrong is shown down in `/readyz` and its refused login in
//!   the log, and the password appears in neither.

use crate::common::daemon::Setup;
use crate::common::kafka::client_config;
use crate::common::process::Ports;
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
