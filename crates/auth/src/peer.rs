//! Who is at the other end of a connection, as the transport saw it: the address, whether
//! TLS protects the connection, and the names in the client's certificate when it presented
//! one that verified.
//!
//! The listeners fill a [`Peer`] in (plaintext, or after the TLS handshake); authentication
//! ([`crate::auth`]) decides what it allows: a user who requires TLS, SASL `EXTERNAL`, a
//! Kafka principal taken from the certificate. A leaf: it imports nothing of Ferry's.

use std::net::SocketAddr;

/// The other end of one client connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// The client's address.
    pub addr: SocketAddr,
    /// The TLS session protecting the connection; `None` on a plaintext listener.
    pub tls: Option<TlsPeer>,
}

impl Peer {
    /// A client on a plaintext listener.
    pub fn plaintext(addr: SocketAddr) -> Self {
        Self { addr, tls: None }
    }

    /// Whether TLS protects the connection.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The names of the client's verified certificate, if it presented one.
    pub fn certificate(&self) -> Option<&CertificateNames> {
        self.tls.as_ref().and_then(|tls| tls.certificate.as_ref())
    }
}

/// What the TLS handshake established about the client.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsPeer {
    /// The client certificate's names, when the client presented a certificate that
    /// verified against `tls.ca_file`; `None` when it presented none.
    pub certificate: Option<CertificateNames>,
}

/// The names in a verified client certificate that a login may be derived from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CertificateNames {
    /// The subject distinguished name as Kafka prints it (RFC 2253: most specific first,
    /// `CN=alice,OU=eng,O=Example`).
    pub subject: String,
    /// The subject's common name (`CN`), if it has one.
    pub common_name: Option<String>,
    /// The DNS names among the subject alternative names.
    pub dns_names: Vec<String>,
    /// The e-mail addresses among the subject alternative names.
    pub emails: Vec<String>,
}
