//! The connection handshake: protocol header, connection.start/start-ok (SASL PLAIN or
//! AMQPLAIN against the user store, or EXTERNAL with a verified client certificate),
//! tune/tune-ok, open/open-ok (a configured vhost the user has permissions on; they are
//! read here and kept for the connection's life).
//!
//! A client that sends any other protocol header is answered with AMQP 0-9-1's header and
//! disconnected, as the specification says; one that opens with a TLS ClientHello (an
//! amqps client on the plaintext port) is disconnected without an answer. A refused login
//! ends with connection.close 403, the form RabbitMQ clients report as an authentication
//! error; a vhost that does not exist or that the user has no permissions on, with 530
//! (RabbitMQ's `access to vhost '/' refused for user 'u'`).

use super::sasl::{self, Response};
use crate::state::broker::Broker;
use crate::state::context::Capabilities;
use crate::state::topology::VHost;
use crate::wire::codec::{self, Frame, PROTOCOL_HEADER};
use crate::wire::errors::AmqpError;
use amq_protocol::protocol::{AMQPClass, connection};
use amq_protocol::types::{AMQPValue, FieldTable};
use bytes::{Buf, BytesMut};
use ferry_auth::peer::Peer;
use ferry_auth::{self as auth, Authenticator, Front, User};
use ferry_config::AmqpConfig;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// What the handshake settled.
#[derive(Debug)]
pub(crate) struct Negotiated {
    /// The logged-in user.
    pub user: String,
    /// The opened virtual host.
    pub vhost: Arc<VHost>,
    /// What the user may do there, read at connection.open.
    pub access: Arc<auth::access::LiveAccess>,
    /// The user store's version read before `access` (0 when it could not be read): the
    /// connection applies a change made since once it is registered.
    pub users_version: i64,
    /// The largest frame either side may send.
    pub frame_max: u32,
    /// The highest channel number the client may open.
    pub channel_max: u16,
    /// Heartbeat interval in seconds (0: none).
    pub heartbeat: u16,
    /// What the client said it supports.
    pub capabilities: Capabilities,
    /// The client properties of its connection.start-ok (shown by the management API).
    pub client_properties: FieldTable,
    /// The SASL mechanism it logged in with.
    pub mechanism: String,
}

