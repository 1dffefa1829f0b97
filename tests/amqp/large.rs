//! Large messages through lapin: bodies above one store transaction (16 MiB, RabbitMQ 4's
//! default limit, and 100 MiB) are published with confirms, kept once in a spill whatever
//! the number of queues, delivered whole (by consumers and basic.get, requeued,
//! dead-lettered, returned), and their spill is freed when the last message referencing it
//! goes (ack, purge, queue delete). A smaller body whose copies in the queues it reaches
//! would not fit one transaction together (3.5 MiB to three queues) is spilled too, when
//! published, dead-lettered or released by a delayed-message exchange: confirmed, and
//! delivered whole from every queue. Eight 3 MiB publishes of one AMQP transaction (24 MiB)
//! commit together, or roll back leaving nothing; several 3.9 MiB messages nacked with
//! `multiple`, or expiring together, or returned past a quorum queue's delivery limit by
//! a closing channel, reach their dead-letter queue each whole.

use crate::common::amqp::{
    CONFIRM_WAIT, WAIT, consume, declare, declare_exchange, next, next_within, payload,
    publish_acked, ready,
};
use crate::common::fronts::AmqpServer;
use crate::delayed::declare_delayed;
use lapin::options::{
    BasicAckOptions, BasicGetOptions, BasicNackOptions, BasicPublishOptions, BasicRejectOptions,
    ConfirmSelectOptions, QueueBindOptions, QueueDeleteOptions, QueuePurgeOptions,
};
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::{BasicProperties, Channel, ExchangeKind};
use std::time::Duration;

const MIB: usize = 1024 * 1024;

/// Publishes `body` under confirms and waits for its ack.
async fn publish(ch: &Channel, exchange: &str, key: &str, body: &[u8]) {
    let properties = BasicProperties::default().with_message_id("large".into());
    publish_acked(ch, exchange, key, body, properties).await;
}

async fn confirming(server: &AmqpServer) -> (lapin::Connection, Channel) {
    let (c, ch) = server.channel().await;
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    (c, ch)
}

