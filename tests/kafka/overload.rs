//! The Kafka front under overload. While the memory high-water mark is exceeded, producers
//! are throttled as Kafka's quotas throttle them (KIP-219): every produce answer carries
//! `throttle_time_ms` and the connection is not read that long, while the records are still
//! taken; librdkafka sees the throttle. Once memory is back under the mark, nothing is
//! throttled. A connection that sends nothing, or whose client reads none of its answers,
//! for `kafka.connections_max_idle_ms` is closed and counted by reason; one that pipelines
//! Fetch requests makes Ferry compute one answer at a time, each once the one before is
//! written. The daemon raises the alarm, logs it and shows it in its metrics above
//! `daemon.max_memory_mb`.

use crate::common::daemon::{Daemon, Setup};
use crate::common::fronts::KafkaServer;
use crate::common::kafka::raw::{Raw, batch};
use crate::common::kafka::{PATIENCE, client_config};
use crate::common::sockets::Ending;
use crate::raw::{create_topic, fetch_request, produce_answer};
use bytes::Bytes;
use ferry_kafka::PRODUCE_THROTTLE;
use kafka_protocol::messages::{ApiKey, FetchResponse, ResponseHeader};
use kafka_protocol::protocol::Decodable;
use rdkafka::ClientContext;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::statistics::Statistics;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_are_throttled_while_memory_is_above_the_mark_and_their_records_taken() {
    let server = KafkaServer::start().await;
    let mut raw = Raw::connect(server.addr).await;
    create_topic(&mut raw, "flood").await;

    server.memory_alarm(Some(
        "900 MiB resident memory exceeds daemon.max_memory_mb (800)",
    ));
    let sent = Instant::now();
    let first = produce_answer(&mut raw, "flood", batch(&["a"])).await;
    assert_eq!(
        i64::from(first.throttle_time_ms),
        PRODUCE_THROTTLE.as_millis() as i64
    );
    let taken = &first.responses[0].partition_responses[0];
    assert_eq!((taken.error_code, taken.base_offset), (0, 0));
    // Muted: the next request is read only once the throttle has passed.
    let second = produce_answer(&mut raw, "flood", batch(&["b"])).await;
    assert!(sent.elapsed() >= PRODUCE_THROTTLE, "{:?}", sent.elapsed());
    assert_eq!(second.responses[0].partition_responses[0].base_offset, 1);

    server.memory_alarm(None);
    let third = produce_answer(&mut raw, "flood", batch(&["c"])).await;
    assert_eq!(third.throttle_time_ms, 0);
    assert_eq!(third.responses[0].partition_responses[0].base_offset, 2);
    server.stop().await;
}

/// The largest broker throttle librdkafka's statistics reported.
struct ThrottleSeen(Arc<AtomicI64>);

