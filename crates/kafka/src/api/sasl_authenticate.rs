//! SaslAuthenticate: PLAIN (`[authzid] NUL user NUL password`) in one request, SCRAM in
//! two (client-first answered with server-first, client-final with server-final), the
//! exchange's state kept on the session between them. Every login goes through the shared
//! authenticator (user store, restrictions, failure metrics, slowdown). A failure gets
//! `SASL_AUTHENTICATION_FAILED` with the reason, and the connection closes after that answer.
//!
//! Re-authentication (KIP-368): with `kafka.connections_max_reauth_ms` set, a login lasts
//! that long, which the answer (v1+) tells the client as `session_lifetime_ms`; the client
//! then runs SaslHandshake and SaslAuthenticate again on the same connection, which must
//! log in the same user with the same mechanism (else the re-authentication fails, as
//! Kafka's does) and starts a new lifetime. A connection whose login expired may make no
//! other request ([`super::refusal`]).

use super::sasl_handshake::SaslMechanism;
use super::{Login, Reply, SaslState, Session, str_bytes};
use crate::Context;
use bytes::Bytes;
use ferry_auth::{AuthError, Front};
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{ResponseKind, SaslAuthenticateRequest, SaslAuthenticateResponse};
use std::sync::Arc;
use tracing::info;

/// Takes the next step of the session's SASL exchange.
pub(crate) async fn handle(
    ctx: &Arc<Context>,
    session: &mut Session,
    version: i16,
    request: SaslAuthenticateRequest,
) -> Reply {
    let users = &ctx.users;
    let peer = session.peer.clone();
    let bytes = &request.auth_bytes;
    let state = std::mem::replace(&mut session.sasl, SaslState::None);
    let chosen = match &state {
        SaslState::Chosen(m) => Some(*m),
        SaslState::ScramFinal(login) => Some(SaslMechanism::Scram(login.mechanism())),
        SaslState::None => None,
    };
    let mechanism = chosen.map_or("none", SaslMechanism::name);
    let step = match state {
        SaslState::Chosen(SaslMechanism::Plain) => match parse_plain(bytes) {
            Some((user, password)) => users
                .password(Front::Kafka, &peer, user, password)
                .await
                .map(|u| (Some(u.name), Bytes::new())),
            None => Err(refused(
                ctx,
                session,
                AuthError::Malformed("the SASL PLAIN message is malformed".to_owned()),
            )),
        },
        SaslState::Chosen(SaslMechanism::Scram(mechanism)) => users
            .scram_first(Front::Kafka, &peer, mechanism, bytes)
            .await
            .map(|(login, server_first)| {
                session.sasl = SaslState::ScramFinal(Box::new(login));
                (None, Bytes::from(server_first))
            }),
        SaslState::ScramFinal(login) => users
            .scram_final(Front::Kafka, &peer, *login, bytes)
            .map(|(u, server_final)| (Some(u.name), Bytes::from(server_final))),
        SaslState::None => Err(refused(
            ctx,
            session,
            AuthError::Mechanism(
                "SaslAuthenticate before a SaslHandshake choosing a mechanism".to_owned(),
            ),
        )),
    };
    match step {
        Ok((Some(user), _)) if let Some(why) = changed_login(session, &user, chosen) => {
            Reply::Last(failed(why))
        }
        Ok((user, answer)) => {
            let mut response = SaslAuthenticateResponse::default().with_auth_bytes(answer);
            if let (Some(user), Some(used)) = (user, chosen) {
                info!(
                    peer = %session.peer.addr,
                    listener = %session.listener,
                    tls = session.peer.is_tls(),
                    user = %user,
                    mechanism,
                    "Kafka client authenticated"
                );
                session.user = Some(user);
                let lifetime = ctx.config.connections_max_reauth();
                session.login = Some(Login {
                    mechanism: used,
                    expires: lifetime.map(|d| std::time::Instant::now() + d),
                });
                if version >= 1 {
                    let ms =
                        lifetime.map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
                    response = response.with_session_lifetime_ms(ms);
                }
            }
            Reply::Now(ResponseKind::SaslAuthenticate(response))
        }
        Err(e) => Reply::Last(failed(e.to_string())),
    }
}

/// Why a re-authentication that logged in `user` with `mechanism` may not replace the
/// session's login: Kafka refuses a change of principal or of mechanism.
fn changed_login(
    session: &Session,
    user: &str,
    mechanism: Option<SaslMechanism>,
) -> Option<String> {
    let (Some(previous), Some(login)) = (&session.user, &session.login) else {
        return None;
    };
    if previous != user {
        return Some(format!(
            "cannot change the user from {previous} to {user} when re-authenticating"
        ));
    }
    (Some(login.mechanism) != mechanism).then(|| {
        format!(
            "cannot change the SASL mechanism from {} when re-authenticating",
            login.mechanism.name()
        )
    })
}

/// The answer to a failed authentication, saying why.
fn failed(why: String) -> ResponseKind {
    ResponseKind::SaslAuthenticate(
        SaslAuthenticateResponse::default()
            .with_error_code(ResponseError::SaslAuthenticationFailed.code())
            .with_error_message(Some(str_bytes(why))),
    )
}

/// A refusal decided here, recorded by the authenticator like its own.
fn refused(ctx: &Context, session: &Session, e: AuthError) -> AuthError {
    ctx.users.refused(Front::Kafka, &session.peer, &e);
    e
}

/// Splits a PLAIN message into (user, password); the authorization id is ignored.
pub(crate) fn parse_plain(bytes: &[u8]) -> Option<(&str, &str)> {
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
