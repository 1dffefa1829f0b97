//! The AMQP front against bad input on raw sockets: garbage, another protocol header, a
//! frame declaring 4 GB, truncated and malformed frames, frames on unopened channels,
//! bodies over the limit, wrong passwords, silent peers and a consumer that reads nothing
//! (it leases at most one batch beyond what its connection's writer holds, and is
//! disconnected after `amqp.send_timeout_ms`, its deliveries requeued). Each gets the reply code the
//! specification gives, closes at most its own channel or connection, and loses nothing
//! already accepted. Server frames are read with `amq-protocol`'s parser, not Ferry's.

use crate::common::amqp::{WAIT, declare, drain, publish_confirmed, ready};
use crate::common::fronts::AmqpServer;
use crate::common::sockets::{Ending, read_to_the_end};
use amq_protocol::frame::{AMQPFrame, WriteContext, gen_frame, parse_frame};
use amq_protocol::protocol::{AMQPClass, basic, channel, connection, queue};
use amq_protocol::types::FieldTable;
use ferry_amqp::LEASE_BATCH;
use futures::StreamExt;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const HEADER: &[u8; 8] = b"AMQP\x00\x00\x09\x01";

/// A client speaking AMQP byte by byte.
pub(crate) struct Raw {
    stream: TcpStream,
    buf: Vec<u8>,
}

/// What the server did next.
#[derive(Debug, PartialEq)]
pub(crate) enum Seen {
    Frame(Box<AMQPFrame>),
    /// It closed the socket.
    Eof,
}

impl Raw {
    async fn connect(server: &AmqpServer) -> Self {
        Self::connect_to(server.addr).await
    }

    /// A client of the AMQP listener at `addr` (a daemon's, say).
    pub(crate) async fn connect_to(addr: std::net::SocketAddr) -> Self {
        Self {
            stream: TcpStream::connect(addr).await.unwrap(),
            buf: Vec::new(),
        }
    }

    pub(crate) async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    pub(crate) async fn send_frame(&mut self, frame: AMQPFrame) {
        let bytes = encode(&frame);
        self.send(&bytes).await;
    }

    pub(crate) async fn method(&mut self, channel: u16, method: AMQPClass) {
        self.send_frame(AMQPFrame::Method(channel, method)).await;
    }

