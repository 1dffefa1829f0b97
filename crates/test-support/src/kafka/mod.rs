//! rdkafka helpers shared by the Kafka tests, whatever serves the Kafka protocol (an
//! in-process front, the daemon): client settings, producers, consumers, sending a range of
//! numbered records and collecting what group members read; [`raw`] speaks the protocol by
//! hand.

pub mod raw;

use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{CommitMode, Consumer, ConsumerContext, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::Timeout;
use rdkafka::{ClientConfig, Message};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Longest any single client operation in these tests may take before the test fails.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// An rdkafka client configuration for `bootstrap` with `settings` on top.
pub fn client_config(bootstrap: &str, settings: &[(&str, &str)]) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap)
        .set("broker.address.family", "v4")
        .set("topic.metadata.refresh.interval.ms", "1000");
    for (k, v) in settings {
        c.set(*k, *v);
    }
    c
}

/// An admin client of `bootstrap`.
pub fn admin(bootstrap: &str) -> AdminClient<DefaultClientContext> {
    client_config(bootstrap, &[]).create().unwrap()
}

/// Admin options waiting at most [`PATIENCE`].
pub fn admin_options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Timeout::After(PATIENCE)))
}

/// Creates topic `name` (one partition) with `settings`.
pub async fn create_topic(bootstrap: &str, name: &str, settings: &[(&str, &str)]) {
    let mut topic = NewTopic::new(name, 1, TopicReplication::Fixed(1));
    for (k, v) in settings {
        topic = topic.set(k, v);
    }
    let created = admin(bootstrap)
        .create_topics(&[topic], &admin_options())
        .await
        .unwrap();
    assert!(created[0].is_ok(), "topic {name} created: {created:?}");
}

/// A producer waiting for every acknowledgement.
pub fn producer(bootstrap: &str, settings: &[(&str, &str)]) -> FutureProducer {
    let mut base = vec![("acks", "all"), ("linger.ms", "5")];
    base.extend_from_slice(settings);
    client_config(bootstrap, &base).create().unwrap()
}

/// A consumer of `group` starting from the earliest offset.
pub fn consumer(bootstrap: &str, group: &str, settings: &[(&str, &str)]) -> StreamConsumer {
    let mut base = vec![
        ("group.id", group),
        ("auto.offset.reset", "earliest"),
        ("enable.auto.commit", "false"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "500"),
        ("fetch.wait.max.ms", "100"),
    ];
    base.extend_from_slice(settings);
    client_config(bootstrap, &base).create().unwrap()
}

/// The partitions assigned to `c` (of whatever topics).
pub fn assigned_partitions<C: ConsumerContext + 'static>(c: &StreamConsumer<C>) -> BTreeSet<i32> {
    c.assignment()
        .unwrap()
        .elements()
        .iter()
        .map(|e| e.partition())
        .collect()
}

/// Sends records `from..to` to `topic`, keyed so they spread over the partitions; each
/// record's value is its number.
pub async fn send_range(p: &FutureProducer, topic: &str, from: usize, to: usize) {
    let sends = (from..to).map(|i| async move {
        let key = format!("key-{i}");
        let value = format!("{i}");
        p.send(
            FutureRecord::to(topic)
                .key(key.as_bytes())
                .payload(value.as_bytes()),
            Timeout::After(PATIENCE),
        )
        .await
        .expect("acknowledged");
    });
    futures::future::join_all(sends).await;
}

/// Runs `consumer` as member `member` until the channel closes, reporting (member,
/// partition, value) for every record of [`send_range`] it reads, and committing each
/// record it reads when `commit`.
pub fn drive(
    member: usize,
    c: Arc<StreamConsumer>,
    commit: bool,
    tx: mpsc::UnboundedSender<(usize, i32, usize)>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tx.closed() => return,
                m = c.recv() => {
                    // Transient errors (a broker restarting) are the client's to recover.
                    let Ok(m) = m else { continue };
                    let value = std::str::from_utf8(m.payload().unwrap()).unwrap().parse().unwrap();
                    if commit {
                        let _ = c.commit_message(&m, CommitMode::Async);
                    }
                    if tx.send((member, m.partition(), value)).is_err() {
                        return;
                    }
                }
            }
        }
    })
}
