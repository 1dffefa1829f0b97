//! Clients that pick older API versions than the other tests' clients, end to end: the
//! kcat of Debian (1.7.1, librdkafka 2.0.2, which asks ListOffsets v2 — the client of
//! issue 33, which a ListOffsets answer carrying a v4 field cut off) consuming from every
//! start it offers, in a group, listing metadata and querying offsets by time; and
//! kafka-python pinned to Kafka 0.10, 1.0 and 2.0 (`tests/python/kafka_old_versions.py`).

use crate::common::clients::{python_script, run, run_as_installed};
use crate::common::fronts::KafkaServer;
use crate::common::kafka::create_topic;

/// What kcat prints of each record.
const RECORD: &str = "%o %k %s\\n";

/// What Debian's kcat (with its own librdkafka) prints for `args` (after `-b bootstrap`)
/// with `input` on its standard input.
async fn kcat(bootstrap: &str, args: &[&str], input: &str) -> String {
    let args = [&["-b", bootstrap], args].concat();
    let out = run_as_installed("kcat", &args, input.as_bytes()).await;
    String::from_utf8(out.stdout).unwrap()
}

/// What kcat consumes of `topic` from `offset` (its `-o`) to the end, a record a line
/// printed with `format`.
async fn kcat_consume(bootstrap: &str, topic: &str, offset: &str, format: &str) -> String {
    let args = ["-C", "-t", topic, "-o", offset, "-e", "-q", "-f", format];
    kcat(bootstrap, &args, "").await
}

/// Produces `lines` (`key:value`) to `topic` with kcat, in one run.
async fn kcat_produce(bootstrap: &str, topic: &str, lines: &str) {
    kcat(bootstrap, &["-P", "-t", topic, "-K", ":"], lines).await;
}

