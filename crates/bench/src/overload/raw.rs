//! Clients on bare sockets, for loads a library client would not make: AMQP connections
//! that stop after the handshake or after basic.consume (and then never read), Kafka
//! connections that send one ApiVersions request or pipeline Fetch requests they never
//! read the answers of. Frames go through Ferry's own AMQP codec and `kafka-protocol`.
//!
//! A socket whose client does not read is watched through the kernel instead
//! ([`tcp_state`], [`unread_bytes`]): reading it to find out whether the broker closed it
//! would be the very thing the scenario must not do.

#![allow(unsafe_code, reason = "TCP_INFO and FIONREAD are read with libc calls")]

use anyhow::Context;
use bytes::BytesMut;
use ferry_amqp::codec::{self, Frame, PROTOCOL_HEADER};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, BrokerId, FetchRequest, RequestHeader,
    ResponseHeader, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use lapin::protocol::{AMQPClass, basic, channel, connection};
use lapin::types::FieldTable;
use lapin::uri::{AMQPScheme, AMQPUri};
use std::os::fd::AsRawFd;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The frame size a raw client accepts before connection.tune has said the broker's.
const HANDSHAKE_FRAME_MAX: u32 = 131_072;
/// The largest Kafka answer a raw client reads (an ApiVersions answer is a few hundred
/// bytes).
const KAFKA_ANSWER_MAX: usize = 1 << 20;
/// `tcpi_state` of an established connection (`TCP_ESTABLISHED` in `<netinet/tcp.h>`).
pub(super) const TCP_ESTABLISHED: u8 = 1;
/// The channel a raw AMQP client consumes on.
const CHANNEL: u16 = 1;

/// Where and as whom a raw AMQP client connects, from an `amqp://` URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AmqpTarget {
    /// `host:port`.
    pub addr: String,
    /// The user of PLAIN.
    pub user: String,
    /// Its password.
    pub password: String,
    /// The virtual host to open.
    pub vhost: String,
}

impl AmqpTarget {
    /// The target of `uri`.
    ///
    /// # Errors
    /// A URI that does not parse, or an `amqps://` one: the raw clients speak plaintext.
    pub(super) fn parse(uri: &str) -> anyhow::Result<Self> {
        let parsed: AMQPUri = uri.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
        anyhow::ensure!(
            parsed.scheme == AMQPScheme::AMQP,
            "the overload scenarios speak plaintext AMQP: --amqp-uri must start with amqp://"
        );
        Ok(Self {
            addr: format!("{}:{}", parsed.authority.host, parsed.authority.port),
            user: parsed.authority.userinfo.username,
            password: parsed.authority.userinfo.password,
            vhost: parsed.vhost,
        })
    }
}

/// An AMQP 0-9-1 connection driven frame by frame.
pub(super) struct RawAmqp {
    stream: TcpStream,
    buf: BytesMut,
    /// The frame size connection.tune agreed on.
    frame_max: u32,
}

