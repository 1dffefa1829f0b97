//! What a topic's `message.timestamp.type` and `compression.type` do to what is appended
//! to it, and the old message formats of old clients, through real clients: librdkafka
//! (rdkafka) reads records of a `LogAppendTime` topic dated by the broker, whatever the
//! producer stamped; a topic's codec is the one its batches are stored with; kafka-python
//! told the broker is Kafka 0.9 or 0.10 (`tests/python/kafka_legacy.py`) produces with
//! Produce v1 and v2 (message formats v0 and v1, plain and gzip-wrapped), and what it sent
//! is read back with the timestamps each format and topic type give; kcat told the broker
//! is Kafka 0.8 produces with Produce v0.

use crate::common::clients::{kcat_consume, python_script, run};
use crate::common::fronts::KafkaServer;
use crate::common::kafka::raw::Raw;
use crate::common::kafka::{PATIENCE, consumer, create_topic, producer};
use crate::raw::fetch;
use rdkafka::consumer::Consumer;
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;
use rdkafka::{Message, Timestamp, TopicPartitionList};
use std::time::{SystemTime, UNIX_EPOCH};

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Produces `values` to `topic` with librdkafka (`settings` added), each stamped
/// `timestamp`, and reads them back from offset 0: (value, timestamp) of each.
async fn round_trip(
    bootstrap: &str,
    topic: &str,
    settings: &[(&str, &str)],
    values: &[&str],
    timestamp: i64,
) -> Vec<(String, Timestamp)> {
    let p = producer(bootstrap, settings);
    for v in values {
        let record = FutureRecord::<(), _>::to(topic)
            .payload(v.as_bytes())
            .timestamp(timestamp);
        p.send(record, Timeout::After(PATIENCE))
            .await
            .expect("acknowledged");
    }
    let c = consumer(bootstrap, &format!("{topic}-reader"), &[]);
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, rdkafka::Offset::Beginning)
        .unwrap();
    c.assign(&assignment).unwrap();
    let mut read = Vec::new();
    while read.len() < values.len() {
        let m = tokio::time::timeout(PATIENCE, c.recv())
            .await
            .expect("a record within the patience")
            .unwrap();
        let value = String::from_utf8(m.payload().unwrap().to_vec()).unwrap();
        read.push((value, m.timestamp()));
    }
    read
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_append_time_topic_dates_every_record_with_the_broker_time() {
    let broker = KafkaServer::start().await;
    let bootstrap = broker.bootstrap();
    let ahead = now_ms() + 86_400_000;
    create_topic(
        &bootstrap,
        "appended",
        &[("message.timestamp.type", "LogAppendTime")],
    )
    .await;
    create_topic(
        &bootstrap,
        "created",
        &[("message.timestamp.type", "CreateTime")],
    )
    .await;
    let before = now_ms();
    let appended = round_trip(&bootstrap, "appended", &[], &["a", "b", "c"], ahead).await;
    let after = now_ms();
    for (value, timestamp) in &appended {
        let Timestamp::LogAppendTime(t) = *timestamp else {
            panic!("{value}: {timestamp:?} is not the broker's append time");
        };
        assert!(
            (before..=after).contains(&t),
            "{value}: {t} not in {before}..={after}"
        );
    }
    let created = round_trip(&bootstrap, "created", &[], &["a", "b"], ahead).await;
    assert_eq!(
        created,
        vec![
            ("a".to_owned(), Timestamp::CreateTime(ahead)),
            ("b".to_owned(), Timestamp::CreateTime(ahead))
        ],
        "CreateTime keeps the producer's stamp"
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_compression_type_is_the_codec_its_batches_are_stored_with() {
    let broker = KafkaServer::start().await;
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "gzipped", &[("compression.type", "gzip")]).await;
    create_topic(&bootstrap, "as-sent", &[]).await;
    let lz4 = [("compression.codec", "lz4")];
    // Compressible: librdkafka sends a batch uncompressed when compressing does not help.
    let values: Vec<String> = ["one", "two", "three"].map(|v| v.repeat(100)).into();
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    for topic in ["gzipped", "as-sent"] {
        let read = round_trip(&bootstrap, topic, &lz4, &values, 1_700_000_000_000).await;
        let read: Vec<&str> = read.iter().map(|(v, _)| v.as_str()).collect();
        assert_eq!(read, values, "{topic}: every record intact");
    }
    let mut raw = Raw::connect(broker.addr).await;
    for (topic, codec) in [("gzipped", 1), ("as-sent", 3)] {
        let (error, _, records) = fetch(&mut raw, topic, 0).await;
        assert_eq!(error, 0);
        let attributes = i16::from_be_bytes([records[21], records[22]]);
        assert_eq!(
            attributes & 0b111,
            codec,
            "{topic}: the stored batch's codec"
        );
    }
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_clients_message_formats_are_converted_and_read_back_with_their_timestamps() {
    let broker = KafkaServer::start().await;
    let out = run(
        "python3",
        &[
            &python_script("kafka_legacy.py"),
            &broker.bootstrap(),
            "legacy",
        ],
        b"",
    )
    .await;
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "0.9 none CreateTime read=5 values=ok timestamps=none ack=-\n\
         0.9 none LogAppendTime read=5 values=ok timestamps=broker ack=-\n\
         0.9 gzip CreateTime read=5 values=ok timestamps=none ack=-\n\
         0.9 gzip LogAppendTime read=5 values=ok timestamps=broker ack=-\n\
         0.10.1 none CreateTime read=5 values=ok timestamps=producer ack=producer\n\
         0.10.1 none LogAppendTime read=5 values=ok timestamps=broker ack=broker\n\
         0.10.1 gzip CreateTime read=5 values=ok timestamps=producer ack=producer\n\
         0.10.1 gzip LogAppendTime read=5 values=ok timestamps=broker ack=broker\n"
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_told_the_broker_is_kafka_0_8_produces_with_produce_v0() {
    let broker = KafkaServer::start().await;
    let bootstrap = broker.bootstrap();
    create_topic(&bootstrap, "old", &[]).await;
    // librdkafka without ApiVersions, taking the broker for 0.8.2: Produce v0, message
    // format v0, a gzip wrapper per message set.
    let old = [
        "-X",
        "api.version.request=false",
        "-X",
        "broker.version.fallback=0.8.2.2",
        "-z",
        "gzip",
    ];
    let produce = [&["-b", &bootstrap, "-P", "-t", "old", "-K", ":"][..], &old].concat();
    run("kcat", &produce, b"k1:v1\nk2:v2\nk3:v3\n").await;
    let read = kcat_consume(&bootstrap, "old", "%o %k=%s %T\\n", &[]).await;
    assert_eq!(
        read, "0 k1=v1 -1\n1 k2=v2 -1\n2 k3=v3 -1\n",
        "no timestamps in format v0"
    );
    broker.stop().await;
}
