//! The connection handshake: protocol header, connection.start/start-ok (SASL PLAIN or
//! AMQPLAIN against the configured users), tune/tune-ok, open/open-ok (a configured vhost
//! the user may open).
//!
//! A client that sends any other protocol header is answered with AMQP 0-9-1's header and
//! disconnected, as the specification says; one that opens with a TLS ClientHello (an
//! amqps client on the plaintext port) is disconnected without an answer. A refused login or vhost ends with
//! connection.close 403 (530 for a vhost that does not exist), the form RabbitMQ clients
//! report as an authentication error.

use super::sasl::{self, MECHANISMS};
use crate::amqp::broker::Broker;
use crate::amqp::codec::{self, Frame, PROTOCOL_HEADER};
use crate::amqp::context::Capabilities;
use crate::amqp::errors::AmqpError;
use crate::amqp::topology::VHost;
use amq_protocol::protocol::{AMQPClass, connection};
use amq_protocol::types::{AMQPValue, FieldTable};
use bytes::{Buf, BytesMut};
use std::net::IpAddr;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// What the handshake settled.
#[derive(Debug)]
pub struct Negotiated {
    /// The logged-in user.
    pub user: String,
    /// The opened virtual host.
    pub vhost: Arc<VHost>,
    /// The largest frame either side may send.
    pub frame_max: u32,
    /// The highest channel number the client may open.
    pub channel_max: u16,
    /// Heartbeat interval in seconds (0: none).
    pub heartbeat: u16,
    /// What the client said it supports.
    pub capabilities: Capabilities,
}

/// How a handshake failed.
#[derive(Debug)]
pub enum HandshakeError {
    /// The client sent another protocol header; it was answered with ours.
    ProtocolHeader,
    /// The client opened with a TLS ClientHello (a TLS client on the plaintext port); it
    /// was not answered.
    ClientHello,
    /// The client is refused: send connection.close with this.
    Refused(AmqpError),
    /// The socket closed or failed.
    Io,
}

impl From<std::io::Error> for HandshakeError {
    fn from(_: std::io::Error) -> Self {
        Self::Io
    }
}

impl From<AmqpError> for HandshakeError {
    fn from(e: AmqpError) -> Self {
        Self::Refused(e)
    }
}

/// Runs the handshake on a fresh connection from `peer`. `buf` keeps any bytes read past
/// connection.open for the connection loop.
///
/// # Errors
/// [`HandshakeError`]; for `Refused` the caller sends connection.close.
pub async fn run<R, W>(
    broker: &Broker,
    peer: IpAddr,
    reader: &mut R,
    writer: &mut W,
    buf: &mut BytesMut,
) -> Result<Negotiated, HandshakeError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    read_protocol_header(reader, writer, buf).await?;
    let config = &broker.config;
    send(writer, start()).await?;

    let AMQPClass::Connection(connection::AMQPMethod::StartOk(start_ok)) =
        next_method(reader, buf, config.frame_max).await?
    else {
        return Err(unexpected("connection.start-ok").into());
    };
    let credentials = sasl::credentials(start_ok.mechanism.as_str(), start_ok.response.as_bytes())
        .map_err(|e| AmqpError::access_refused(e.to_string()))?;
    let user = broker
        .users
        .authenticate(&credentials.user, &credentials.password, peer)
        .map_err(|e| AmqpError::access_refused(e.to_string()))?
        .clone();
    let capabilities = capabilities_of(&start_ok.client_properties);

    send(
        writer,
        AMQPClass::Connection(connection::AMQPMethod::Tune(connection::Tune {
            channel_max: config.channel_max,
            frame_max: config.frame_max,
            heartbeat: config.heartbeat_s,
        })),
    )
    .await?;
    let AMQPClass::Connection(connection::AMQPMethod::TuneOk(tune_ok)) =
        next_method(reader, buf, config.frame_max).await?
    else {
        return Err(unexpected("connection.tune-ok").into());
    };
    let frame_max = negotiate_frame_max(tune_ok.frame_max, config.frame_max)?;
    let channel_max = match tune_ok.channel_max {
        0 => config.channel_max,
        n if n > config.channel_max => {
            return Err(AmqpError::not_allowed(format!(
                "channel_max={n} > {} max",
                config.channel_max
            ))
            .into());
        }
        n => n,
    };

    let AMQPClass::Connection(connection::AMQPMethod::Open(open)) =
        next_method(reader, buf, frame_max).await?
    else {
        return Err(unexpected("connection.open").into());
    };
    let name = open.virtual_host.as_str();
    let vhost = broker
        .vhosts
        .get(name)
        .cloned()
        .ok_or_else(|| AmqpError::not_allowed(format!("vhost '{name}' not found")))?;
    user.check_vhost(name)
        .map_err(|e| AmqpError::access_refused(e.to_string()))?;
    send(
        writer,
        AMQPClass::Connection(connection::AMQPMethod::OpenOk(connection::OpenOk {})),
    )
    .await?;
    Ok(Negotiated {
        user: user.name,
        vhost,
        frame_max,
        channel_max,
        heartbeat: tune_ok.heartbeat,
        capabilities,
    })
}

