//! A stream client made of Ferry's codec alone, against RabbitMQ's stream server: the
//! handshake (peer properties, SASL PLAIN, tune, open), a wrong password, streams created
//! and deleted with RabbitMQ's codes, metadata, a publisher with a reference, publishes and
//! their confirms, the publisher's sequence, a subscription whose delivered chunk holds the
//! published messages, stored and queried offsets, credit refused, close. (The suite's
//! node is RabbitMQ 3.10, whose server has none of the commands of 3.11 and later: super
//! streams, consumer updates, command versions, stream stats, offset resolution; the unit
//! tests of `ferry-streams` cover those.)

use crate::common::rabbitmq::{RabbitNode, unique};
use bytes::{Buf, Bytes, BytesMut};
use ferry_streams::{
    Answer, OffsetSpec, Published, Request, ServerFrame, StreamMetadata, code, framed, next_frame,
};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest a frame is waited for.
const PATIENCE: Duration = Duration::from_secs(20);
/// The largest frame read.
const FRAME_MAX: usize = 1 << 20;

/// One connection, frames in and out.
struct Connection {
    socket: TcpStream,
    buffer: BytesMut,
}

impl Connection {
    async fn open(node: &RabbitNode) -> Self {
        Self {
            socket: TcpStream::connect(node.stream_addr()).await.unwrap(),
            buffer: BytesMut::new(),
        }
    }

    async fn send(&mut self, request: &Request) {
        self.socket
            .write_all(&framed(|out| request.encode(out)))
            .await
            .unwrap();
    }

    /// The next frame, heartbeats skipped; `None` when the server closed the socket.
    async fn next(&mut self) -> Option<ServerFrame> {
        loop {
            if let Some(frame) = next_frame(&mut self.buffer, FRAME_MAX).unwrap() {
                match ServerFrame::decode(&frame) {
                    Ok(ServerFrame::Heartbeat) => continue,
                    Ok(frame) => return Some(frame),
                    Err(e) => panic!("RabbitMQ's frame {frame:?} does not decode: {e}"),
                }
            }
            let read = tokio::time::timeout(PATIENCE, self.socket.read_buf(&mut self.buffer))
                .await
                .expect("a frame from RabbitMQ in time")
                .unwrap();
            if read == 0 {
                return None;
            }
        }
    }

    async fn expect(&mut self) -> ServerFrame {
        self.next()
            .await
            .expect("a frame, not the end of the connection")
    }

    /// Sends `request` and returns the answer's code and what it carries.
    async fn call(&mut self, request: Request) -> (u16, Answer) {
        let (want, _) = request.key_version();
        self.send(&request).await;
        match self.expect().await {
            ServerFrame::Response {
                key, code, answer, ..
            } if key == want => (code, answer),
            other => panic!("answer to {request:?}: {other:?}"),
        }
    }

    /// Peer properties, SASL PLAIN as `user`/`password`: the authentication's code.
    async fn authenticate(&mut self, user: &str, password: &str) -> u16 {
        let (ok, Answer::Properties(server)) = self
            .call(Request::PeerProperties {
                correlation_id: 1,
                properties: vec![("product".into(), "ferry-codec-test".into())],
            })
            .await
        else {
            panic!("peer properties without properties");
        };
        assert_eq!(ok, code::OK);
        assert!(
            server
                .iter()
                .any(|(k, v)| k == "product" && v == "RabbitMQ"),
            "{server:?}"
        );
        let (ok, answer) = self
            .call(Request::SaslHandshake { correlation_id: 2 })
            .await;
        assert_eq!(ok, code::OK);
        let Answer::Mechanisms(mechanisms) = answer else {
            panic!("{answer:?}");
        };
        assert!(mechanisms.iter().any(|m| m == "PLAIN"), "{mechanisms:?}");
        let response = Bytes::from(format!("\0{user}\0{password}"));
        let (code, answer) = self
            .call(Request::SaslAuthenticate {
                correlation_id: 3,
                mechanism: "PLAIN".into(),
                response: Some(response),
            })
            .await;
        assert_eq!(answer, Answer::Challenge(None));
        code
    }

    /// The handshake as guest, into vhost `/`.
    async fn handshake(node: &RabbitNode) -> Self {
        let mut c = Self::open(node).await;
        assert_eq!(c.authenticate("guest", "guest").await, code::OK);
        let ServerFrame::Tune {
            frame_max,
            heartbeat,
        } = c.expect().await
        else {
            panic!("no tune after authentication");
        };
        assert!(frame_max > 0, "{frame_max}");
        c.send(&Request::Tune {
            frame_max,
            heartbeat,
        })
        .await;
        let (ok, _) = c
            .call(Request::Open {
                correlation_id: 4,
                vhost: "/".into(),
            })
            .await;
        assert_eq!(ok, code::OK);
        c
    }
}

