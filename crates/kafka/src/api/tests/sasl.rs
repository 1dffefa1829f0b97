//! SaslHandshake and SaslAuthenticate with `kafka.require_sasl`: what may come before
//! authentication, PLAIN credentials accepted or refused (then the connection closes),
//! mechanisms not offered, the SCRAM exchange across two requests (a right proof, a
//! wrong one, an unknown user, a nonce that does not match, malformed messages), a user
//! who requires TLS, and the principal a client certificate maps to.

use super::fixture::{Answer, Client, Front, test_config, text};
use bytes::Bytes;
use ferry_auth::UserConfig;
use ferry_auth::peer::{CertificateNames, Peer, TlsPeer};
use ferry_auth::scram::test_client::client_final;
use ferry_auth::scram::{Mechanism, ScramCredential};
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
    assert_eq!(
        handshake(&mut c, "PLAIN").await,
        (
            0,
            vec![
                "PLAIN".into(),
                "SCRAM-SHA-256".into(),
                "SCRAM-SHA-512".into()
            ]
        )
    );
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
async fn a_mechanism_not_offered_is_refused_with_those_offered() {
    let front = secured().await;
    let mut c = front.client();
    let (code, offered) = handshake(&mut c, "GSSAPI").await;
    assert_eq!(code, ResponseError::UnsupportedSaslMechanism.code());
    assert_eq!(offered, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]);
    assert_eq!(
        last(authenticate(&mut c, "\0guest\0guest").await),
        (
            ResponseError::SaslAuthenticationFailed.code(),
            Some("SaslAuthenticate before a SaslHandshake choosing a mechanism".into())
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

/// A front requiring SASL whose users are `alice` (SCRAM-SHA-256 and -512 only, password
/// `wonderland`) and `tls-only` (password `pw`, `require_tls`).
async fn scram_front(edit: impl FnOnce(&mut ferry_config::KafkaConfig)) -> Front {
    let mut config = test_config();
    config.require_sasl = true;
    edit(&mut config);
    let scram = |m| Some(ScramCredential::new(m, "wonderland", 4096).to_string());
    let alice = UserConfig {
        name: "alice".into(),
        password_hash: None,
        scram_sha_256: scram(Mechanism::Sha256),
        scram_sha_512: scram(Mechanism::Sha512),
        ..UserConfig::default()
    };
    let tls_only = UserConfig {
        name: "tls-only".into(),
        password_hash: Some(ferry_auth::password::PasswordHash::new("pw").to_string()),
        scram_sha_256: None,
        scram_sha_512: None,
        require_tls: true,
        ..alice.clone()
    };
    Front::start_as(config, &[alice, tls_only]).await
}

/// A SCRAM client's side: client-first, then client-final for the server-first it got.
struct ScramClient {
    mechanism: Mechanism,
    bare: String,
}

impl ScramClient {
    fn new(mechanism: Mechanism, user: &str) -> Self {
        Self {
            mechanism,
            bare: format!("n={user},r=rOprNGfwEbeRWgbNEkqO"),
        }
    }

    fn first(&self) -> String {
        format!("n,,{}", self.bare)
    }

    /// client-final proving `password`, with the nonce server-first gave (or `nonce`).
    fn last(&self, password: &str, server_first: &str, nonce: Option<&str>) -> String {
        client_final(self.mechanism, password, &self.bare, server_first, nonce)
    }
}

/// Runs client-first and returns server-first.
async fn scram_first(c: &mut Client, client: &ScramClient) -> String {
    assert_eq!(handshake(c, client.mechanism.name()).await.0, 0);
    let r = authenticate(c, &client.first()).await.response().await;
    assert_eq!(r.error_code, 0, "{:?}", r.error_message);
    String::from_utf8(r.auth_bytes.to_vec()).unwrap()
}

#[tokio::test]
async fn scram_with_the_right_password_authenticates_with_both_hashes() {
    let front = scram_front(|_| {}).await;
    for mechanism in Mechanism::ALL {
        let mut c = front.client();
        let client = ScramClient::new(mechanism, "alice");
        let server_first = scram_first(&mut c, &client).await;
        assert!(server_first.starts_with("r=rOprNGfwEbeRWgbNEkqO"));
        assert_eq!(c.session.user, None, "not yet");
        let last = client.last("wonderland", &server_first, None);
        let r = authenticate(&mut c, &last).await.response().await;
        assert_eq!(r.error_code, 0, "{:?}", r.error_message);
        assert!(r.auth_bytes.starts_with(b"v="), "server-final");
        assert_eq!(c.session.user.as_deref(), Some("alice"));
        let metadata = c
            .call(12, MetadataRequest::default().with_topics(None))
            .await;
        assert_eq!(metadata.brokers.len(), 1);
    }
    front.stop().await;
}

#[tokio::test]
async fn scram_with_a_wrong_password_or_an_unknown_user_fails_alike() {
    let front = scram_front(|_| {}).await;
    let failed = (
        ResponseError::SaslAuthenticationFailed.code(),
        Some("login refused for user 'alice': invalid credentials".to_owned()),
    );
    let mut c = front.client();
    let client = ScramClient::new(Mechanism::Sha256, "alice");
    let server_first = scram_first(&mut c, &client).await;
    let wrong = client.last("looking-glass", &server_first, None);
    assert_eq!(last(authenticate(&mut c, &wrong).await), failed);
    assert_eq!(c.session.user, None);

    // An unknown user gets a server-first too (a stable fake salt), then the same failure.
    let mut c = front.client();
    let ghost = ScramClient::new(Mechanism::Sha512, "ghost");
    let server_first = scram_first(&mut c, &ghost).await;
    let again = scram_first(&mut front.client(), &ghost).await;
    assert_eq!(server_first.split(',').nth(1), again.split(',').nth(1));
    let attempt = ghost.last("anything", &server_first, None);
    assert_eq!(
        last(authenticate(&mut c, &attempt).await),
        (
            failed.0,
            Some("login refused for user 'ghost': invalid credentials".to_owned())
        )
    );
    front.stop().await;
}

#[tokio::test]
async fn a_scram_final_message_with_another_nonce_fails() {
    let front = scram_front(|_| {}).await;
    let mut c = front.client();
    let client = ScramClient::new(Mechanism::Sha256, "alice");
    let server_first = scram_first(&mut c, &client).await;
    let forged = client.last(
        "wonderland",
        &server_first,
        Some("rOprNGfwEbeRWgbNEkqOforged"),
    );
    assert_eq!(
        last(authenticate(&mut c, &forged).await),
        (
            ResponseError::SaslAuthenticationFailed.code(),
            Some("the SCRAM client-final nonce does not match the exchange's".into())
        )
    );
    front.stop().await;
}

#[tokio::test]
async fn malformed_scram_messages_fail() {
    let front = scram_front(|_| {}).await;
    let mut c = front.client();
    handshake(&mut c, "SCRAM-SHA-256").await;
    assert_eq!(
        last(authenticate(&mut c, "n=alice,r=abc").await),
        (
            ResponseError::SaslAuthenticationFailed.code(),
            Some("the SCRAM client-first message is malformed: it has no GS2 header".into())
        )
    );
    let mut c = front.client();
    let client = ScramClient::new(Mechanism::Sha256, "alice");
    scram_first(&mut c, &client).await;
    assert_eq!(
        last(authenticate(&mut c, "c=biws,r=abc").await),
        (
            ResponseError::SaslAuthenticationFailed.code(),
            Some("the SCRAM client-final message is malformed: it has no p= proof".into())
        )
    );
    front.stop().await;
}

#[tokio::test]
async fn a_user_requiring_tls_is_refused_on_plaintext_and_accepted_over_tls() {
    let front = scram_front(|_| {}).await;
    let mut c = front.client();
    handshake(&mut c, "PLAIN").await;
    assert_eq!(
        last(authenticate(&mut c, "\0tls-only\0pw").await),
        (
            ResponseError::SaslAuthenticationFailed.code(),
            Some("user 'tls-only' must connect over TLS (its require_tls is set)".into())
        )
    );
    let over_tls = Peer {
        tls: Some(TlsPeer { certificate: None }),
        ..Peer::plaintext(SocketAddr::from(([127, 0, 0, 1], 50_001)))
    };
    let mut c = front.client_as(over_tls);
    handshake(&mut c, "PLAIN").await;
    let r = authenticate(&mut c, "\0tls-only\0pw")
        .await
        .response()
        .await;
    assert_eq!(r.error_code, 0);
    assert_eq!(c.session.user.as_deref(), Some("tls-only"));
    front.stop().await;
}

/// A peer on a TLS listener whose client certificate has `subject`.
pub(super) fn with_certificate(subject: &str) -> Peer {
    Peer {
        tls: Some(TlsPeer {
            certificate: Some(CertificateNames {
                subject: subject.into(),
                ..CertificateNames::default()
            }),
        }),
        ..Peer::plaintext(SocketAddr::from(([127, 0, 0, 1], 50_002)))
    }
}

#[tokio::test]
async fn a_client_certificate_maps_to_a_principal_by_the_rules() {
    let front = scram_front(|c| {
        c.require_sasl = false;
        c.ssl_principal_mapping_rules = "RULE:^CN=([^,]*),OU=apps(,.*)?$/$1/L".into();
    })
    .await;
    let mut c = front.client_as(with_certificate("CN=Billing,OU=apps,O=Example"));
    assert_eq!(c.session.certificate_principal.as_deref(), Some("billing"));
    assert_eq!(c.session.principal(), Some("billing"));
    let metadata = c
        .call(12, MetadataRequest::default().with_topics(None))
        .await;
    assert_eq!(metadata.brokers.len(), 1, "served");

    let mut unmapped = front.client_as(with_certificate("CN=x,OU=people"));
    assert_eq!(unmapped.session.principal(), None);
    let Answer::Close(reason) = unmapped.send(12, MetadataRequest::default()).await else {
        panic!("a certificate no rule maps is refused");
    };
    assert_eq!(
        reason,
        "the client certificate's subject matches no kafka.ssl_principal_mapping_rules rule"
    );
    front.stop().await;
}
