//! `[sinks.NAME] kind = "rabbitmq"`: publishes to an exchange on an external RabbitMQ with
//! publisher confirms.
//!
//! A batch is published in full (`mandatory`, so an unroutable message comes back) and
//! its confirms are awaited while the next batches go out (see
//! [`crate::sink::IN_FLIGHT_BATCHES`]); a message is [`Outcome::Delivered`] only once the broker
//! confirmed it. Each message keeps its properties and gets its stable
//! [`Outgoing::message_id`] when it had none, so a message sent again after a crash can
//! be recognised downstream. Outcomes: unroutable (`basic.return`) is
//! [`Outcome::Rejected`] (an attempt; dead-lettered after `max_attempts`); a `basic.nack`,
//! a failed connection or channel, or a confirm that does not come within
//! [`CONFIRM_TIMEOUT`] is [`Outcome::Retry`], and the next batch connects again. The
//! connection is opened lazily, on the first batch.

use crate::rabbitmq_link::connect;
use crate::sink::{Confirms, ExternalSink, IN_FLIGHT_BATCHES, Outcome};
use crate::staged::Outgoing;
use crate::status::Status;
use ferry_config::{AmqpTlsConfig, AmqpUri};
use futures::future::BoxFuture;
use lapin::Confirmation;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::{Channel, Connection};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn};

/// Longest wait for a batch's confirms before the connection is considered broken.
pub(crate) const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);

/// A `[sinks.NAME] kind = "rabbitmq"`.
pub(crate) struct RabbitmqSink {
    /// Endpoint label, `sink:NAME`.
    label: String,
    /// AMQP URI of the downstream broker.
    uri: AmqpUri,
    /// TLS toward it, with an `amqps://` URI.
    tls: AmqpTlsConfig,
    /// The exchange published to.
    exchange: String,
    /// Routing key for every message; `None` keeps each message's own.
    routing_key: Option<String>,
    /// Connection states for `/readyz`.
    status: Status,
    /// The open connection and its confirm-mode channel; `None` until the next batch
    /// connects (at first, and after a failure).
    link: Option<(Connection, Channel)>,
    /// Why the connection failed, set by a batch's confirms; the next send reconnects.
    broken: Arc<Mutex<Option<String>>>,
}

impl RabbitmqSink {
    /// A sink labelled `label` that publishes to `exchange` at `uri` (with `tls` when it
    /// is `amqps://`); it connects on its first batch.
    pub(crate) fn new(
        label: String,
        (uri, tls): (AmqpUri, AmqpTlsConfig),
        exchange: String,
        routing_key: Option<String>,
        status: Status,
    ) -> Self {
        Self {
            label,
            uri,
            tls,
            exchange,
            routing_key,
            status,
            link: None,
            broken: Arc::default(),
        }
    }

    /// The confirm-mode channel, connecting first when there is none.
    async fn channel(&mut self) -> Result<Channel, String> {
        if let Some((connection, channel)) = &self.link
            && connection.status().connected()
            && channel.status().connected()
        {
            return Ok(channel.clone());
        }
        self.link = None;
        let connection = connect(
            &self.uri,
            &self.tls,
            &format!("ferry bridge {}", self.label),
        )
        .await?;
        let channel = connection
            .create_channel()
            .await
            .map_err(|e| format!("cannot open a channel: {e}"))?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(|e| format!("confirm.select refused: {e}"))?;
        info!(sink = %self.label, exchange = %self.exchange, "publishing to RabbitMQ");
        self.status.up(&self.label);
        self.link = Some((connection, channel.clone()));
        Ok(channel)
    }

    /// Publishes `batch`; returns the future of its confirms, one outcome per message.
    /// A failure that needs a new connection is written to `broken`, which the next send
    /// reads (the confirms may settle after this call returned).
    async fn publish(&self, channel: &Channel, batch: &[Outgoing]) -> Confirms {
        // The publishes are issued together (polled in batch order, so they go out in
        // order): awaiting each before the next costs a round trip through lapin's I/O
        // loop per message.
        let publishes = batch.iter().map(|o| {
            let mut properties = o.message.properties.clone();
            if properties.message_id().is_none() {
                properties = properties.with_message_id(o.message_id().into());
            }
            let routing_key = self
                .routing_key
                .as_deref()
                .unwrap_or(&o.message.routing_key);
            channel.basic_publish(
                self.exchange.as_str().into(),
                routing_key.into(),
                BasicPublishOptions {
                    mandatory: true,
                    ..BasicPublishOptions::default()
                },
                &o.message.body,
                properties,
            )
        });
        let published = futures::future::join_all(publishes).await;
        let broken = self.broken.clone();
        Box::pin(async move {
            let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
            let mut outcomes = Vec::with_capacity(published.len());
            for confirm in published {
                let outcome = match confirm {
                    Err(e) => Err(format!("basic.publish failed: {e}")),
                    Ok(confirm) => match tokio::time::timeout_at(deadline, confirm).await {
                        Ok(Ok(Confirmation::Ack(None))) => Ok(Outcome::Delivered),
                        Ok(Ok(
                            Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)),
                        )) => Ok(Outcome::Rejected(format!(
                            "unroutable: exchange '{}' has no binding for routing key '{}' ({} {})",
                            returned.delivery.exchange,
                            returned.delivery.routing_key,
                            returned.reply_code,
                            returned.reply_text
                        ))),
                        Ok(Ok(Confirmation::Nack(None))) => Ok(Outcome::Retry(
                            "the broker refused the message (basic.nack)".into(),
                        )),
                        Ok(Ok(Confirmation::NotRequested)) => {
                            Err("the channel is not in confirm mode".into())
                        }
                        Ok(Err(e)) => Err(format!("the channel failed: {e}")),
                        Err(_) => Err(format!(
                            "no publisher confirm within {} s",
                            CONFIRM_TIMEOUT.as_secs()
                        )),
                    },
                };
                outcomes.push(outcome.unwrap_or_else(|why| {
                    *broken.lock() = Some(why.clone());
                    Outcome::Retry(why)
                }));
            }
            outcomes
        })
    }

    /// Drops the connection if a confirm said it is broken; says why.
    async fn check_link(&mut self) {
        let why = self.broken.lock().take();
        if let Some(why) = why {
            warn!(sink = %self.label, error = %why, "RabbitMQ sink connection failed; reconnecting");
            self.status.down(&self.label, why);
            if let Some((connection, _)) = self.link.take() {
                let _ = connection
                    .close(200, "ferry sink reconnecting".into())
                    .await;
            }
        }
    }
}

impl ExternalSink for RabbitmqSink {
    fn deliver<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, Vec<Outcome>> {
        Box::pin(async move { self.send(batch).await.await })
    }

    fn in_flight_batches(&self) -> usize {
        IN_FLIGHT_BATCHES
    }

    #[expect(
        clippy::async_yields_async,
        reason = "sending and confirming are two steps: the outer future sends"
    )]
    fn send<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, Confirms> {
        Box::pin(async move {
            self.check_link().await;
            let channel = match self.channel().await {
                Ok(c) => c,
                Err(why) => {
                    warn!(sink = %self.label, error = %why, "RabbitMQ sink is down; retrying");
                    self.status.down(&self.label, why.clone());
                    let outcomes = vec![Outcome::Retry(why); batch.len()];
                    return Box::pin(std::future::ready(outcomes)) as Confirms;
                }
            };
            self.publish(&channel, batch).await
        })
    }
}
