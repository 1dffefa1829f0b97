//! Ferry's metrics under the names of RabbitMQ's Prometheus plugin and of kafka_exporter,
//! checked against those projects: the suite's private RabbitMQ node and Ferry get the
//! same AMQP traffic, and every `rabbitmq_*` family Ferry serves must exist in the node's
//! `/metrics` (or `/metrics/per-object`) with the same type and label names, and show the
//! same queue depths; Ferry's `kafka_*` families must be kafka_exporter's (names and labels
//! copied from its source below) with the lag a real consumer group leaves; and every
//! metric RabbitMQ-Overview queries is exported or listed as not applicable.

use crate::common::amqp;
use crate::common::daemon::{Setup, sum_of};
use crate::common::kafka::{PATIENCE, consumer, producer};
use crate::common::rabbitmq::{RabbitNode, unique};
use ferry_telemetry::compat::rabbitmq::{self as rabbit_names, NOT_APPLICABLE};
use lapin::options::BasicGetOptions;
use lapin::types::FieldTable;
use rdkafka::Message;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// How long RabbitMQ (which refreshes queue statistics every 5 s) and Ferry (every
/// `amqp.resource_check_ms`) may take to show a queue's depth.
const DEPTH_WAIT: Duration = Duration::from_secs(30);

/// kafka_exporter's families that Ferry serves, with their label names, from
/// danielqsj/kafka_exporter `kafka_exporter.go` at commit
/// 00498a4a2e23ab2432bea910cd52263427abf46e (the `prometheus.NewDesc` calls in `setup`;
/// all are gauges). Written out here rather than taken from Ferry's own table, so a
/// change on Ferry's side cannot pass unnoticed.
const KAFKA_EXPORTER: &[(&str, &[&str])] = &[
    ("kafka_topic_partitions", &["topic"]),
    (
        "kafka_topic_partition_current_offset",
        &["topic", "partition"],
    ),
    (
        "kafka_topic_partition_oldest_offset",
        &["topic", "partition"],
    ),
    (
        "kafka_consumergroup_current_offset",
        &["consumergroup", "topic", "partition"],
    ),
    (
        "kafka_consumergroup_current_offset_sum",
        &["consumergroup", "topic"],
    ),
    (
        "kafka_consumergroup_lag",
        &["consumergroup", "topic", "partition"],
    ),
    ("kafka_consumergroup_lag_sum", &["consumergroup", "topic"]),
    ("kafka_consumergroup_members", &["consumergroup"]),
];

/// One family of a Prometheus text exposition.
#[derive(Debug, Default)]
struct Family {
    /// Its `# TYPE`.
    kind: String,
    /// The label names of each of its samples.
    label_sets: BTreeSet<BTreeSet<String>>,
}

/// The families of `text` whose names start with `prefix`.
fn families(text: &str, prefix: &str) -> BTreeMap<String, Family> {
    let mut out: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            if name.starts_with(prefix) {
                out.entry(name.to_owned()).or_default().kind = kind.to_owned();
            }
        } else if line.starts_with(prefix) {
            let name = line.split(['{', ' ']).next().unwrap();
            let labels = line
                .split_once('{')
                .and_then(|(_, rest)| rest.rsplit_once('}'))
                .map(|(labels, _)| label_names(labels))
                .unwrap_or_default();
            out.entry(name.to_owned())
                .or_default()
                .label_sets
                .insert(labels);
        }
    }
    out
}

/// The names in a label list `a="x",b="y"` (values may hold commas and escaped quotes).
fn label_names(labels: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = labels;
    while let Some((name, after)) = rest.split_once("=\"") {
        names.insert(name.trim_start_matches(',').to_owned());
        let mut end = 0;
        let bytes = after.as_bytes();
        while end < bytes.len() && bytes[end] != b'"' {
            end += if bytes[end] == b'\\' { 2 } else { 1 };
        }
        rest = &after[(end + 1).min(after.len())..];
    }
    names
}

/// `GET path` on 127.0.0.1:`port` as HTTP/1.0 (so no chunked body); the body of a 200.
fn fetch(port: u16, path: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"),
        "{head}"
    );
    body.to_owned()
}

