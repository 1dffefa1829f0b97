//! TLS on Ferry's own listeners (rustls with the `ring` provider): the server
//! configuration built from `[tls]` ([`server_config`]), kept current across certificate
//! renewals ([`reload`]), the handshake of each connection with its failures logged and
//! counted ([`accept`]), the names of a verified client certificate ([`names`]), and the
//! connection type the fronts read and write over TCP or TLS alike ([`stream`]).
//!
//! The listeners ([`server`]: the accept loop every front shares, and [`http`] serving an
//! HTTP router on it) hand every connection on as a [`stream::Stream`] with its
//! [`ferry_auth::peer::Peer`]; authentication decides what the certificate allows. `[tls]`'s
//! keys are [`TlsConfig`], this crate's own section of `ferry.toml`.

pub mod accept;
mod config;
pub mod http;
mod names;
mod reload;
pub mod server;
mod server_config;
pub mod stream;

pub use accept::Acceptor;
pub use config::{
    CA_FILE_KEY, CERT_FILE_KEY, DEFAULT_HANDSHAKE_TIMEOUT_MS, DEFAULT_RELOAD_CHECK_MS,
    KEY_FILE_KEY, TlsConfig, TlsVersion, VerifyPeer,
};
pub use reload::Certificates;
pub use server_config::TlsSetupError;
pub use stream::Stream;

/// TLS record type of a handshake message, the first byte a TLS client sends.
const HANDSHAKE_RECORD: u8 = 0x16;

/// Whether `first_bytes` (what a client sent first, any length) can begin a TLS
/// ClientHello: a handshake record of protocol major version 3. Used on TLS ports to spot
/// plaintext clients and on plaintext ports to spot TLS clients.
pub fn looks_like_tls(first_bytes: &[u8]) -> bool {
    match first_bytes {
        [] => false,
        [kind] => *kind == HANDSHAKE_RECORD,
        [kind, major, ..] => *kind == HANDSHAKE_RECORD && *major == 3,
    }
}

#[cfg(test)]
mod tests {
    use super::looks_like_tls;

    #[test]
    fn a_client_hello_is_told_from_amqp_and_kafka_openings() {
        assert!(looks_like_tls(&[0x16, 0x03, 0x01, 0x02, 0x00]));
        assert!(looks_like_tls(&[0x16]));
        assert!(!looks_like_tls(b"AMQP\x00\x00\x09\x01"));
        assert!(!looks_like_tls(&[0x00, 0x00, 0x00, 0x2a]));
        assert!(!looks_like_tls(&[0x16, 0x00]));
        assert!(!looks_like_tls(&[]));
    }
}
