//! lapin helpers shared by the AMQP tests, whatever serves the AMQP (an in-process front,
//! the daemon, the private RabbitMQ node): connecting with a bounded wait, declaring,
//! publishing under confirms, draining a queue, and reading reply codes out of lapin's
//! errors.

use futures::{Stream, StreamExt};
use lapin::message::Delivery;
use lapin::options::{
    BasicConsumeOptions, BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{
    BasicProperties, Channel, Connection, ConnectionProperties, Consumer, Event, ExchangeKind,
};
use std::time::Duration;

/// Upper bound on anything a test waits for.
pub const WAIT: Duration = Duration::from_secs(10);

/// Upper bound on a publish confirm: a message of 100 MiB takes seconds to store in a
/// debug build on a loaded machine.
pub const CONFIRM_WAIT: Duration = Duration::from_secs(120);

/// A body of `len` bytes that no shifted or truncated copy equals (for large messages).
pub fn payload(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 24) as u8)
        .collect()
}

/// The next delivery of `consumer`; panics when none comes within [`WAIT`].
pub async fn next(consumer: &mut Consumer) -> Delivery {
    next_within(consumer, WAIT).await
}

/// The next delivery within `wait` (a large body takes longer than [`WAIT`] on a loaded
/// machine).
pub async fn next_within(consumer: &mut Consumer, wait: Duration) -> Delivery {
    tokio::time::timeout(wait, consumer.next())
        .await
        .expect("no delivery in time")
        .expect("the consumer ended")
        .expect("delivery error")
}

