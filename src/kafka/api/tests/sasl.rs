//! SaslHandshake and SaslAuthenticate with `kafka.require_sasl`: what may come before
//! authentication, PLAIN credentials accepted or refused (then the connection closes),
//! and mechanisms other than PLAIN.

use super::fixture::{Answer, Client, Front, text};
use bytes::Bytes;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::{
    ApiVersionsRequest, MetadataRequest, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest,
};
use std::net::SocketAddr;

async fn secured() -> Front {
    Front::start_with(|c| c.require_sasl = true).await
}

/// SaslHandshake (v1) choosing `mechanism`: (error code, mechanisms offered).
async fn handshake(c: &mut Client, mechanism: &str) -> (i16, Vec<String>) {
    let request = SaslHandshakeRequest::default().with_mechanism(text(mechanism));
    let r = c.call(1, request).await;
    (
        r.error_code,
        r.mechanisms.iter().map(|m| m.to_string()).collect(),
    )
}

/// SaslAuthenticate (v2) with `token`.
async fn authenticate(c: &mut Client, token: &str) -> Answer<SaslAuthenticateResponse> {
    let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token.to_owned()));
    c.send(2, request).await
}

/// The (error code, message) of an answer that closes the connection after it.
fn last(answer: Answer<SaslAuthenticateResponse>) -> (i16, Option<String>) {
    match answer {
        Answer::Last(r) => (r.error_code, r.error_message.map(|m| m.to_string())),
        _ => panic!("a refusal is the connection's last answer"),
    }
}

#[tokio::test]
async fn plain_credentials_authenticate_the_connection() {
    let front = secured().await;
    let mut c = front.client();
    assert_eq!(
        c.call(3, ApiVersionsRequest::default()).await.error_code,
        0,
        "ApiVersions comes before authentication"
    );
    assert_eq!(handshake(&mut c, "PLAIN").await, (0, vec!["PLAIN".into()]));
    let r = authenticate(&mut c, "\0guest\0guest")
        .await
        .response()
        .await;
    assert_eq!(r.error_code, 0);
    assert_eq!(c.session.user.as_deref(), Some("guest"));
    let metadata = c
        .call(12, MetadataRequest::default().with_topics(None))
        .await;
    assert_eq!(
        metadata.brokers.len(),
        1,
        "requests are served once authenticated"
    );
    front.stop().await;
}

#[tokio::test]
async fn requests_before_authentication_close_the_connection() {
    let front = secured().await;
    let mut c = front.client();
    let Answer::Close(reason) = c.send(12, MetadataRequest::default()).await else {
        panic!("refused");
    };
    assert_eq!(
        reason,
        "Metadata before SASL authentication (kafka.require_sasl is on)"
    );
    front.stop().await;
}

#[tokio::test]
async fn wrong_credentials_fail_and_close_the_connection() {
    let front = secured().await;
    let mut c = front.client();
    handshake(&mut c, "PLAIN").await;
    assert_eq!(
        last(authenticate(&mut c, "\0guest\0wrong").await),
        (
            ResponseError::SaslAuthenticationFailed.code(),
            Some("login refused for user 'guest': invalid credentials".into())
        )
    );
    assert_eq!(c.session.user, None);
    let mut other = front.client();
    handshake(&mut other, "PLAIN").await;
    assert_eq!(
        last(authenticate(&mut other, "\0nobody\0guest").await).0,
        ResponseError::SaslAuthenticationFailed.code()
    );
    front.stop().await;
}

#[tokio::test]
async fn a_loopback_only_user_is_refused_from_another_address() {
    let front = secured().await;
    let mut c = front.client_from(SocketAddr::from(([192, 0, 2, 1], 40_000)));
    handshake(&mut c, "PLAIN").await;
    assert_eq!(
        last(authenticate(&mut c, "\0guest\0guest").await),
        (
            ResponseError::SaslAuthenticationFailed.code(),
            Some("user 'guest' can only connect via localhost".into())
        )
    );
    assert_eq!(c.session.user, None);
    front.stop().await;
}

#[tokio::test]
async fn a_mechanism_other_than_plain_is_refused_with_the_one_offered() {
    let front = secured().await;
    let mut c = front.client();
    assert_eq!(
        handshake(&mut c, "SCRAM-SHA-256").await,
        (
            ResponseError::UnsupportedSaslMechanism.code(),
            vec!["PLAIN".into()]
        )
    );
    assert_eq!(
        last(authenticate(&mut c, "\0guest\0guest").await),
        (
            ResponseError::SaslAuthenticationFailed.code(),
            Some("SaslAuthenticate before a SaslHandshake choosing PLAIN".into())
        ),
        "no mechanism was agreed"
    );
    front.stop().await;
}

#[tokio::test]
async fn a_malformed_plain_message_fails() {
    let front = secured().await;
    let mut c = front.client();
    handshake(&mut c, "PLAIN").await;
    assert_eq!(
        last(authenticate(&mut c, "guest-without-separators").await),
        (
            ResponseError::SaslAuthenticationFailed.code(),
            Some("the SASL PLAIN message is malformed".into())
        )
    );
    front.stop().await;
}