impl RawAmqp {
    /// Connects and runs the handshake (PLAIN, heartbeats off, the broker's frame size)
    /// up to connection.open-ok.
    ///
    /// # Errors
    /// The connection fails, closes, or the broker answers with something else (a refused
    /// login closes it with a reply code, which the error carries).
    pub(super) async fn handshake(target: &AmqpTarget) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(&target.addr).await?;
        let mut raw = Self {
            stream,
            buf: BytesMut::with_capacity(1024),
            frame_max: HANDSHAKE_FRAME_MAX,
        };
        raw.stream.write_all(&PROTOCOL_HEADER).await?;
        raw.expect(|m| matches!(m, AMQPClass::Connection(connection::AMQPMethod::Start(_))))
            .await
            .context("connection.start")?;
        raw.send(
            0,
            AMQPClass::Connection(connection::AMQPMethod::StartOk(connection::StartOk {
                client_properties: FieldTable::default(),
                mechanism: "PLAIN".into(),
                response: format!("\0{}\0{}", target.user, target.password).into(),
                locale: "en_US".into(),
            })),
        )
        .await?;
        let AMQPClass::Connection(connection::AMQPMethod::Tune(tune)) = raw
            .expect(|m| matches!(m, AMQPClass::Connection(connection::AMQPMethod::Tune(_))))
            .await
            .context("connection.tune")?
        else {
            unreachable!("expect returns what it matched")
        };
        if tune.frame_max != 0 {
            raw.frame_max = tune.frame_max;
        }
        raw.send(
            0,
            AMQPClass::Connection(connection::AMQPMethod::TuneOk(connection::TuneOk {
                channel_max: tune.channel_max,
                frame_max: raw.frame_max,
                heartbeat: 0,
            })),
        )
        .await?;
        raw.send(
            0,
            AMQPClass::Connection(connection::AMQPMethod::Open(connection::Open {
                virtual_host: target.vhost.as_str().into(),
            })),
        )
        .await?;
        raw.expect(|m| matches!(m, AMQPClass::Connection(connection::AMQPMethod::OpenOk(_))))
            .await
            .context("connection.open-ok")?;
        raw.buf = BytesMut::new();
        Ok(raw)
    }

    /// Opens channel 1 and consumes `queue` with acknowledgements and a prefetch of
    /// `prefetch` (0: unlimited), up to basic.consume-ok; deliveries that came before it
    /// stay unread in the socket with everything after.
    ///
    /// # Errors
    /// The broker closes the channel or the connection, or the socket fails.
    pub(super) async fn consume(&mut self, queue: &str, prefetch: u16) -> anyhow::Result<()> {
        self.send(
            CHANNEL,
            AMQPClass::Channel(channel::AMQPMethod::Open(channel::Open {})),
        )
        .await?;
        self.expect(|m| matches!(m, AMQPClass::Channel(channel::AMQPMethod::OpenOk(_))))
            .await
            .context("channel.open-ok")?;
        self.send(
            CHANNEL,
            AMQPClass::Basic(basic::AMQPMethod::Qos(basic::Qos {
                prefetch_count: prefetch,
                global: false,
            })),
        )
        .await?;
        self.expect(|m| matches!(m, AMQPClass::Basic(basic::AMQPMethod::QosOk(_))))
            .await
            .context("basic.qos-ok")?;
        self.send(
            CHANNEL,
            AMQPClass::Basic(basic::AMQPMethod::Consume(basic::Consume {
                queue: queue.into(),
                consumer_tag: "".into(),
                no_local: false,
                no_ack: false,
                exclusive: false,
                nowait: false,
                arguments: FieldTable::default(),
            })),
        )
        .await?;
        self.expect(|m| matches!(m, AMQPClass::Basic(basic::AMQPMethod::ConsumeOk(_))))
            .await
            .context("basic.consume-ok")?;
        Ok(())
    }

    /// Sends connection.close and waits for close-ok (or the socket's end).
    ///
    /// # Errors
    /// The socket fails before close-ok.
    pub(super) async fn close(mut self) -> anyhow::Result<()> {
        self.send(
            0,
            AMQPClass::Connection(connection::AMQPMethod::Close(connection::Close {
                reply_code: 200,
                reply_text: "bye".into(),
                class_id: 0,
                method_id: 0,
            })),
        )
        .await?;
        match self
            .expect(|m| matches!(m, AMQPClass::Connection(connection::AMQPMethod::CloseOk(_))))
            .await
        {
            Ok(_) | Err(RawError::Eof) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The socket, for watching it through the kernel ([`tcp_state`], [`unread_bytes`]).
    pub(super) fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// Reads what the socket holds, for at most `budget`, to learn how the connection
    /// ended: the reply of the broker's connection.close, the socket's end, or a reset.
    pub(super) async fn read_leftover(&mut self, budget: Duration) -> Leftover {
        let mut read = 0u64;
        let (stream, buf, frame_max) = (&mut self.stream, &mut self.buf, self.frame_max);
        let how = tokio::time::timeout(budget, async {
            loop {
                match codec::decode(buf, frame_max) {
                    Ok(Some(Frame::Method(_, method))) => {
                        if let Some(closed) = RawError::of_close(&method) {
                            return closed.to_string();
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        buf.reserve(64 * 1024);
                        match stream.read_buf(buf).await {
                            Ok(0) => return RawError::Eof.to_string(),
                            Ok(n) => read += n as u64,
                            Err(e) => return e.to_string(),
                        }
                    }
                    Err(e) => return e.to_string(),
                }
            }
        })
        .await;
        match how {
            Ok(how) => Leftover::Closed { read, how },
            Err(_) => Leftover::Open { read },
        }
    }

    async fn send(&mut self, channel: u16, method: AMQPClass) -> std::io::Result<()> {
        let mut out = Vec::new();
        codec::encode_method(&mut out, channel, method);
        self.stream.write_all(&out).await
    }

    /// Reads methods until one `wanted` accepts, passing over deliveries and heartbeats.
    async fn expect(&mut self, wanted: impl Fn(&AMQPClass) -> bool) -> Result<AMQPClass, RawError> {
        loop {
            match self.next_frame().await? {
                Frame::Method(_, method) if wanted(&method) => return Ok(*method),
                Frame::Method(_, method) => {
                    if let Some(closed) = RawError::of_close(&method) {
                        return Err(closed);
                    }
                    if !matches!(*method, AMQPClass::Basic(basic::AMQPMethod::Deliver(_))) {
                        return Err(RawError::Unexpected {
                            class: method.get_amqp_class_id(),
                            method: method.get_amqp_method_id(),
                        });
                    }
                }
                Frame::Header(..) | Frame::Body(..) | Frame::Heartbeat(_) => {}
            }
        }
    }

    async fn next_frame(&mut self) -> Result<Frame, RawError> {
        loop {
            if let Some(frame) = codec::decode(&mut self.buf, self.frame_max)? {
                return Ok(frame);
            }
            self.buf.reserve(4096);
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                return Err(RawError::Eof);
            }
        }
    }
}

/// How a raw AMQP exchange ended otherwise than hoped.
#[derive(Debug, thiserror::Error)]
pub(super) enum RawError {
    /// The broker closed the socket.
    #[error("the broker closed the socket")]
    Eof,
    /// The broker closed the connection or channel with a reply code.
    #[error("the broker closed the {what} with {code} '{text}'")]
    Closed {
        /// "connection" or "channel".
        what: &'static str,
        /// The reply code.
        code: u16,
        /// The reply text.
        text: String,
    },
    /// A method the exchange does not expect.
    #[error("the broker sent method {class}.{method}, which the exchange does not expect")]
    Unexpected {
        /// Its class id.
        class: u16,
        /// Its method id.
        method: u16,
    },
    /// The bytes are not AMQP.
    #[error(transparent)]
    Codec(#[from] codec::CodecError),
    /// The socket failed (a reset, say).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl RawError {
    /// The error a connection.close or channel.close from the broker stands for.
    fn of_close(method: &AMQPClass) -> Option<Self> {
        let (what, code, text) = match method {
            AMQPClass::Connection(connection::AMQPMethod::Close(c)) => {
                ("connection", c.reply_code, c.reply_text.as_str())
            }
            AMQPClass::Channel(channel::AMQPMethod::Close(c)) => {
                ("channel", c.reply_code, c.reply_text.as_str())
            }
            _ => return None,
        };
        Some(Self::Closed {
            what,
            code,
            text: text.to_owned(),
        })
    }
}

/// What reading a socket that was left unread for a while found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Leftover {
    /// The broker had closed the connection, with connection.close or without it.
    Closed {
        /// Bytes read before the end.
        read: u64,
        /// How it ended: a close's reply code and text, the socket's end, or a reset.
        how: String,
    },
    /// Still open when the reading time ran out.
    Open {
        /// Bytes read meanwhile.
        read: u64,
    },
}

/// Reads and discards what a socket holds, for at most `budget`, to learn whether the
/// broker closed it (any protocol).
pub(super) async fn read_leftover_bytes(stream: &mut TcpStream, budget: Duration) -> Leftover {
    let mut scratch = vec![0u8; 64 * 1024];
    let mut read = 0u64;
    let outcome = tokio::time::timeout(budget, async {
        loop {
            match stream.read(&mut scratch).await {
                Ok(0) => return "the broker closed the socket".to_owned(),
                Ok(n) => read += n as u64,
                Err(e) => return e.to_string(),
            }
        }
    })
    .await;
    match outcome {
        Ok(how) => Leftover::Closed { read, how },
        Err(_) => Leftover::Open { read },
    }
}

/// The kernel's state of `stream`'s connection (`tcpi_state` of `TCP_INFO`): still
/// [`TCP_ESTABLISHED`], or another state once the broker closed its end (`CLOSE_WAIT`) or
/// reset it (`CLOSE`), read without consuming anything the socket holds.
pub(super) fn tcp_state(stream: &TcpStream) -> Option<u8> {
    // SAFETY: tcp_info is plain integers, for which all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the struct it is given, on a
    // descriptor `stream` keeps open for the call.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut info).cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(info.tcpi_state)
}

/// Bytes waiting unread in `stream`'s receive buffer (`FIONREAD`).
pub(super) fn unread_bytes(stream: &TcpStream) -> Option<u64> {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int into the pointer it is given, on a descriptor
    // `stream` keeps open for the call.
    let rc = unsafe { libc::ioctl(stream.as_raw_fd(), libc::FIONREAD, &raw mut n) };
    (rc == 0).then(|| u64::try_from(n).unwrap_or(0))
}

/// A Kafka request frame: size, header (client id `ferry-overload`), body at `version`.
///
/// # Errors
/// A body that its version cannot express.
pub(super) fn kafka_request(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &impl Encodable,
) -> anyhow::Result<Vec<u8>> {
    let mut buf = BytesMut::new();
    buf.extend_from_slice(&[0; 4]);
    RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("ferry-overload")))
        .encode(&mut buf, api.request_header_version(version))?;
    body.encode(&mut buf, version)?;
    let size = i32::try_from(buf.len() - 4)?;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    Ok(buf.to_vec())
}

