//! Delayed-message exchanges (`x-delayed-message`, as the archived RabbitMQ plugin offered
//! them) driven by lapin in-process, and by pika against the `ferry` binary killed with
//! SIGKILL while it holds delayed messages (tests/python/amqp_delayed.py): declares and
//! their errors, messages routed by their due time with `x-delay` negated, publish order
//! kept among messages due together, held messages dropped with their exchange, the
//! `ferry_amqp_delayed_messages` gauge, held messages routed after a restart, and two
//! instances whose movers race for every message routing each once.

use crate::common::amqp::{WAIT, declare_bound, publish_acked, ready, reply_code, reply_text};
use crate::common::clients::{python_script, run};
use crate::common::daemon::{Daemon, Setup};
use crate::common::fronts::AmqpServer;
use crate::common::wait;
use lapin::options::{
    BasicGetOptions, BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions,
    ExchangeDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, ExchangeKind};

/// Declares the durable delayed-message exchange `name` routing as `routing`.
pub(crate) async fn declare_delayed(
    ch: &Channel,
    name: &str,
    routing: &str,
) -> Result<(), lapin::Error> {
    let mut args = FieldTable::default();
    args.insert(
        "x-delayed-type".into(),
        AMQPValue::LongString(routing.into()),
    );
    ch.exchange_declare(
        name.into(),
        ExchangeKind::Custom("x-delayed-message".into()),
        ExchangeDeclareOptions {
            durable: true,
            ..ExchangeDeclareOptions::default()
        },
        args,
    )
    .await
}

/// Publishes `body` to `exchange` with `key` and, when given, the header `x-delay` (as
/// `value`); waits for its confirm (the channel is in confirm mode).
async fn publish(ch: &Channel, exchange: &str, key: &str, body: &str, delay: Option<AMQPValue>) {
    let mut headers = FieldTable::default();
    if let Some(delay) = delay {
        headers.insert("x-delay".into(), delay);
    }
    let properties = BasicProperties::default()
        .with_delivery_mode(2)
        .with_headers(headers);
    publish_acked(ch, exchange, key, body.as_bytes(), properties).await;
}

