//! The soak's clients: a paced [`Publisher`] (AMQP with publisher confirms, or an
//! idempotent Kafka producer with acks=all) and the consumers (AMQP with one basic.ack per
//! delivery, or a Kafka group member), each writing what it sees to its workload's
//! [`Ledger`].
//!
//! A publisher sends message `n` at its due time ([`Pace`]), with at most [`WINDOW`]
//! unconfirmed: a full window holds the next send, which then leaves late rather than
//! shifting the schedule. Every loop ends at the end of the pace or when the run's stop
//! token is cancelled, whichever comes first.
//!
//! librdkafka's idempotent producer (at most 5 requests in flight) busy-polls its broker
//! thread while all 5 are out: against a broker short of CPU (a debug build on two shared
//! cores) it took up to 0.7 of a core here, from that broker — the rows' `bench CPU s`
//! column shows it. Without idempotence it did not happen; linger.ms 20 only delayed it.

use super::ledger::Ledger;
use super::schedule::Pace;
use crate::amqp::connect;
use ferry_config::AmqpTlsConfig;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, BasicQosOptions,
    ConfirmSelectOptions,
};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection};
use parking_lot::Mutex;
use rdkafka::consumer::StreamConsumer;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// Most messages a publisher may have unconfirmed.
pub(super) const WINDOW: usize = 1000;
/// Unacknowledged deliveries an AMQP consumer may hold.
const PREFETCH: u16 = 1000;
/// How long closing a connection may take at the end.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a Kafka consumer waits after an error before reading again.
const ERROR_PAUSE: Duration = Duration::from_millis(100);

/// A workload's ledger, shared by its clients and the printing loop.
pub(super) type Shared = Arc<Mutex<Ledger>>;

/// The broker's answer to one send: `Err` with the reason when it refused.
type Confirm = BoxFuture<'static, Result<(), String>>;

/// Where a publisher sends.
pub(super) enum Publisher {
    /// Persistent messages with confirms to an exchange.
    Amqp(Box<AmqpOut>),
    /// Unkeyed records to `topic`.
    Kafka {
        /// Idempotent, acks=all.
        producer: FutureProducer,
        /// The topic.
        topic: String,
    },
}

/// An AMQP publisher's connection and destination.
pub(super) struct AmqpOut {
    /// Kept open for the channel, closed at the end.
    connection: Connection,
    /// In confirm mode.
    channel: Channel,
    /// The exchange ("" for the default exchange).
    exchange: String,
    /// The routing key (the queue's name on the default exchange).
    routing_key: String,
}

impl Publisher {
    /// An AMQP publisher to `exchange` with `routing_key`, on a connection of its own.
    ///
    /// # Errors
    /// The broker cannot be reached or refuses confirm mode.
    pub(super) async fn amqp(uri: &str, exchange: &str, routing_key: &str) -> anyhow::Result<Self> {
        let connection = connect(uri, &AmqpTlsConfig::default()).await?;
        let channel = connection.create_channel().await?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await?;
        Ok(Self::Amqp(Box::new(AmqpOut {
            connection,
            channel,
            exchange: exchange.to_owned(),
            routing_key: routing_key.to_owned(),
        })))
    }

    /// Sends `body`; the broker's answer to come.
    async fn send(&self, body: &[u8]) -> anyhow::Result<Confirm> {
        match self {
            Self::Amqp(out) => {
                let confirm = out
                    .channel
                    .basic_publish(
                        out.exchange.as_str().into(),
                        out.routing_key.as_str().into(),
                        BasicPublishOptions::default(),
                        body,
                        BasicProperties::default().with_delivery_mode(2),
                    )
                    .await?;
                Ok(async move {
                    match confirm.await {
                        Ok(c) if c.is_ack() => Ok(()),
                        Ok(_) => Err("nacked".to_owned()),
                        Err(e) => Err(e.to_string()),
                    }
                }
                .boxed())
            }
            Self::Kafka { producer, topic } => {
                let delivery = producer
                    .send_result(FutureRecord::<(), _>::to(topic).payload(body))
                    .map_err(|(e, _)| e)?;
                Ok(async move {
                    match delivery.await {
                        Ok(Ok(_)) => Ok(()),
                        Ok(Err((e, _))) => Err(e.to_string()),
                        Err(_) => Err("the producer was dropped".to_owned()),
                    }
                }
                .boxed())
            }
        }
    }

