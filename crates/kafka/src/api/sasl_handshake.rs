//! SaslHandshake: Ferry offers SASL PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, checked
//! against the user store every front shares; the exchange follows in SaslAuthenticate
//! (v1), or in bare size-prefixed tokens after a v0 handshake, as Kafka 0.10 framed it
//! ([`super::Session::sasl_tokens`]).

use super::{Session, str_bytes};
use ferry_auth::scram::Mechanism;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{ResponseKind, SaslHandshakeRequest, SaslHandshakeResponse};

/// The PLAIN mechanism's name.
pub(crate) const PLAIN: &str = "PLAIN";

/// A mechanism a client may choose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SaslMechanism {
    /// `PLAIN`: one message with the name and password.
    Plain,
    /// `SCRAM-SHA-256` or `SCRAM-SHA-512`: two round trips.
    Scram(Mechanism),
}

impl SaslMechanism {
    /// Every mechanism, in the order SaslHandshake lists them.
    const ALL: [SaslMechanism; 3] = [
        SaslMechanism::Plain,
        SaslMechanism::Scram(Mechanism::Sha256),
        SaslMechanism::Scram(Mechanism::Sha512),
    ];

    /// The SASL name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Plain => PLAIN,
            Self::Scram(m) => m.name(),
        }
    }
}

/// Records the mechanism the client chose (and, at `version` 0, that the exchange goes on
/// in bare tokens), or refuses one Ferry does not offer.
pub(crate) fn handle(
    session: &mut Session,
    version: i16,
    request: SaslHandshakeRequest,
) -> ResponseKind {
    let offered = SaslMechanism::ALL
        .iter()
        .map(|m| str_bytes(m.name()))
        .collect();
    let mut response = SaslHandshakeResponse::default().with_mechanisms(offered);
    match SaslMechanism::ALL
        .into_iter()
        .find(|m| m.name() == request.mechanism.as_str())
    {
        Some(mechanism) => {
            session.sasl = super::SaslState::Chosen(mechanism);
            session.sasl_tokens = version == 0;
        }
        None => response.error_code = ResponseError::UnsupportedSaslMechanism.code(),
    }
    ResponseKind::SaslHandshake(response)
}