/// Sends ApiVersions v0 on `stream` and reads its answer, as every Kafka client does first.
///
/// # Errors
/// The socket fails or closes, or the answer is not a successful ApiVersions answer.
pub(super) async fn kafka_api_versions(stream: &mut TcpStream) -> anyhow::Result<()> {
    let request = kafka_request(ApiKey::ApiVersions, 0, 1, &ApiVersionsRequest::default())?;
    stream.write_all(&request).await?;
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).await?;
    let size = usize::try_from(i32::from_be_bytes(size))?;
    anyhow::ensure!(size <= KAFKA_ANSWER_MAX, "a {size}-byte ApiVersions answer");
    let mut frame = vec![0u8; size];
    stream.read_exact(&mut frame).await?;
    let mut frame = bytes::Bytes::from(frame);
    let header = ResponseHeader::decode(&mut frame, 0)?;
    anyhow::ensure!(header.correlation_id == 1, "an answer to another request");
    let answer = ApiVersionsResponse::decode(&mut frame, 0)?;
    anyhow::ensure!(
        answer.error_code == 0,
        "ApiVersions failed with error {}",
        answer.error_code
    );
    Ok(())
}

/// Connects to a Kafka broker at `addr` and exchanges ApiVersions.
///
/// # Errors
/// As [`kafka_api_versions`], or the connection fails.
pub(super) async fn kafka_connect(addr: &str) -> anyhow::Result<TcpStream> {
    let mut stream = TcpStream::connect(addr).await?;
    kafka_api_versions(&mut stream).await?;
    Ok(stream)
}