/// How a handshake failed.
#[derive(Debug)]
pub(crate) enum HandshakeError {
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
pub(crate) async fn run<R, W>(
    broker: &Broker,
    peer: &Peer,
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
    send(writer, start(sasl::mechanisms(peer))).await?;

    let AMQPClass::Connection(connection::AMQPMethod::StartOk(start_ok)) =
        next_method(reader, buf, config.frame_max).await?
    else {
        return Err(unexpected("connection.start-ok").into());
    };
    let user = login(
        &broker.users,
        config,
        peer,
        start_ok.mechanism.as_str(),
        start_ok.response.as_bytes(),
    )
    .await
    .map_err(|e| AmqpError::access_refused(e.to_string()))?;
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
        // RabbitMQ's words, without quotes.
        .ok_or_else(|| AmqpError::not_allowed(format!("vhost {name} not found")))?;
    // Read before the permissions: a change after it is applied once the connection is
    // registered (user_changes), so none falls between the two.
    let users_version = broker.users.store().version().await.unwrap_or_default();
    // RabbitMQ gives AMQP 0-9-1 connections no `{client_id}` for topic permissions.
    let variables = ferry_auth::permissions::TopicVariables::new(&user.name, name);
    let access = broker
        .users
        .vhost_access(&user.name, name, &variables)
        .await
        .map_err(|e| match e {
            auth::AuthError::VhostRefused { .. } => AmqpError::not_allowed(e.to_string()),
            other => AmqpError::internal(other.to_string()),
        })?;
    send(
        writer,
        AMQPClass::Connection(connection::AMQPMethod::OpenOk(connection::OpenOk {})),
    )
    .await?;
    Ok(Negotiated {
        user: user.name,
        vhost,
        access: Arc::new(auth::access::LiveAccess::new(access)),
        users_version,
        frame_max,
        channel_max,
        heartbeat: tune_ok.heartbeat,
        capabilities,
        client_properties: start_ok.client_properties,
        mechanism: start_ok.mechanism.to_string(),
    })
}

/// The user start-ok's SASL response logs in as, from `peer`.
async fn login(
    users: &Authenticator,
    config: &AmqpConfig,
    peer: &Peer,
    mechanism: &str,
    response: &[u8],
) -> Result<User, auth::AuthError> {
    let response = sasl::response(peer, mechanism, response).map_err(|e| {
        let e = match e {
            sasl::SaslError::Mechanism(..) => auth::AuthError::Mechanism(e.to_string()),
            sasl::SaslError::Malformed(_) => auth::AuthError::Malformed(e.to_string()),
        };
        users.refused(Front::Amqp, peer, &e);
        e
    })?;
    match response {
        Response::Password(c) => {
            users
                .password(Front::Amqp, peer, &c.user, &c.password)
                .await
        }
        Response::External(names) => {
            let Some(name) = auth::login_name(
                names,
                config.ssl_cert_login_from,
                config.ssl_cert_login_san_type,
            ) else {
                let e = auth::AuthError::Certificate(
                    "the client certificate has no name where amqp.ssl_cert_login_from takes it"
                        .to_owned(),
                );
                users.refused(Front::Amqp, peer, &e);
                return Err(e);
            };
            users.certificate(Front::Amqp, peer, name).await
        }
    }
}

/// The frame_max a client's tune-ok asks for, checked against ours (0: ours).
pub(crate) fn negotiate_frame_max(asked: u32, ours: u32) -> Result<u32, AmqpError> {
    match asked {
        0 => Ok(ours),
        n if n > ours => Err(AmqpError::not_allowed(format!(
            "frame_max={n} > {ours} max size"
        ))),
        n if n < ferry_config::amqp::MIN_FRAME_MAX => Err(AmqpError::not_allowed(format!(
            "frame_max={n} < {} min size",
            ferry_config::amqp::MIN_FRAME_MAX
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
        if ferry_tls::looks_like_tls(buf) {
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

/// connection.start: who we are and what we support (`mechanisms`, space-separated).
fn start(mechanisms: &str) -> AMQPClass {
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
        mechanisms: mechanisms.into(),
        locales: "en_US".into(),
    }))
}

pub(crate) fn capabilities_of(client_properties: &FieldTable) -> Capabilities {
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

    /// An authenticator whose one user is `alice` (password `pw`), over a fresh store.
    async fn alice() -> (Authenticator, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store = ferry_store::StoreConfig {
            path: dir.path().join("store"),
            cache_mb: 16,
            ..ferry_store::StoreConfig::default()
        };
        let db = ferry_store::Database::open(&store).await.unwrap();
        let user = ferry_auth::UserConfig {
            name: "alice".into(),
            password_hash: Some(ferry_auth::password::PasswordHash::new("pw").to_string()),
            scram_sha_256: None,
            ..ferry_auth::UserConfig::default()
        };
        let users = Authenticator::start(db, &store.prefix, &[user])
            .await
            .unwrap();
        (users, dir)
    }

    fn with_certificate(names: ferry_auth::peer::CertificateNames) -> Peer {
        Peer {
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], 40_000)),
            tls: Some(ferry_auth::peer::TlsPeer {
                certificate: Some(names),
            }),
        }
    }

    #[tokio::test]
    async fn external_logs_in_as_the_certificates_name_when_the_user_exists() {
        let (users, _dir) = alice().await;
        let config = AmqpConfig::default();
        let cn = |name: &str| ferry_auth::peer::CertificateNames {
            subject: format!("CN={name},O=Example"),
            common_name: Some(name.into()),
            emails: vec!["alice".into()],
            ..Default::default()
        };
        let peer = with_certificate(cn("alice"));
        let user = login(&users, &config, &peer, "EXTERNAL", b"")
            .await
            .unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(
            login(
                &users,
                &config,
                &with_certificate(cn("bob")),
                "EXTERNAL",
                b""
            )
            .await
            .unwrap_err()
            .to_string(),
            "login refused for user 'bob': invalid credentials"
        );
        let by_email = AmqpConfig {
            ssl_cert_login_from: ferry_auth::CertLoginFrom::SubjectAlternativeName,
            ssl_cert_login_san_type: ferry_auth::SanType::Email,
            ..AmqpConfig::default()
        };
        let user = login(
            &users,
            &by_email,
            &with_certificate(cn("bob")),
            "EXTERNAL",
            b"",
        )
        .await
        .unwrap();
        assert_eq!(user.name, "alice", "the e-mail SAN, not the CN");
    }

    #[tokio::test]
    async fn external_is_refused_without_a_certificate_or_without_the_name() {
        let (users, _dir) = alice().await;
        let config = AmqpConfig::default();
        let plaintext = Peer::plaintext(std::net::SocketAddr::from(([127, 0, 0, 1], 40_000)));
        let e = login(&users, &config, &plaintext, "EXTERNAL", b"")
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "authentication mechanism 'EXTERNAL' is not offered; use one of PLAIN AMQPLAIN"
        );
        let nameless = with_certificate(ferry_auth::peer::CertificateNames {
            subject: "O=Example".into(),
            ..Default::default()
        });
        let e = login(&users, &config, &nameless, "EXTERNAL", b"")
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the client certificate has no name where amqp.ssl_cert_login_from takes it"
        );
        let password = login(&users, &config, &nameless, "PLAIN", b"\0alice\0pw").await;
        assert_eq!(password.unwrap().name, "alice", "PLAIN is still offered");
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