async fn round_trip(size: usize) {
    let server = AmqpServer::start_with(|c| c.max_message_size = 128 * MIB as u32).await;
    let (_c, ch) = confirming(&server).await;
    declare(&ch, "large", FieldTable::default()).await;
    let body = payload(size, 1);
    publish(&ch, "", "large", &body).await;
    server.spills_hold(size as i64).await;
    let mut consumer = consume(&ch, "large", false).await;
    let d = next_within(&mut consumer, CONFIRM_WAIT).await;
    assert_eq!(d.data.len(), size);
    assert!(d.data == body, "the body arrives whole and unchanged");
    assert_eq!(
        d.properties.message_id().as_ref().map(|m| m.as_str()),
        Some("large")
    );
    d.ack(BasicAckOptions::default()).await.unwrap();
    server.spills_hold(0).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_16_mib_message_is_confirmed_delivered_whole_and_freed_after_its_ack() {
    round_trip(16 * MIB).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_mib_message_is_confirmed_delivered_whole_and_freed_after_its_ack() {
    round_trip(100 * MIB).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fanout_stores_the_body_once_and_frees_it_after_the_last_queue_lets_go() {
    let server = AmqpServer::start().await;
    let (_c, ch) = confirming(&server).await;
    let mut dlx = FieldTable::default();
    dlx.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString("".into()),
    );
    dlx.insert(
        "x-dead-letter-routing-key".into(),
        AMQPValue::LongString("dead".into()),
    );
    declare(&ch, "dead", FieldTable::default()).await;
    for q in ["a", "b", "c"] {
        declare(&ch, q, dlx.clone()).await;
        ch.queue_bind(
            q.into(),
            "amq.fanout".into(),
            "".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    }
    let body = payload(6 * MIB, 2);
    publish(&ch, "amq.fanout", "", &body).await;
    server.spills_hold(body.len() as i64).await;

    // a: acknowledged; b: requeued, then rejected to "dead"; c: purged.
    let mut a = consume(&ch, "a", false).await;
    let got = next(&mut a).await;
    assert!(got.data == body);
    got.ack(BasicAckOptions::default()).await.unwrap();
    let mut b = consume(&ch, "b", false).await;
    let first = next(&mut b).await;
    first
        .nack(BasicNackOptions {
            requeue: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let again = next(&mut b).await;
    assert!(again.redelivered && again.data == body, "requeued whole");
    again
        .reject(BasicRejectOptions { requeue: false })
        .await
        .unwrap();
    ch.queue_purge("c".into(), QueuePurgeOptions::default())
        .await
        .unwrap();
    server.spills_hold(body.len() as i64).await;

    // The dead-lettered copy references the same spill, with its x-death header.
    let dead = tokio::time::timeout(WAIT, async {
        loop {
            if let Some(m) = ch
                .basic_get("dead".into(), BasicGetOptions { no_ack: true })
                .await
                .unwrap()
            {
                return m;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("dead-lettered in time");
    assert!(dead.delivery.data == body);
    let headers = dead.delivery.properties.headers().clone().unwrap();
    assert!(headers.inner().contains_key("x-death"));
    server.spills_hold(0).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_queue_frees_its_messages_spills() {
    let server = AmqpServer::start().await;
    let (_c, ch) = confirming(&server).await;
    declare(&ch, "doomed", FieldTable::default()).await;
    for seed in 0..2 {
        publish(&ch, "", "doomed", &payload(5 * MIB, seed)).await;
    }
    server.spills_hold(10 * MIB as i64).await;
    ch.queue_delete("doomed".into(), QueueDeleteOptions::default())
        .await
        .unwrap();
    server.spills_hold(0).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unroutable_mandatory_large_message_is_returned_whole_and_freed() {
    let server = AmqpServer::start().await;
    let (_c, ch) = confirming(&server).await;
    let body = payload(5 * MIB, 3);
    let confirm = ch
        .basic_publish(
            "amq.direct".into(),
            "nobody".into(),
            BasicPublishOptions {
                mandatory: true,
                ..Default::default()
            },
            &body,
            BasicProperties::default(),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(confirm.is_ack());
    let returned = confirm.take_message().expect("basic.return");
    assert_eq!(returned.reply_code, 312);
    assert!(returned.delivery.data == body, "returned whole");
    server.spills_hold(0).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_at_the_spill_threshold_stays_inline() {
    let server = AmqpServer::start().await;
    let (_c, ch) = confirming(&server).await;
    declare(&ch, "edge", FieldTable::default()).await;
    let body = payload(4 * MIB, 4);
    publish(&ch, "", "edge", &body).await;
    assert_eq!(
        server.spilled_bytes().await,
        0,
        "4 MiB takes the one-transaction path"
    );
    let got = ch
        .basic_get("edge".into(), BasicGetOptions { no_ack: true })
        .await
        .unwrap()
        .unwrap();
    assert!(got.delivery.data == body);
    server.stop().await;
}

/// Declares `queues` and binds each to `exchange` for every routing key.
async fn bind_all(ch: &Channel, exchange: &str, queues: &[&str]) {
    for q in queues {
        declare(ch, q, FieldTable::default()).await;
        ch.queue_bind(
            (*q).into(),
            exchange.into(),
            "".into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    }
}

/// Each of `queues` delivers `body` whole, once; acknowledged.
async fn each_delivers(ch: &Channel, queues: &[&str], body: &[u8]) {
    for q in queues {
        let mut consumer = consume(ch, q, false).await;
        let d = next(&mut consumer).await;
        assert!(d.data == body, "queue {q} delivers the body whole");
        d.ack(BasicAckOptions::default()).await.unwrap();
    }
}

/// 3.5 MiB: under the spill threshold, but three copies (10.5 MiB) do not fit one
/// transaction.
const FANNED: usize = 3 * MIB + MIB / 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fanout_too_large_for_one_transaction_is_confirmed_and_delivered_whole() {
    let server = AmqpServer::start().await;
    let (_c, ch) = confirming(&server).await;
    declare_exchange(&ch, "wide", ExchangeKind::Fanout).await;
    let queues = ["w1", "w2", "w3"];
    bind_all(&ch, "wide", &queues).await;
    let body = payload(FANNED, 5);
    publish(&ch, "wide", "", &body).await;
    server.spills_hold(body.len() as i64).await;
    each_delivers(&ch, &queues, &body).await;
    server.spills_hold(0).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_letter_fanout_too_large_for_one_transaction_is_delivered_whole() {
    let server = AmqpServer::start().await;
    let (_c, ch) = confirming(&server).await;
    declare_exchange(&ch, "graves", ExchangeKind::Fanout).await;
    let queues = ["g1", "g2", "g3"];
    bind_all(&ch, "graves", &queues).await;
    let mut dlx = FieldTable::default();
    dlx.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString("graves".into()),
    );
    declare(&ch, "dying", dlx).await;
    let body = payload(FANNED, 6);
    publish(&ch, "", "dying", &body).await;
    let got = ch
        .basic_get("dying".into(), BasicGetOptions { no_ack: false })
        .await
        .unwrap()
        .expect("the message is in its queue");
    got.delivery
        .reject(BasicRejectOptions { requeue: false })
        .await
        .unwrap();
    each_delivers(&ch, &queues, &body).await;
    server.spills_hold(0).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_fanout_too_large_for_one_transaction_is_delivered_whole_when_due() {
    let server = AmqpServer::start().await;
    let (_c, ch) = confirming(&server).await;
    declare_delayed(&ch, "later", "fanout").await.unwrap();
    let queues = ["l1", "l2", "l3"];
    bind_all(&ch, "later", &queues).await;
    let body = payload(FANNED, 7);
    let headers = FieldTable::from(std::collections::BTreeMap::from([(
        ShortString::from("x-delay"),
        AMQPValue::LongInt(200),
    )]));
    let confirm = ch
        .basic_publish(
            "later".into(),
            "".into(),
            BasicPublishOptions::default(),
            &body,
            BasicProperties::default().with_headers(headers),
        )
        .await
        .unwrap()
        .await
        .unwrap();
    assert!(confirm.is_ack(), "the publish is confirmed");
    each_delivers(&ch, &queues, &body).await;
    server.spills_hold(0).await;
    server.stop().await;
}

/// A message of 3 MiB: stored inline when alone, but eight of them (24 MiB) do not fit one
/// transaction.
const HELD: usize = 3 * MIB;

/// Publishes `body` on a channel in tx mode (nothing to wait for until tx.commit).
async fn publish_held(ch: &Channel, queue: &str, body: &[u8]) {
    ch.basic_publish(
        "".into(),
        queue.into(),
        BasicPublishOptions::default(),
        body,
        BasicProperties::default(),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_of_publishes_too_large_for_one_store_transaction_commits_all_or_nothing() {
    let server = AmqpServer::start().await;
    let (_c, ch) = server.channel().await;
    let (_o, observer) = server.channel().await;
    declare(&ch, "held", FieldTable::default()).await;
    ch.tx_select().await.unwrap();

    // Rolled back: none of them is stored, and what was spilled for them is freed.
    for seed in 0..4 {
        publish_held(&ch, "held", &payload(HELD, 100 + seed)).await;
    }
    ch.tx_rollback().await.unwrap();
    assert_eq!(
        ready(&observer, "held").await,
        0,
        "a rollback stores nothing"
    );

    let bodies: Vec<Vec<u8>> = (0..8).map(|seed| payload(HELD, 200 + seed)).collect();
    for body in &bodies {
        publish_held(&ch, "held", body).await;
    }
    assert_eq!(
        ready(&observer, "held").await,
        0,
        "nothing before the commit"
    );
    tokio::time::timeout(CONFIRM_WAIT, ch.tx_commit())
        .await
        .expect("the commit finishes")
        .expect("eight 3 MiB publishes commit as one transaction");
    assert_eq!(ready(&observer, "held").await, 8, "all of them after it");
    let mut consumer = consume(&observer, "held", false).await;
    for (i, body) in bodies.iter().enumerate() {
        let d = next(&mut consumer).await;
        assert!(d.data == *body, "publish {i} arrives whole, in order");
        d.ack(BasicAckOptions::default()).await.unwrap();
    }
    server.spills_hold(0).await;
    server.stop().await;
}

/// Declares `queue` dead-lettering into the fanout exchange `dlx`, to which `dead` is
/// bound.
async fn declare_dying(ch: &Channel, queue: &str, dlx: &str, dead: &str) {
    declare_dying_with(ch, queue, dlx, dead, FieldTable::default()).await;
}

/// [`declare_dying`] with further queue arguments `args`.
async fn declare_dying_with(
    ch: &Channel,
    queue: &str,
    dlx: &str,
    dead: &str,
    mut args: FieldTable,
) {
    declare_exchange(ch, dlx, ExchangeKind::Fanout).await;
    bind_all(ch, dlx, &[dead]).await;
    args.insert(
        "x-dead-letter-exchange".into(),
        AMQPValue::LongString(dlx.into()),
    );
    declare(ch, queue, args).await;
}

/// 3.9 MiB: stored inline, and two copies do not fit one dead-lettering transaction's
/// budget (four do not fit one transaction at all).
const DYING: usize = 3 * MIB + 9 * MIB / 10;

/// `queue` delivers `bodies` whole, in order; acknowledged.
async fn delivers_in_order(ch: &Channel, queue: &str, bodies: &[Vec<u8>]) {
    let mut consumer = consume(ch, queue, false).await;
    for (i, body) in bodies.iter().enumerate() {
        let d = next(&mut consumer).await;
        assert_eq!(d.data.len(), body.len(), "message {i} keeps its length");
        assert!(d.data == *body, "message {i} arrives whole, in order");
        d.ack(BasicAckOptions::default()).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nack_of_several_large_messages_dead_letters_each_whole_and_a_reject_of_a_spilled_one_too()
 {
    let server = AmqpServer::start_with(|c| c.max_message_size = 128 * MIB as u32).await;
    let (_c, ch) = confirming(&server).await;
    declare_dying(&ch, "doomed", "tomb", "buried").await;
    let bodies: Vec<Vec<u8>> = (0..4).map(|seed| payload(DYING, 300 + seed)).collect();
    for body in &bodies {
        publish(&ch, "", "doomed", body).await;
    }
    let mut consumer = consume(&ch, "doomed", false).await;
    let mut last = 0;
    for _ in &bodies {
        last = next(&mut consumer).await.delivery_tag;
    }
    ch.basic_nack(
        last,
        BasicNackOptions {
            multiple: true,
            requeue: false,
        },
    )
    .await
    .unwrap();
    delivers_in_order(&ch, "buried", &bodies).await;
    assert_eq!(ready(&ch, "doomed").await, 0, "none is left behind");

    // A spilled one is handed to the dead-letter queue by reference to its spill.
    let spilled = payload(16 * MIB, 310);
    publish(&ch, "", "doomed", &spilled).await;
    let d = next(&mut consumer).await;
    d.reject(BasicRejectOptions { requeue: false })
        .await
        .unwrap();
    delivers_in_order(&ch, "buried", &[spilled]).await;
    assert!(ch.status().connected(), "the channel stays open throughout");
    server.spills_hold(0).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_large_messages_expiring_together_are_dead_lettered_each_whole() {
    let server = AmqpServer::start().await;
    let (_c, ch) = confirming(&server).await;
    declare_dying(&ch, "fading", "ashes", "urn").await;
    // Expiry is checked at the head: the three behind the first expire with it, in one
    // sweep of the head.
    let bodies: Vec<Vec<u8>> = (0..4).map(|seed| payload(DYING, 400 + seed)).collect();
    for (i, body) in bodies.iter().enumerate() {
        let expiration = if i == 0 { "4000" } else { "1" };
        let properties = BasicProperties::default().with_expiration(expiration.into());
        publish_acked(&ch, "", "fading", body, properties).await;
    }
    delivers_in_order(&ch, "urn", &bodies).await;
    assert_eq!(ready(&ch, "fading").await, 0, "none is left behind");
    server.spills_hold(0).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_messages_a_closing_channel_returns_past_the_delivery_limit_are_dead_lettered_each_whole()
 {
    let server = AmqpServer::start().await;
    let (c, ch) = confirming(&server).await;
    // A quorum queue whose messages are dead-lettered when returned after one delivery.
    let mut args = FieldTable::default();
    args.insert(
        "x-queue-type".into(),
        AMQPValue::LongString("quorum".into()),
    );
    args.insert("x-delivery-limit".into(), AMQPValue::LongLongInt(0));
    declare_dying_with(&ch, "once", "grave", "buried-once", args).await;
    let bodies: Vec<Vec<u8>> = (0..4).map(|seed| payload(DYING, 500 + seed)).collect();
    for body in &bodies {
        publish(&ch, "", "once", body).await;
    }
    // A consumer takes all four and its channel closes without acknowledging them: the
    // channel's lease holder is released, which returns them past the limit.
    let taker = c.create_channel().await.unwrap();
    let mut consumer = consume(&taker, "once", false).await;
    for _ in &bodies {
        next(&mut consumer).await;
    }
    taker.close(200, "done".into()).await.unwrap();
    delivers_in_order(&ch, "buried-once", &bodies).await;
    assert_eq!(ready(&ch, "once").await, 0, "none is left behind");
    server.stop().await;
}