/// A Fetch v4 request for partition 0 of `topic` from its first record, answered as soon
/// as there is anything, with up to `max_bytes` of records.
pub(super) fn fetch_from_start(topic: &str, max_bytes: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![
                    FetchPartition::default()
                        .with_partition(0)
                        .with_fetch_offset(0)
                        .with_partition_max_bytes(max_bytes),
                ]),
        ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_takes_address_credentials_and_decoded_vhost_from_the_uri() {
        let target = AmqpTarget::parse("amqp://bench:s3cret@127.0.0.1:25672/%2f").unwrap();
        assert_eq!(
            target,
            AmqpTarget {
                addr: "127.0.0.1:25672".into(),
                user: "bench".into(),
                password: "s3cret".into(),
                vhost: "/".into(),
            }
        );
    }

    #[test]
    fn an_amqps_uri_is_refused_for_the_plaintext_raw_clients() {
        let err = AmqpTarget::parse("amqps://guest:guest@127.0.0.1:5671/%2f").unwrap_err();
        assert!(err.to_string().contains("amqp://"), "{err}");
    }

    #[test]
    fn a_kafka_request_frame_carries_its_size_key_version_and_correlation_id() {
        let frame =
            kafka_request(ApiKey::ApiVersions, 0, 7, &ApiVersionsRequest::default()).unwrap();
        let size = i32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(size, frame.len() - 4);
        assert_eq!(
            i16::from_be_bytes([frame[4], frame[5]]),
            ApiKey::ApiVersions as i16
        );
        assert_eq!(i16::from_be_bytes([frame[6], frame[7]]), 0);
        assert_eq!(i32::from_be_bytes(frame[8..12].try_into().unwrap()), 7);
    }
}
