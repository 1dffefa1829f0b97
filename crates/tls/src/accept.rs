//! The TLS handshake of one accepted connection: within `tls.handshake_timeout_ms`, with
//! the configuration current when it starts, ending in a [`Stream`] and the [`Peer`] it
//! established — or in one log line and one count by front and reason, and that
//! connection alone closed.

use super::reload::Certificates;
use super::stream::Stream;
use super::{looks_like_tls, names};
use ferry_auth::peer::{Peer, TlsPeer};
use ferry_telemetry::tls as metric;
use rustls::{CertificateError, Error as TlsError};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio_rustls::TlsAcceptor;
use tracing::{debug, info};

/// Terminates TLS for one listener.
#[derive(Clone)]
pub struct Acceptor {
    /// The reloadable server configuration.
    certificates: Certificates,
    /// `tls.handshake_timeout_ms`.
    timeout: Duration,
}

/// Why a connection was closed before its first frame: the metric's `reason` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// The handshake did not finish within `tls.handshake_timeout_ms`.
    Timeout,
    /// The client left before or during the handshake.
    Closed,
    /// Plaintext bytes on a TLS port.
    NotTls,
    /// The client presented no certificate where one is required.
    NoCertificate,
    /// The client's certificate does not chain to `tls.ca_file`.
    UntrustedCertificate,
    /// The client's certificate has expired.
    ExpiredCertificate,
    /// The client's certificate is invalid otherwise.
    BadCertificate,
    /// A TLS message that does not parse, or comes out of order.
    Malformed,
    /// No common protocol version or cipher suite.
    Incompatible,
    /// Any other TLS or I/O failure.
    Protocol,
    /// A TLS ClientHello on a plaintext port (the fronts' connection handlers spot it).
    ClientHelloOnPlaintext,
}

impl Reason {
    /// Every way a TLS listener's handshake can fail.
    const HANDSHAKE: [Self; 10] = [
        Self::Timeout,
        Self::Closed,
        Self::NotTls,
        Self::NoCertificate,
        Self::UntrustedCertificate,
        Self::ExpiredCertificate,
        Self::BadCertificate,
        Self::Malformed,
        Self::Incompatible,
        Self::Protocol,
    ];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            Self::Timeout => "timeout",
            Self::Closed => "closed",
            Self::NotTls => "not_tls",
            Self::NoCertificate => "no_certificate",
            Self::UntrustedCertificate => "untrusted_certificate",
            Self::ExpiredCertificate => "expired_certificate",
            Self::BadCertificate => "bad_certificate",
            Self::Malformed => "malformed",
            Self::Incompatible => "incompatible",
            Self::Protocol => "protocol",
            Self::ClientHelloOnPlaintext => "client_hello_on_plaintext",
        }
    }
}

/// Why a handshake failed: the metric's reason and a sentence for the log.
#[derive(Debug)]
struct Failure {
    reason: Reason,
    /// What happened.
    detail: String,
}

impl Acceptor {
    /// An acceptor over `certificates`, giving each handshake `timeout`.
    pub fn new(certificates: Certificates, timeout: Duration) -> Self {
        Self {
            certificates,
            timeout,
        }
    }

    /// Runs the handshake on `tcp` from `addr`, which came to the listener that config key
    /// `key` (`amqp.tls_listen`) set up for `front`. `None` when it failed (logged and
    /// counted).
    pub async fn accept(
        &self,
        front: &'static str,
        key: &str,
        tcp: TcpStream,
        addr: SocketAddr,
    ) -> Option<(Stream, Peer)> {
        let attempt = tokio::time::timeout(self.timeout, self.handshake(tcp, addr));
        let failure = match attempt.await {
            Ok(Ok(done)) => {
                metrics::counter!(metric::HANDSHAKES_TOTAL, metric::LABEL_FRONT => front)
                    .increment(1);
                if let Some(names) = done.1.certificate() {
                    info!(front, peer = %addr, subject = %names.subject, "TLS client certificate verified");
                }
                return Some(done);
            }
            Ok(Err(failure)) => failure,
            Err(_) => Failure {
                reason: Reason::Timeout,
                detail: format!(
                    "the handshake did not finish within {} ms (tls.handshake_timeout_ms)",
                    self.timeout.as_millis()
                ),
            },
        };
        count_failure(front, failure.reason);
        if failure.reason == Reason::NotTls {
            info!(front, peer = %addr, listener = key, "closing a connection: {}", failure.detail);
        } else {
            info!(front, peer = %addr, listener = key, reason = failure.reason.label(), "TLS handshake failed: {}", failure.detail);
        }
        None
    }

