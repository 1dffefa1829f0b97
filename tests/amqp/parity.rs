//! RabbitMQ parity where real applications hit it, driven by lapin: the delivery
//! acknowledgement timeout (`amqp.consumer_timeout_ms`, `x-consumer-timeout`) closes a
//! channel that holds a delivery too long, with RabbitMQ's 406 text, and requeues it; a
//! quorum queue stops a poison message after RabbitMQ 4's default 20 returns and keeps
//! two priority levels.

use crate::common::amqp::{WAIT, declare, publish_confirmed, reply_code, reply_text};
use crate::common::fronts::AmqpServer;
use crate::common::wait;
use futures::StreamExt;
use lapin::options::{
    BasicConsumeOptions, BasicGetOptions, BasicNackOptions, BasicPublishOptions,
    ConfirmSelectOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection};

/// RabbitMQ's text for a delivery not acknowledged within `ms` on channel `channel`.
fn timed_out(channel: u16, ms: u64) -> String {
    format!(
        "PRECONDITION_FAILED - delivery acknowledgement on channel {channel} timed out. \
         Timeout value used: {ms} ms. This timeout value can be configured, see consumers \
         doc guide to learn more"
    )
}

/// Takes one delivery of `queue` on a new channel of `conn` and never acknowledges it;
/// returns the channel's number and the error that closed it.
async fn hold_one_delivery(conn: &Connection, queue: &str) -> (u16, lapin::Error) {
    let ch = conn.create_channel().await.unwrap();
    let mut consumer = ch
        .basic_consume(
            queue.into(),
            "holder".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let first = tokio::time::timeout(WAIT, consumer.next())
        .await
        .expect("no delivery in time");
    assert!(matches!(first, Some(Ok(_))), "{first:?}");
    let closed = tokio::time::timeout(WAIT, consumer.next())
        .await
        .expect("the channel was not closed in time");
    match closed {
        Some(Err(e)) => (ch.id(), e),
        other => panic!("expected the channel's close, got {other:?}"),
    }
}

/// The message returned to `queue` (the closed channel's deliveries go back as it closes),
/// taken with basic.get on `ch`: (body, redelivered).
async fn get(ch: &Channel, queue: &str) -> (String, bool) {
    wait::until("the message back in the queue", WAIT, async || {
        let got = ch
            .basic_get(queue.into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()?;
        Some((
            String::from_utf8(got.delivery.data.clone()).unwrap(),
            got.delivery.redelivered,
        ))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_held_past_x_consumer_timeout_closes_its_channel_and_returns() {
    let server = AmqpServer::start().await;
    let conn = server.connect().await;
    let ch = conn.create_channel().await.unwrap();
    let mut args = FieldTable::default();
    args.insert("x-consumer-timeout".into(), AMQPValue::LongLongInt(300));
    declare(&ch, "held", args).await;
    publish_confirmed(&ch, "", "held", &["slow work"]).await;

    let (channel, e) = hold_one_delivery(&conn, "held").await;
    assert_eq!(reply_code(&e), Some(406), "{e}");
    assert_eq!(reply_text(&e), timed_out(channel, 300));
    // The connection and its other channels live on; the delivery is back, redelivered.
    assert_eq!(get(&ch, "held").await, ("slow work".to_owned(), true));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amqp_consumer_timeout_ms_applies_to_queues_without_their_own() {
    let server = AmqpServer::start_with(|c| c.consumer_timeout_ms = 400).await;
    let conn = server.connect().await;
    let ch = conn.create_channel().await.unwrap();
    declare(&ch, "plain", FieldTable::default()).await;
    publish_confirmed(&ch, "", "plain", &["late"]).await;

    let (channel, e) = hold_one_delivery(&conn, "plain").await;
    assert_eq!(reply_text(&e), timed_out(channel, 400));
    assert_eq!(get(&ch, "plain").await, ("late".to_owned(), true));

    // A basic.get delivery is held to the same limit.
    publish_confirmed(&ch, "", "plain", &["got"]).await;
    let getter = conn.create_channel().await.unwrap();
    let got = getter
        .basic_get("plain".into(), BasicGetOptions { no_ack: false })
        .await
        .unwrap();
    assert!(got.is_some());
    wait::until("the getting channel closed", WAIT, async || {
        (!getter.status().connected()).then_some(())
    })
    .await;
    assert_eq!(get(&ch, "plain").await, ("got".to_owned(), true));
    server.stop().await;
}

/// Takes the one message of `queue` with basic.get and returns it with a requeuing nack
/// until it is gone (dead-lettered); returns each delivery's `x-delivery-count` header.
async fn return_until_gone(ch: &Channel, queue: &str, most: usize) -> Vec<Option<i64>> {
    let mut counts = Vec::new();
    for _ in 0..most {
        // A requeuing nack is committed before the channel's next method: the message is
        // back for this get, unless it was dead-lettered.
        let got = ch
            .basic_get(queue.into(), BasicGetOptions { no_ack: false })
            .await
            .unwrap();
        let Some(got) = got else { break };
        let count = got
            .delivery
            .properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get("x-delivery-count").cloned())
            .and_then(|v| ferry_amqp::integer(&v));
        counts.push(count);
        ch.basic_nack(
            got.delivery.delivery_tag,
            BasicNackOptions {
                requeue: true,
                ..BasicNackOptions::default()
            },
        )
        .await
        .unwrap();
    }
    counts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_queue_dead_letters_a_poison_message_after_20_returns_by_default() {
    let server = AmqpServer::start().await;
    let conn = server.connect().await;
    let ch = conn.create_channel().await.unwrap();
    let quorum = |extra: &[(&str, AMQPValue)]| {
        let mut args = FieldTable::default();
        args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("quorum".into()),
        );
        args.insert(
            "x-dead-letter-exchange".into(),
            AMQPValue::LongString("".into()),
        );
        args.insert(
            "x-dead-letter-routing-key".into(),
            AMQPValue::LongString("poison".into()),
        );
        for (k, v) in extra {
            args.insert((*k).into(), v.clone());
        }
        args
    };
    declare(&ch, "poison", FieldTable::default()).await;
    declare(&ch, "work", quorum(&[])).await;
    publish_confirmed(&ch, "", "work", &["bad"]).await;
    let counts = return_until_gone(&ch, "work", 30).await;
    // RabbitMQ 4: 20 returns allowed, the 21st dead-letters; the header on redeliveries.
    let expected: Vec<Option<i64>> = std::iter::once(None).chain((1..=20).map(Some)).collect();
    assert_eq!(counts, expected);
    // The dead-letter router moves it to the dead-letter exchange's queue.
    let dead = wait::until("the message dead-lettered", WAIT, async || {
        ch.basic_get("poison".into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()
    })
    .await;
    assert_eq!(dead.delivery.data, b"bad");

    // -1: no limit.
    declare(
        &ch,
        "patient",
        quorum(&[("x-delivery-limit", AMQPValue::LongInt(-1))]),
    )
    .await;
    publish_confirmed(&ch, "", "patient", &["retried"]).await;
    assert_eq!(return_until_gone(&ch, "patient", 25).await.len(), 25);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_queue_delivers_high_priority_messages_first_without_x_max_priority() {
    let server = AmqpServer::start().await;
    let conn = server.connect().await;
    let ch = conn.create_channel().await.unwrap();
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("quorum".into()),
    );
    declare(&ch, "two-levels", args).await;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    for (body, priority) in [("low 0", 0), ("low 4", 4), ("high 9", 9), ("high 5", 5)] {
        ch.basic_publish(
            "".into(),
            "two-levels".into(),
            BasicPublishOptions::default(),
            body.as_bytes(),
            BasicProperties::default().with_priority(priority),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    }
    let mut order = Vec::new();
    while let Some(got) = ch
        .basic_get("two-levels".into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
    {
        order.push(String::from_utf8(got.delivery.data.clone()).unwrap());
    }
    // RabbitMQ 4: above 4 is high, FIFO within each level; a message keeps its property.
    assert_eq!(order, ["high 9", "high 5", "low 0", "low 4"]);
    server.stop().await;
}
