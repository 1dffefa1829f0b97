//! A disk failing or filling under the embedded store, as an rdkafka producer sees it:
//! after `EIO` on an fsync (injected at the data file's I/O seam) the produce whose commit
//! failed and every later one get an error, never an acknowledgement; after a restart every
//! acknowledged record is read back at its offset, once, and the failed batch is there
//! whole or not at all. And while free space is below `store.min_free_disk_mb` (a
//! pretended reading) a record is not taken; it is, once, when space returns.

use crate::common::fronts::KafkaServer;
use crate::common::kafka::{PATIENCE, client_config, producer, send_range};
use crate::common::wait;
use ferry_store::embedded::DiskFault;
use rdkafka::Message;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;
use rdkafka::{Offset, TopicPartitionList};
use std::time::Duration;

const TOPIC: &str = "disk";

/// The values of partition 0 of [`TOPIC`] from offset 0, read with a new consumer.
fn read_partition(bootstrap: &str) -> Vec<(i64, String)> {
    let c: BaseConsumer = client_config(bootstrap, &[("group.id", "disk-reader")])
        .create()
        .unwrap();
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(TOPIC, 0, Offset::Beginning)
        .unwrap();
    c.assign(&assignment).unwrap();
    let mut out = Vec::new();
    let deadline = std::time::Instant::now() + PATIENCE;
    // Ends at the high watermark: when a poll brings nothing and the position is there.
    while std::time::Instant::now() < deadline {
        match c.poll(Duration::from_millis(500)) {
            Some(Ok(m)) => out.push((
                m.offset(),
                String::from_utf8(m.payload().unwrap().to_vec()).unwrap(),
            )),
            Some(Err(e)) => panic!("{e}"),
            None => {
                let (_, high) = c
                    .fetch_watermarks(TOPIC, 0, Duration::from_secs(5))
                    .unwrap();
                if out.last().map_or(0, |(at, _)| at + 1) >= high {
                    return out;
                }
            }
        }
    }
    panic!("partition 0 not read to its end within {PATIENCE:?}: {out:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fsync_fails_produces_and_loses_nothing_acknowledged() {
    let mut server = KafkaServer::start().await;
    let bootstrap = server.bootstrap();
    let p = producer(
        &bootstrap,
        &[
            ("message.timeout.ms", "5000"),
            ("enable.idempotence", "true"),
        ],
    );
    // One partition: the records' offsets are their order.
    let admin: AdminClient<DefaultClientContext> = client_config(&bootstrap, &[]).create().unwrap();
    admin
        .create_topics(
            &[NewTopic::new(TOPIC, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    send_range(&p, TOPIC, 0, 20).await;
    server
        .db
        .faults()
        .expect("the embedded engine injects faults")
        .fail_next_sync(DiskFault::Io);
    let sends = (20..23).map(|i| {
        let p = &p;
        async move {
            let value = i.to_string();
            let sent = p
                .send(
                    FutureRecord::<(), _>::to(TOPIC).payload(value.as_bytes()),
                    Timeout::After(PATIENCE),
                )
                .await;
            assert!(
                sent.is_err(),
                "record {i} acknowledged by a store that failed"
            );
        }
    });
    futures::future::join_all(sends).await;
    drop(p);
    server.restart().await;
    let read = read_partition(&server.bootstrap());
    let acknowledged: Vec<(i64, String)> = (0..20).map(|i| (i, i.to_string())).collect();
    assert_eq!(read[..20.min(read.len())], acknowledged[..], "{read:?}");
    // The commit whose fsync failed may have reached the disk anyway, whole: the records
    // it held, in order; no later commit was taken, and nothing is there twice.
    let rest: Vec<&str> = read[20..].iter().map(|(_, v)| v.as_str()).collect();
    assert!(["20", "21", "22"].starts_with(&rest), "{read:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_free_disk_alarm_holds_produces_back_until_space_returns() {
    let server = KafkaServer::start().await;
    let bootstrap = server.bootstrap();
    let admin: AdminClient<DefaultClientContext> = client_config(&bootstrap, &[]).create().unwrap();
    admin
        .create_topics(
            &[NewTopic::new(TOPIC, 1, TopicReplication::Fixed(1))],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    let p = producer(&bootstrap, &[("message.timeout.ms", "30000")]);
    send_range(&p, TOPIC, 0, 1).await;
    let faults = server
        .db
        .faults()
        .expect("the embedded engine injects faults");
    // 1 MiB free, under the default store.min_free_disk_mb of 50.
    faults.pretend_free_bytes(Some(1 << 20));
    wait::until("the free disk alarm", PATIENCE, async || {
        server.db.disk_alarm()
    })
    .await;
    // The producer gets the retriable KAFKA_STORAGE_ERROR and retries; the record waits.
    let sending = tokio::spawn(async move {
        p.send(
            FutureRecord::<(), _>::to(TOPIC).payload(b"1"),
            Timeout::After(PATIENCE),
        )
        .await
        .map(|_| ())
        .map_err(|(e, _)| e.to_string())
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !sending.is_finished(),
        "a record was taken during the alarm"
    );
    faults.pretend_free_bytes(None);
    let sent = tokio::time::timeout(PATIENCE, sending)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(sent, Ok(()));
    let read = read_partition(&bootstrap);
    assert_eq!(read, [(0, "0".to_owned()), (1, "1".to_owned())]);
}