    /// The next frame (heartbeats included), or EOF.
    pub(crate) async fn next(&mut self) -> Seen {
        tokio::time::timeout(WAIT, async {
            loop {
                if !self.buf.is_empty() {
                    let parsed = parse_frame(&self.buf[..]).map(|(rest, f)| (rest.len(), f));
                    if let Ok((rest, frame)) = parsed {
                        self.buf.drain(..self.buf.len() - rest);
                        return Seen::Frame(Box::new(frame));
                    }
                }
                let mut chunk = [0u8; 4096];
                match self.stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return Seen::Eof,
                    Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                }
            }
        })
        .await
        .expect("the server neither answered nor closed")
    }

    /// The next method, skipping heartbeats.
    pub(crate) async fn next_method(&mut self) -> Option<(u16, AMQPClass)> {
        loop {
            match self.next().await {
                Seen::Frame(frame) => match *frame {
                    AMQPFrame::Method(c, m) => return Some((c, m)),
                    AMQPFrame::Heartbeat => {}
                    other => panic!("unexpected frame {other:?}"),
                },
                Seen::Eof => return None,
            }
        }
    }

    /// Expects connection.close; answers close-ok; returns (code, text).
    async fn connection_closed(&mut self) -> (u16, String) {
        match self.next_method().await {
            Some((0, AMQPClass::Connection(connection::AMQPMethod::Close(c)))) => {
                self.method(
                    0,
                    AMQPClass::Connection(connection::AMQPMethod::CloseOk(connection::CloseOk {})),
                )
                .await;
                (c.reply_code, c.reply_text.to_string())
            }
            other => panic!("expected connection.close, got {other:?}"),
        }
    }

    /// Runs the handshake as `user`/`password` with `heartbeat` seconds; returns the
    /// server's answer to connection.open (or to start-ok, when it refuses the login).
    async fn handshake_as(
        &mut self,
        user: &str,
        password: &str,
        heartbeat: u16,
    ) -> Option<(u16, AMQPClass)> {
        self.handshake_tuned(user, password, heartbeat, None).await
    }

    /// [`Self::handshake_as`], asking in tune-ok for `channel_max` instead of the
    /// server's.
    async fn handshake_tuned(
        &mut self,
        user: &str,
        password: &str,
        heartbeat: u16,
        channel_max: Option<u16>,
    ) -> Option<(u16, AMQPClass)> {
        self.send(HEADER).await;
        let Some((0, AMQPClass::Connection(connection::AMQPMethod::Start(_)))) =
            self.next_method().await
        else {
            panic!("no connection.start");
        };
        self.method(
            0,
            AMQPClass::Connection(connection::AMQPMethod::StartOk(connection::StartOk {
                client_properties: FieldTable::default(),
                mechanism: "PLAIN".into(),
                response: format!("\0{user}\0{password}").into(),
                locale: "en_US".into(),
            })),
        )
        .await;
        let next = self.next_method().await;
        let Some((0, AMQPClass::Connection(connection::AMQPMethod::Tune(tune)))) = next else {
            return next;
        };
        self.method(
            0,
            AMQPClass::Connection(connection::AMQPMethod::TuneOk(connection::TuneOk {
                channel_max: channel_max.unwrap_or(tune.channel_max),
                frame_max: tune.frame_max,
                heartbeat,
            })),
        )
        .await;
        self.method(
            0,
            AMQPClass::Connection(connection::AMQPMethod::Open(connection::Open {
                virtual_host: "/".into(),
            })),
        )
        .await;
        self.next_method().await
    }

    pub(crate) async fn handshake(&mut self) {
        let open_ok = self.handshake_as("guest", "guest", 0).await;
        assert!(
            matches!(
                open_ok,
                Some((0, AMQPClass::Connection(connection::AMQPMethod::OpenOk(_))))
            ),
            "{open_ok:?}"
        );
    }

    pub(crate) async fn open_channel(&mut self, id: u16) {
        self.method(
            id,
            AMQPClass::Channel(channel::AMQPMethod::Open(channel::Open {})),
        )
        .await;
        let got = self.next_method().await;
        assert!(
            matches!(got, Some((c, AMQPClass::Channel(channel::AMQPMethod::OpenOk(_)))) if c == id),
            "{got:?}"
        );
    }
}

fn encode(frame: &AMQPFrame) -> Vec<u8> {
    gen_frame(frame)(WriteContext::from(Vec::new()))
        .unwrap()
        .into_inner()
        .0
}

/// basic.publish of `body` to the default exchange with `routing_key` on `channel`: its
/// method, header and body frames.
pub(crate) fn publish_frames(channel: u16, routing_key: &str, body: &[u8]) -> Vec<u8> {
    let mut out = encode(&AMQPFrame::Method(
        channel,
        AMQPClass::Basic(basic::AMQPMethod::Publish(basic::Publish {
            exchange: "".into(),
            routing_key: routing_key.into(),
            mandatory: false,
            immediate: false,
        })),
    ));
    out.extend(encode(&AMQPFrame::Header(
        channel,
        amq_protocol::frame::AMQPContentHeader {
            class_id: 60,
            body_size: body.len() as u64,
            properties: Default::default(),
        },
    )));
    out.extend(encode(&AMQPFrame::Body(channel, body.to_vec())));
    out
}

fn declare_queue(name: &str) -> AMQPClass {
    AMQPClass::Queue(queue::AMQPMethod::Declare(queue::Declare {
        queue: name.into(),
        ..Default::default()
    }))
}

