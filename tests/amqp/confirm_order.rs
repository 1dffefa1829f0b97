//! Issue 33: a publish confirm never overtakes the delivery of the same message to a
//! consumer on the same connection. A client that consumes what it publishes reads, on
//! its one socket, the delivery of message k before the confirm that covers k, whether it
//! consumes on the publishing channel or another. A connection that does not consume the
//! queue, or whose consumer has no prefetch room, gets its confirms without waiting for a
//! delivery. Driven with raw frames, so the order is the socket's.
//!
//! Not compared with RabbitMQ: the same runs against the suite's RabbitMQ 3.10 node read
//! a confirm before its delivery in most runs, on one channel as on two — Ferry's order
//! is a guarantee of its own (docs/amqp.md, "Confirms").

use crate::common::fronts::AmqpServer;
use crate::raw::{Raw, Seen, publish_frames};
use amq_protocol::frame::AMQPFrame;
use amq_protocol::protocol::{AMQPClass, basic, confirm, queue};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Messages each run publishes.
const MESSAGES: u64 = 50;

/// What the client read, in socket order.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Read {
    /// The body of a delivery: the publish's number (1-based, its confirm tag).
    Delivered(u64),
    /// A confirm: basic.ack of a delivery tag, `multiple` or not.
    Confirmed(u64, bool),
}

/// Sends `method` on `channel` and expects its `-ok` (any method back on that channel).
async fn call(raw: &mut Raw, channel: u16, method: AMQPClass) {
    raw.method(channel, method).await;
    let got = raw.next_method().await;
    assert!(matches!(got, Some((c, _)) if c == channel), "{got:?}");
}

/// Opens channels 1 and 2 on a fresh connection to `addr`, declares the exclusive queue
/// `queue`, consumes it on channel 1 with `prefetch` (acknowledgements on, none sent), and
/// selects confirm mode on channel `publisher`.
async fn consuming_publisher(addr: SocketAddr, queue: &str, prefetch: u16, publisher: u16) -> Raw {
    let mut raw = Raw::connect_to(addr).await;
    raw.handshake().await;
    raw.open_channel(1).await;
    raw.open_channel(2).await;
    let declare = queue::Declare {
        queue: queue.into(),
        exclusive: true,
        ..Default::default()
    };
    call(
        &mut raw,
        1,
        AMQPClass::Queue(queue::AMQPMethod::Declare(declare)),
    )
    .await;
    let qos = basic::Qos {
        prefetch_count: prefetch,
        ..Default::default()
    };
    call(&mut raw, 1, AMQPClass::Basic(basic::AMQPMethod::Qos(qos))).await;
    let consume = basic::Consume {
        queue: queue.into(),
        consumer_tag: "c".into(),
        ..Default::default()
    };
    call(
        &mut raw,
        1,
        AMQPClass::Basic(basic::AMQPMethod::Consume(consume)),
    )
    .await;
    let select = confirm::Select { nowait: false };
    call(
        &mut raw,
        publisher,
        AMQPClass::Confirm(confirm::AMQPMethod::Select(select)),
    )
    .await;
    raw
}