/// The frame_max a client's tune-ok asks for, checked against ours (0: ours).
fn negotiate_frame_max(asked: u32, ours: u32) -> Result<u32, AmqpError> {
    match asked {
        0 => Ok(ours),
        n if n > ours => Err(AmqpError::not_allowed(format!(
            "frame_max={n} > {ours} max size"
        ))),
        n if n < crate::config::amqp::MIN_FRAME_MAX => Err(AmqpError::not_allowed(format!(
            "frame_max={n} < {} min size",
            crate::config::amqp::MIN_FRAME_MAX
        ))),
        n => Ok(n),
    }
}

/// Reads the 8-byte protocol header; any other is answered with ours as soon as it
/// differs.
async fn read_protocol_header<R, W>(
    reader: &mut R,
    writer: &mut W,
    buf: &mut BytesMut,
) -> Result<(), HandshakeError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        let seen = buf.len().min(PROTOCOL_HEADER.len());
        if crate::tls::looks_like_tls(buf) {
            return Err(HandshakeError::ClientHello);
        }
        if buf[..seen] != PROTOCOL_HEADER[..seen] {
            writer.write_all(&PROTOCOL_HEADER).await?;
            writer.flush().await?;
            return Err(HandshakeError::ProtocolHeader);
        }
        if seen == PROTOCOL_HEADER.len() {
            buf.advance(seen);
            return Ok(());
        }
        if reader.read_buf(buf).await? == 0 {
            return Err(HandshakeError::Io);
        }
    }
}

/// The next method on channel 0, skipping heartbeats.
async fn next_method<R: AsyncRead + Unpin>(
    reader: &mut R,
    buf: &mut BytesMut,
    frame_max: u32,
) -> Result<AMQPClass, HandshakeError> {
    loop {
        match codec::decode(buf, frame_max).map_err(AmqpError::from)? {
            Some(Frame::Method(0, method)) => return Ok(*method),
            Some(Frame::Heartbeat(0)) => {}
            Some(other) => {
                return Err(AmqpError::unexpected_frame(format!(
                    "a frame on channel {} before the connection is open",
                    other.channel()
                ))
                .into());
            }
            None => {
                if reader.read_buf(buf).await? == 0 {
                    return Err(HandshakeError::Io);
                }
            }
        }
    }
}

fn unexpected(wanted: &str) -> AmqpError {
    AmqpError::unexpected_frame(format!("expected {wanted} during the handshake"))
}

async fn send<W: AsyncWrite + Unpin>(writer: &mut W, method: AMQPClass) -> std::io::Result<()> {
    let mut out = Vec::new();
    codec::encode_method(&mut out, 0, method);
    writer.write_all(&out).await?;
    writer.flush().await
}

/// connection.start: who we are and what we support.
fn start() -> AMQPClass {
    let mut capabilities = FieldTable::default();
    for capability in [
        "publisher_confirms",
        "exchange_exchange_bindings",
        "basic.nack",
        "consumer_cancel_notify",
        "connection.blocked",
        "authentication_failure_close",
        "per_consumer_qos",
    ] {
        capabilities.insert(capability.into(), AMQPValue::Boolean(true));
    }
    let mut properties = FieldTable::default();
    let text = |s: &str| AMQPValue::LongString(s.into());
    properties.insert("product".into(), text("Ferry"));
    properties.insert("version".into(), text(env!("CARGO_PKG_VERSION")));
    properties.insert("platform".into(), text("Rust"));
    properties.insert(
        "information".into(),
        text("AMQP 0-9-1 front over durable stages"),
    );
    properties.insert("capabilities".into(), AMQPValue::FieldTable(capabilities));
    AMQPClass::Connection(connection::AMQPMethod::Start(connection::Start {
        version_major: 0,
        version_minor: 9,
        server_properties: properties,
        mechanisms: MECHANISMS.into(),
        locales: "en_US".into(),
    }))
}

fn capabilities_of(client_properties: &FieldTable) -> Capabilities {
    let Some(AMQPValue::FieldTable(caps)) = client_properties.inner().get("capabilities") else {
        return Capabilities::default();
    };
    let on = |name: &str| matches!(caps.inner().get(name), Some(AMQPValue::Boolean(true)));
    Capabilities {
        consumer_cancel_notify: on("consumer_cancel_notify"),
        connection_blocked: on("connection.blocked"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_max_is_negotiated_within_bounds() {
        assert_eq!(negotiate_frame_max(0, 131_072).unwrap(), 131_072);
        assert_eq!(negotiate_frame_max(8192, 131_072).unwrap(), 8192);
        assert_eq!(
            negotiate_frame_max(200_000, 131_072)
                .unwrap_err()
                .reply_text(),
            "NOT_ALLOWED - frame_max=200000 > 131072 max size"
        );
        assert_eq!(
            negotiate_frame_max(100, 131_072).unwrap_err().code.code(),
            530
        );
    }

    #[tokio::test]
    async fn another_protocol_header_is_answered_with_ours() {
        let (mut client, server) = tokio::io::duplex(64);
        let (mut r, mut w) = tokio::io::split(server);
        client.write_all(b"AMQP\x01\x01\x00\x09").await.unwrap();
        let mut buf = BytesMut::new();
        let result = read_protocol_header(&mut r, &mut w, &mut buf).await;
        assert!(matches!(result, Err(HandshakeError::ProtocolHeader)));
        let mut answer = [0u8; 8];
        client.read_exact(&mut answer).await.unwrap();
        assert_eq!(answer, PROTOCOL_HEADER);
    }
}
