//! Record batches larger than one store transaction, through librdkafka: a topic whose
//! `max.message.bytes` is raised takes records of 20 MiB and 99 MiB from an idempotent
//! producer with `acks=all`; each batch is kept once in a spill, and consumers read it back
//! byte for byte at its dense offset between small records (a 20 MiB batch with the default
//! `max.partition.fetch.bytes` of 1 MiB, as the first batch of a fetch may exceed it). A
//! batch above the topic's limit is still refused; DeleteRecords, retention and the topic's
//! deletion free the spills of the batches they delete. kafka-python produces and reads
//! one too (`tests/python/kafka_large.py`). Through the real `ferry run` process: a large
//! produce acknowledged before a kill -9 is read back whole after the restart, and one the
//! kill cut short leaves no record and no spill.

use crate::common::clients::{python_script, run};
use crate::common::daemon::{EXIT, Setup};
use crate::common::fronts::KafkaServer;
use crate::common::kafka::{PATIENCE, admin, admin_options, consumer, create_topic, producer};
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer, PurgeConfig};
use rdkafka::util::Timeout;
use rdkafka::{Message, Offset, TopicPartitionList};
use std::time::Instant;

const MIB: usize = 1024 * 1024;
/// The topics' `max.message.bytes`: the largest Ferry allows.
const TOPIC_LIMIT: &str = "134217728";

/// A value of `len` bytes that no shifted or truncated copy equals.
fn payload(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 24) as u8)
        .collect()
}

/// An idempotent producer (`acks=all`) whose own size limit lets large records through.
fn large_producer(bootstrap: &str) -> FutureProducer {
    producer(
        bootstrap,
        &[
            ("enable.idempotence", "true"),
            ("message.max.bytes", "1000000000"),
            ("linger.ms", "0"),
        ],
    )
}

/// Sends `value` to partition 0 of `topic`; returns its offset.
async fn send(p: &FutureProducer, topic: &str, value: &[u8]) -> i64 {
    let record = FutureRecord::to(topic).key("k").payload(value).partition(0);
    p.send(record, Timeout::After(PATIENCE))
        .await
        .expect("acknowledged")
        .offset
}

/// A consumer of partition 0 of `topic` from its beginning, with `settings`.
fn reader(bootstrap: &str, topic: &str, settings: &[(&str, &str)]) -> StreamConsumer {
    let c = consumer(bootstrap, "large", settings);
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    c
}

/// The next record `c` reads: its offset and value.
async fn next(c: &StreamConsumer) -> (i64, Vec<u8>) {
    let m = tokio::time::timeout(PATIENCE, c.recv())
        .await
        .expect("a record within the patience")
        .expect("a record");
    (m.offset(), m.payload().unwrap_or_default().to_vec())
}