/// Reads frames until a confirm covers `tag`, recording deliveries and confirms.
async fn read_until_confirmed(raw: &mut Raw, tag: u64, read: &mut Vec<Read>) {
    loop {
        let Seen::Frame(frame) = raw.next().await else {
            panic!("the broker closed the connection");
        };
        match *frame {
            AMQPFrame::Body(_, body) => {
                let n = String::from_utf8(body).unwrap().parse().unwrap();
                read.push(Read::Delivered(n));
            }
            AMQPFrame::Method(_, AMQPClass::Basic(basic::AMQPMethod::Ack(a))) => {
                read.push(Read::Confirmed(a.delivery_tag, a.multiple));
                if a.delivery_tag >= tag {
                    return;
                }
            }
            AMQPFrame::Method(_, AMQPClass::Basic(basic::AMQPMethod::Deliver(_)))
            | AMQPFrame::Header(..)
            | AMQPFrame::Heartbeat => {}
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

/// One connection to `addr` consumes `queue` on channel 1 and publishes [`MESSAGES`] to
/// it on channel `publisher`, `burst` at a time (each burst in one write, the next once
/// the last is confirmed): what it reads, in order.
async fn publish_to_own_consumer(
    addr: SocketAddr,
    queue: &str,
    publisher: u16,
    burst: u64,
) -> Vec<Read> {
    let mut raw = consuming_publisher(addr, queue, 100, publisher).await;
    let mut read = Vec::new();
    for first in (1..=MESSAGES).step_by(burst as usize) {
        let last = (first + burst - 1).min(MESSAGES);
        let frames: Vec<u8> = (first..=last)
            .flat_map(|n| publish_frames(publisher, queue, n.to_string().as_bytes()))
            .collect();
        raw.send(&frames).await;
        read_until_confirmed(&mut raw, last, &mut read).await;
    }
    read
}

/// Every message a confirm covers (`multiple`: every one not yet confirmed up to its tag)
/// was delivered before it; every message is confirmed once.
fn assert_delivered_before_confirmed(read: &[Read]) {
    let mut delivered = std::collections::HashSet::new();
    let mut confirmed = 0;
    for r in read {
        match *r {
            Read::Delivered(n) => {
                delivered.insert(n);
            }
            Read::Confirmed(tag, multiple) => {
                let covered = if multiple {
                    confirmed + 1..=tag
                } else {
                    tag..=tag
                };
                for n in covered {
                    assert!(
                        delivered.contains(&n),
                        "the confirm of {n} came before its delivery: {read:?}"
                    );
                }
                assert!(tag > confirmed, "confirms in order: {read:?}");
                confirmed = tag;
            }
        }
    }
    assert_eq!(confirmed, MESSAGES, "{read:?}");
}

/// Runs [`publish_to_own_consumer`] one at a time and in bursts of ten.
async fn deliveries_come_before_confirms(publisher: u16) {
    let server = AmqpServer::start().await;
    for burst in [1, 10] {
        let queue = format!("confirm-order-{publisher}-{burst}");
        let read = publish_to_own_consumer(server.addr, &queue, publisher, burst).await;
        assert_delivered_before_confirmed(&read);
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_follows_the_delivery_to_a_consumer_on_another_channel_of_the_connection() {
    deliveries_come_before_confirms(2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_follows_the_delivery_to_a_consumer_on_the_publishing_channel() {
    deliveries_come_before_confirms(1).await;
}

/// A connection consuming `full` with prefetch 1 (never acknowledging) publishes to it
/// and to `other`, which it does not consume, one message at a time on channel 2: each
/// confirm comes well within the wait a held confirm may take, and only the first message
/// of `full` is delivered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirms_wait_for_no_consumer_without_room_or_of_another_queue() {
    let server = AmqpServer::start().await;
    let mut raw = consuming_publisher(server.addr, "full", 1, 2).await;
    let declare = queue::Declare {
        queue: "other".into(),
        ..Default::default()
    };
    call(
        &mut raw,
        2,
        AMQPClass::Queue(queue::AMQPMethod::Declare(declare)),
    )
    .await;
    let mut read = Vec::new();
    for tag in 1..=2 * MESSAGES {
        let queue = if tag % 2 == 0 { "other" } else { "full" };
        raw.send(&publish_frames(2, queue, tag.to_string().as_bytes()))
            .await;
        let sent = Instant::now();
        read_until_confirmed(&mut raw, tag, &mut read).await;
        assert!(
            sent.elapsed() < Duration::from_millis(500),
            "confirm {tag} took {:?}",
            sent.elapsed()
        );
    }
    let delivered: Vec<_> = read
        .iter()
        .filter(|r| matches!(r, Read::Delivered(_)))
        .collect();
    assert_eq!(delivered, [&Read::Delivered(1)]);
    drop(raw);
    server.stop().await;
}
