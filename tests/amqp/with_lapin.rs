//! The AMQP 0-9-1 front driven by lapin, a real RabbitMQ client: connection and
//! handshake, topology, publishing with confirms and transactions, consuming with
//! prefetch and acknowledgements, TTL and dead-lettering, and channel exceptions — each
//! with the outcome RabbitMQ gives.

use crate::common::amqp::{
    WAIT, blocked, connect, consume, declare, declare_exchange, drain, next, publish_confirmed,
    ready, reply_code, reply_text, unblocked,
};
use crate::common::fronts::{AmqpServer, OTHER_USER, SCRAM_USER, TLS_USER};
use crate::common::wait;
use futures::StreamExt;
use lapin::message::Delivery;
use lapin::options::{
    BasicAckOptions, BasicCancelOptions, BasicConsumeOptions, BasicGetOptions, BasicNackOptions,
    BasicPublishOptions, BasicQosOptions, BasicRecoverOptions, BasicRejectOptions,
    ConfirmSelectOptions, ExchangeBindOptions, ExchangeDeclareOptions, ExchangeDeleteOptions,
    ExchangeUnbindOptions, QueueBindOptions, QueueDeclareOptions, QueueDeleteOptions,
    QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, ExchangeKind};

fn table(entries: &[(&str, AMQPValue)]) -> FieldTable {
    let mut t = FieldTable::default();
    for (k, v) in entries {
        t.insert((*k).into(), v.clone());
    }
    t
}

fn long(s: &str) -> AMQPValue {
    AMQPValue::LongString(s.into())
}

fn body(d: &Delivery) -> String {
    String::from_utf8(d.data.clone()).unwrap()
}

async fn bind(ch: &Channel, queue: &str, exchange: &str, key: &str, args: FieldTable) {
    ch.queue_bind(
        queue.into(),
        exchange.into(),
        key.into(),
        QueueBindOptions::default(),
        args,
    )
    .await
    .unwrap();
}

async fn publish(ch: &Channel, exchange: &str, key: &str, body: &str, properties: BasicProperties) {
    ch.basic_publish(
        exchange.into(),
        key.into(),
        BasicPublishOptions::default(),
        body.as_bytes(),
        properties,
    )
    .await
    .unwrap()
    .await
    .unwrap();
}

/// Publishes in confirm mode and returns the channel exception the publish caused (lapin
/// fails the pending confirm with it).
async fn publish_fails(ch: &Channel, exchange: &str, key: &str, payload: &[u8]) -> lapin::Error {
    publish_with_fails(ch, exchange, key, payload, BasicProperties::default()).await
}

/// [`publish_fails`] with `properties`.
async fn publish_with_fails(
    ch: &Channel,
    exchange: &str,
    key: &str,
    payload: &[u8],
    properties: BasicProperties,
) -> lapin::Error {
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let confirm = ch
        .basic_publish(
            exchange.into(),
            key.into(),
            BasicPublishOptions::default(),
            payload,
            properties,
        )
        .await
        .unwrap();
    failure(tokio::time::timeout(WAIT, confirm).await.unwrap())
}

/// The error of an operation that must fail.
fn failure<T: std::fmt::Debug>(result: lapin::Result<T>) -> lapin::Error {
    result.expect_err("the operation should have failed")
}

