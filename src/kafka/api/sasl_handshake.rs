//! SaslHandshake: Ferry offers SASL PLAIN, checked against the `[[users]]` of the AMQP
//! front; the credentials follow in SaslAuthenticate.

use super::{Session, str_bytes};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{ResponseKind, SaslHandshakeRequest, SaslHandshakeResponse};

/// The one mechanism Ferry supports.
pub const PLAIN: &str = "PLAIN";

/// Records the mechanism the client chose, or refuses one other than PLAIN.
pub fn handle(session: &mut Session, request: SaslHandshakeRequest) -> ResponseKind {
    let mut response = SaslHandshakeResponse::default().with_mechanisms(vec![str_bytes(PLAIN)]);
    if request.mechanism.as_str() == PLAIN {
        session.mechanism = Some(PLAIN.to_owned());
    } else {
        response.error_code = ResponseError::UnsupportedSaslMechanism.code();
    }
    ResponseKind::SaslHandshake(response)
}
