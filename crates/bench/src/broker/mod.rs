//! The broker under test, as every load tool that watches one sees it: its process (name,
//! open-files limit, and its resources sampled over a run: [`watch`]), and the queue and
//! topic a run starts fresh and deletes at its end.

pub(crate) mod watch;

use crate::amqp::connect;
use crate::kafka::{KafkaBench, client};
use ferry_config::AmqpTlsConfig;
use lapin::options::{QueueDeclareOptions, QueueDeleteOptions};
use lapin::types::FieldTable;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use std::time::Duration;

/// How long deleting a scenario's queue or topic, or closing a connection, may take at
/// the end.
pub(crate) const CLEANUP_TIMEOUT: Duration = Duration::from_secs(10);

/// The broker's command name and open-files limit, from `/proc`.
pub(crate) fn describe_broker(pid: u32) -> String {
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|n| n.trim().to_owned())
        .unwrap_or_else(|_| "not readable: is the PID right?".to_owned());
    let limit = std::fs::read_to_string(format!("/proc/{pid}/limits"))
        .ok()
        .map(|l| watch::max_open_files(&l).map_or("unlimited".to_owned(), |n| n.to_string()))
        .unwrap_or_else(|| "unknown".to_owned());
    format!("pid {pid} ({name}), open files limit {limit}")
}

/// The settings `ferry bench kafka`'s helpers take, for `topic` with one partition and
/// records of `size` bytes, acks=all, linger 5 ms.
pub(crate) fn kafka_bench(
    bootstrap: &str,
    topic: &str,
    size: usize,
    broker_pid: u32,
) -> KafkaBench {
    KafkaBench {
        bootstrap: bootstrap.to_owned(),
        topic: topic.to_owned(),
        partitions: 1,
        records: 0,
        size,
        in_flight: 10_000,
        idempotence: false,
        linger_ms: 5,
        load: 0.0,
        latency_seconds: 0,
        broker_pid: Some(broker_pid),
        properties: Vec::new(),
    }
}

/// Declares `queue` durable and empty (deleting what was there).
///
/// # Errors
/// The broker cannot be reached or refuses.
pub(crate) async fn fresh_queue(uri: &str, queue: &str) -> anyhow::Result<()> {
    let connection = connect(uri, &AmqpTlsConfig::default()).await?;
    let channel = connection.create_channel().await?;
    channel
        .queue_delete(queue.into(), QueueDeleteOptions::default())
        .await?;
    let durable = QueueDeclareOptions {
        durable: true,
        ..QueueDeclareOptions::default()
    };
    channel
        .queue_declare(queue.into(), durable, FieldTable::default())
        .await?;
    connection.close(200, "declared".into()).await?;
    Ok(())
}

/// Deletes `queue` at the end of a run (an overload scenario, a soak), saying so when it
/// cannot.
pub(crate) async fn delete_queue(uri: &str, queue: &str) {
    let deleted = tokio::time::timeout(CLEANUP_TIMEOUT, async {
        let connection = connect(uri, &AmqpTlsConfig::default()).await?;
        let channel = connection.create_channel().await?;
        channel
            .queue_delete(queue.into(), QueueDeleteOptions::default())
            .await?;
        connection.close(200, "deleted".into()).await?;
        Ok::<_, anyhow::Error>(())
    })
    .await;
    match deleted {
        Ok(Ok(())) => {}
        Ok(Err(e)) => println!("note: the queue '{queue}' could not be deleted: {e:#}"),
        Err(_) => {
            println!("note: the queue '{queue}' could not be deleted within {CLEANUP_TIMEOUT:?}")
        }
    }
}

/// Deletes `kafka`'s topic at the end of a run (an overload scenario, a soak), saying so
/// when it cannot.
pub(crate) async fn delete_topic(kafka: &KafkaBench) {
    let deleted = async {
        let admin: AdminClient<DefaultClientContext> = client(kafka).create()?;
        let options = AdminOptions::new().operation_timeout(Some(CLEANUP_TIMEOUT));
        admin.delete_topics(&[&kafka.topic], &options).await?;
        Ok::<_, rdkafka::error::KafkaError>(())
    };
    if let Err(e) = deleted.await {
        println!(
            "note: the topic '{}' could not be deleted: {e}",
            kafka.topic
        );
    }
}