/// `topic` holding `k0:v0` from one kcat run, then `k1:v1` and `k2:v2` from a second one
/// (so record 1 is newer than record 0): the timestamp of record 1.
async fn three_records(bootstrap: &str, topic: &str) -> i64 {
    create_topic(bootstrap, topic, &[]).await;
    kcat_produce(bootstrap, topic, "k0:v0\n").await;
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    kcat_produce(bootstrap, topic, "k1:v1\nk2:v2\n").await;
    let stamps = kcat_consume(bootstrap, topic, "beginning", "%o %T\\n").await;
    let stamps: Vec<(i64, i64)> = stamps
        .lines()
        .map(|l| {
            let (offset, at) = l.split_once(' ').unwrap();
            (offset.parse().unwrap(), at.parse().unwrap())
        })
        .collect();
    assert_eq!(stamps.len(), 3, "{stamps:?}");
    assert!(stamps[0].1 < stamps[1].1, "{stamps:?}");
    stamps[1].1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debian_kcat_consumes_from_the_beginning_the_end_an_offset_a_time_and_the_tail() {
    let broker = KafkaServer::start().await;
    let b = broker.bootstrap();
    let second = three_records(&b, "orders").await;
    let from = |offset: String| {
        let b = b.clone();
        async move { kcat_consume(&b, "orders", &offset, RECORD).await }
    };
    let all = "0 k0 v0\n1 k1 v1\n2 k2 v2\n";
    assert_eq!(from("beginning".into()).await, all);
    assert_eq!(from("end".into()).await, "");
    assert_eq!(from("1".into()).await, "1 k1 v1\n2 k2 v2\n");
    assert_eq!(from("-1".into()).await, "2 k2 v2\n");
    assert_eq!(from(format!("s@{second}")).await, "1 k1 v1\n2 k2 v2\n");
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debian_kcat_queries_offsets_by_time_and_lists_metadata() {
    let broker = KafkaServer::start().await;
    let b = broker.bootstrap();
    let second = three_records(&b, "orders").await;
    let at_second = format!("orders:0:{second}");
    assert_eq!(
        kcat(&b, &["-Q", "-t", &at_second], "").await,
        "orders [0] offset 1\n"
    );
    assert_eq!(
        kcat(&b, &["-Q", "-t", "orders:0:-1"], "").await,
        "orders [0] offset 3\n"
    );
    assert_eq!(
        kcat(&b, &["-Q", "-t", "orders:0:-2"], "").await,
        "orders [0] offset 0\n"
    );
    // Ferry is broker 0 (`kafka.node_id`).
    let port = broker.addr.port();
    assert_eq!(
        kcat(&b, &["-L", "-t", "orders"], "").await,
        format!(
            "Metadata for orders (from broker 0: 127.0.0.1:{port}/0):\n \
             1 brokers:\n  broker 0 at 127.0.0.1:{port} (controller)\n \
             1 topics:\n  topic \"orders\" with 1 partitions:\n    \
             partition 0, leader 0, replicas: 0, isrs: 0\n"
        )
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debian_kcat_in_a_group_reads_everything_then_only_what_came_after_its_commit() {
    let broker = KafkaServer::start().await;
    let b = broker.bootstrap();
    three_records(&b, "orders").await;
    let group = [
        "-G",
        "readers",
        "orders",
        "-X",
        "auto.offset.reset=earliest",
        "-e",
        "-q",
        "-f",
        RECORD,
    ];
    assert_eq!(kcat(&b, &group, "").await, "0 k0 v0\n1 k1 v1\n2 k2 v2\n");
    kcat_produce(&b, "orders", "k3:v3\n").await;
    assert_eq!(kcat(&b, &group, "").await, "3 k3 v3\n");
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_pinned_to_old_kafka_versions_produces_reads_and_commits() {
    let broker = KafkaServer::start().await;
    let b = broker.bootstrap();
    let script = python_script("kafka_old_versions.py");
    let mut answered = Vec::new();
    for version in ["0.10", "1.0", "2.0"] {
        let topic = format!("old-{version}");
        let out = run("python3", &[&script, &b, version, &topic], b"").await;
        answered.push((version, String::from_utf8(out.stdout).unwrap()));
    }
    // Kafka 0.10's Fetch v2 and ListOffsets v0 are not served (Kafka 4 dropped them too,
    // KIP-896): its consumer reads nothing and times out on offsets; offsets_for_times
    // needs ListOffsets v1, which kafka-python refuses to use with 0.10 itself.
    let old = r#"{"assigned": [0], "beginning": "KafkaTimeoutError", "committed": [2, "note"], "end": "KafkaTimeoutError", "fetched": [], "for_time": "IncompatibleBrokerVersion", "produced": [0, 1, 2]}"#;
    let current = r#"{"assigned": [0], "beginning": 0, "committed": [2, "note"], "end": 3, "fetched": [[0, "k0", "v0", 1700000000000], [1, "k1", "v1", 1700000000010], [2, "k2", "v2", 1700000000020]], "for_time": [1, 1700000000010], "produced": [0, 1, 2]}"#;
    let expected = [("0.10", old), ("1.0", current), ("2.0", current)]
        .map(|(version, json)| (version, format!("{json}\n")));
    assert_eq!(answered, expected);
    broker.stop().await;
}

/// Debian's kcat (librdkafka 2.0.2) logs in with SASL only if the broker advertises
/// SaslHandshake v0 (its "SASL handshake" feature asks for it), and then uses v1 and
/// SaslAuthenticate: with only v1 advertised it refused every mechanism but GSSAPI
/// ("SASL Handshake not supported by broker").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn debian_kcat_logs_in_with_scram_and_reads_what_it_wrote() {
    let broker = KafkaServer::start_with(|c| c.require_sasl = true).await;
    let b = broker.bootstrap();
    let (user, password) = crate::common::fronts::SCRAM_USER;
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let topic = format!("sasl-{}", &mechanism[10..]);
        let login = [
            "-X",
            "security.protocol=SASL_PLAINTEXT",
            "-X",
            &format!("sasl.mechanisms={mechanism}"),
            "-X",
            &format!("sasl.username={user}"),
            "-X",
            &format!("sasl.password={password}"),
        ];
        let produce = [&login[..], &["-P", "-t", &topic, "-K", ":"]].concat();
        kcat(&b, &produce, "k0:v0\n").await;
        let consume = [
            &login[..],
            &[
                "-C",
                "-t",
                &topic,
                "-o",
                "beginning",
                "-e",
                "-q",
                "-f",
                RECORD,
            ],
        ]
        .concat();
        assert_eq!(kcat(&b, &consume, "").await, "0 k0 v0\n", "{mechanism}");
    }
    broker.stop().await;
}

/// kafka-python pinned to Kafka 0.10 logs in with SaslHandshake v0 and bare tokens (PLAIN
/// in one, SCRAM in two round trips), later versions with SaslAuthenticate; a wrong
/// password is refused either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_pinned_to_old_kafka_versions_logs_in_with_sasl() {
    let broker = KafkaServer::start_with(|c| c.require_sasl = true).await;
    let b = broker.bootstrap();
    let script = python_script("kafka_old_sasl.py");
    let (scram_user, scram_password) = crate::common::fronts::SCRAM_USER;
    for version in ["0.10", "1.0"] {
        for (mechanism, user, password, logs_in) in [
            ("PLAIN", "guest", "guest", true),
            ("SCRAM-SHA-256", scram_user, scram_password, true),
            ("SCRAM-SHA-512", scram_user, "wrong", false),
        ] {
            let topic = format!(
                "login-{}-{}",
                version.replace('.', "-"),
                mechanism.to_lowercase()
            );
            let args = [&script, &b, version, mechanism, user, password, &topic];
            let out = run("python3", &args, b"").await;
            let seen = String::from_utf8(out.stdout).unwrap();
            if logs_in {
                assert_eq!(seen, "{\"produced\": 0}\n", "{version} {mechanism}");
            } else {
                assert!(
                    seen.starts_with("{\"refused\": "),
                    "{version} {mechanism}: {seen}"
                );
            }
        }
    }
    broker.stop().await;
}
