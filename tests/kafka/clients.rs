//! librdkafka (through rdkafka) against Ferry's Kafka front: producing with acks=all,
//! idempotence and every compression codec; consuming what was produced with keys,
//! values, headers and timestamps intact; a consumer woken by a long poll.

use crate::common::fronts::KafkaServer;
use crate::common::kafka::{PATIENCE, consumer, producer};
use rdkafka::Message;
use rdkafka::TopicPartitionList;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use std::time::Duration;

/// Sends `n` records `key-i` → `value-i` with a header `i`, waiting for each
/// acknowledgement; returns the (partition, offset) of each.
async fn send(producer: &FutureProducer, topic: &str, n: usize) -> Vec<(i32, i64)> {
    let sends = (0..n).map(|i| async move {
        let (key, value) = (format!("key-{i}"), format!("value-{i}"));
        let headers = OwnedHeaders::new().insert(Header {
            key: "i",
            value: Some(i.to_string().as_bytes()),
        });
        let record = FutureRecord::to(topic)
            .key(key.as_bytes())
            .payload(value.as_bytes())
            .timestamp(1_700_000_000_000 + i as i64)
            .headers(headers);
        let delivery = producer
            .send(record, Timeout::After(PATIENCE))
            .await
            .expect("acknowledged");
        (delivery.partition, delivery.offset)
    });
    // join_all polls in order, so records are handed to librdkafka in index order.
    futures::future::join_all(sends).await
}

/// Reads `n` records of partition 0 of `topic` from offset 0 with an assigned consumer.
async fn read(
    consumer: &StreamConsumer,
    topic: &str,
    n: usize,
) -> Vec<(i64, String, String, String, i64)> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, rdkafka::Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let m = tokio::time::timeout(PATIENCE, consumer.recv())
            .await
            .expect("a record within the patience")
            .expect("a record");
        let header = m
            .headers()
            .and_then(|h| h.iter().find(|h| h.key == "i"))
            .and_then(|h| h.value)
            .map(|v| String::from_utf8(v.to_vec()).unwrap())
            .unwrap_or_default();
        out.push((
            m.offset(),
            String::from_utf8(m.key().unwrap().to_vec()).unwrap(),
            String::from_utf8(m.payload().unwrap().to_vec()).unwrap(),
            header,
            m.timestamp().to_millis().unwrap(),
        ));
    }
    out
}

/// What [`send`] sends, as [`read`] returns it.
fn expected(n: usize) -> Vec<(i64, String, String, String, i64)> {
    (0..n)
        .map(|i| {
            (
                i as i64,
                format!("key-{i}"),
                format!("value-{i}"),
                i.to_string(),
                1_700_000_000_000 + i as i64,
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_all_records_get_dense_offsets_and_read_back_intact() {
    let broker = KafkaServer::start().await;
    let p = producer(&broker.bootstrap(), &[("enable.idempotence", "false")]);
    let acks = send(&p, "orders", 50).await;
    let mut offsets: Vec<i64> = acks.iter().map(|(_, o)| *o).collect();
    offsets.sort_unstable();
    assert_eq!(offsets, (0..50).collect::<Vec<_>>());
    assert!(acks.iter().all(|(p, _)| *p == 0));
    let c = consumer(&broker.bootstrap(), "reader", &[]);
    assert_eq!(read(&c, "orders", 50).await, expected(50));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_producer_records_are_stored_once_in_order() {
    let broker = KafkaServer::start().await;
    let p = producer(
        &broker.bootstrap(),
        &[
            ("enable.idempotence", "true"),
            ("max.in.flight.requests.per.connection", "5"),
        ],
    );
    let acks = send(&p, "idem", 200).await;
    let offsets: Vec<i64> = acks.iter().map(|(_, o)| *o).collect();
    assert_eq!(
        offsets,
        (0..200).collect::<Vec<_>>(),
        "idempotence keeps send order"
    );
    let c = consumer(&broker.bootstrap(), "reader", &[]);
    assert_eq!(read(&c, "idem", 200).await, expected(200));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_compression_codec_is_kept_and_read_back() {
    let broker = KafkaServer::start().await;
    for codec in ["gzip", "snappy", "lz4", "zstd"] {
        let topic = format!("compressed-{codec}");
        let p = producer(
            &broker.bootstrap(),
            &[("compression.codec", codec), ("linger.ms", "20")],
        );
        send(&p, &topic, 30).await;
        let c = consumer(&broker.bootstrap(), "reader", &[]);
        assert_eq!(read(&c, &topic, 30).await, expected(30), "{codec}");
    }
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_consumer_is_woken_by_a_new_record() {
    let broker = KafkaServer::start().await;
    let p = producer(&broker.bootstrap(), &[]);
    send(&p, "wake", 1).await;
    // A long max wait: only the high-watermark watch can answer the fetch early.
    let c = consumer(
        &broker.bootstrap(),
        "waker",
        &[("fetch.wait.max.ms", "60000")],
    );
    let first = read(&c, "wake", 1).await;
    assert_eq!(first[0].0, 0);
    let next = tokio::spawn(async move {
        let m = tokio::time::timeout(PATIENCE, c.recv())
            .await
            .expect("woken within the patience")
            .expect("a record");
        (m.offset(), m.payload().map(|v| v.to_vec()))
    });
    // Give the consumer time to park its fetch on the watch before producing: nothing a
    // client sees says the fetch is parked, so this wait is the test's premise, not a
    // condition to poll.
    tokio::time::sleep(Duration::from_millis(500)).await;
    p.send(
        FutureRecord::to("wake").key("k").payload("late"),
        Timeout::After(PATIENCE),
    )
    .await
    .unwrap();
    assert_eq!(next.await.unwrap(), (1, Some(b"late".to_vec())));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_are_stored_once_despite_unknown_commit_results() {
    let broker = KafkaServer::start().await;
    // One record per request, so many appends meet the injected faults.
    let p = producer(
        &broker.bootstrap(),
        &[
            ("enable.idempotence", "false"),
            ("linger.ms", "0"),
            ("batch.num.messages", "1"),
        ],
    );
    send(&p, "faulty", 1).await;
    // From now on a third of the commits that apply report an unknown result, and some
    // commits fail as conflicts: appends and sequencer transactions are retried.
    let faults = broker
        .db
        .faults()
        .expect("the embedded engine injects faults");
    faults.set_unknown_result_rate(0.3);
    faults.set_conflict_rate(0.1);
    let acks = send(&p, "faulty", 300).await;
    faults.set_unknown_result_rate(0.0);
    faults.set_conflict_rate(0.0);
    let mut offsets: Vec<i64> = acks.iter().map(|(_, o)| *o).collect();
    offsets.sort_unstable();
    assert_eq!(
        offsets,
        (1..=300).collect::<Vec<_>>(),
        "each record once, densely"
    );
    let c = consumer(&broker.bootstrap(), "reader", &[]);
    let read_back: Vec<String> = read(&c, "faulty", 301)
        .await
        .into_iter()
        .skip(1)
        .map(|r| r.2)
        .collect();
    let mut values = read_back.clone();
    values.sort();
    values.dedup();
    assert_eq!(values.len(), 300, "no value stored twice");
    assert_eq!(
        c.fetch_watermarks("faulty", 0, Timeout::After(PATIENCE))
            .unwrap()
            .1,
        301
    );
    broker.stop().await;
}
