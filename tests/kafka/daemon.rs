//! The Kafka front of the real `ferry` process: killed with SIGKILL while an idempotent
//! producer writes with acks=all, after a restart every acknowledged record is readable at
//! the offset it was acknowledged with and none is stored twice (the batches the producer
//! resends after the crash are recognised by their sequence numbers); and its Kafka
//! metrics on `/metrics`.

use crate::common::daemon::{Daemon, EXIT, Setup};
use crate::common::kafka::{PATIENCE, client_config, consumer};
use crate::common::wait;
use rdkafka::Message;
use rdkafka::TopicPartitionList;
use rdkafka::consumer::Consumer;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Records the producer tries to write.
const RECORDS: usize = 3000;
/// Records sent concurrently.
const WAVE: usize = 50;

/// `ferry run` with groups formed at once and its store in `dir`.
fn start(dir: &Path) -> Daemon {
    Setup::shipped(dir)
        .env("FERRY__KAFKA__GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
        .start()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_records_survive_kill_9_at_their_offsets_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = start(dir.path());
    let bootstrap = ferry.kafka_bootstrap();

    let producer: Arc<FutureProducer> = Arc::new(
        client_config(
            &bootstrap,
            &[
                ("acks", "all"),
                ("enable.idempotence", "true"),
                ("linger.ms", "2"),
                ("message.timeout.ms", "60000"),
                ("reconnect.backoff.max.ms", "200"),
            ],
        )
        .create()
        .unwrap(),
    );
    let acked = Arc::new(AtomicUsize::new(0));
    let (sender, counter) = (producer.clone(), acked.clone());
    let send = move |i: usize| {
        let (producer, acked) = (sender.clone(), counter.clone());
        async move {
            let value = format!("record-{i}");
            let outcome = producer
                .send(
                    FutureRecord::<(), _>::to("durable").payload(value.as_bytes()),
                    Timeout::After(Duration::from_secs(60)),
                )
                .await;
            if outcome.is_ok() {
                acked.fetch_add(1, Ordering::Relaxed);
            }
            outcome.ok().map(|d| (d.offset, value))
        }
    };
    // Waves of 50 concurrent sends keep records in flight until the end, across the crash.
    let writer = tokio::spawn(async move {
        let mut results = Vec::with_capacity(RECORDS);
        for wave in (0..RECORDS).collect::<Vec<_>>().chunks(WAVE) {
            results.extend(futures::future::join_all(wave.iter().map(|&i| send(i))).await);
        }
        results
    });

    // Kill the daemon once some records are acknowledged and more are in flight.
    wait::until(
        "a quarter of the records acknowledged",
        PATIENCE,
        async || (acked.load(Ordering::Relaxed) >= RECORDS / 4).then_some(()),
    )
    .await;
    ferry.kill();
    let acked_before_kill = acked.load(Ordering::Relaxed);
    assert!(
        acked_before_kill < RECORDS,
        "the kill came while records were in flight"
    );

    ferry.restart();
    let acknowledged: BTreeMap<i64, String> = writer.await.unwrap().into_iter().flatten().collect();
    assert!(acknowledged.len() >= acked_before_kill);

    // Read the whole partition back.
    let c = consumer(&bootstrap, "verifier", &[]);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("durable", 0, rdkafka::Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let (_, end) = c
        .fetch_watermarks("durable", 0, Timeout::After(PATIENCE))
        .unwrap();
    let high = end - 1;
    assert!(high >= *acknowledged.keys().last().unwrap());
    let mut stored: BTreeMap<i64, String> = BTreeMap::new();
    let mut values_seen: BTreeMap<String, i64> = BTreeMap::new();
    while stored.keys().last().is_none_or(|last| *last < high) {
        let m = tokio::time::timeout(PATIENCE, c.recv())
            .await
            .expect("the whole log within the patience")
            .expect("a record");
        let value = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
        if let Some(earlier) = values_seen.insert(value.clone(), m.offset()) {
            panic!("{value} stored twice, at {earlier} and {}", m.offset());
        }
        stored.insert(m.offset(), value);
    }
    for (offset, value) in &acknowledged {
        assert_eq!(stored.get(offset), Some(value), "acknowledged at {offset}");
    }
    ferry.signal(libc::SIGTERM);
    assert!(ferry.wait_exit(EXIT).status.success());
}

/// The value of the sample `series` (name and labels as Prometheus prints them).
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_exports_kafka_requests_traffic_offsets_groups_and_lag() {
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = start(dir.path());
    let bootstrap = ferry.kafka_bootstrap();
    let p: FutureProducer = client_config(&bootstrap, &[("acks", "all")])
        .create()
        .unwrap();
    for i in 0..10 {
        p.send(
            FutureRecord::<(), _>::to("metered").payload(format!("{i}").as_bytes()),
            Timeout::After(PATIENCE),
        )
        .await
        .unwrap();
    }
    let c = consumer(&bootstrap, "meter", &[]);
    c.subscribe(&["metered"]).unwrap();
    for _ in 0..4 {
        tokio::time::timeout(PATIENCE, c.recv())
            .await
            .unwrap()
            .unwrap();
    }
    let mut done = TopicPartitionList::new();
    done.add_partition_offset("metered", 0, rdkafka::Offset::Offset(4))
        .unwrap();
    c.commit(&done, rdkafka::consumer::CommitMode::Sync)
        .unwrap();

    // Lag is measured every few seconds; wait for it, then read everything once.
    let lag = r#"ferry_kafka_group_lag{group="meter",topic="metered",partition="0"}"#;
    let metrics = wait::until("the lag gauge", PATIENCE, async || {
        let body = ferry.metrics();
        sample(&body, lag).is_some().then_some(body)
    })
    .await;
    assert_eq!(sample(&metrics, lag), Some(6.0), "10 records, 4 committed");
    for (series, at_least) in [
        (r#"ferry_kafka_requests_total{api="Produce",code="0"}"#, 1.0),
        (r#"ferry_kafka_requests_total{api="Fetch",code="0"}"#, 1.0),
        (
            r#"ferry_kafka_requests_total{api="JoinGroup",code="0"}"#,
            1.0,
        ),
        (r#"ferry_kafka_request_seconds_count{api="Produce"}"#, 1.0),
        (
            r#"ferry_kafka_produced_records_total{topic="metered"}"#,
            10.0,
        ),
        (
            r#"ferry_kafka_fetched_records_total{topic="metered"}"#,
            10.0,
        ),
        (
            r#"ferry_kafka_partition_high_watermark{topic="metered",partition="0"}"#,
            10.0,
        ),
        (r#"ferry_kafka_group_members{group="meter"}"#, 1.0),
        ("ferry_kafka_sequencers", 1.0),
        ("ferry_kafka_connections", 1.0),
    ] {
        let value =
            sample(&metrics, series).unwrap_or_else(|| panic!("{series} missing:\n{metrics}"));
        assert!(value >= at_least, "{series} is {value}");
    }
    drop(c);
    ferry.signal(libc::SIGTERM);
    assert!(ferry.wait_exit(EXIT).status.success());
}
