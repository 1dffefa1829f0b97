//! Compacted topics (`cleanup.policy=compact`) through real clients: Kafka Connect's use of
//! them with kafka-python (`tests/python/kafka_compaction.py`: config, offset and status
//! topics written several times over and read again from the beginning, with the gaps
//! compaction leaves, and a group committing past them); kcat tombstones, which delete
//! their key and go themselves after `delete.retention.ms`; and a `kill -9` of the daemon
//! while it compacts, after which every key still has its newest value.

use crate::common::clients::{kcat_consume, python_script, run};
use crate::common::daemon::{EXIT, Setup};
use crate::common::fronts::KafkaServer;
use crate::common::kafka::{PATIENCE, admin, admin_options, consumer, create_topic, producer};
use crate::common::wait;
use rdkafka::admin::{AlterConfig, ResourceSpecifier};
use rdkafka::consumer::Consumer;
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;
use rdkafka::{Message, Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::Duration;

/// Longest a compaction the tests wait for may take.
const COMPACTED_WITHIN: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_connect_topics_are_compacted_and_read_again_from_the_beginning() {
    let broker = KafkaServer::start_with(|c| c.compaction_check_interval_ms = 100).await;
    let out = run(
        "python3",
        &[
            &python_script("kafka_compaction.py"),
            &broker.bootstrap(),
            "connect",
        ],
        b"",
    )
    .await;
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "connect-configs policy=compact records=8 newest=yes gaps=yes tombstones=k0\n\
         connect-offsets policy=compact records=8 newest=yes gaps=yes tombstones=-\n\
         connect-status policy=compact records=8 newest=yes gaps=yes tombstones=-\n\
         group committed=40 end=40\n"
    );
    broker.stop().await;
}

/// What kcat reads of `topic` from the beginning: `offset key value` lines, NULL values
/// (tombstones) as `NULL`.
async fn kcat_read(bootstrap: &str, topic: &str) -> String {
    kcat_consume(bootstrap, topic, "%o %k %s\\n", &["-Z"]).await
}

/// Produces `lines` (`key:value`, an empty value a tombstone) to `topic` with kcat.
async fn kcat_produce(bootstrap: &str, topic: &str, lines: &str) {
    let args = ["-b", bootstrap, "-P", "-t", topic, "-K", ":", "-Z"];
    run("kcat", &args, lines.as_bytes()).await;
}

/// Waits until kcat reads exactly `expected` from `topic`.
async fn kcat_reads(bootstrap: &str, topic: &str, what: &str, expected: &str) {
    wait::until(what, COMPACTED_WITHIN, async || {
        (kcat_read(bootstrap, topic).await == expected).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_tombstones_delete_their_key_and_go_after_delete_retention() {
    let broker = KafkaServer::start_with(|c| c.compaction_check_interval_ms = 50).await;
    let b = broker.bootstrap();
    let compacted = [
        ("cleanup.policy", "compact"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    create_topic(&b, "accounts", &compacted).await;
    // Three produce runs, three batches at least: the tombstone is not in the newest one.
    kcat_produce(&b, "accounts", "user1:alice\nuser2:bob\n").await;
    kcat_produce(&b, "accounts", "user1:\n").await;
    kcat_produce(&b, "accounts", "other:x\n").await;
    kcat_reads(
        &b,
        "accounts",
        "compaction of user1's value under its tombstone",
        "1 user2 bob\n2 user1 NULL\n3 other x\n",
    )
    .await;

    // With delete.retention.ms at 0 the next pass (a new record makes the log dirty) takes
    // the tombstone too. AlterConfigs replaces every setting, so the others come again.
    let altered = AlterConfig::new(ResourceSpecifier::Topic("accounts"))
        .set(compacted[0].0, compacted[0].1)
        .set(compacted[1].0, compacted[1].1)
        .set("delete.retention.ms", "0");
    let results = admin(&b)
        .alter_configs(&[altered], &admin_options())
        .await
        .unwrap();
    assert!(results[0].is_ok(), "{results:?}");
    kcat_produce(&b, "accounts", "other:y\n").await;
    kcat_reads(
        &b,
        "accounts",
        "the tombstone's removal past delete.retention.ms",
        "1 user2 bob\n4 other y\n",
    )
    .await;
    broker.stop().await;
}

/// Every record of partition 0 of `topic` from the beginning to its high watermark, read
/// by librdkafka: value by key, in offset order (so the last value of a key wins), and
/// how many records were read.
async fn read_all(bootstrap: &str, topic: &str) -> (BTreeMap<String, String>, usize) {
    let c = consumer(bootstrap, "compaction-reader", &[]);
    let (_, high) = c.fetch_watermarks(topic, 0, PATIENCE).unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let (mut values, mut read, mut next) = (BTreeMap::new(), 0, 0);
    while next < high {
        let m = tokio::time::timeout(PATIENCE, c.recv())
            .await
            .unwrap_or_else(|_| panic!("records up to {high} of {topic}; read up to {next}"))
            .unwrap();
        let text = |b: Option<&[u8]>| String::from_utf8(b.unwrap().to_vec()).unwrap();
        values.insert(text(m.key()), text(m.payload()));
        read += 1;
        next = m.offset() + 1;
    }
    (values, read)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_9_during_compaction_loses_no_newest_value() {
    const KEYS: usize = 20_000;
    const ROUNDS: usize = 4;
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = Setup::shipped(dir.path())
        .env("FERRY__KAFKA__COMPACTION_CHECK_INTERVAL_MS", "10")
        .start();
    let settings = [
        ("cleanup.policy", "compact"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    create_topic(&ferry.kafka_bootstrap(), "state", &settings).await;
    for round in 0..ROUNDS {
        let p = producer(
            &ferry.kafka_bootstrap(),
            &[("compression.codec", "zstd"), ("linger.ms", "20")],
        );
        let sends = (0..KEYS).map(|k| {
            let (key, value) = (
                format!("key-{k}"),
                format!("{round}-{k}-{}", "x".repeat(64)),
            );
            let p = &p;
            async move {
                let record = FutureRecord::to("state").key(&key).payload(&value);
                p.send(record, Timeout::After(PATIENCE))
                    .await
                    .expect("acknowledged");
            }
        });
        futures::future::join_all(sends).await;
        drop(p);
        // Compaction passes run every 10 ms over the round just written, each taking a few
        // hundred ms over 20,000 records in a debug build; the kill lands at a different
        // point of them each round (each transaction of a pass committed or not: either
        // way no key may lose its newest value).
        tokio::time::sleep(Duration::from_millis(40 * round as u64)).await;
        ferry.kill_and_restart();
    }
    let bootstrap = ferry.kafka_bootstrap();
    let (values, read) = wait::until(
        "compaction to one record per key",
        COMPACTED_WITHIN,
        async || {
            let (values, read) = read_all(&bootstrap, "state").await;
            (read == KEYS).then_some((values, read))
        },
    )
    .await;
    assert_eq!(read, KEYS);
    for k in 0..KEYS {
        let value = &values[&format!("key-{k}")];
        assert!(
            value.starts_with(&format!("{}-{k}-", ROUNDS - 1)),
            "key-{k} has {value}, not its newest value"
        );
    }
    ferry.signal(libc::SIGTERM);
    assert!(ferry.wait_exit(EXIT).status.success());
}