impl ClientContext for ThrottleSeen {
    fn stats(&self, statistics: Statistics) {
        for broker in statistics.brokers.values() {
            if let Some(throttle) = &broker.throttle {
                self.0.fetch_max(throttle.max, Ordering::SeqCst);
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_sees_the_throttle_and_its_records_are_delivered() {
    let server = KafkaServer::start().await;
    server.memory_alarm(Some(
        "900 MiB resident memory exceeds daemon.max_memory_mb (800)",
    ));
    let seen = Arc::new(AtomicI64::new(0));
    let producer: FutureProducer<ThrottleSeen> = client_config(
        &server.bootstrap(),
        &[("acks", "all"), ("statistics.interval.ms", "100")],
    )
    .create_with_context(ThrottleSeen(seen.clone()))
    .unwrap();
    for i in 0..5 {
        let value = format!("v{i}");
        let delivered = producer
            .send(
                FutureRecord::<(), _>::to("throttled").payload(&value),
                PATIENCE,
            )
            .await;
        assert!(delivered.is_ok(), "{delivered:?}");
    }
    let deadline = Instant::now() + PATIENCE;
    while seen.load(Ordering::SeqCst) < PRODUCE_THROTTLE.as_millis() as i64 {
        assert!(Instant::now() < deadline, "librdkafka reported no throttle");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.stop().await;
}

/// `ferry run` with a short idle limit.
fn idle_limited(dir: &std::path::Path) -> Daemon {
    Setup::shipped(dir)
        .env("FERRY__KAFKA__CONNECTIONS_MAX_IDLE_MS", "500")
        .start()
}

fn addr(ferry: &Daemon) -> SocketAddr {
    ferry.kafka_bootstrap().parse().unwrap()
}

/// Connections Ferry closed for `reason`.
fn refused(ferry: &Daemon, reason: &str) -> f64 {
    ferry.metric(
        "ferry_kafka_connections_refused_total",
        &[&format!("reason=\"{reason}\"")],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_connection_is_closed_after_the_idle_limit() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = idle_limited(dir.path());
    let mut silent = Raw::connect(addr(&ferry)).await;
    assert!(silent.is_closed().await);
    ferry.wait_for("the idle close counted", PATIENCE, |f| {
        refused(f, "idle") >= 1.0
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_no_answers_is_disconnected_and_others_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = idle_limited(dir.path());
    let mut raw = Raw::connect(addr(&ferry)).await;
    create_topic(&mut raw, "big").await;
    let value = "x".repeat(900_000);
    for _ in 0..4 {
        let answer = produce_answer(&mut raw, "big", batch(&[value.as_str()])).await;
        assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    }
    // Fetches answered with megabytes each, far more than the sockets' buffers hold,
    // and never read.
    let request = fetch_request(&[("big", 0)], 4 << 20, 4 << 20);
    for _ in 0..10 {
        raw.send(ApiKey::Fetch, 12, &request).await;
    }
    ferry.wait_for("the unread connection closed", PATIENCE, |f| {
        refused(f, "unread") >= 1.0
    });
    // What was sent before is there to read; then the reset that dropped what the client
    // never read (a FIN queued behind those bytes would never reach it).
    assert_eq!(raw.ending().await, Ending::Reset);
    // Another client is served as before.
    let mut other = Raw::connect(addr(&ferry)).await;
    let answer = produce_answer(&mut other, "big", batch(&["after"])).await;
    assert_eq!(answer.responses[0].partition_responses[0].base_offset, 4);
}

/// A Fetch answer (v12) as read: its correlation id and body.
fn fetch_answer(mut frame: Bytes) -> (i32, FetchResponse) {
    let header =
        ResponseHeader::decode(&mut frame, ApiKey::Fetch.response_header_version(12)).unwrap();
    (
        header.correlation_id,
        FetchResponse::decode(&mut frame, 12).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_fetches_are_answered_one_at_a_time_each_once_the_one_before_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped(dir.path()).start();
    let mut producer = Raw::connect(addr(&ferry)).await;
    create_topic(&mut producer, "held").await;
    // 10.8 MB: one answer holding them all is more than the sockets' buffers take.
    let value = "x".repeat(900_000);
    for _ in 0..12 {
        let answer = produce_answer(&mut producer, "held", batch(&[value.as_str()])).await;
        assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    }
    // Two Fetch requests back to back, none of whose answers is read yet.
    let mut fetcher = Raw::connect(addr(&ferry)).await;
    fetcher
        .send(
            ApiKey::Fetch,
            12,
            &fetch_request(&[("held", 0)], 16 << 20, 16 << 20),
        )
        .await;
    fetcher
        .send(ApiKey::Fetch, 12, &fetch_request(&[("held", 11)], 1, 1))
        .await;
    // The first answer is made (its records are counted) and cannot be written whole.
    ferry.wait_for("the first answer", PATIENCE, |f| {
        f.metric("ferry_kafka_fetched_records_total", &["topic=\"held\""]) >= 12.0
    });
    let late = produce_answer(&mut producer, "held", batch(&["late"])).await;
    assert_eq!(late.responses[0].partition_responses[0].base_offset, 12);
    // The second answer was made only once the first was written, which took this client's
    // reading: it knows of the record produced in between.
    let (first_id, first) = fetch_answer(fetcher.read_frame().await.unwrap());
    let (second_id, second) = fetch_answer(fetcher.read_frame().await.unwrap());
    assert_eq!((first_id, second_id), (1, 2));
    assert_eq!(first.responses[0].partitions[0].high_watermark, 12);
    assert_eq!(second.responses[0].partitions[0].high_watermark, 13);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_raises_the_memory_alarm_above_daemon_max_memory_mb() {
    let dir = tempfile::tempdir().unwrap();
    // One mebibyte: the process is above it from the start.
    let ferry = Setup::shipped(dir.path())
        .env("FERRY__DAEMON__MAX_MEMORY_MB", "1")
        .start();
    ferry.wait_for("the memory alarm", PATIENCE, |f| {
        f.metric("ferry_memory_alarm", &[]) == 1.0
    });
    assert_eq!(ferry.metric("ferry_memory_limit_bytes", &[]), 1048576.0);
    assert_eq!(
        ferry.metric("rabbitmq_resident_memory_limit_bytes", &[]),
        1048576.0
    );
    let log = ferry.log();
    assert!(
        log.contains("memory alarm raised") && log.contains("daemon.max_memory_mb (1)"),
        "{log}"
    );
    assert!(
        log.contains("daemon.max_memory_mb: 1 is below store.cache_mb (256)"),
        "{log}"
    );
    let mut raw = Raw::connect(addr(&ferry)).await;
    create_topic(&mut raw, "flood").await;
    let answer = produce_answer(&mut raw, "flood", batch(&["a"])).await;
    assert_eq!(
        i64::from(answer.throttle_time_ms),
        PRODUCE_THROTTLE.as_millis() as i64
    );
}