/// A consumer of `queue` with a server-named tag.
pub async fn consume(ch: &Channel, queue: &str, no_ack: bool) -> Consumer {
    ch.basic_consume(
        queue.into(),
        "".into(),
        BasicConsumeOptions {
            no_ack,
            ..BasicConsumeOptions::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap()
}

/// The ready messages of `queue` (a passive declare).
pub async fn ready(ch: &Channel, queue: &str) -> u32 {
    ch.queue_declare(
        queue.into(),
        QueueDeclareOptions {
            passive: true,
            ..QueueDeclareOptions::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap()
    .message_count()
}

/// A lapin connection to `uri`; panics when it takes longer than [`WAIT`].
pub async fn connect(uri: &str) -> Connection {
    tokio::time::timeout(
        WAIT,
        Connection::connect(uri, ConnectionProperties::default()),
    )
    .await
    .expect("connecting took too long")
    .expect("connect")
}

/// A channel on a new connection to `uri`.
pub async fn channel(uri: &str) -> (Connection, Channel) {
    let conn = connect(uri).await;
    let ch = conn.create_channel().await.unwrap();
    (conn, ch)
}

/// The AMQP reply code in a lapin error, if it carries one.
pub fn reply_code(e: &lapin::Error) -> Option<u16> {
    match e.kind() {
        lapin::ErrorKind::ProtocolError(amqp) => Some(amqp.get_id()),
        _ => None,
    }
}

/// The reply text in a lapin error, if it carries one.
pub fn reply_text(e: &lapin::Error) -> String {
    match e.kind() {
        lapin::ErrorKind::ProtocolError(amqp) => amqp.get_message().to_string(),
        other => format!("{other:?}"),
    }
}

/// Declares a durable exchange `name` of `kind`.
pub async fn declare_exchange(ch: &Channel, name: &str, kind: ExchangeKind) {
    ch.exchange_declare(
        name.into(),
        kind,
        ExchangeDeclareOptions {
            durable: true,
            ..ExchangeDeclareOptions::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
}

/// Declares a durable queue `name` with `args`.
pub async fn declare(ch: &Channel, name: &str, args: FieldTable) {
    ch.queue_declare(
        name.into(),
        QueueDeclareOptions {
            durable: true,
            ..QueueDeclareOptions::default()
        },
        args,
    )
    .await
    .unwrap();
}

/// Declares the durable queue `queue` (again, when it exists) and binds it to `exchange`
/// with `key`.
pub async fn declare_bound(ch: &Channel, queue: &str, exchange: &str, key: &str) {
    declare(ch, queue, FieldTable::default()).await;
    ch.queue_bind(
        queue.into(),
        exchange.into(),
        key.into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
}

/// Publishes `body` with `properties` to `exchange` with `key` on a channel in confirm
/// mode, and checks (waiting up to [`CONFIRM_WAIT`]) that it was acked.
pub async fn publish_acked(
    ch: &Channel,
    exchange: &str,
    key: &str,
    body: &[u8],
    properties: BasicProperties,
) {
    let confirm = ch
        .basic_publish(
            exchange.into(),
            key.into(),
            BasicPublishOptions::default(),
            body,
            properties,
        )
        .await
        .unwrap();
    let confirm = tokio::time::timeout(CONFIRM_WAIT, confirm)
        .await
        .unwrap()
        .unwrap();
    assert!(confirm.is_ack(), "{confirm:?}");
}

/// Publishes `bodies` to `exchange` with `routing_key` under confirms, and checks every one
/// was acked.
pub async fn publish_confirmed(ch: &Channel, exchange: &str, routing_key: &str, bodies: &[&str]) {
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let mut confirms = Vec::new();
    for body in bodies {
        confirms.push(
            ch.basic_publish(
                exchange.into(),
                routing_key.into(),
                BasicPublishOptions::default(),
                body.as_bytes(),
                BasicProperties::default().with_delivery_mode(2),
            )
            .await
            .unwrap(),
        );
    }
    for confirm in confirms {
        let c = tokio::time::timeout(WAIT, confirm).await.unwrap().unwrap();
        assert!(c.is_ack(), "{c:?}");
    }
}

/// Waits (up to [`WAIT`]) for connection.blocked among a connection's `events`; its reason.
pub async fn blocked(events: &mut (impl Stream<Item = Event> + Unpin)) -> String {
    tokio::time::timeout(WAIT, async {
        loop {
            if let Some(Event::ConnectionBlocked(reason)) = events.next().await {
                return reason;
            }
        }
    })
    .await
    .expect("no connection.blocked")
}

/// Waits (up to [`WAIT`]) for connection.unblocked among a connection's `events`.
pub async fn unblocked(events: &mut (impl Stream<Item = Event> + Unpin)) {
    tokio::time::timeout(WAIT, async {
        loop {
            if let Some(Event::ConnectionUnblocked) = events.next().await {
                return;
            }
        }
    })
    .await
    .expect("no connection.unblocked");
}

/// Takes every message of `queue` with basic.get (acking each), as strings.
pub async fn drain(ch: &Channel, queue: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Bounded: a queue that never empties fails the test instead of hanging it.
    for _ in 0..10_000 {
        let got = ch
            .basic_get(
                queue.into(),
                lapin::options::BasicGetOptions { no_ack: true },
            )
            .await
            .unwrap();
        match got {
            Some(m) => out.push(String::from_utf8(m.delivery.data.clone()).unwrap()),
            None => return out,
        }
    }
    panic!("queue {queue} did not empty");
}

/// A lapin connection over TLS to `uri` (`amqps://…`), trusting `ca_pem` and presenting
/// `identity` (certificate and PKCS#8 key, PEM) when given; lapin's error when the server
/// refuses it. Panics when it takes longer than [`WAIT`].
pub async fn connect_tls(
    uri: &str,
    ca_pem: &str,
    identity: Option<(&str, &str)>,
) -> lapin::Result<Connection> {
    let config = lapin::tcp::OwnedTLSConfig {
        identity: identity.map(|(cert, key)| lapin::tcp::OwnedIdentity::PKCS8 {
            pem: cert.as_bytes().to_vec(),
            key: key.as_bytes().to_vec(),
        }),
        cert_chain: Some(ca_pem.to_owned()),
    };
    let runtime = lapin::runtime::default_runtime().unwrap();
    tokio::time::timeout(
        WAIT,
        Connection::connect_with_config(uri, ConnectionProperties::default(), config, runtime),
    )
    .await
    .expect("connecting took too long")
}
