//! SaslAuthenticate with PLAIN (`[authzid] NUL user NUL password`), checked against the
//! `[[users]]` every front shares. Wrong credentials get `SASL_AUTHENTICATION_FAILED` with
//! the reason, and the connection closes after that answer.

use super::sasl_handshake::PLAIN;
use super::{Reply, Session, str_bytes};
use crate::kafka::Context;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{ResponseKind, SaslAuthenticateRequest, SaslAuthenticateResponse};
use std::sync::Arc;
use tracing::info;

/// Checks the client's PLAIN credentials.
pub fn handle(
    ctx: &Arc<Context>,
    session: &mut Session,
    request: SaslAuthenticateRequest,
) -> Reply {
    let refuse = |message: String| {
        info!(peer = %session.peer.addr, reason = %message, "Kafka SASL authentication failed");
        Reply::Last(ResponseKind::SaslAuthenticate(
            SaslAuthenticateResponse::default()
                .with_error_code(ResponseError::SaslAuthenticationFailed.code())
                .with_error_message(Some(str_bytes(message))),
        ))
    };
    if session.mechanism.as_deref() != Some(PLAIN) {
        return refuse("SaslAuthenticate before a SaslHandshake choosing PLAIN".to_owned());
    }
    let Some((user, password)) = parse_plain(&request.auth_bytes) else {
        return refuse("the SASL PLAIN message is malformed".to_owned());
    };
    match ctx
        .users
        .authenticate(user, password, session.peer.addr.ip())
    {
        Ok(u) => {
            session.user = Some(u.name.clone());
            Reply::Now(ResponseKind::SaslAuthenticate(
                SaslAuthenticateResponse::default(),
            ))
        }
        Err(e) => refuse(e.to_string()),
    }
}

/// Splits a PLAIN message into (user, password); the authorization id is ignored.
fn parse_plain(bytes: &[u8]) -> Option<(&str, &str)> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut parts = text.split('\0');
    let (_authzid, user, password) = (parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_none() && !user.is_empty()).then_some((user, password))
}

#[cfg(test)]
mod tests {
    use super::parse_plain;

    #[test]
    fn plain_messages_split_into_user_and_password() {
        assert_eq!(parse_plain(b"\0guest\0pw"), Some(("guest", "pw")));
        assert_eq!(parse_plain(b"admin\0guest\0pw"), Some(("guest", "pw")));
        assert_eq!(parse_plain(b"guest\0pw"), None);
        assert_eq!(parse_plain(b"\0\0pw"), None);
        assert_eq!(parse_plain(b"\0a\0b\0c"), None);
    }
}
