//! `[sinks.NAME] kind = "rabbitmq"`: publishes to an exchange on an external RabbitMQ with
//! publisher confirms.
//!
//! A batch is published in full (`mandatory`, so an unroutable message comes back) and
//! then every confirm is awaited; a message is [`Outcome::Delivered`] only once the broker
//! confirmed it. Each message keeps its properties and gets its stable
//! [`Outgoing::message_id`] when it had none, so a message sent again after a crash can
//! be recognised downstream. Outcomes: unroutable (`basic.return`) is
//! [`Outcome::Rejected`] (an attempt; dead-lettered after `max_attempts`); a `basic.nack`,
//! a failed connection or channel, or a confirm that does not come within
//! [`CONFIRM_TIMEOUT`] is [`Outcome::Retry`], and the next batch connects again. The
//! connection is opened lazily, on the first batch.

use crate::bridge::sink::{ExternalSink, Outcome};
use crate::bridge::sources::rabbitmq::connect;
use crate::bridge::staged::Outgoing;
use crate::bridge::status::Status;
use futures::future::BoxFuture;
use lapin::Confirmation;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::{Channel, Connection};
use std::time::Duration;
use tracing::{info, warn};

/// Longest wait for a batch's confirms before the connection is considered broken.
pub const CONFIRM_TIMEOUT: Duration = Duration::from_secs(30);

/// A `[sinks.NAME] kind = "rabbitmq"`.
pub struct RabbitmqSink {
    /// Endpoint label, `sink:NAME`.
    label: String,
    /// AMQP URI of the downstream broker.
    uri: String,
    /// The exchange published to.
    exchange: String,
    /// Routing key for every message; `None` keeps each message's own.
    routing_key: Option<String>,
    /// Connection states for `/readyz`.
    status: Status,
    /// The open connection and its confirm-mode channel; `None` until the next batch
    /// connects (at first, and after a failure).
    link: Option<(Connection, Channel)>,
}

impl RabbitmqSink {
    /// A sink labelled `label` that publishes to `exchange` at `uri`; it connects on its
    /// first batch.
    pub fn new(
        label: String,
        uri: String,
        exchange: String,
        routing_key: Option<String>,
        status: Status,
    ) -> Self {
        Self {
            label,
            uri,
            exchange,
            routing_key,
            status,
            link: None,
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
        let connection = connect(&self.uri).await?;
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

    /// Publishes `batch` and awaits its confirms; one outcome per message. Sets `broken`
    /// when the connection must be opened again.
    async fn publish(
        &self,
        channel: &Channel,
        batch: &[Outgoing],
        broken: &mut Option<String>,
    ) -> Vec<Outcome> {
        let mut confirms = Vec::with_capacity(batch.len());
        for o in batch {
            let mut properties = o.message.properties.clone();
            if properties.message_id().is_none() {
                properties = properties.with_message_id(o.message_id().into());
            }
            let routing_key = self
                .routing_key
                .as_deref()
                .unwrap_or(&o.message.routing_key);
            let published = channel
                .basic_publish(
                    self.exchange.as_str().into(),
                    routing_key.into(),
                    BasicPublishOptions {
                        mandatory: true,
                        ..BasicPublishOptions::default()
                    },
                    &o.message.body,
                    properties,
                )
                .await;
            match published {
                Ok(confirm) => confirms.push(Ok(confirm)),
                Err(e) => {
                    let why = format!("basic.publish failed: {e}");
                    *broken = Some(why.clone());
                    confirms.push(Err(why));
                }
            }
        }
        // Every message is on its way; the confirms arrive in one pipelined stream.
        let mut outcomes = Vec::with_capacity(batch.len());
        let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
        for confirm in confirms {
            let outcome = match confirm {
                Err(why) => Outcome::Retry(why),
                Ok(confirm) => match tokio::time::timeout_at(deadline, confirm).await {
                    Ok(Ok(Confirmation::Ack(None))) => Outcome::Delivered,
                    Ok(Ok(
                        Confirmation::Ack(Some(returned)) | Confirmation::Nack(Some(returned)),
                    )) => Outcome::Rejected(format!(
                        "unroutable: exchange '{}' has no binding for routing key '{}' ({} {})",
                        returned.delivery.exchange,
                        returned.delivery.routing_key,
                        returned.reply_code,
                        returned.reply_text
                    )),
                    Ok(Ok(Confirmation::Nack(None))) => {
                        Outcome::Retry("the broker refused the message (basic.nack)".into())
                    }
                    Ok(Ok(Confirmation::NotRequested)) => {
                        *broken = Some("the channel is not in confirm mode".into());
                        Outcome::Retry("the channel is not in confirm mode".into())
                    }
                    Ok(Err(e)) => {
                        let why = format!("the channel failed: {e}");
                        *broken = Some(why.clone());
                        Outcome::Retry(why)
                    }
                    Err(_) => {
                        let why = format!(
                            "no publisher confirm within {} s",
                            CONFIRM_TIMEOUT.as_secs()
                        );
                        *broken = Some(why.clone());
                        Outcome::Retry(why)
                    }
                },
            };
            outcomes.push(outcome);
        }
        outcomes
    }
}

impl ExternalSink for RabbitmqSink {
    fn deliver<'a>(&'a mut self, batch: &'a [Outgoing]) -> BoxFuture<'a, Vec<Outcome>> {
        Box::pin(async move {
            let channel = match self.channel().await {
                Ok(c) => c,
                Err(why) => {
                    warn!(sink = %self.label, error = %why, "RabbitMQ sink is down; retrying");
                    self.status.down(&self.label, why.clone());
                    return vec![Outcome::Retry(why); batch.len()];
                }
            };
            let mut broken = None;
            let outcomes = self.publish(&channel, batch, &mut broken).await;
            if let Some(why) = broken {
                warn!(sink = %self.label, error = %why, "RabbitMQ sink connection failed; reconnecting");
                self.status.down(&self.label, why);
                if let Some((connection, _)) = self.link.take() {
                    let _ = connection
                        .close(200, "ferry sink reconnecting".into())
                        .await;
                }
            }
            outcomes
        })
    }
}