// ----- 1. Listener and connection -----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_and_amqplain_logins_open_the_default_vhost() {
    let server = AmqpServer::start().await;
    let plain = server.connect().await;
    let amqplain = connect(&format!("{}?auth_mechanism=amqplain", server.uri())).await;
    assert!(plain.status().connected());
    assert!(amqplain.status().connected());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_refused_with_403() {
    let server = AmqpServer::start().await;
    let uri = format!("amqp://guest:wrong@{}/%2f", server.addr);
    let e = failure(lapin::Connection::connect(&uri, Default::default()).await);
    assert_eq!(reply_code(&e), Some(403), "{e}");
    assert!(reply_text(&e).contains("invalid credentials"), "{e}");
    // The server keeps serving.
    assert!(server.connect().await.status().connected());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_requiring_tls_is_refused_on_the_plaintext_listener_with_403() {
    let server = AmqpServer::start().await;
    let uri = format!("amqp://{}:{}@{}/%2f", TLS_USER.0, TLS_USER.1, server.addr);
    let e = failure(lapin::Connection::connect(&uri, Default::default()).await);
    assert_eq!(reply_code(&e), Some(403), "{e}");
    assert_eq!(
        reply_text(&e),
        "ACCESS_REFUSED - user 'tls-user' must connect over TLS (its require_tls is set)"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_with_only_scram_credentials_logs_in_with_plain() {
    let server = AmqpServer::start().await;
    let uri = format!(
        "amqp://{}:{}@{}/%2f",
        SCRAM_USER.0, SCRAM_USER.1, server.addr
    );
    assert!(connect(&uri).await.status().connected());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vhost_without_permissions_and_an_unknown_vhost_are_530() {
    let server = AmqpServer::start().await;
    let refused = format!("amqp://guest:guest@{}/other", server.addr);
    let e = failure(lapin::Connection::connect(&refused, Default::default()).await);
    assert_eq!(reply_code(&e), Some(530), "{e}");
    assert_eq!(
        reply_text(&e),
        "NOT_ALLOWED - access to vhost 'other' refused for user 'guest'"
    );
    let unknown = format!("amqp://guest:guest@{}/nowhere", server.addr);
    let e = failure(lapin::Connection::connect(&unknown, Default::default()).await);
    assert_eq!(reply_code(&e), Some(530), "{e}");
    let allowed = format!(
        "amqp://{}:{}@{}/other",
        OTHER_USER.0, OTHER_USER.1, server.addr
    );
    assert!(connect(&allowed).await.status().connected());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tune_negotiates_the_servers_limits() {
    let server = AmqpServer::start_with(|c| {
        c.frame_max = 8192;
        c.channel_max = 7;
        c.heartbeat_s = 3;
    })
    .await;
    let conn = server.connect().await;
    let tuned = conn.configuration();
    assert_eq!(
        (tuned.frame_max(), tuned.channel_max(), tuned.heartbeat()),
        (8192, 7, 3)
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishers_are_blocked_while_memory_is_above_the_mark_and_consumers_go_on() {
    let server = AmqpServer::start().await;
    let (_consuming, consumer_ch) = server.channel().await;
    declare(&consumer_ch, "memory", FieldTable::default()).await;
    publish_confirmed(&consumer_ch, "", "memory", &["before"]).await;
    let conn = server.connect().await;
    let mut events = Box::pin(conn.events_listener());
    let ch = conn.create_channel().await.unwrap();
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();

    let reason = "900 MiB resident memory exceeds daemon.max_memory_mb (800)";
    server.memory_alarm(Some(reason));
    // The alarm reaches a connection when it publishes (once the front has heard of it):
    // publish one message at a time until one is held.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopping = stop.clone();
    let publisher = tokio::spawn(async move {
        let mut confirmed = Vec::new();
        for i in 0..10_000 {
            if stopping.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            let body = format!("m{i}");
            let confirm = ch
                .basic_publish(
                    "".into(),
                    "memory".into(),
                    Default::default(),
                    body.as_bytes(),
                    Default::default(),
                )
                .await
                .unwrap();
            assert!(confirm.await.unwrap().is_ack());
            confirmed.push(body);
        }
        confirmed
    });
    assert_eq!(blocked(&mut events).await, reason);
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    // Consumers are not held back: what was there drains, the held publish is not in it.
    let during = drain(&consumer_ch, "memory").await;
    assert_eq!(during.first().map(String::as_str), Some("before"));
    assert!(
        !publisher.is_finished(),
        "a publish was taken during the alarm"
    );

    server.memory_alarm(None);
    unblocked(&mut events).await;
    let confirmed = tokio::time::timeout(WAIT, publisher)
        .await
        .expect("the held publish completes once the alarm clears")
        .unwrap();
    let after = drain(&consumer_ch, "memory").await;
    assert_eq!([&during[1..], &after[..]].concat(), confirmed);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishers_are_blocked_over_the_backlog_limit_and_unblocked_below_it() {
    let server = AmqpServer::start_with(|c| {
        c.max_backlog_messages = 3;
        c.resource_check_ms = 20;
    })
    .await;
    let conn = server.connect().await;
    let mut events = Box::pin(conn.events_listener());
    let ch = conn.create_channel().await.unwrap();
    declare(&ch, "backlog", FieldTable::default()).await;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    // Publish one message at a time until one is held: the alarm blocks a connection when
    // it publishes while the backlog is over the limit.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (publishing, stopping) = (ch.clone(), stop.clone());
    let publisher = tokio::spawn(async move {
        for _ in 0..10_000 {
            if stopping.load(std::sync::atomic::Ordering::SeqCst) {
                return;
            }
            let confirm = publishing
                .basic_publish(
                    "".into(),
                    "backlog".into(),
                    Default::default(),
                    b"m",
                    Default::default(),
                )
                .await
                .unwrap();
            assert!(confirm.await.unwrap().is_ack());
        }
    });
    let blocked = blocked(&mut events).await;
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(
        blocked.ends_with("ready messages exceed amqp.max_backlog_messages (3)"),
        "{blocked}"
    );
    let (_other, ch2) = server.channel().await;
    ch2.queue_purge("backlog".into(), QueuePurgeOptions::default())
        .await
        .unwrap();
    unblocked(&mut events).await;
    tokio::time::timeout(WAIT, publisher)
        .await
        .expect("the held publish completes once unblocked")
        .unwrap();
    server.stop().await;
}

// ----- 2. Topology -----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_fanout_topic_and_headers_exchanges_route_like_rabbitmq() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    for q in ["d", "f1", "f2", "t", "h"] {
        declare(&ch, q, FieldTable::default()).await;
    }
    declare_exchange(&ch, "x.direct", ExchangeKind::Direct).await;
    declare_exchange(&ch, "x.fanout", ExchangeKind::Fanout).await;
    declare_exchange(&ch, "x.topic", ExchangeKind::Topic).await;
    declare_exchange(&ch, "x.headers", ExchangeKind::Headers).await;
    bind(&ch, "d", "x.direct", "red", FieldTable::default()).await;
    bind(&ch, "f1", "x.fanout", "", FieldTable::default()).await;
    bind(&ch, "f2", "x.fanout", "", FieldTable::default()).await;
    bind(&ch, "t", "x.topic", "orders.*.eu.#", FieldTable::default()).await;
    bind(
        &ch,
        "h",
        "x.headers",
        "",
        table(&[
            ("x-match", long("any")),
            ("format", long("pdf")),
            ("size", long("big")),
        ]),
    )
    .await;
    let plain = BasicProperties::default;
    publish(&ch, "x.direct", "red", "direct hit", plain()).await;
    publish(&ch, "x.direct", "blue", "direct miss", plain()).await;
    publish(&ch, "x.fanout", "whatever", "fanned", plain()).await;
    publish(&ch, "x.topic", "orders.new.eu", "topic hit", plain()).await;
    publish(
        &ch,
        "x.topic",
        "orders.new.eu.de.berlin",
        "topic deep",
        plain(),
    )
    .await;
    publish(&ch, "x.topic", "orders.eu", "topic miss", plain()).await;
    let pdf = plain().with_headers(table(&[("format", long("pdf"))]));
    publish(&ch, "x.headers", "", "headers hit", pdf).await;
    publish(&ch, "x.headers", "", "headers miss", plain()).await;
    publish(&ch, "amq.direct", "nobody", "amq.direct exists", plain()).await;
    assert_eq!(drain(&ch, "d").await, ["direct hit"]);
    assert_eq!(drain(&ch, "f1").await, ["fanned"]);
    assert_eq!(drain(&ch, "f2").await, ["fanned"]);
    assert_eq!(drain(&ch, "t").await, ["topic hit", "topic deep"]);
    assert_eq!(drain(&ch, "h").await, ["headers hit"]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_to_exchange_bindings_route_until_unbound() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "e2e", FieldTable::default()).await;
    declare_exchange(&ch, "upstream", ExchangeKind::Topic).await;
    declare_exchange(&ch, "downstream", ExchangeKind::Direct).await;
    ch.exchange_bind(
        "downstream".into(),
        "upstream".into(),
        "a.*".into(),
        ExchangeBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    bind(&ch, "e2e", "downstream", "a.b", FieldTable::default()).await;
    publish(
        &ch,
        "upstream",
        "a.b",
        "through two",
        BasicProperties::default(),
    )
    .await;
    publish(
        &ch,
        "upstream",
        "a.c",
        "stops downstream",
        BasicProperties::default(),
    )
    .await;
    assert_eq!(drain(&ch, "e2e").await, ["through two"]);
    ch.exchange_unbind(
        "downstream".into(),
        "upstream".into(),
        "a.*".into(),
        ExchangeUnbindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    publish(
        &ch,
        "upstream",
        "a.b",
        "unbound",
        BasicProperties::default(),
    )
    .await;
    assert!(drain(&ch, "e2e").await.is_empty());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_exchange_routes_by_queue_name_and_cannot_be_bound() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "by-name", FieldTable::default()).await;
    publish(
        &ch,
        "",
        "by-name",
        "direct to queue",
        BasicProperties::default(),
    )
    .await;
    assert_eq!(drain(&ch, "by-name").await, ["direct to queue"]);
    let e = failure(
        ch.queue_bind(
            "by-name".into(),
            "".into(),
            "k".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await,
    );
    assert_eq!(reply_code(&e), Some(403), "{e}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_internal_exchange_refuses_publishes_with_403() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    ch.exchange_declare(
        "inside".into(),
        ExchangeKind::Fanout,
        ExchangeDeclareOptions {
            internal: true,
            ..ExchangeDeclareOptions::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    let e = publish_fails(&ch, "inside", "", b"x").await;
    assert_eq!(
        reply_text(&e),
        "ACCESS_REFUSED - cannot publish to internal exchange 'inside' in vhost '/'"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passive_declares_of_missing_entities_are_404() {
    let server = AmqpServer::start().await;
    let conn = server.connect().await;
    let ch = conn.create_channel().await.unwrap();
    let e = failure(
        ch.queue_declare(
            "ghost".into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await,
    );
    assert_eq!(reply_code(&e), Some(404));
    assert_eq!(reply_text(&e), "NOT_FOUND - no queue 'ghost' in vhost '/'");
    let ch = conn.create_channel().await.unwrap();
    let e = failure(
        ch.exchange_declare(
            "ghost".into(),
            ExchangeKind::Direct,
            ExchangeDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await,
    );
    assert_eq!(
        reply_text(&e),
        "NOT_FOUND - no exchange 'ghost' in vhost '/'"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inequivalent_redeclares_are_406() {
    let server = AmqpServer::start().await;
    let conn = server.connect().await;
    let ch = conn.create_channel().await.unwrap();
    declare(
        &ch,
        "shaped",
        table(&[("x-max-priority", AMQPValue::ShortShortUInt(5))]),
    )
    .await;
    // The same declaration again is fine.
    declare(
        &ch,
        "shaped",
        table(&[("x-max-priority", AMQPValue::LongInt(5))]),
    )
    .await;
    let e = failure(
        ch.queue_declare(
            "shaped".into(),
            QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            table(&[("x-max-priority", AMQPValue::LongInt(9))]),
        )
        .await,
    );
    assert_eq!(
        reply_text(&e),
        "PRECONDITION_FAILED - inequivalent arg 'x-max-priority' for queue 'shaped' in vhost '/': received '9' but current is '5'"
    );
    let ch = conn.create_channel().await.unwrap();
    declare_exchange(&ch, "typed", ExchangeKind::Direct).await;
    let e = failure(
        ch.exchange_declare(
            "typed".into(),
            ExchangeKind::Fanout,
            ExchangeDeclareOptions {
                durable: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await,
    );
    assert_eq!(reply_code(&e), Some(406), "{e}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exchange_delete_if_unused_is_406_while_bound_and_auto_delete_exchanges_go_with_their_last_binding()
 {
    let server = AmqpServer::start().await;
    let conn = server.connect().await;
    let ch = conn.create_channel().await.unwrap();
    declare(&ch, "target", FieldTable::default()).await;
    declare_exchange(&ch, "used", ExchangeKind::Direct).await;
    bind(&ch, "target", "used", "k", FieldTable::default()).await;
    let e = failure(
        ch.exchange_delete(
            "used".into(),
            ExchangeDeleteOptions {
                if_unused: true,
                ..Default::default()
            },
        )
        .await,
    );
    assert_eq!(reply_code(&e), Some(406), "{e}");
    let ch = conn.create_channel().await.unwrap();
    ch.exchange_declare(
        "fleeting".into(),
        ExchangeKind::Direct,
        ExchangeDeclareOptions {
            auto_delete: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    bind(&ch, "target", "fleeting", "k", FieldTable::default()).await;
    ch.queue_unbind(
        "target".into(),
        "fleeting".into(),
        "k".into(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    let e = failure(
        ch.exchange_declare(
            "fleeting".into(),
            ExchangeKind::Direct,
            ExchangeDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await,
    );
    assert_eq!(reply_code(&e), Some(404), "{e}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_named_queues_look_like_rabbitmqs_and_empty_names_mean_the_last_one() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    let q = ch
        .queue_declare(
            "".into(),
            QueueDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    assert!(q.name().as_str().starts_with("amq.gen-"), "{}", q.name());
    // "" names the channel's last declared queue (and its name is the binding key).
    bind(&ch, "", "amq.direct", "", FieldTable::default()).await;
    publish(
        &ch,
        "amq.direct",
        q.name().as_str(),
        "to the last",
        BasicProperties::default(),
    )
    .await;
    assert_eq!(drain(&ch, "").await, ["to the last"]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exclusive_queue_is_locked_405_to_others_and_goes_with_its_connection() {
    let server = AmqpServer::start().await;
    let (owner, ch) = server.channel().await;
    ch.queue_declare(
        "mine".into(),
        QueueDeclareOptions {
            exclusive: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    let (_other, ch2) = server.channel().await;
    let e = failure(
        ch2.basic_get("mine".into(), BasicGetOptions::default())
            .await,
    );
    assert_eq!(reply_code(&e), Some(405), "{e}");
    owner.close(200, "bye".into()).await.unwrap();
    let (_third, ch3) = server.channel().await;
    let e = failure(
        ch3.queue_declare(
            "mine".into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await,
    );
    assert_eq!(
        reply_code(&e),
        Some(404),
        "the exclusive queue was deleted: {e}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auto_delete_queue_goes_with_its_last_consumer() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    ch.queue_declare(
        "temp".into(),
        QueueDeclareOptions {
            auto_delete: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    let consumer = consume(&ch, "temp", false).await;
    ch.basic_cancel(consumer.tag(), BasicCancelOptions::default())
        .await
        .unwrap();
    let e = failure(
        ch.queue_declare(
            "temp".into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await,
    );
    assert_eq!(reply_code(&e), Some(404), "{e}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_delete_if_empty_and_if_unused_are_406_and_counts_are_reported() {
    let server = AmqpServer::start().await;
    let conn = server.connect().await;
    let ch = conn.create_channel().await.unwrap();
    declare(&ch, "full", FieldTable::default()).await;
    publish_confirmed(&ch, "", "full", &["a", "b", "c"]).await;
    let e = failure(
        ch.queue_delete(
            "full".into(),
            QueueDeleteOptions {
                if_empty: true,
                ..Default::default()
            },
        )
        .await,
    );
    assert_eq!(
        reply_text(&e),
        "PRECONDITION_FAILED - queue 'full' in vhost '/' not empty"
    );
    let ch = conn.create_channel().await.unwrap();
    let _consumer = consume(&ch, "full", false).await;
    let ch2 = conn.create_channel().await.unwrap();
    let e = failure(
        ch2.queue_delete(
            "full".into(),
            QueueDeleteOptions {
                if_unused: true,
                ..Default::default()
            },
        )
        .await,
    );
    assert_eq!(reply_code(&e), Some(406), "{e}");
    let ch3 = conn.create_channel().await.unwrap();
    declare(&ch3, "counted", FieldTable::default()).await;
    publish_confirmed(&ch3, "", "counted", &["1", "2"]).await;
    let purged = ch3
        .queue_purge("counted".into(), QueuePurgeOptions::default())
        .await
        .unwrap();
    assert_eq!(purged, 2);
    publish_confirmed(&ch3, "", "counted", &["3"]).await;
    let deleted = ch3
        .queue_delete("counted".into(), QueueDeleteOptions::default())
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_topology_and_messages_survive_a_restart() {
    let mut server = AmqpServer::start().await;
    {
        let (_c, ch) = server.channel().await;
        declare(
            &ch,
            "kept",
            table(&[("x-max-priority", AMQPValue::LongInt(3))]),
        )
        .await;
        declare_exchange(&ch, "kept.x", ExchangeKind::Topic).await;
        bind(&ch, "kept", "kept.x", "k.#", FieldTable::default()).await;
        ch.queue_declare(
            "transient".into(),
            QueueDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
        publish_confirmed(&ch, "kept.x", "k.1", &["before restart"]).await;
    }
    server.restart().await;
    let (_c, ch) = server.channel().await;
    publish_confirmed(&ch, "kept.x", "k.2", &["after restart"]).await;
    assert_eq!(
        drain(&ch, "kept").await,
        ["before restart", "after restart"]
    );
    // The same declaration is still equivalent.
    declare(
        &ch,
        "kept",
        table(&[("x-max-priority", AMQPValue::LongInt(3))]),
    )
    .await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_length_drop_head_dead_letters_the_oldest_with_reason_maxlen() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "overflowed", FieldTable::default()).await;
    declare(
        &ch,
        "bounded",
        table(&[
            ("x-max-length", AMQPValue::LongInt(2)),
            ("x-dead-letter-exchange", long("")),
            ("x-dead-letter-routing-key", long("overflowed")),
        ]),
    )
    .await;
    for body in ["1", "2", "3", "4"] {
        publish_confirmed(&ch, "", "bounded", &[body]).await;
    }
    assert_eq!(drain(&ch, "bounded").await, ["3", "4"]);
    let dead = tokio::time::timeout(WAIT, async {
        loop {
            let got = ch
                .basic_get("overflowed".into(), BasicGetOptions { no_ack: true })
                .await
                .unwrap();
            if let Some(m) = got {
                return m;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&dead.delivery.data), "1");
    let death = x_death(&dead.delivery.properties);
    assert_eq!(death.get("reason"), Some(&long("maxlen")));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_length_reject_publish_nacks_the_publish() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(
        &ch,
        "full-up",
        table(&[
            ("x-max-length", AMQPValue::LongInt(1)),
            ("x-overflow", long("reject-publish")),
        ]),
    )
    .await;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let first = ch
        .basic_publish(
            "".into(),
            "full-up".into(),
            Default::default(),
            b"fits",
            Default::default(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    let second = ch
        .basic_publish(
            "".into(),
            "full-up".into(),
            Default::default(),
            b"refused",
            Default::default(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(first.is_ack());
    assert!(second.is_nack());
    assert_eq!(drain(&ch, "full-up").await, ["fits"]);
    server.stop().await;
}

/// The first `x-death` entry of a dead-lettered message.
fn x_death(properties: &BasicProperties) -> std::collections::BTreeMap<ShortString, AMQPValue> {
    let headers = properties.headers().clone().expect("headers");
    let Some(AMQPValue::FieldArray(deaths)) = headers.inner().get("x-death") else {
        panic!("no x-death in {headers:?}");
    };
    let Some(AMQPValue::FieldTable(first)) = deaths.as_slice().first() else {
        panic!("empty x-death");
    };
    first.inner().clone()
}

/// Waits (bounded) for a message to arrive in `queue` and returns it.
async fn await_message(ch: &Channel, queue: &str) -> Delivery {
    let mut consumer = consume(ch, queue, true).await;
    next(&mut consumer).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_ttl_dead_letters_without_a_consumer_with_an_x_death_like_rabbitmqs() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare_exchange(&ch, "dlx", ExchangeKind::Fanout).await;
    declare(&ch, "graveyard", FieldTable::default()).await;
    bind(&ch, "graveyard", "dlx", "", FieldTable::default()).await;
    declare(
        &ch,
        "short-lived",
        table(&[
            ("x-message-ttl", AMQPValue::LongInt(50)),
            ("x-dead-letter-exchange", long("dlx")),
        ]),
    )
    .await;
    publish(
        &ch,
        "",
        "short-lived",
        "too late",
        BasicProperties::default(),
    )
    .await;
    let dead = await_message(&ch, "graveyard").await;
    assert_eq!(body(&dead), "too late");
    assert_eq!(dead.exchange.as_str(), "dlx");
    let death = x_death(&dead.properties);
    assert_eq!(death.get("reason"), Some(&long("expired")));
    assert_eq!(death.get("queue"), Some(&long("short-lived")));
    assert_eq!(death.get("exchange"), Some(&long("")));
    assert_eq!(death.get("count"), Some(&AMQPValue::LongLongInt(1)));
    assert!(matches!(death.get("time"), Some(AMQPValue::Timestamp(_))));
    let Some(AMQPValue::FieldArray(keys)) = death.get("routing-keys") else {
        panic!("no routing-keys in {death:?}");
    };
    assert_eq!(keys.as_slice(), [long("short-lived")]);
    let headers = dead.properties.headers().clone().unwrap();
    assert_eq!(
        headers.inner().get("x-first-death-reason"),
        Some(&long("expired"))
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_per_message_expiration_expires_and_is_kept_as_original_expiration() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "expired-here", FieldTable::default()).await;
    declare(
        &ch,
        "waiting",
        table(&[
            ("x-dead-letter-exchange", long("")),
            ("x-dead-letter-routing-key", long("expired-here")),
        ]),
    )
    .await;
    let short = BasicProperties::default().with_expiration("30".into());
    publish(&ch, "", "waiting", "brief", short).await;
    let dead = await_message(&ch, "expired-here").await;
    assert_eq!(dead.properties.expiration(), &None, "expiration is removed");
    assert_eq!(
        x_death(&dead.properties).get("original-expiration"),
        Some(&long("30"))
    );
    server.stop().await;
}

/// RabbitMQ takes an `expiration` of 0 to 2³²−1 ms; anything else closes the channel
/// with 406 and stores nothing (2⁶⁴−1 once overflowed the expiry time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiration_beyond_u32_max_or_not_a_number_is_refused() {
    let server = AmqpServer::start().await;
    let (conn, ch) = server.channel().await;
    declare(&ch, "expirations", FieldTable::default()).await;
    for bad in ["4294967296", "18446744073709551615", "-1", "soon"] {
        let ch = conn.create_channel().await.unwrap();
        let properties = BasicProperties::default().with_expiration(bad.into());
        let e = publish_with_fails(&ch, "", "expirations", b"refused", properties).await;
        assert_eq!(reply_code(&e), Some(406), "{bad}: {e}");
        assert_eq!(
            reply_text(&e),
            format!("PRECONDITION_FAILED - invalid expiration '{bad}'")
        );
    }
    let longest = BasicProperties::default().with_expiration("4294967295".into());
    publish(&ch, "", "expirations", "kept", longest).await;
    assert_eq!(drain(&ch, "expirations").await, ["kept"]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x_expires_deletes_a_queue_left_unused() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(
        &ch,
        "forgotten",
        table(&[("x-expires", AMQPValue::LongInt(50))]),
    )
    .await;
    let gone = wait::until("the queue's deletion", WAIT, async || {
        let (_c, probe) = server.channel().await;
        let passive = QueueDeclareOptions {
            passive: true,
            ..Default::default()
        };
        let r = probe
            .queue_declare("forgotten".into(), passive, FieldTable::default())
            .await;
        r.err().map(|e| reply_code(&e))
    })
    .await;
    assert_eq!(gone, Some(404));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_active_consumer_receives_alone_until_it_cancels() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(
        &ch,
        "solo",
        table(&[("x-single-active-consumer", AMQPValue::Boolean(true))]),
    )
    .await;
    let mut first = consume(&ch, "solo", false).await;
    let (_c2, ch2) = server.channel().await;
    let mut second = consume(&ch2, "solo", false).await;
    publish_confirmed(&ch, "", "solo", &["one", "two"]).await;
    let a = next(&mut first).await;
    let b = next(&mut first).await;
    assert_eq!((body(&a), body(&b)), ("one".into(), "two".into()));
    a.acker.ack(BasicAckOptions::default()).await.unwrap();
    b.acker.ack(BasicAckOptions::default()).await.unwrap();
    ch.basic_cancel(first.tag(), BasicCancelOptions::default())
        .await
        .unwrap();
    publish_confirmed(&ch, "", "solo", &["three"]).await;
    assert_eq!(body(&next(&mut second).await), "three");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priorities_deliver_highest_first_and_fifo_within_a_priority() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(
        &ch,
        "ranked",
        table(&[("x-max-priority", AMQPValue::LongInt(10))]),
    )
    .await;
    for (b, p) in [
        ("low-1", 1),
        ("high-1", 9),
        ("low-2", 1),
        ("high-2", 9),
        ("none", 0),
    ] {
        publish(
            &ch,
            "",
            "ranked",
            b,
            BasicProperties::default().with_priority(p),
        )
        .await;
    }
    assert_eq!(
        drain(&ch, "ranked").await,
        ["high-1", "high-2", "low-1", "low-2", "none"]
    );
    server.stop().await;
}

// ----- 3. Publishing -----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unroutable_mandatory_message_is_returned_then_acked() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    let confirm = ch
        .basic_publish(
            "amq.direct".into(),
            "nobody-listens".into(),
            BasicPublishOptions {
                mandatory: true,
                ..Default::default()
            },
            b"lost?",
            BasicProperties::default(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(confirm.is_ack());
    let returned = confirm.take_message().expect("basic.return");
    assert_eq!(returned.reply_code, 312);
    assert_eq!(returned.reply_text.as_str(), "NO_ROUTE");
    assert_eq!(returned.delivery.data, b"lost?");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_property_and_header_round_trips() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "props", FieldTable::default()).await;
    let headers = table(&[
        ("string", long("text")),
        ("int", AMQPValue::LongLongInt(-42)),
        ("bool", AMQPValue::Boolean(true)),
        (
            "nested",
            AMQPValue::FieldTable(table(&[("inner", long("x"))])),
        ),
        (
            "list",
            AMQPValue::FieldArray(vec![AMQPValue::LongInt(1), long("two")].into()),
        ),
        ("stamp", AMQPValue::Timestamp(1_700_000_000)),
    ]);
    let properties = BasicProperties::default()
        .with_content_type("application/json".into())
        .with_content_encoding("gzip".into())
        .with_headers(headers)
        .with_delivery_mode(2)
        .with_priority(4)
        .with_correlation_id("corr".into())
        .with_reply_to("replies".into())
        .with_expiration("600000".into())
        .with_message_id("m-1".into())
        .with_timestamp(1_700_000_001)
        .with_type("order.created".into())
        .with_user_id("guest".into())
        .with_app_id("tests".into())
        .with_cluster_id("c".into());
    publish(&ch, "", "props", "{}", properties.clone()).await;
    let got = ch
        .basic_get("props".into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.delivery.properties, properties);
    assert_eq!(got.delivery.routing_key.as_str(), "props");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_larger_than_a_frame_are_split_and_joined() {
    let server = AmqpServer::start_with(|c| c.frame_max = 8192).await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "big", FieldTable::default()).await;
    let payload: Vec<u8> = (0..1_500_000u32).map(|i| (i % 251) as u8).collect();
    ch.basic_publish(
        "".into(),
        "big".into(),
        Default::default(),
        &payload,
        Default::default(),
    )
    .await
    .unwrap()
    .await
    .unwrap();
    let got = ch
        .basic_get("big".into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.delivery.data.len(), payload.len());
    assert!(got.delivery.data == payload);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_max_message_size_closes_only_its_channel_with_406() {
    let server = AmqpServer::start_with(|c| c.max_message_size = 1000).await;
    let conn = server.connect().await;
    let ch = conn.create_channel().await.unwrap();
    declare(&ch, "small", FieldTable::default()).await;
    publish_confirmed(&ch, "", "small", &["accepted before"]).await;
    let e = publish_fails(&ch, "", "small", &[b'x'; 2000]).await;
    assert_eq!(
        reply_text(&e),
        "PRECONDITION_FAILED - message size 2000 is larger than configured max size 1000"
    );
    let ch2 = conn.create_channel().await.unwrap();
    assert_eq!(drain(&ch2, "small").await, ["accepted before"]);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirms_ack_every_message_and_the_messages_are_stored_in_order() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "confirmed", FieldTable::default()).await;
    let bodies: Vec<String> = (0..500).map(|i| format!("m{i:03}")).collect();
    let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
    publish_confirmed(&ch, "", "confirmed", &refs).await;
    assert_eq!(drain(&ch, "confirmed").await, bodies);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tx_commit_stores_publishes_and_acks_together_and_rollback_discards() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "txq", FieldTable::default()).await;
    ch.tx_select().await.unwrap();
    publish(&ch, "", "txq", "rolled back", BasicProperties::default()).await;
    ch.tx_rollback().await.unwrap();
    assert_eq!(ready(&ch, "txq").await, 0);
    publish(&ch, "", "txq", "committed", BasicProperties::default()).await;
    assert_eq!(ready(&ch, "txq").await, 0, "held until commit");
    ch.tx_commit().await.unwrap();
    assert_eq!(ready(&ch, "txq").await, 1);
    let got = ch
        .basic_get("txq".into(), BasicGetOptions::default())
        .await
        .unwrap()
        .unwrap();
    got.delivery
        .acker
        .ack(BasicAckOptions::default())
        .await
        .unwrap();
    publish(&ch, "", "txq", "second", BasicProperties::default()).await;
    ch.tx_commit().await.unwrap();
    let (_c2, other) = server.channel().await;
    assert_eq!(
        drain(&other, "txq").await,
        ["second"],
        "the ack committed with the publish"
    );
    server.stop().await;
}

// ----- 4. Consuming -----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_receives_in_order_and_acks_remove_messages() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "work", FieldTable::default()).await;
    let mut consumer = consume(&ch, "work", false).await;
    // The consumer is idle on the stage's watch when these arrive.
    publish_confirmed(&ch, "", "work", &["a", "b", "c"]).await;
    let mut got = Vec::new();
    for _ in 0..3 {
        let d = next(&mut consumer).await;
        assert!(!d.redelivered);
        got.push(body(&d));
        d.acker.ack(BasicAckOptions::default()).await.unwrap();
    }
    assert_eq!(got, ["a", "b", "c"]);
    ch.basic_cancel(consumer.tag(), BasicCancelOptions::default())
        .await
        .unwrap();
    assert_eq!(ready(&ch, "work").await, 0);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_no_ack_consumer_removes_messages_as_they_are_delivered() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "fire-and-forget", FieldTable::default()).await;
    publish_confirmed(&ch, "", "fire-and-forget", &["x", "y"]).await;
    let mut consumer = consume(&ch, "fire-and-forget", true).await;
    assert_eq!(body(&next(&mut consumer).await), "x");
    assert_eq!(body(&next(&mut consumer).await), "y");
    ch.basic_cancel(consumer.tag(), BasicCancelOptions::default())
        .await
        .unwrap();
    drop(ch);
    let (_c2, other) = server.channel().await;
    assert!(drain(&other, "fire-and-forget").await.is_empty());
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefetch_bounds_unacked_deliveries_per_consumer_and_per_channel() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "p1", FieldTable::default()).await;
    declare(&ch, "p2", FieldTable::default()).await;
    publish_confirmed(&ch, "", "p1", &["1", "2", "3", "4", "5"]).await;
    publish_confirmed(&ch, "", "p2", &["1", "2", "3", "4", "5"]).await;
    let (_c2, consuming) = server.channel().await;
    consuming
        .basic_qos(2, BasicQosOptions { global: false })
        .await
        .unwrap();
    let mut per_consumer = consume(&consuming, "p1", false).await;
    let first = next(&mut per_consumer).await;
    next(&mut per_consumer).await;
    assert_eq!(ready(&ch, "p1").await, 3, "two leased, no more");
    first.acker.ack(BasicAckOptions::default()).await.unwrap();
    next(&mut per_consumer).await;
    assert_eq!(ready(&ch, "p1").await, 2, "one ack made room for one");

    let (_c3, shared) = server.channel().await;
    shared
        .basic_qos(3, BasicQosOptions { global: true })
        .await
        .unwrap();
    let mut a = consume(&shared, "p2", false).await;
    let mut b = consume(&shared, "p2", false).await;
    let mut received = 0;
    tokio::time::timeout(WAIT, async {
        while received < 3 {
            tokio::select! {
                Some(Ok(_)) = a.next() => received += 1,
                Some(Ok(_)) = b.next() => received += 1,
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(ready(&ch, "p2").await, 2, "three leased across the channel");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nack_with_requeue_redelivers_in_the_original_position() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "retry", FieldTable::default()).await;
    publish_confirmed(&ch, "", "retry", &["first", "second"]).await;
    let got = ch
        .basic_get("retry".into(), BasicGetOptions::default())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.message_count, 1);
    got.delivery
        .acker
        .nack(BasicNackOptions {
            requeue: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut consumer = consume(&ch, "retry", false).await;
    let again = next(&mut consumer).await;
    assert_eq!(body(&again), "first", "back at the head");
    assert!(again.redelivered);
    let then = next(&mut consumer).await;
    assert_eq!(body(&then), "second");
    assert!(!then.redelivered);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reject_without_requeue_dead_letters_with_reason_rejected() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "rejects", FieldTable::default()).await;
    declare(
        &ch,
        "picky",
        table(&[
            ("x-dead-letter-exchange", long("")),
            ("x-dead-letter-routing-key", long("rejects")),
        ]),
    )
    .await;
    publish_confirmed(&ch, "", "picky", &["unwanted"]).await;
    let got = ch
        .basic_get("picky".into(), BasicGetOptions::default())
        .await
        .unwrap()
        .unwrap();
    got.delivery
        .acker
        .reject(BasicRejectOptions { requeue: false })
        .await
        .unwrap();
    let dead = await_message(&ch, "rejects").await;
    assert_eq!(body(&dead), "unwanted");
    assert_eq!(
        x_death(&dead.properties).get("reason"),
        Some(&long("rejected"))
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_redelivers_every_unacked_message() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "recovered", FieldTable::default()).await;
    publish_confirmed(&ch, "", "recovered", &["r1", "r2"]).await;
    let mut consumer = consume(&ch, "recovered", false).await;
    next(&mut consumer).await;
    next(&mut consumer).await;
    ch.basic_recover(BasicRecoverOptions { requeue: true })
        .await
        .unwrap();
    let again = next(&mut consumer).await;
    assert!(again.redelivered);
    assert_eq!(body(&again), "r1");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_and_get_empty_report_what_remains() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "gettable", FieldTable::default()).await;
    assert!(
        ch.basic_get("gettable".into(), BasicGetOptions::default())
            .await
            .unwrap()
            .is_none()
    );
    publish_confirmed(&ch, "", "gettable", &["only", "other"]).await;
    let got = ch
        .basic_get("gettable".into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.message_count, 1);
    assert_eq!(got.delivery.data, b"only");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unacked_messages_of_a_closed_channel_return_redelivered_in_their_place() {
    let server = AmqpServer::start().await;
    let (conn, ch) = server.channel().await;
    declare(&ch, "returning", FieldTable::default()).await;
    publish_confirmed(&ch, "", "returning", &["held", "later"]).await;
    let consuming = conn.create_channel().await.unwrap();
    consuming
        .basic_qos(1, BasicQosOptions::default())
        .await
        .unwrap();
    let mut consumer = consume(&consuming, "returning", false).await;
    assert_eq!(body(&next(&mut consumer).await), "held");
    consuming.close(200, "bye".into()).await.unwrap();
    let got = ch
        .basic_get("returning".into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.delivery.data, b"held");
    assert!(got.delivery.redelivered);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_queue_cancels_its_consumers() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "doomed", FieldTable::default()).await;
    let mut consumer = consume(&ch, "doomed", false).await;
    let (_c2, other) = server.channel().await;
    other
        .queue_delete("doomed".into(), QueueDeleteOptions::default())
        .await
        .unwrap();
    let end = tokio::time::timeout(WAIT, consumer.next()).await.unwrap();
    assert!(
        end.is_none(),
        "the consumer stream ends on basic.cancel: {end:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exclusive_consumer_keeps_others_out_with_403() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "owned", FieldTable::default()).await;
    // lapin cancels a consumer whose stream is dropped: keep it.
    let _sole = ch
        .basic_consume(
            "owned".into(),
            "sole".into(),
            BasicConsumeOptions {
                exclusive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    let (_c2, other) = server.channel().await;
    let e = failure(
        other
            .basic_consume(
                "owned".into(),
                "".into(),
                Default::default(),
                FieldTable::default(),
            )
            .await,
    );
    assert_eq!(reply_code(&e), Some(403), "{e}");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_cancel_unacked_deliveries_can_still_be_acked() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    declare(&ch, "cancelled", FieldTable::default()).await;
    publish_confirmed(&ch, "", "cancelled", &["in hand", "left"]).await;
    ch.basic_qos(1, BasicQosOptions::default()).await.unwrap();
    let mut consumer = consume(&ch, "cancelled", false).await;
    let d = next(&mut consumer).await;
    ch.basic_cancel(consumer.tag(), BasicCancelOptions::default())
        .await
        .unwrap();
    d.acker.ack(BasicAckOptions::default()).await.unwrap();
    assert_eq!(drain(&ch, "cancelled").await, ["left"]);
    server.stop().await;
}

// ----- 5. Errors -----

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_delivery_tag_is_406() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    // lapin fails a live consumer's stream with the channel's exception.
    let q = ch
        .queue_declare(
            "".into(),
            QueueDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let mut watcher = consume(&ch, q.name().as_str(), false).await;
    ch.basic_ack(99, BasicAckOptions::default()).await.unwrap();
    let e = tokio::time::timeout(WAIT, watcher.next())
        .await
        .unwrap()
        .expect("the stream reports the close")
        .expect_err("a channel exception");
    assert_eq!(
        reply_text(&e),
        "PRECONDITION_FAILED - unknown delivery tag 99"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishing_to_a_missing_exchange_closes_only_that_channel_with_404() {
    let server = AmqpServer::start().await;
    let conn = server.connect().await;
    let good = conn.create_channel().await.unwrap();
    declare(&good, "safe", FieldTable::default()).await;
    publish_confirmed(&good, "", "safe", &["kept"]).await;
    let bad = conn.create_channel().await.unwrap();
    let e = publish_fails(&bad, "nowhere", "k", b"x").await;
    assert_eq!(
        reply_text(&e),
        "NOT_FOUND - no exchange 'nowhere' in vhost '/'"
    );
    // The connection and its other channel keep working, and nothing accepted is lost.
    publish_confirmed(&good, "", "safe", &["also kept"]).await;
    assert_eq!(drain(&good, "safe").await, ["kept", "also kept"]);
    server.stop().await;
}
