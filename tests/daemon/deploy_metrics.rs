//! The dashboard, the alert rules and every other file under `deploy/` use only metric
//! names Ferry really exports (those in `ferry_telemetry::all()`), the Grafana
//! dashboard is valid JSON and charts the security metrics (TLS handshake failures, failed
//! logins, certificate expiry), and `docs/operations.md` lists exactly the exported metrics.

use ferry_telemetry::{self as telemetry, names::Kind};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// Suffixes Prometheus adds to a histogram's name.
const HISTOGRAM_SUFFIXES: &[&str] = &["_bucket", "_sum", "_count"];

pub(crate) fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy")
}

/// Every file below `dir`.
pub(crate) fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(files_below(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Every `ferry_[a-z0-9_]+` token in `text` that is not the tail of a longer identifier.
fn metric_tokens(text: &str) -> BTreeSet<&str> {
    let is_ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = text.as_bytes();
    text.match_indices("ferry_")
        .filter(|&(start, _)| start == 0 || !is_ident(bytes[start - 1]))
        .map(|(start, _)| {
            let len = bytes[start..]
                .iter()
                .take_while(|&&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
                .count();
            &text[start..start + len]
        })
        .collect()
}

/// `token` without a histogram suffix, when that names a histogram.
fn exported_name(token: &str) -> &str {
    HISTOGRAM_SUFFIXES
        .iter()
        .filter_map(|suffix| token.strip_suffix(suffix))
        .find(|base| {
            telemetry::all().any(|m| m.name == *base && matches!(m.kind, Kind::Histogram(_)))
        })
        .unwrap_or(token)
}

#[test]
fn deploy_files_use_only_exported_metric_names() {
    let known: BTreeSet<&str> = telemetry::all().map(|m| m.name).collect();
    let mut unknown = Vec::new();
    let mut used = BTreeSet::new();
    for file in files_below(&deploy_dir()) {
        let text = fs::read_to_string(&file).unwrap();
        for token in metric_tokens(&text) {
            if let Some(&name) = known.get(exported_name(token)) {
                used.insert(name);
            } else {
                unknown.push(format!("{}: {token}", file.display()));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "not exported by ferry (telemetry::all):\n{}",
        unknown.join("\n")
    );
    assert!(!used.is_empty(), "no metric names found under deploy/");
}

#[test]
fn dashboard_is_json_with_queries() {
    let queries = dashboard_queries();
    assert!(queries.len() >= 10, "{queries:?}");
    assert!(
        queries.iter().all(|q| !metric_tokens(q).is_empty()),
        "{queries:?}"
    );
}

#[test]
fn dashboard_charts_tls_failures_login_failures_and_certificate_expiry() {
    let queries = dashboard_queries();
    for metric in [
        ferry_telemetry::tls::HANDSHAKE_FAILURES_TOTAL,
        ferry_telemetry::auth::FAILURES_TOTAL,
        ferry_telemetry::tls::CERTIFICATE_NOT_AFTER,
    ] {
        assert!(
            queries.iter().any(|q| metric_tokens(q).contains(metric)),
            "no dashboard query charts {metric}"
        );
    }
}

/// The query of every target of every panel of the shipped Grafana dashboard.
fn dashboard_queries() -> Vec<String> {
    let path = deploy_dir().join("grafana/ferry-dashboard.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|panel| panel["targets"].as_array())
        .flatten()
        .filter_map(|target| target["expr"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn histogram_suffixes_are_stripped_only_from_histograms() {
    assert_eq!(
        exported_name("ferry_store_commit_seconds_bucket"),
        "ferry_store_commit_seconds"
    );
    assert_eq!(
        exported_name("ferry_store_commits_total_count"),
        "ferry_store_commits_total_count"
    );
    assert_eq!(
        metric_tokens("rate(ferry_store_up[5m]) x_ferry_no"),
        BTreeSet::from(["ferry_store_up"])
    );
}

#[test]
fn operations_doc_lists_exactly_the_exported_metrics() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/operations.md");
    let text = fs::read_to_string(path).unwrap();
    let documented: BTreeSet<&str> = metric_tokens(&text)
        .into_iter()
        .map(exported_name)
        .collect();
    let exported: BTreeSet<&str> = telemetry::all().map(|m| m.name).collect();
    assert_eq!(documented, exported);
}

/// Issue 33: `ferry_stage_dequeue_requests_total` was exported without a `# HELP` line, as
/// its name was declared but missing from [`telemetry::all`], the list `describe_all`
/// registers and `docs/operations.md` is checked against. Every `ferry_` name declared in
/// `crates/telemetry/src/` must be on that list.
#[test]
fn every_declared_metric_name_has_help_and_an_entry() {
    let known: BTreeSet<&str> = telemetry::all().map(|m| m.name).collect();
    let declared =
        regex::Regex::new(r#"pub const [A-Z0-9_]+: &str = "(ferry_[a-z0-9_]+)";"#).unwrap();
    let mut missing = Vec::new();
    let mut count = 0;
    for file in files_below(&Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/telemetry/src")) {
        let text = fs::read_to_string(&file).unwrap();
        for name in declared.captures_iter(&text).map(|c| c[1].to_owned()) {
            count += 1;
            if !known.contains(name.as_str()) {
                missing.push(format!("{}: {name}", file.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "declared but not in telemetry::all:\n{}",
        missing.join("\n")
    );
    assert!(count > 0, "no metric name found in crates/telemetry/src");
}

/// Issue 33: labelled counters appeared only after their first event, so an alert on
/// `increase(...) > 0` missed the first event after a restart (a series born at 1 has no
/// increase). Every counter an alert rule watches is exported by a daemon that has just
/// started (with TLS files and a route, so each has its known labels), before anything
/// happened.
#[test]
fn every_counter_the_alerts_watch_is_exported_from_the_start() {
    let rules = fs::read_to_string(deploy_dir().join("prometheus/ferry-alerts.yml")).unwrap();
    let watched: BTreeSet<&str> = metric_tokens(&rules)
        .into_iter()
        .filter(|name| name.ends_with("_total"))
        .collect();
    assert!(watched.len() >= 5, "{watched:?}");
    let dir = tempfile::tempdir().unwrap();
    let tls = crate::common::tls::TlsFiles::new(dir.path());
    let route = "[[routes]]\nname = \"alerted\"\nfrom = { kafka_topic = \"alerted-in\" }\n\
                 to = [{ amqp_exchange = \"amq.topic\" }]\n";
    let mut setup = crate::common::daemon::Setup::shipped_with(dir.path(), route);
    for (name, value) in tls.env() {
        setup = setup.env(&name, &value);
    }
    let daemon = setup.start();
    let missing = |metrics: &str| -> Vec<&str> {
        watched
            .iter()
            .copied()
            .filter(|name| {
                !metrics.lines().any(|line| {
                    line.strip_prefix(name)
                        .is_some_and(|rest| rest.starts_with(['{', ' ']))
                })
            })
            .collect()
    };
    // Stage series come with the first refresh of the stage gauges, a moment after start.
    let settled = crate::common::wait::try_until_blocking(STAGE_REFRESH, || {
        missing(&daemon.metrics()).is_empty().then_some(())
    });
    let metrics = daemon.metrics();
    assert!(settled.is_some(), "not exported: {:?}", missing(&metrics));
    assert!(
        metrics.contains("ferry_amqp_errors_total{code=\"541\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ferry_bridge_dead_letters_total{route=\"alerted\""),
        "{metrics}"
    );
}

/// How long the first refresh of the stage gauges may take after start.
const STAGE_REFRESH: std::time::Duration = std::time::Duration::from_secs(15);

/// Issue 33: a queue's, a topic's and a stored consumer group's counters are exported at 0
/// once they exist on an instance — declared or created, and loaded again after a restart —
/// so the dashboard's `rate(...)` and an alert's `increase(...)` see their first event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queues_and_a_topics_counters_are_exported_at_zero_before_their_first_message() {
    use crate::common::{amqp, kafka};
    use lapin::types::{AMQPValue, FieldTable};
    use rdkafka::consumer::Consumer;
    let dir = tempfile::tempdir().unwrap();
    let mut daemon = crate::common::daemon::Setup::shipped(dir.path()).start();
    let (_conn, ch) = amqp::channel(&daemon.amqp_uri()).await;
    let mut args = FieldTable::default();
    args.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString("amq.fanout".into()),
    );
    amqp::declare(&ch, "counted", args).await;
    kafka::create_topic(&daemon.kafka_bootstrap(), "counted-topic", &[]).await;
    kafka::create_topic(
        &daemon.kafka_bootstrap(),
        "counted-compacted",
        &[("cleanup.policy", "compact")],
    )
    .await;
    // A group in the store: it joined (one rebalance) and committed before the restart.
    kafka::create_topic(&daemon.kafka_bootstrap(), "grouped", &[]).await;
    let producer = kafka::producer(&daemon.kafka_bootstrap(), &[]);
    kafka::send_range(&producer, "grouped", 0, 1).await;
    let consumer = kafka::consumer(
        &daemon.kafka_bootstrap(),
        "counted-group",
        &[("auto.offset.reset", "earliest")],
    );
    consumer.subscribe(&["grouped"]).unwrap();
    let record = tokio::time::timeout(std::time::Duration::from_secs(30), consumer.recv())
        .await
        .expect("a record within 30 s")
        .unwrap();
    consumer
        .commit_message(&record, rdkafka::consumer::CommitMode::Sync)
        .unwrap();
    drop(record);
    drop(consumer);
    let expected = [
        "ferry_amqp_published_total{vhost=\"/\",queue=\"counted\"} 0",
        "ferry_amqp_delivered_total{vhost=\"/\",queue=\"counted\"} 0",
        "ferry_amqp_acks_total{vhost=\"/\",queue=\"counted\"} 0",
        "ferry_amqp_dead_lettered_total{vhost=\"/\",queue=\"counted\",reason=\"expired\"} 0",
        "ferry_kafka_produced_records_total{topic=\"counted-topic\"} 0",
        "ferry_kafka_fetched_records_total{topic=\"counted-topic\"} 0",
        "ferry_kafka_compaction_passes_total{topic=\"counted-compacted\"} 0",
        "ferry_amqp_confirms_total{vhost=\"/\",outcome=\"ack\"} 0",
        "ferry_amqp_returns_total{vhost=\"/\"} 0",
        "ferry_kafka_requests_total{api=\"DeleteRecords\",code=\"0\"} 0",
    ];
    let missing = |metrics: &str| -> Vec<&str> {
        expected
            .iter()
            .copied()
            .filter(|line| !metrics.lines().any(|l| l == *line))
            .collect()
    };
    for moment in ["after the declarations", "after a restart"] {
        if moment == "after a restart" {
            // The stored group's counter comes with the first lag pass after the start.
            daemon.wait_for("the group's rebalance counter", LAG_PASS, |d| {
                d.metrics()
                    .lines()
                    .any(|l| l == "ferry_kafka_group_rebalances_total{group=\"counted-group\"} 0")
            });
        }
        let metrics = daemon.metrics();
        assert!(
            missing(&metrics).is_empty(),
            "{moment}, not exported at 0: {:?}",
            missing(&metrics)
        );
        assert!(
            !metrics.contains("ferry_kafka_compaction_passes_total{topic=\"counted-topic\"}"),
            "a topic that is not compacted has no compaction counters"
        );
        daemon.kill_and_restart();
    }
}

/// How long the first lag pass (which exports the stored groups' counters) may take after a
/// start.
const LAG_PASS: std::time::Duration = std::time::Duration::from_secs(15);