/// A raw frame: type, channel, payload, end byte `end`.
fn frame(kind: u8, channel: u16, payload: &[u8], end: u8) -> Vec<u8> {
    let mut b = vec![kind];
    b.extend_from_slice(&channel.to_be_bytes());
    b.extend_from_slice(&(payload.len() as u32).to_be_bytes());
    b.extend_from_slice(payload);
    b.push(end);
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_gets_the_protocol_header_then_the_socket_closes() {
    let server = AmqpServer::start().await;
    for hello in [
        &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        b"AMQP\x01\x01\x00\x09",
    ] {
        let mut raw = Raw::connect(&server).await;
        raw.send(hello).await;
        let mut answer = [0u8; 8];
        raw.stream.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, HEADER);
        assert_eq!(raw.next().await, Seen::Eof);
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_declaring_4_gb_is_a_501_frame_error() {
    let server = AmqpServer::start().await;
    let mut raw = Raw::connect(&server).await;
    raw.handshake().await;
    raw.send(&[3, 0, 1, 0xff, 0xff, 0xff, 0xff]).await;
    let (code, text) = raw.connection_closed().await;
    assert_eq!(code, 501);
    assert_eq!(
        text,
        "FRAME_ERROR - a frame of 4294967303 bytes exceeds the negotiated frame_max of 131072 bytes"
    );
    assert_eq!(raw.next().await, Seen::Eof);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_get_their_reply_codes() {
    let server = AmqpServer::start().await;
    // (what, bytes after the handshake and channel 1's open, expected code)
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        (
            "bad end byte",
            frame(1, 1, &[0, 50, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0], 0x00),
            501,
        ),
        ("unknown frame type", frame(9, 1, &[], 0xCE), 501),
        ("unknown method", frame(1, 1, &[0, 60, 0, 99], 0xCE), 540),
        (
            "malformed fields",
            frame(1, 1, &[0, 50, 0, 10, 0, 0, 200], 0xCE),
            502,
        ),
        ("heartbeat on a channel", frame(8, 1, &[], 0xCE), 501),
        (
            "header without publish",
            encode(&AMQPFrame::Header(
                1,
                amq_protocol::frame::AMQPContentHeader {
                    class_id: 60,
                    body_size: 1,
                    properties: Default::default(),
                },
            )),
            505,
        ),
        (
            "frame on an unopened channel",
            encode(&AMQPFrame::Method(7, declare_queue("q"))),
            504,
        ),
        (
            "second channel.open",
            encode(&AMQPFrame::Method(
                1,
                AMQPClass::Channel(channel::AMQPMethod::Open(channel::Open {})),
            )),
            504,
        ),
        (
            "immediate publish",
            encode(&AMQPFrame::Method(
                1,
                AMQPClass::Basic(basic::AMQPMethod::Publish(basic::Publish {
                    exchange: "".into(),
                    routing_key: "q".into(),
                    mandatory: false,
                    immediate: true,
                })),
            )),
            540,
        ),
    ];
    for (what, bytes, expected) in cases {
        let mut raw = Raw::connect(&server).await;
        raw.handshake().await;
        raw.open_channel(1).await;
        raw.send(&bytes).await;
        if what == "immediate publish" {
            raw.send_frame(AMQPFrame::Header(
                1,
                amq_protocol::frame::AMQPContentHeader {
                    class_id: 60,
                    body_size: 0,
                    properties: Default::default(),
                },
            ))
            .await;
        }
        let (code, text) = raw.connection_closed().await;
        assert_eq!(code, expected, "{what}: {text}");
    }
    server.stop().await;
}

/// What a client that negotiated a `channel_max` of 2 sees at the broker at `addr` when it
/// opens channels 65535 and 7 and then a third, 1: whether each opened, and the close.
async fn channels_past_channel_max(addr: std::net::SocketAddr) -> (Vec<bool>, (u16, String)) {
    let mut raw = Raw::connect_to(addr).await;
    let open_ok = raw.handshake_tuned("guest", "guest", 0, Some(2)).await;
    assert!(
        matches!(
            open_ok,
            Some((0, AMQPClass::Connection(connection::AMQPMethod::OpenOk(_))))
        ),
        "{open_ok:?}"
    );
    let mut opened = Vec::new();
    for id in [65535, 7, 1] {
        raw.method(
            id,
            AMQPClass::Channel(channel::AMQPMethod::Open(channel::Open {})),
        )
        .await;
        match raw.next_method().await {
            Some((c, AMQPClass::Channel(channel::AMQPMethod::OpenOk(_)))) if c == id => {
                opened.push(true);
            }
            Some((0, AMQPClass::Connection(connection::AMQPMethod::Close(c)))) => {
                opened.push(false);
                return (opened, (c.reply_code, c.reply_text.to_string()));
            }
            other => panic!("channel {id}: {other:?}"),
        }
    }
    panic!("a third channel opened past channel_max 2")
}

/// Issue 33: a client that opened channel 65535 after negotiating `channel_max` 2047 lost
/// its connection. As RabbitMQ, `channel_max` bounds how many channels are open at once;
/// any number from 1 to 65535 may be used. Compared with the suite's RabbitMQ node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_max_bounds_how_many_channels_are_open_not_their_numbers_as_rabbitmq() {
    let server = AmqpServer::start().await;
    let ferry = channels_past_channel_max(server.addr).await;
    let node = crate::common::rabbitmq::RabbitNode::get();
    let rabbitmq = channels_past_channel_max(node.addr()).await;
    assert_eq!(ferry, rabbitmq);
    assert_eq!(ferry.0, [true, true, false]);
    assert_eq!(ferry.1.0, 530);
    server.stop().await;
}

/// What a client sees at the broker at `addr` when it sends connection.close with more
/// publishes behind it (as amqplib does when `close()` is called with publishes still in
/// its buffer): the close-ok, and then whether its later writes kept going through until
/// it closed the socket itself, and the broker's end of the stream after that.
async fn close_with_publishes_behind(addr: std::net::SocketAddr) -> (bool, usize) {
    let mut raw = Raw::connect_to(addr).await;
    raw.handshake().await;
    raw.open_channel(1).await;
    raw.method(
        0,
        AMQPClass::Connection(connection::AMQPMethod::Close(connection::Close {
            reply_code: 200,
            reply_text: "bye".into(),
            class_id: 0,
            method_id: 0,
        })),
    )
    .await;
    let close_ok = matches!(
        raw.next_method().await,
        Some((0, AMQPClass::Connection(connection::AMQPMethod::CloseOk(_))))
    );
    // Twenty more writes over 200 ms: past the broker's close-ok, the time a reset takes to
    // come back, and the write that then fails.
    let mut written = 0;
    for i in 0..20u8 {
        if raw
            .stream
            .write_all(&publish_frames(1, "q", &[i]))
            .await
            .is_err()
        {
            break;
        }
        written += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    raw.stream.shutdown().await.unwrap();
    assert_eq!(
        raw.next().await,
        Seen::Eof,
        "the broker closes after the client"
    );
    (close_ok, written)
}

/// Issue 33, found with amqplib: a client that sent connection.close while publishes were
/// still in its buffer got close-ok and then a socket Ferry had already closed; its next
/// writes failed, it never read the close-ok, and its close never completed. As RabbitMQ,
/// Ferry now reads and drops what comes after the close until the client closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_closing_with_publishes_behind_the_close_keeps_its_socket_until_it_closes() {
    let server = AmqpServer::start().await;
    let ferry = close_with_publishes_behind(server.addr).await;
    let node = crate::common::rabbitmq::RabbitNode::get();
    let rabbitmq = close_with_publishes_behind(node.addr()).await;
    assert_eq!(ferry, rabbitmq);
    assert_eq!(ferry, (true, 20));
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_closes_its_channel_with_406_and_the_connection_goes_on() {
    let server = AmqpServer::start_with(|c| c.max_message_size = 1000).await;
    let mut raw = Raw::connect(&server).await;
    raw.handshake().await;
    raw.open_channel(1).await;
    raw.method(
        1,
        AMQPClass::Basic(basic::AMQPMethod::Publish(basic::Publish {
            exchange: "".into(),
            routing_key: "q".into(),
            mandatory: false,
            immediate: false,
        })),
    )
    .await;
    raw.send_frame(AMQPFrame::Header(
        1,
        amq_protocol::frame::AMQPContentHeader {
            class_id: 60,
            body_size: 3_000_000_000,
            properties: Default::default(),
        },
    ))
    .await;
    // Body frames already on their way are dropped with the failed channel.
    raw.send_frame(AMQPFrame::Body(1, vec![0u8; 500])).await;
    match raw.next_method().await {
        Some((1, AMQPClass::Channel(channel::AMQPMethod::Close(c)))) => {
            assert_eq!(c.reply_code, 406);
            assert_eq!(
                c.reply_text.as_str(),
                "PRECONDITION_FAILED - message size 3000000000 is larger than configured max size 1000"
            );
            assert_eq!((c.class_id, c.method_id), (60, 40));
        }
        other => panic!("expected channel.close, got {other:?}"),
    }
    raw.method(
        1,
        AMQPClass::Channel(channel::AMQPMethod::CloseOk(channel::CloseOk {})),
    )
    .await;
    raw.open_channel(1).await;
    raw.method(1, declare_queue("still-here")).await;
    let got = raw.next_method().await;
    assert!(
        matches!(
            got,
            Some((1, AMQPClass::Queue(queue::AMQPMethod::DeclareOk(_))))
        ),
        "{got:?}"
    );
    drop(raw);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_closed_with_403() {
    let server = AmqpServer::start().await;
    let mut raw = Raw::connect(&server).await;
    match raw.handshake_as("guest", "wrong", 0).await {
        Some((0, AMQPClass::Connection(connection::AMQPMethod::Close(c)))) => {
            raw.method(
                0,
                AMQPClass::Connection(connection::AMQPMethod::CloseOk(connection::CloseOk {})),
            )
            .await;
            assert_eq!(raw.next().await, Seen::Eof);
            assert_eq!(c.reply_code, 403);
            assert_eq!(
                c.reply_text.as_str(),
                "ACCESS_REFUSED - login refused for user 'guest': invalid credentials"
            );
        }
        other => panic!("expected connection.close, got {other:?}"),
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_peer_is_disconnected_after_two_heartbeats_and_gets_heartbeats_meanwhile() {
    let server = AmqpServer::start().await;
    let mut raw = Raw::connect(&server).await;
    let open_ok = raw.handshake_as("guest", "guest", 1).await;
    assert!(matches!(
        open_ok,
        Some((0, AMQPClass::Connection(connection::AMQPMethod::OpenOk(_))))
    ));
    let mut heartbeats = 0;
    loop {
        match raw.next().await {
            Seen::Frame(frame) if *frame == AMQPFrame::Heartbeat => heartbeats += 1,
            Seen::Eof => break,
            Seen::Frame(other) => panic!("unexpected {other:?}"),
        }
    }
    assert!(
        heartbeats >= 1,
        "the server sends heartbeats to a quiet peer"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_server_holds_the_next_connection_until_one_closes() {
    let server = AmqpServer::start_with(|c| c.max_connections = 1).await;
    let mut first = Raw::connect(&server).await;
    first.handshake().await;
    let mut second = Raw::connect(&server).await;
    second.send(HEADER).await;
    let mut byte = [0u8; 1];
    let early =
        tokio::time::timeout(Duration::from_millis(300), second.stream.read(&mut byte)).await;
    assert!(
        early.is_err(),
        "the second connection is not served while the first is open"
    );
    drop(first);
    let started = second.next_method().await;
    assert!(
        matches!(
            started,
            Some((0, AMQPClass::Connection(connection::AMQPMethod::Start(_))))
        ),
        "{started:?}"
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_on_other_connections_loses_no_accepted_message() {
    let server = AmqpServer::start().await;
    let (_conn, ch) = server.channel().await;
    declare(&ch, "precious", FieldTable::default()).await;
    let bodies: Vec<String> = (0..100).map(|i| format!("p{i:02}")).collect();
    let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
    publish_confirmed(&ch, "", "precious", &refs).await;

    let mut garbage = Raw::connect(&server).await;
    garbage.send(b"\x00\x01\x02garbage").await;
    let mut huge = Raw::connect(&server).await;
    huge.handshake().await;
    huge.send(&[1, 0, 0, 0xff, 0xff, 0xff, 0xff]).await;
    let mut truncated = Raw::connect(&server).await;
    truncated.handshake().await;
    truncated.open_channel(1).await;
    let publish = encode(&AMQPFrame::Method(1, declare_queue("precious")));
    truncated.send(&publish[..publish.len() / 2]).await;
    drop(truncated);
    let mut unopened = Raw::connect(&server).await;
    unopened.handshake().await;
    unopened.method(9, declare_queue("precious")).await;
    assert_eq!(unopened.connection_closed().await.0, 504);
    assert_eq!(huge.connection_closed().await.0, 501);

    // The connection that published is still open, and every message is there in order.
    assert_eq!(drain(&ch, "precious").await, bodies);
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirms_of_a_burst_are_grouped_into_multiple_acks() {
    let server = AmqpServer::start().await;
    let mut raw = Raw::connect(&server).await;
    raw.handshake().await;
    raw.open_channel(1).await;
    raw.method(1, declare_queue("burst")).await;
    assert!(matches!(
        raw.next_method().await,
        Some((1, AMQPClass::Queue(queue::AMQPMethod::DeclareOk(_))))
    ));
    raw.method(
        1,
        AMQPClass::Confirm(amq_protocol::protocol::confirm::AMQPMethod::Select(
            amq_protocol::protocol::confirm::Select { nowait: false },
        )),
    )
    .await;
    raw.next_method().await.expect("select-ok");
    // Fifty publishes in one write: they are stored in few transactions, and each run of
    // acks arrives as one multiple ack.
    let burst: Vec<u8> = (0..50u8)
        .flat_map(|i| publish_frames(1, "burst", &[i]))
        .collect();
    raw.send(&burst).await;
    let (mut confirmed, mut acks, mut multiple) = (0u64, 0, false);
    while confirmed < 50 {
        match raw.next_method().await {
            Some((1, AMQPClass::Basic(basic::AMQPMethod::Ack(a)))) => {
                assert!(a.delivery_tag > confirmed, "acks come in order");
                confirmed = a.delivery_tag;
                acks += 1;
                multiple |= a.multiple;
            }
            other => panic!("expected basic.ack, got {other:?}"),
        }
    }
    assert!(multiple, "a run of confirms was sent as one multiple ack");
    assert!(acks < 50, "{acks} acks for 50 publishes");
    drop(raw);
    server.stop().await;
}

/// Starts a consumer of `queue` without a prefetch limit or heartbeats on a raw connection
/// that never reads its socket after consume-ok, and waits until it holds deliveries (the
/// queue's ready count falls below `queued`).
async fn stuck_consumer(
    server: &AmqpServer,
    ch: &lapin::Channel,
    queue: &str,
    queued: usize,
) -> Raw {
    let mut stuck = Raw::connect(server).await;
    stuck.handshake().await;
    stuck.open_channel(1).await;
    stuck
        .method(
            1,
            AMQPClass::Basic(basic::AMQPMethod::Consume(basic::Consume {
                queue: queue.into(),
                consumer_tag: "stuck".into(),
                no_local: false,
                no_ack: false,
                exclusive: false,
                nowait: false,
                arguments: FieldTable::default(),
            })),
        )
        .await;
    let consume_ok = stuck.next_method().await;
    assert!(
        matches!(
            consume_ok,
            Some((1, AMQPClass::Basic(basic::AMQPMethod::ConsumeOk(_))))
        ),
        "{consume_ok:?}"
    );
    let holding = tokio::time::timeout(WAIT, async {
        while ready(ch, queue).await as usize == queued {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(holding.is_ok(), "the stuck consumer got no delivery");
    stuck
}

/// Consumes `count` messages of `queue` (waiting for a stuck consumer's disconnection to
/// requeue what it held) and returns how many were redelivered: those it had leased.
async fn redelivered_to_another(ch: &lapin::Channel, queue: &str, count: usize) -> usize {
    let consumer = ch
        .basic_consume(
            queue.into(),
            "other".into(),
            lapin::options::BasicConsumeOptions {
                no_ack: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    let got = tokio::time::timeout(WAIT * 3, consumer.take(count).collect::<Vec<_>>())
        .await
        .expect("every message reached the other consumer");
    got.iter()
        .filter(|d| d.as_ref().unwrap().redelivered)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_that_reads_nothing_is_disconnected_and_its_deliveries_go_to_others() {
    let server = AmqpServer::start_with(|c| c.send_timeout_ms = 500).await;
    let (_conn, ch) = server.channel().await;
    declare(&ch, "unread", FieldTable::default()).await;
    // 24 MiB: far more than the sockets' buffers hold.
    let body = "x".repeat(64 * 1024);
    let bodies = vec![body.as_str(); 384];
    publish_confirmed(&ch, "", "unread", &bodies).await;

    let mut stuck = stuck_consumer(&server, &ch, "unread", bodies.len()).await;
    // Once its writes stall past amqp.send_timeout_ms it is disconnected and what it held
    // is requeued, so another consumer gets every message.
    let redelivered = redelivered_to_another(&ch, "unread", bodies.len()).await;
    assert!(redelivered > 0, "nothing was held by the stuck consumer");
    // The stuck client finds what was written before, then a reset, as RabbitMQ ends such
    // a connection: a FIN would wait behind the bytes it never reads, so it would never
    // learn that its connection is gone.
    assert_eq!(
        read_to_the_end(&mut stuck.stream, WAIT).await,
        Ending::Reset
    );
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_without_prefetch_that_reads_nothing_leases_one_batch_beyond_its_writer() {
    // Time enough for more leases than the bound allows, were they not held back.
    let server = AmqpServer::start_with(|c| c.send_timeout_ms = 3000).await;
    let (_conn, ch) = server.channel().await;
    declare(&ch, "unread", FieldTable::default()).await;
    // Three lease batches of 8 KiB messages: one batch (8 MiB) is more than the writer's
    // queue (QUEUE_BYTES) and the sockets' buffers hold.
    let body = "x".repeat(8 * 1024);
    let bodies = vec![body.as_str(); 3 * LEASE_BATCH];
    publish_confirmed(&ch, "", "unread", &bodies).await;

    let mut stuck = stuck_consumer(&server, &ch, "unread", bodies.len()).await;
    // No other consumer competes until it is disconnected and what it held is back.
    let released = tokio::time::timeout(WAIT, async {
        loop {
            let queue = ch
                .queue_declare(
                    "unread".into(),
                    lapin::options::QueueDeclareOptions {
                        passive: true,
                        ..Default::default()
                    },
                    FieldTable::default(),
                )
                .await
                .unwrap();
            if queue.consumer_count() == 0 && queue.message_count() as usize == bodies.len() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(released.is_ok(), "the stuck consumer was not disconnected");
    // Its first batch is stuck in the writer, so it leased one more and no third: a
    // consumer whose client reads nothing makes Ferry hold one batch beyond the writer's
    // bytes, not the queue.
    let redelivered = redelivered_to_another(&ch, "unread", bodies.len()).await;
    assert!(
        (LEASE_BATCH..=2 * LEASE_BATCH).contains(&redelivered),
        "the stuck consumer leased {redelivered} of {} messages",
        bodies.len()
    );
    while stuck.next().await != Seen::Eof {}
    server.stop().await;
}