    async fn handshake(&self, tcp: TcpStream, addr: SocketAddr) -> Result<(Stream, Peer), Failure> {
        let mut first = [0u8; 3];
        let seen = tcp.peek(&mut first).await.map_err(io_failure)?;
        if seen == 0 {
            return Err(Failure {
                reason: Reason::Closed,
                detail: "the client closed the connection before the handshake".to_owned(),
            });
        }
        if !looks_like_tls(&first[..seen]) {
            return Err(Failure {
                reason: Reason::NotTls,
                detail: "the client sent plaintext to a TLS port; plaintext clients use the plaintext listener".to_owned(),
            });
        }
        let acceptor = TlsAcceptor::from(self.certificates.current());
        let tls = acceptor.accept(tcp).await.map_err(io_failure)?;
        let certificate = tls
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|leaf| names::of(leaf));
        debug!(peer = %addr, "TLS handshake completed");
        let peer = Peer {
            addr,
            tls: Some(TlsPeer { certificate }),
        };
        Ok((Stream::Tls(Box::new(tls)), peer))
    }
}

/// Counts a failed handshake.
pub fn count_failure(front: &'static str, reason: Reason) {
    failures(front, reason).increment(1);
}

/// Exports a listener's handshake counters at 0, so that `rate()` and `increase()` see
/// the first event: on a TLS listener the handshakes and every handshake failure, on a
/// front's plaintext listener the ClientHellos it refuses.
pub fn export_counters(front: &'static str, tls: bool) {
    if tls {
        metrics::counter!(metric::HANDSHAKES_TOTAL, metric::LABEL_FRONT => front).increment(0);
        for reason in Reason::HANDSHAKE {
            failures(front, reason).increment(0);
        }
    } else {
        failures(front, Reason::ClientHelloOnPlaintext).increment(0);
    }
}

fn failures(front: &'static str, reason: Reason) -> metrics::Counter {
    metrics::counter!(
        metric::HANDSHAKE_FAILURES_TOTAL,
        metric::LABEL_FRONT => front,
        metric::LABEL_REASON => reason.label()
    )
}

/// A handshake's I/O error, classified by the TLS error inside it when there is one.
fn io_failure(e: io::Error) -> Failure {
    if let Some(tls) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<TlsError>())
    {
        return Failure {
            reason: tls_reason(tls),
            detail: tls.to_string(),
        };
    }
    let reason = match e.kind() {
        io::ErrorKind::UnexpectedEof
        | io::ErrorKind::ConnectionReset
        | io::ErrorKind::BrokenPipe => Reason::Closed,
        _ => Reason::Protocol,
    };
    Failure {
        reason,
        detail: if reason == Reason::Closed {
            format!("the client closed the connection mid-handshake ({e})")
        } else {
            e.to_string()
        },
    }
}

/// Why a TLS error failed the handshake.
fn tls_reason(e: &TlsError) -> Reason {
    match e {
        TlsError::NoCertificatesPresented => Reason::NoCertificate,
        TlsError::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => Reason::UntrustedCertificate,
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                Reason::ExpiredCertificate
            }
            _ => Reason::BadCertificate,
        },
        TlsError::InvalidMessage(_) | TlsError::InappropriateMessage { .. } => Reason::Malformed,
        TlsError::PeerIncompatible(_) => Reason::Incompatible,
        _ => Reason::Protocol,
    }
}