/// Produces small, `size` bytes, small to a topic that allows it, checks their dense
/// offsets and that the large batch is kept in a spill, and reads the three back with
/// `settings`.
async fn round_trip(size: usize, consumer_settings: &[(&str, &str)]) {
    let broker = KafkaServer::start().await;
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "large", &[("max.message.bytes", TOPIC_LIMIT)]).await;
    let p = large_producer(&bootstrap);
    let value = payload(size, 1);
    assert_eq!(send(&p, "large", b"before").await, 0);
    let start = Instant::now();
    assert_eq!(send(&p, "large", &value).await, 1);
    let produced = start.elapsed();
    assert_eq!(send(&p, "large", b"after").await, 2);
    let spilled = broker.spilled_bytes().await;
    assert!(
        (size as i64..size as i64 + 1024).contains(&spilled),
        "the large batch alone is kept in a spill: {spilled} bytes"
    );

    let c = reader(&bootstrap, "large", consumer_settings);
    assert_eq!(next(&c).await, (0, b"before".to_vec()));
    let start = Instant::now();
    let (offset, got) = next(&c).await;
    println!(
        "{} MiB record: produced (acks=all) in {produced:?}, fetched in {:?}",
        size / MIB,
        start.elapsed()
    );
    assert_eq!((offset, got.len()), (1, size));
    assert!(got == value, "the record arrives whole and unchanged");
    assert_eq!(next(&c).await, (2, b"after".to_vec()));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_20_mib_record_is_produced_idempotently_and_read_back_whole_at_its_offset() {
    // librdkafka's default max.partition.fetch.bytes is 1 MiB: the batch comes as the
    // first of its fetch, which may exceed the limit.
    round_trip(20 * MIB, &[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_99_mib_record_fits_the_default_request_size_and_is_read_back_whole() {
    round_trip(99 * MIB, &[("receive.message.max.bytes", "250000000")]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_above_the_topics_max_message_bytes_is_refused() {
    let broker = KafkaServer::start().await;
    let bootstrap = broker.bootstrap();
    let limit = 16 * MIB;
    create_topic(
        &bootstrap,
        "capped",
        &[("max.message.bytes", &limit.to_string())],
    )
    .await;
    let p = producer(
        &bootstrap,
        &[("message.max.bytes", "1000000000"), ("linger.ms", "0")],
    );
    assert_eq!(send(&p, "capped", &payload(limit - MIB, 2)).await, 0);
    let refused = p
        .send(
            FutureRecord::to("capped")
                .key("k")
                .payload(&payload(limit + MIB, 3))
                .partition(0),
            Timeout::After(PATIENCE),
        )
        .await;
    match refused {
        Err((KafkaError::MessageProduction(RDKafkaErrorCode::MessageSizeTooLarge), _)) => {}
        other => panic!("a batch above max.message.bytes is refused, not {other:?}"),
    }
    let spilled = broker.spilled_bytes().await;
    assert!(
        spilled < limit as i64,
        "only the accepted batch is kept: {spilled} bytes"
    );
    let c = reader(&bootstrap, "capped", &[]);
    let (low, high) = c
        .fetch_watermarks("capped", 0, Timeout::After(PATIENCE))
        .unwrap();
    assert_eq!((low, high), (0, 1), "the refused batch took no offset");
    broker.stop().await;
}

/// A broker with a topic `name` (retention checked every 100 ms, topic `settings`) holding
/// a 6 MiB record at offset 0, with `timestamp`, and a small one at offset 1. Unless the
/// settings give the topic a retention (which may delete the large record before anything
/// can look at it: it failed so in CI once), the large one's spill is counted.
async fn broker_with_a_large_record(
    name: &str,
    settings: &[(&str, &str)],
    timestamp: i64,
) -> KafkaServer {
    let broker = KafkaServer::start_with(|c| c.retention_check_interval_ms = 100).await;
    let bootstrap = broker.bootstrap();
    let mut all = vec![("max.message.bytes", TOPIC_LIMIT)];
    all.extend_from_slice(settings);
    create_topic(&bootstrap, name, &all).await;
    let p = large_producer(&bootstrap);
    let large = payload(6 * MIB, 4);
    let record = FutureRecord::to(name)
        .key("k")
        .payload(&large)
        .partition(0)
        .timestamp(timestamp);
    let delivered = p.send(record, Timeout::After(PATIENCE)).await.unwrap();
    assert_eq!(delivered.offset, 0);
    assert_eq!(send(&p, name, b"small").await, 1);
    if settings.iter().all(|(key, _)| *key != "retention.ms") {
        assert!(broker.spilled_bytes().await >= large.len() as i64);
    }
    broker
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_past_a_large_batch_frees_its_spill() {
    let broker = broker_with_a_large_record("trimmed", &[], now_ms()).await;
    let mut before = TopicPartitionList::new();
    before
        .add_partition_offset("trimmed", 0, Offset::Offset(1))
        .unwrap();
    let deleted = admin(&broker.bootstrap())
        .delete_records(&before, &admin_options())
        .await
        .unwrap();
    let low = deleted.find_partition("trimmed", 0).unwrap();
    assert_eq!((low.offset(), low.error()), (Offset::Offset(1), Ok(())));
    broker.spills_hold(0).await;
    let c = reader(&broker.bootstrap(), "trimmed", &[]);
    assert_eq!(next(&c).await, (1, b"small".to_vec()));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_frees_the_spill_of_a_large_batch_it_deletes() {
    let two_hours_ago = now_ms() - 2 * 3_600_000;
    let broker =
        broker_with_a_large_record("aging", &[("retention.ms", "3600000")], two_hours_ago).await;
    broker.spills_hold(0).await;
    let c = reader(&broker.bootstrap(), "aging", &[]);
    assert_eq!(next(&c).await, (1, b"small".to_vec()));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_topic_frees_the_spills_of_its_large_batches() {
    let broker = broker_with_a_large_record("doomed", &[], now_ms()).await;
    let deleted = admin(&broker.bootstrap())
        .delete_topics(&["doomed"], &admin_options())
        .await
        .unwrap();
    assert!(deleted[0].is_ok(), "{deleted:?}");
    broker.spills_hold(0).await;
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_produce_survives_kill_9_once_acknowledged_and_leaves_nothing_when_cut_short() {
    const SPILLED: &str = "ferry_kafka_spilled_bytes_total";
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = Setup::shipped(dir.path()).start();
    let bootstrap = ferry.kafka_bootstrap();
    create_topic(&bootstrap, "big", &[("max.message.bytes", TOPIC_LIMIT)]).await;

    // Acknowledged before the kill.
    let kept = payload(20 * MIB, 5);
    let p = large_producer(&bootstrap);
    assert_eq!(send(&p, "big", &kept).await, 0);
    let kept_batch = ferry.metric(SPILLED, &[]);
    assert!(kept_batch >= kept.len() as f64);

    // Cut short: the kill strikes once 8 MB of a 96 MiB batch are in its spill.
    let cut = p.clone();
    let sending = tokio::spawn(async move {
        let value = payload(96 * MIB, 6);
        let record = FutureRecord::to("big")
            .key("k")
            .payload(&value)
            .partition(0);
        cut.send(record, Timeout::After(PATIENCE)).await.map(|_| ())
    });
    ferry.wait_for("8 MB of the batch written to its spill", PATIENCE, |f| {
        f.metric(SPILLED, &[]) >= kept_batch + 8e6
    });
    ferry.kill();
    sending.abort();
    // The producer must not send the batch again to the restarted daemon.
    p.purge(PurgeConfig::default().queue().inflight());
    drop(p);

    ferry.restart();
    let c = reader(&bootstrap, "big", &[]);
    let (offset, got) = next(&c).await;
    assert_eq!((offset, got.len()), (0, kept.len()));
    assert!(got == kept, "the acknowledged record is read back whole");
    let (low, high) = c
        .fetch_watermarks("big", 0, Timeout::After(PATIENCE))
        .unwrap();
    assert_eq!((low, high), (0, 1), "no part of the cut batch is visible");
    ferry.wait_for("the cut batch's spill collected", PATIENCE, |f| {
        f.metric("ferry_stage_spill_bytes", &[]) == kept_batch
    });
    ferry.signal(libc::SIGTERM);
    assert!(ferry.wait_exit(EXIT).status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_produces_and_reads_back_a_20_mib_record() {
    let broker = KafkaServer::start().await;
    let script = python_script("kafka_large.py");
    let out = run(
        "python3",
        &[&script, &broker.bootstrap(), "py-large", "20"],
        b"",
    )
    .await;
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        format!("[[0, 5, true], [1, {}, true], [2, 4, true]]", 20 * MIB),
        "each record read back whole at its dense offset"
    );
    broker.stop().await;
}