/// The next message of `queue` (waiting for one): its body and its `x-delay` header.
async fn next(ch: &Channel, queue: &str) -> (String, Option<AMQPValue>) {
    wait::until("a message in the queue", WAIT, async || {
        let got = ch
            .basic_get(queue.into(), BasicGetOptions { no_ack: true })
            .await
            .unwrap()?;
        let delay = got
            .delivery
            .properties
            .headers()
            .as_ref()
            .and_then(|h| h.inner().get("x-delay").cloned());
        Some((String::from_utf8(got.delivery.data.clone()).unwrap(), delay))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_exchange_needs_an_existing_x_delayed_type() {
    let server = AmqpServer::start().await;
    let conn = server.connect().await;
    for (routing, code, text) in [
        (
            None,
            406,
            "PRECONDITION_FAILED - Invalid argument, 'x-delayed-type' must be an existing exchange type",
        ),
        (
            Some("nope"),
            503,
            "COMMAND_INVALID - unknown exchange type 'nope'",
        ),
    ] {
        let ch = conn.create_channel().await.unwrap();
        let e = match routing {
            Some(routing) => declare_delayed(&ch, "d", routing).await.unwrap_err(),
            None => ch
                .exchange_declare(
                    "d".into(),
                    ExchangeKind::Custom("x-delayed-message".into()),
                    ExchangeDeclareOptions::default(),
                    FieldTable::default(),
                )
                .await
                .unwrap_err(),
        };
        assert_eq!(reply_code(&e), Some(code), "{e}");
        assert_eq!(reply_text(&e), text);
    }
    // A redeclare with another x-delayed-type is inequivalent.
    let conn = server.connect().await;
    let ch = conn.create_channel().await.unwrap();
    declare_delayed(&ch, "d", "direct").await.unwrap();
    declare_delayed(&ch, "d", "direct").await.unwrap();
    let e = declare_delayed(&ch, "d", "topic").await.unwrap_err();
    assert_eq!(reply_code(&e), Some(406), "{e}");
    assert_eq!(
        reply_text(&e),
        "PRECONDITION_FAILED - inequivalent arg 'x-delayed-type' for exchange 'd' in vhost '/': received 'topic' but current is 'direct'"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_are_routed_by_their_delayed_type_when_due_with_x_delay_negated() {
    let server = AmqpServer::start().await;
    let (_conn, ch) = server.channel().await;
    declare_delayed(&ch, "later", "topic").await.unwrap();
    declare_bound(&ch, "orders", "later", "orders.#").await;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    // The plugin reads x-delay of any integer type, a decimal string or a float.
    publish(
        &ch,
        "later",
        "orders.eu",
        "slow",
        Some(AMQPValue::LongLongInt(3000)),
    )
    .await;
    publish(
        &ch,
        "later",
        "orders.us",
        "quick",
        Some(AMQPValue::LongString("1500".into())),
    )
    .await;
    publish(&ch, "later", "orders.eu", "now", None).await;
    publish(
        &ch,
        "later",
        "orders.eu",
        "zero",
        Some(AMQPValue::LongInt(0)),
    )
    .await;
    publish(
        &ch,
        "later",
        "orders.eu",
        "negative",
        Some(AMQPValue::Double(-5.0)),
    )
    .await;
    publish(
        &ch,
        "later",
        "other",
        "unbound",
        Some(AMQPValue::LongInt(100)),
    )
    .await;
    // Not yet due: only the undelayed messages are in the queue.
    assert_eq!(ready(&ch, "orders").await, 3);
    let got = [
        next(&ch, "orders").await,
        next(&ch, "orders").await,
        next(&ch, "orders").await,
        next(&ch, "orders").await,
        next(&ch, "orders").await,
    ];
    assert_eq!(
        got,
        [
            ("now".to_owned(), None),
            ("zero".to_owned(), Some(AMQPValue::LongInt(0))),
            ("negative".to_owned(), Some(AMQPValue::Double(-5.0))),
            ("quick".to_owned(), Some(AMQPValue::LongInt(-1500))),
            ("slow".to_owned(), Some(AMQPValue::LongInt(-3000))),
        ]
    );
    // The unroutable one was dropped when due, as the plugin drops it.
    assert_eq!(ready(&ch, "orders").await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_due_together_keep_their_publish_order() {
    let server = AmqpServer::start().await;
    let (_conn, ch) = server.channel().await;
    declare_delayed(&ch, "batch", "fanout").await.unwrap();
    declare_bound(&ch, "ordered", "batch", "").await;
    // One transaction: one commit, so one due time for all of them.
    ch.tx_select().await.unwrap();
    let bodies: Vec<String> = (0..50).map(|i| format!("m{i:02}")).collect();
    for body in &bodies {
        ch.basic_publish(
            "batch".into(),
            "".into(),
            BasicPublishOptions::default(),
            body.as_bytes(),
            BasicProperties::default().with_headers(FieldTable::from(
                std::collections::BTreeMap::from([(
                    ShortString::from("x-delay"),
                    AMQPValue::LongInt(300),
                )]),
            )),
        )
        .await
        .unwrap();
    }
    ch.tx_commit().await.unwrap();
    let mut got = Vec::new();
    for _ in &bodies {
        got.push(next(&ch, "ordered").await.0);
    }
    assert_eq!(got, bodies);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_delayed_exchange_drops_what_it_holds() {
    let server = AmqpServer::start().await;
    let (_conn, ch) = server.channel().await;
    declare_delayed(&ch, "gone", "direct").await.unwrap();
    declare_bound(&ch, "after", "gone", "k").await;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    publish(&ch, "gone", "k", "dropped", Some(AMQPValue::LongInt(2000))).await;
    ch.exchange_delete("gone".into(), ExchangeDeleteOptions::default())
        .await
        .unwrap();
    // A new exchange of the same name holds nothing of the old one's: the one message that
    // arrives is the one published to it, due after the dropped one would have been.
    declare_delayed(&ch, "gone", "direct").await.unwrap();
    declare_bound(&ch, "after", "gone", "k").await;
    publish(&ch, "gone", "k", "kept", Some(AMQPValue::LongInt(2500))).await;
    assert_eq!(next(&ch, "after").await.0, "kept");
    assert_eq!(ready(&ch, "after").await, 0);
}

#[tokio::test(flavor = "multi_thread")]
async fn held_messages_survive_kill_9_and_are_routed_when_due() {
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = Setup::shipped(dir.path()).start();
    let port = ferry.ports().amqp.to_string();
    let script = python_script("amqp_delayed.py");
    let phase = async |phase: &str| {
        let output = run("python3", &[&script, &port, phase], b"").await;
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            "OK",
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let held = |ferry: &Daemon| {
        ferry.metric(
            "ferry_amqp_delayed_messages",
            &[r#"vhost="/""#, r#"exchange="later""#],
        )
    };
    phase("run").await;
    ferry.wait_for("five messages held", WAIT, |f| held(f) == 5.0);
    ferry.kill_and_restart();
    phase("after-restart").await;
    ferry.wait_for("no message held", WAIT, |f| held(f) == 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_route_each_held_message_once() {
    let server = AmqpServer::start().await;
    // A second instance over the same store: its mover races this one's for every message.
    let peer = server.peer_with(|_| {}).await;
    let (_conn, ch) = server.channel().await;
    declare_delayed(&ch, "raced", "direct").await.unwrap();
    declare_bound(&ch, "once", "raced", "k").await;
    ch.tx_select().await.unwrap();
    let bodies: Vec<String> = (0..100).map(|i| format!("m{i:03}")).collect();
    for (i, body) in bodies.iter().enumerate() {
        ch.basic_publish(
            "raced".into(),
            "k".into(),
            BasicPublishOptions::default(),
            body.as_bytes(),
            BasicProperties::default().with_headers(FieldTable::from(
                std::collections::BTreeMap::from([(
                    ShortString::from("x-delay"),
                    AMQPValue::LongInt(200 + (i as i32 % 5) * 50),
                )]),
            )),
        )
        .await
        .unwrap();
    }
    ch.tx_commit().await.unwrap();
    let mut got = Vec::new();
    for _ in &bodies {
        got.push(next(&ch, "once").await.0);
    }
    got.sort();
    assert_eq!(got, bodies);
    // Nothing more comes: every held message is gone from the store.
    let (_peer_conn, peer_ch) =
        crate::common::amqp::channel(&format!("amqp://guest:guest@{}/%2f", peer.addr)).await;
    declare_delayed(&peer_ch, "raced", "direct").await.unwrap();
    publish_sentinel(&peer_ch).await;
    assert_eq!(next(&ch, "once").await.0, "sentinel");
    assert_eq!(ready(&ch, "once").await, 0);
    peer.stop().await;
}

/// Publishes "sentinel" through the delayed exchange "raced" with a delay past every
/// message of [`two_instances_route_each_held_message_once`].
async fn publish_sentinel(ch: &Channel) {
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    publish(ch, "raced", "k", "sentinel", Some(AMQPValue::LongInt(500))).await;
}