/// The port of `http://127.0.0.1:PORT/...`.
fn port_of(uri: &str) -> u16 {
    let authority = uri.trim_start_matches("http://").split('/').next().unwrap();
    authority.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// Declares `queue`, publishes five messages under confirms, and takes one with basic.get
/// without acknowledging it: 4 ready, 1 unacknowledged. The connection stays open (the
/// delivery stays unacknowledged) while the caller holds what is returned.
async fn traffic(uri: &str, queue: &str) -> (lapin::Connection, lapin::Channel) {
    let (connection, channel) = amqp::channel(uri).await;
    amqp::declare(&channel, queue, FieldTable::default()).await;
    amqp::publish_confirmed(&channel, "", queue, &["1", "2", "3", "4", "5"]).await;
    let got = channel
        .basic_get(queue.into(), BasicGetOptions { no_ack: false })
        .await
        .unwrap();
    assert!(got.is_some(), "basic.get found {queue} empty");
    (connection, channel)
}

/// The per-object view of `port` once it shows `queue` with 4 ready and 1 unacknowledged
/// message; panics after [`DEPTH_WAIT`].
fn per_object_with_depth(port: u16, queue: &str) -> String {
    let started = Instant::now();
    let label = format!("queue=\"{queue}\"");
    loop {
        let text = fetch(port, "/metrics/per-object");
        let ready = sum_of(&text, rabbit_names::QUEUE_MESSAGES_READY, &[&label]);
        let unacked = sum_of(&text, rabbit_names::QUEUE_MESSAGES_UNACKED, &[&label]);
        if (ready, unacked) == (4.0, 1.0) {
            return text;
        }
        assert!(
            started.elapsed() < DEPTH_WAIT,
            "port {port}: {queue} shows {ready} ready, {unacked} unacked"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Every `rabbitmq_*` family of `ferry` is in `rabbit` with the same type (RabbitMQ's
/// `untyped` info series are gauges in Ferry: Prometheus stores both alike) and the same
/// label names.
fn assert_rabbitmq_shape(view: &str, ferry: &str, rabbit: &str) {
    let (ferry, rabbit) = (families(ferry, "rabbitmq_"), families(rabbit, "rabbitmq_"));
    assert!(ferry.len() >= 30, "{view}: Ferry serves only {ferry:?}");
    for (name, f) in &ferry {
        let Some(r) = rabbit.get(name) else {
            panic!("{view}: {name} is not a RabbitMQ family");
        };
        let same_kind = f.kind == r.kind || (f.kind == "gauge" && r.kind == "untyped");
        assert!(
            same_kind,
            "{view}: {name} is a {} in Ferry, a {} in RabbitMQ",
            f.kind, r.kind
        );
        assert!(
            !f.label_sets.is_empty(),
            "{view}: {name} has no sample in Ferry"
        );
        for labels in &f.label_sets {
            assert!(
                r.label_sets.contains(labels),
                "{view}: {name} has labels {labels:?} in Ferry, {:?} in RabbitMQ",
                r.label_sets
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn rabbitmq_families_match_a_real_node_in_names_types_labels_and_queue_depths() {
    let node = RabbitNode::get();
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped(dir.path()).start();
    let queue = unique("promcompat");
    let _on_rabbit = traffic(node.uri(), &queue).await;
    let _on_ferry = traffic(&ferry.amqp_uri(), &queue).await;
    let (rabbit_port, ferry_port) = (port_of(&node.prometheus_uri()), ferry.ports().metrics);

    let rabbit_per_object = per_object_with_depth(rabbit_port, &queue);
    let ferry_per_object = per_object_with_depth(ferry_port, &queue);
    assert_rabbitmq_shape("/metrics/per-object", &ferry_per_object, &rabbit_per_object);
    let label = format!("queue=\"{queue}\"");
    for text in [&rabbit_per_object, &ferry_per_object] {
        assert_eq!(sum_of(text, rabbit_names::QUEUE_MESSAGES, &[&label]), 5.0);
        assert_eq!(sum_of(text, rabbit_names::QUEUE_CONSUMERS, &[&label]), 0.0);
    }

    let rabbit = fetch(rabbit_port, "/metrics");
    let ferry_text = fetch(ferry_port, "/metrics");
    assert_rabbitmq_shape("/metrics", &ferry_text, &rabbit);
    // This Ferry saw only this test's traffic; the shared node saw at least as much.
    for (name, labels, expected) in [
        (rabbit_names::QUEUE_MESSAGES_READY, &[][..], 4.0),
        (rabbit_names::QUEUE_MESSAGES_UNACKED, &[], 1.0),
        (rabbit_names::QUEUES_CREATED_TOTAL, &[], 1.0),
        (rabbit_names::CHANNEL_MESSAGES_PUBLISHED_TOTAL, &[], 5.0),
        (rabbit_names::CHANNEL_MESSAGES_CONFIRMED_TOTAL, &[], 5.0),
        (rabbit_names::CHANNEL_GET_ACK_TOTAL, &[], 1.0),
        (rabbit_names::QUEUE_MESSAGES_PUBLISHED_TOTAL, &[], 5.0),
        (
            rabbit_names::GLOBAL_MESSAGES_RECEIVED_TOTAL,
            &["protocol=\"amqp091\""],
            5.0,
        ),
        (
            rabbit_names::GLOBAL_MESSAGES_ROUTED_TOTAL,
            &["protocol=\"amqp091\""],
            5.0,
        ),
        (
            rabbit_names::GLOBAL_MESSAGES_CONFIRMED_TOTAL,
            &["protocol=\"amqp091\""],
            5.0,
        ),
        (
            rabbit_names::GLOBAL_MESSAGES_DELIVERED_GET_MANUAL_ACK_TOTAL,
            &["queue_type=\"rabbit_classic_queue\""],
            1.0,
        ),
    ] {
        assert_eq!(
            sum_of(&ferry_text, name, labels),
            expected,
            "Ferry's {name}"
        );
        assert!(
            sum_of(&rabbit, name, labels) >= expected,
            "RabbitMQ's {name}"
        );
    }
    assert!(sum_of(&ferry_text, rabbit_names::CONNECTIONS, &[]) >= 1.0);
    assert!(sum_of(&ferry_text, rabbit_names::CHANNELS, &[]) >= 1.0);
    assert!(
        sum_of(
            &ferry_text,
            rabbit_names::PROCESS_RESIDENT_MEMORY_BYTES,
            &[]
        ) > 0.0
    );
}

#[test]
fn every_metric_of_rabbitmq_overview_is_exported_or_listed_as_not_applicable() {
    let list = include_str!("data/rabbitmq-overview-metrics.txt");
    let queried: Vec<&str> = list
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    assert!(queried.len() >= 30, "{queried:?}");
    let exported: BTreeSet<&str> = rabbit_names::ALL.iter().map(|f| f.metric.name).collect();
    let not_applicable: BTreeSet<&str> = NOT_APPLICABLE.iter().map(|(name, _)| *name).collect();
    let missing: Vec<&&str> = queried
        .iter()
        .filter(|name| !exported.contains(*name) && !not_applicable.contains(*name))
        .collect();
    assert!(
        missing.is_empty(),
        "neither exported nor listed: {missing:?}"
    );
}

#[test]
fn operations_doc_lists_the_compatible_and_the_left_out_names() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let kafka = ferry_telemetry::compat::kafka_exporter::ALL
        .iter()
        .map(|(m, _)| m.name);
    let rabbit = rabbit_names::ALL.iter().map(|f| f.metric.name);
    let left_out = NOT_APPLICABLE.iter().map(|(name, _)| *name);
    let undocumented: Vec<&str> = rabbit
        .chain(kafka)
        .chain(left_out)
        .filter(|name| !doc.contains(&format!("`{name}`")))
        .collect();
    assert!(
        undocumented.is_empty(),
        "not in docs/operations.md: {undocumented:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_exporter_families_have_its_names_types_labels_and_the_groups_lag() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped(dir.path()).start();
    let (topic, group) = (unique("lag"), unique("lag-group"));
    let p = producer(&ferry.kafka_bootstrap(), &[]);
    for i in 0..5 {
        let value = i.to_string();
        p.send(
            FutureRecord::<(), _>::to(&topic)
                .partition(0)
                .payload(&value),
            Timeout::After(PATIENCE),
        )
        .await
        .expect("acknowledged");
    }
    let c = consumer(&ferry.kafka_bootstrap(), &group, &[]);
    c.subscribe(&[&topic]).unwrap();
    for expected in 0..2 {
        let m = tokio::time::timeout(PATIENCE, c.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!((m.partition(), m.offset()), (0, expected));
        if expected == 1 {
            c.commit_message(&m, CommitMode::Sync).unwrap();
        }
    }
    let lag = [
        format!("consumergroup=\"{group}\""),
        format!("topic=\"{topic}\""),
        "partition=\"0\"".to_owned(),
    ];
    let lag: Vec<&str> = lag.iter().map(String::as_str).collect();
    ferry.wait_for("kafka_consumergroup_lag", DEPTH_WAIT, |f| {
        f.metrics().contains(&format!(
            "kafka_consumergroup_lag{{consumergroup=\"{group}\""
        ))
    });
    let text = ferry.metrics();
    assert_eq!(sum_of(&text, "kafka_consumergroup_lag", &lag), 3.0);
    assert_eq!(
        sum_of(&text, "kafka_consumergroup_current_offset", &lag),
        2.0
    );
    assert_eq!(sum_of(&text, "kafka_consumergroup_lag_sum", &lag[..2]), 3.0);
    assert_eq!(
        sum_of(&text, "kafka_consumergroup_current_offset_sum", &lag[..2]),
        2.0
    );
    assert_eq!(
        sum_of(&text, "kafka_topic_partition_current_offset", &lag[1..]),
        5.0
    );
    assert_eq!(
        sum_of(&text, "kafka_topic_partition_oldest_offset", &lag[1..]),
        0.0
    );
    assert!(sum_of(&text, "kafka_topic_partitions", &lag[1..2]) >= 1.0);
    assert_eq!(sum_of(&text, "kafka_consumergroup_members", &lag[..1]), 1.0);

    let served = families(&text, "kafka_");
    let expected: BTreeMap<&str, BTreeSet<String>> = KAFKA_EXPORTER
        .iter()
        .map(|(name, labels)| (*name, labels.iter().map(|l| l.to_string()).collect()))
        .collect();
    for (name, family) in &served {
        let Some(labels) = expected.get(name.as_str()) else {
            panic!("{name} is not one of kafka_exporter's families");
        };
        assert_eq!(family.kind, "gauge", "{name}");
        assert_eq!(
            family.label_sets,
            BTreeSet::from([labels.clone()]),
            "{name}"
        );
    }
    let missing: Vec<&&str> = expected
        .keys()
        .filter(|n| !served.contains_key(**n))
        .collect();
    assert!(missing.is_empty(), "Ferry does not serve {missing:?}");
}