/// A minimal AMQP 1.0 message: one data section holding `body`.
fn amqp_message(body: &[u8]) -> Bytes {
    let mut m = vec![0x00, 0x53, 0x75, 0xa0, u8::try_from(body.len()).unwrap()];
    m.extend_from_slice(body);
    Bytes::from(m)
}

/// The first offset and the messages of an osiris chunk of simple entries, as Deliver
/// (version 1) carries it: a 48-byte header, then the entries.
fn chunk_messages(mut chunk: &[u8]) -> (u64, Vec<Bytes>) {
    let magic_version = chunk.get_u8();
    assert_eq!(magic_version >> 4, 5, "osiris magic");
    assert_eq!(chunk.get_u8(), 0, "a user chunk");
    let entries = chunk.get_u16();
    let records = chunk.get_u32();
    assert_eq!(u32::from(entries), records, "simple entries only");
    let _timestamp = chunk.get_i64();
    let _epoch = chunk.get_u64();
    let first = chunk.get_u64();
    let _crc = chunk.get_i32();
    let data = chunk.get_u32() as usize;
    let _trailer = chunk.get_u32();
    chunk.advance(4); // bloom size and reserved
    // The trailer (the writers' deduplication state) stays in the segment: not sent.
    assert_eq!(chunk.len(), data, "the chunk's data");
    let mut messages = Vec::new();
    for _ in 0..entries {
        let header = chunk.get_u32();
        assert_eq!(header >> 31, 0, "a simple entry");
        let size = (header & 0x7fff_ffff) as usize;
        messages.push(Bytes::copy_from_slice(&chunk[..size]));
        chunk.advance(size);
    }
    (first, messages)
}

