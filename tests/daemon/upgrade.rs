//! Upgrades and downgrades: this Ferry opens the stores earlier releases left (each kept in
//! tests/daemon/data/ as `store-ferry-VERSION.tar.gz`, made by scripts/store-fixture.sh
//! with that release's binary) and serves everything in them to real clients; a store laid
//! out by a newer Ferry (a newer keyspace schema, or a newer engine format) is refused at
//! start with a message naming both versions, and left as it was.

use crate::common::amqp::connect;
use crate::common::clients::run;
use crate::common::daemon::{Setup, shipped_config};
use crate::common::kafka::{PATIENCE, consumer};
use futures::StreamExt;
use lapin::options::{BasicConsumeOptions, BasicPublishOptions, BasicQosOptions};
use lapin::types::AMQPValue;
use rdkafka::consumer::Consumer;
use rdkafka::message::Headers;
use rdkafka::{Message, Offset, TopicPartitionList};
use std::path::Path;
use std::time::Duration;

/// The stores of earlier releases, oldest first.
const FIXTURES: &[&str] = &["store-ferry-0.1.0.tar.gz"];

/// Unpacks fixture `name` into `dir` (as `dir/data`).
async fn unpack(name: &str, dir: &Path) {
    let fixture = crate::common::repository()
        .join("tests/daemon/data")
        .join(name);
    let out = run(
        "tar",
        &[
            "-xzf",
            fixture.to_str().unwrap(),
            "-C",
            dir.to_str().unwrap(),
        ],
        b"",
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_stores_earlier_releases_left_are_served_with_everything_in_them() {
    for name in FIXTURES {
        let dir = tempfile::tempdir().unwrap();
        unpack(name, dir.path()).await;
        let ferry = Setup::shipped(dir.path()).start();

        // The user the old release made logs in; its queue holds the 100 messages in order,
        // with their properties; the binding still routes.
        let uri = format!(
            "amqp://fixture-user:fixture-pass@127.0.0.1:{}/%2f",
            ferry.ports().amqp
        );
        let connection = connect(&uri).await;
        let ch = connection.create_channel().await.unwrap();
        ch.basic_qos(200, BasicQosOptions::default()).await.unwrap();
        ch.basic_publish(
            "fixture.x".into(),
            "fixture.new".into(),
            BasicPublishOptions::default(),
            b"after the upgrade",
            Default::default(),
        )
        .await
        .unwrap();
        let mut deliveries = ch
            .basic_consume(
                "fixture.q".into(),
                "upgrade".into(),
                BasicConsumeOptions {
                    no_ack: true,
                    ..Default::default()
                },
                Default::default(),
            )
            .await
            .unwrap();
        for i in 0..101 {
            let d = tokio::time::timeout(PATIENCE, deliveries.next())
                .await
                .unwrap_or_else(|_| panic!("{name}: message {i} did not come"))
                .unwrap()
                .unwrap();
            if i == 100 {
                assert_eq!(d.data, b"after the upgrade", "{name}");
                continue;
            }
            assert_eq!(d.data, format!("m{i}").into_bytes(), "{name}");
            assert_eq!(d.properties.delivery_mode(), &Some(2), "{name}");
            assert_eq!(
                d.properties.content_type().as_ref().map(|c| c.as_str()),
                Some("text/plain"),
                "{name}"
            );
            let n = d
                .properties
                .headers()
                .as_ref()
                .unwrap()
                .inner()
                .get("n")
                .cloned();
            assert!(
                matches!(n, Some(AMQPValue::ShortShortInt(v)) if i64::from(v) == i)
                    || matches!(n, Some(AMQPValue::LongInt(v)) if i64::from(v) == i)
                    || matches!(n, Some(AMQPValue::LongLongInt(v)) if v == i)
                    || matches!(n, Some(AMQPValue::ShortInt(v)) if i64::from(v) == i)
                    || matches!(n, Some(AMQPValue::ShortShortUInt(v)) if i64::from(v) == i),
                "{name}: header n of m{i} is {n:?}"
            );
        }

        // The topic's records, settings and the group's committed offsets.
        let bootstrap = ferry.kafka_bootstrap();
        let c = consumer(&bootstrap, "upgrade-reader", &[]);
        c.subscribe(&["fixture.t"]).unwrap();
        let mut seen = Vec::new();
        while seen.len() < 60 {
            let m = tokio::time::timeout(PATIENCE, c.recv())
                .await
                .unwrap_or_else(|_| panic!("{name}: only {} of 60 records", seen.len()))
                .unwrap();
            let value: usize = std::str::from_utf8(m.payload().unwrap()).unwrap()[1..]
                .parse()
                .unwrap();
            assert_eq!(m.partition() as usize, value % 3, "{name}");
            assert_eq!(
                m.key(),
                Some(format!("k{}", value % 6).as_bytes()),
                "{name}"
            );
            let header = m.headers().unwrap().get(0);
            assert_eq!(
                (header.key, header.value),
                ("n", Some(value.to_string().as_bytes())),
                "{name}"
            );
            seen.push(value);
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..60).collect::<Vec<_>>(), "{name}");
        let group = consumer(&bootstrap, "fixture.g", &[]);
        let mut wanted = TopicPartitionList::new();
        for p in 0..3 {
            wanted.add_partition("fixture.t", p);
        }
        let committed = group.committed_offsets(wanted, PATIENCE).unwrap();
        for e in committed.elements() {
            assert_eq!(
                e.offset(),
                Offset::Offset(10),
                "{name}: partition {}",
                e.partition()
            );
        }
        let shown = run(
            "curl",
            &[
                "-sf",
                "-u",
                "guest:guest",
                &format!(
                    "{}/api/ferry/kafka/topics/fixture.t",
                    ferry.management_uri()
                ),
            ],
            b"",
        )
        .await;
        let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
        assert_eq!(
            shown["config"]["retention.ms"], 86_400_000,
            "{name}: {shown}"
        );
        assert_eq!(shown["partitions"].as_array().unwrap().len(), 3, "{name}");
        drop((ch, connection));
    }
}

/// `ferry run` on the store in `dir`: it must stop at start with exit code 1; its stderr.
fn refused_start(dir: &Path) -> String {
    let mut ferry = Setup::shipped(dir).spawn();
    let outcome = ferry.wait(Duration::from_secs(60));
    assert_eq!(outcome.status.code(), Some(1), "{}", outcome.stderr);
    outcome.stderr
}

#[tokio::test(flavor = "multi_thread")]
async fn a_store_of_a_newer_ferry_is_refused_naming_both_versions_and_left_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    unpack(FIXTURES[FIXTURES.len() - 1], dir.path()).await;
    let data = dir.path().join("data");
    let newer = ferry_stage::keys::SCHEMA_VERSION as u64 + 1;
    {
        let db = ferry_store::Database::open_embedded(ferry_store::embedded::Options::new(&data))
            .await
            .unwrap();
        let config = ferry_config::Config::load(shipped_config()).unwrap();
        let stages = ferry_stage::Stages::new(db.clone(), &config.store.prefix);
        let (schema, writer) = (stages.root().schema(), stages.root().schema_writer());
        db.run(|tx| {
            let (schema, writer) = (schema.clone(), writer.clone());
            async move {
                tx.set(&schema, foundationdb_tuple::pack(&(newer,)));
                tx.set(&writer, b"9.9.9".to_vec());
                Ok::<_, ferry_store::StoreError>(())
            }
        })
        .await
        .unwrap();
        db.close().await;
    }
    let stderr = refused_start(dir.path());
    let this = env!("CARGO_PKG_VERSION");
    let reads = newer - 1;
    assert!(
        stderr.contains(&format!(
            "the store's keyspace is schema version {newer}, written by Ferry 9.9.9; this Ferry \
             ({this}) reads schema version {reads}"
        )),
        "{stderr}"
    );
    // Refused before anything was written: a second start says the same.
    assert_eq!(
        refused_start(dir.path()).lines().last(),
        stderr.lines().last()
    );

    // A newer engine format is refused before the store is opened, naming both.
    let other = tempfile::tempdir().unwrap();
    unpack(FIXTURES[FIXTURES.len() - 1], other.path()).await;
    let marker = other
        .path()
        .join("data")
        .join(ferry_store::embedded::MARKER);
    std::fs::write(&marker, "ferry embedded store, format 9\n").unwrap();
    let stderr = refused_start(other.path());
    assert!(
        stderr.contains("has format 'ferry embedded store, format 9', this ferry reads 'ferry embedded store, format 2'"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "ferry embedded store, format 9\n"
    );
}