    async fn close(self) {
        if let Self::Amqp(out) = self {
            let closed = out.connection.close(200, "soak done".into());
            let _ = tokio::time::timeout(CLOSE_TIMEOUT, closed).await;
        }
    }
}

/// Sends the messages of `pace`, bodies of `size` bytes, then waits for the last
/// confirms; until `stop` at the latest.
///
/// # Errors
/// A send fails (the connection is lost, say): the workload stops sending.
pub(super) async fn publish(
    publisher: Publisher,
    pace: Pace,
    size: usize,
    ledger: Shared,
    stop: CancellationToken,
) -> anyhow::Result<()> {
    let mut pending = FuturesUnordered::new();
    let mut seq = 0;
    while let Some(due) = pace.due(seq) {
        // Confirms are taken while the next send waits for its time (or for room in the
        // window).
        loop {
            tokio::select! {
                biased;
                () = stop.cancelled() => {
                    publisher.close().await;
                    return Ok(());
                }
                Some((s, outcome)) = pending.next() => ledger.lock().confirmed(s, outcome),
                () = tokio::time::sleep_until(due.into()), if pending.len() < WINDOW => break,
            }
        }
        let body = {
            let now = Instant::now();
            let mut ledger = ledger.lock();
            ledger.sent(seq, now);
            ledger.stamp(seq, now).body(size)
        };
        let confirm = publisher.send(&body).await?;
        pending.push(confirm.map(move |outcome| (seq, outcome)));
        seq += 1;
    }
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            next = pending.next() => match next {
                Some((s, outcome)) => ledger.lock().confirmed(s, outcome),
                None => break,
            },
        }
    }
    publisher.close().await;
    Ok(())
}

/// An AMQP consumer of `queue` (prefetch [`PREFETCH`], manual acks), ready to [`run`].
///
/// [`run`]: AmqpConsumer::run
pub(super) struct AmqpConsumer {
    connection: Connection,
    consumer: lapin::Consumer,
}

impl AmqpConsumer {
    /// Subscribes to `queue`.
    ///
    /// # Errors
    /// The broker cannot be reached or refuses.
    pub(super) async fn subscribe(uri: &str, queue: &str) -> anyhow::Result<Self> {
        let connection = connect(uri, &AmqpTlsConfig::default()).await?;
        let channel = connection.create_channel().await?;
        channel
            .basic_qos(PREFETCH, BasicQosOptions::default())
            .await?;
        let consumer = channel
            .basic_consume(
                queue.into(),
                "ferry-soak".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        Ok(Self {
            connection,
            consumer,
        })
    }

    /// Records and acknowledges every delivery until `stop`.
    ///
    /// # Errors
    /// The connection fails or the broker cancels the consumer.
    pub(super) async fn run(
        mut self,
        ledger: Shared,
        stop: CancellationToken,
    ) -> anyhow::Result<()> {
        let outcome = async {
            loop {
                let next = tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    next = self.consumer.next() => next,
                };
                let delivery =
                    next.ok_or_else(|| anyhow::anyhow!("the broker cancelled the consumer"))??;
                ledger.lock().received(&delivery.data, Instant::now());
                delivery.acker.ack(BasicAckOptions::default()).await?;
            }
        }
        .await;
        let _ = tokio::time::timeout(
            CLOSE_TIMEOUT,
            self.connection.close(200, "soak done".into()),
        )
        .await;
        outcome
    }
}

/// Records every record `consumer` (a group member, already joined) receives until
/// `stop`; an error is recorded and reading goes on (librdkafka reconnects by itself).
pub(super) async fn consume_kafka(
    consumer: StreamConsumer,
    ledger: Shared,
    stop: CancellationToken,
) {
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => return,
            next = consumer.recv() => next,
        };
        match next {
            Ok(m) => ledger
                .lock()
                .received(m.payload().unwrap_or_default(), Instant::now()),
            Err(e) => {
                ledger.lock().fault(format!("consumer: {e}"));
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
    }
}