#[tokio::test]
async fn ferrys_codec_speaks_the_stream_protocol_with_rabbitmq() {
    let node = RabbitNode::get();

    // A wrong password: RabbitMQ's code, then the connection ends.
    let mut refused = Connection::open(&node).await;
    assert_eq!(
        refused.authenticate("guest", "wrong").await,
        code::AUTHENTICATION_FAILURE
    );
    while refused.next().await.is_some() {}

    let mut c = Connection::handshake(&node).await;
    let stream = unique("stream");
    let missing = unique("missing");
    let create = |correlation_id| Request::Create {
        correlation_id,
        stream: stream.clone(),
        arguments: vec![("max-length-bytes".into(), "1000000".into())],
    };
    assert_eq!(c.call(create(10)).await.0, code::OK);
    assert_eq!(c.call(create(11)).await.0, code::STREAM_ALREADY_EXISTS);

    c.send(&Request::Metadata {
        correlation_id: 12,
        streams: vec![stream.clone(), missing.clone()],
    })
    .await;
    let ServerFrame::Metadata {
        correlation_id: 12,
        brokers,
        mut streams,
    } = c.expect().await
    else {
        panic!("no metadata");
    };
    let port = u32::from(node.stream_addr().port());
    assert_eq!(brokers, [(0, "127.0.0.1".to_owned(), port)]);
    streams.sort_by(|a, b| a.stream.cmp(&b.stream));
    let mut want = vec![
        StreamMetadata {
            stream: stream.clone(),
            code: code::OK,
            leader: 0,
            replicas: vec![],
        },
        StreamMetadata {
            stream: missing.clone(),
            code: code::STREAM_DOES_NOT_EXIST,
            leader: u16::MAX,
            replicas: vec![],
        },
    ];
    want.sort_by(|a, b| a.stream.cmp(&b.stream));
    assert_eq!(streams, want);

    // A publisher with a reference: three messages, each confirmed.
    let (ok, _) = c
        .call(Request::DeclarePublisher {
            correlation_id: 13,
            publisher_id: 1,
            reference: "codec-test".into(),
            stream: stream.clone(),
        })
        .await;
    assert_eq!(ok, code::OK);
    let bodies: Vec<Bytes> = (1..=3)
        .map(|i| amqp_message(format!("m{i}").as_bytes()))
        .collect();
    c.send(&Request::Publish {
        publisher_id: 1,
        messages: bodies
            .iter()
            .zip(1u64..)
            .map(|(message, publishing_id)| Published {
                publishing_id,
                filter_value: None,
                message: message.clone(),
            })
            .collect(),
    })
    .await;
    let mut confirmed = Vec::new();
    while confirmed.len() < 3 {
        match c.expect().await {
            ServerFrame::PublishConfirm {
                publisher_id: 1,
                publishing_ids,
            } => {
                confirmed.extend(publishing_ids);
            }
            other => panic!("waiting for confirms: {other:?}"),
        }
    }
    confirmed.sort_unstable();
    assert_eq!(confirmed, [1, 2, 3]);
    let sequence = c
        .call(Request::QueryPublisherSequence {
            correlation_id: 14,
            reference: "codec-test".into(),
            stream: stream.clone(),
        })
        .await;
    assert_eq!(sequence, (code::OK, Answer::Value(3)));
    assert_eq!(
        c.call(Request::DeclarePublisher {
            correlation_id: 15,
            publisher_id: 2,
            reference: String::new(),
            stream: missing.clone(),
        })
        .await
        .0,
        code::STREAM_DOES_NOT_EXIST
    );

    // A subscription from the first offset gets the messages in one chunk.
    let subscribe = |correlation_id, subscription_id, stream: &str| Request::Subscribe {
        correlation_id,
        subscription_id,
        stream: stream.to_owned(),
        offset: OffsetSpec::First,
        credit: 1,
        properties: vec![],
    };
    assert_eq!(c.call(subscribe(16, 7, &stream)).await.0, code::OK);
    let mut delivered = Vec::new();
    while delivered.len() < 3 {
        match c.expect().await {
            ServerFrame::Deliver {
                subscription_id: 7,
                committed_chunk_id: None,
                chunk,
            } => {
                let (first, messages) = chunk_messages(&chunk);
                assert_eq!(first, delivered.len() as u64);
                delivered.extend(messages);
                c.send(&Request::Credit {
                    subscription_id: 7,
                    credit: 1,
                })
                .await;
            }
            other => panic!("waiting for deliveries: {other:?}"),
        }
    }
    assert_eq!(delivered, bodies);
    assert_eq!(
        c.call(subscribe(17, 7, &stream)).await.0,
        code::SUBSCRIPTION_ID_ALREADY_EXISTS
    );
    assert_eq!(
        c.call(subscribe(18, 8, &missing)).await.0,
        code::STREAM_DOES_NOT_EXIST
    );

    // Offsets stored under a reference are read back (the store is asynchronous).
    let query = |correlation_id, reference: &str| Request::QueryOffset {
        correlation_id,
        reference: reference.to_owned(),
        stream: stream.clone(),
    };
    assert_eq!(
        c.call(query(19, "nobody")).await,
        (code::NO_OFFSET, Answer::Value(0))
    );
    c.send(&Request::StoreOffset {
        reference: "codec-reader".into(),
        stream: stream.clone(),
        offset: 2,
    })
    .await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        match c.call(query(20, "codec-reader")).await {
            (code::OK, Answer::Value(2)) => break,
            (code::NO_OFFSET, _) if tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            other => panic!("stored offset: {other:?}"),
        }
    }

    let unsubscribe = |correlation_id| Request::Unsubscribe {
        correlation_id,
        subscription_id: 7,
    };
    assert_eq!(c.call(unsubscribe(21)).await.0, code::OK);
    assert_eq!(
        c.call(unsubscribe(22)).await.0,
        code::SUBSCRIPTION_ID_DOES_NOT_EXIST
    );
    c.send(&Request::Credit {
        subscription_id: 9,
        credit: 1,
    })
    .await;
    assert_eq!(
        c.expect().await,
        ServerFrame::CreditRefused {
            code: code::SUBSCRIPTION_ID_DOES_NOT_EXIST,
            subscription_id: 9
        }
    );

    let delete = |correlation_id| Request::Delete {
        correlation_id,
        stream: stream.clone(),
    };
    assert_eq!(c.call(delete(24)).await.0, code::OK);
    // Its publisher learns that its stream went.
    assert_eq!(
        c.expect().await,
        ServerFrame::MetadataUpdate {
            code: code::STREAM_NOT_AVAILABLE,
            stream: stream.clone()
        }
    );
    assert_eq!(c.call(delete(25)).await.0, code::STREAM_DOES_NOT_EXIST);
    assert_eq!(
        c.call(Request::Close {
            correlation_id: 26,
            code: code::OK,
            reason: "done".into()
        })
        .await
        .0,
        code::OK
    );
}
