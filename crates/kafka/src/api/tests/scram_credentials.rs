//! DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554) through the API
//! handlers: credentials set from a client's salted password verify that password and
//! create the user bare, describe shows mechanisms and iterations, and each refusal —
//! what real admin clients refuse to send too (an unknown mechanism, an empty name, a user
//! described twice) — carries Kafka's code, for that user only.

use super::acls::{client_of, guarded};
use super::fixture::{Client, Front, text};
use ferry_auth::User;
use ferry_auth::password::PasswordHash;
use ferry_auth::scram::Mechanism;
use ferry_auth::scram::test_client::salted_password;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
};

/// Kafka's numbers of the mechanisms.
pub(super) const SHA_256: i8 = 1;
const SHA_512: i8 = 2;

/// An upsertion of `user`'s credential for `mechanism` from `password`, as a client
/// computes it (PBKDF2 with the salt `salt`).
pub(super) fn upsert(
    user: &str,
    mechanism: i8,
    iterations: i32,
    password: &str,
) -> ScramCredentialUpsertion {
    let salt = b"NaCl".to_vec();
    let salted = Mechanism::from_kafka_number(mechanism).map_or_else(
        || vec![0; 32],
        |m| salted_password(m, password, &salt, iterations.max(1) as u32),
    );
    ScramCredentialUpsertion::default()
        .with_name(text(user))
        .with_mechanism(mechanism)
        .with_iterations(iterations)
        .with_salt(salt.into())
        .with_salted_password(salted.into())
}

fn delete(user: &str, mechanism: i8) -> ScramCredentialDeletion {
    ScramCredentialDeletion::default()
        .with_name(text(user))
        .with_mechanism(mechanism)
}

/// AlterUserScramCredentials (v0): each result's (user, error code).
async fn alter(
    c: &mut Client,
    deletions: Vec<ScramCredentialDeletion>,
    upsertions: Vec<ScramCredentialUpsertion>,
) -> Vec<(String, i16)> {
    let request = AlterUserScramCredentialsRequest::default()
        .with_deletions(deletions)
        .with_upsertions(upsertions);
    let r = c.call(0, request).await;
    r.results
        .iter()
        .map(|r| (r.user.to_string(), r.error_code))
        .collect()
}

/// DescribeUserScramCredentials (v0) of `users` (`None`: all).
async fn describe(c: &mut Client, users: Option<&[&str]>) -> DescribeUserScramCredentialsResponse {
    let users = users.map(|u| {
        u.iter()
            .map(|n| UserName::default().with_name(text(n)))
            .collect()
    });
    c.call(
        0,
        DescribeUserScramCredentialsRequest::default().with_users(users),
    )
    .await
}

/// A described user: (name, error code, [(mechanism, iterations)]).
type Described = (String, i16, Vec<(i8, i32)>);

/// Each result of `r`.
fn described(r: &DescribeUserScramCredentialsResponse) -> Vec<Described> {
    r.results
        .iter()
        .map(|u| {
            (
                u.user.to_string(),
                u.error_code,
                u.credential_infos
                    .iter()
                    .map(|c| (c.mechanism, c.iterations))
                    .collect(),
            )
        })
        .collect()
}

async fn stored(front: &Front, name: &str) -> Option<User> {
    front.ctx.users.store().get(name).await.unwrap()
}

#[tokio::test]
async fn an_upsertion_creates_a_bare_user_whose_credentials_verify_the_password() {
    let front = Front::start().await;
    let mut c = front.client();
    let answer = alter(
        &mut c,
        vec![],
        vec![
            upsert("kafka-made", SHA_256, 8192, "s3cret"),
            upsert("kafka-made", SHA_512, 4096, "s3cret"),
        ],
    )
    .await;
    assert_eq!(answer, [("kafka-made".to_owned(), 0)]);
    let user = stored(&front, "kafka-made").await.expect("created");
    for mechanism in Mechanism::ALL {
        let credential = user.scram(mechanism).expect("set");
        assert!(credential.verify_password("s3cret"));
        assert!(!credential.verify_password("s3creT"));
    }
    assert_eq!(user.scram(Mechanism::Sha256).unwrap().iterations(), 8192);
    assert_eq!(user.password_hash, None);
    assert!(user.tags.is_empty() && !user.loopback_only && !user.require_tls);
    assert!(
        front
            .ctx
            .users
            .store()
            .grants("/", "kafka-made")
            .await
            .unwrap()
            .permissions
            .is_none()
    );
    let r = describe(&mut c, Some(&["kafka-made"])).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(
        described(&r),
        [(
            "kafka-made".to_owned(),
            0,
            vec![(SHA_256, 8192), (SHA_512, 4096)]
        )]
    );
    front.stop().await;
}

#[tokio::test]
async fn an_upsertion_keeps_an_existing_users_password_tags_and_other_credential() {
    let front = Front::start().await;
    let mut c = front.client();
    let before = stored(&front, "guest").await.unwrap();
    assert_eq!(
        alter(&mut c, vec![], vec![upsert("guest", SHA_512, 10000, "new")]).await,
        [("guest".to_owned(), 0)]
    );
    let after = stored(&front, "guest").await.unwrap();
    assert!(
        after
            .scram(Mechanism::Sha512)
            .unwrap()
            .verify_password("new")
    );
    assert_eq!(
        after.scram(Mechanism::Sha256),
        before.scram(Mechanism::Sha256)
    );
    assert_eq!(
        (&after.password_hash, &after.tags, after.loopback_only),
        (&before.password_hash, &before.tags, before.loopback_only)
    );
    front.stop().await;
}

#[tokio::test]
async fn a_deletion_removes_one_mechanism_and_a_missing_one_is_not_found() {
    let front = Front::start().await;
    let mut c = front.client();
    assert_eq!(
        alter(&mut c, vec![delete("guest", SHA_256)], vec![]).await,
        [("guest".to_owned(), 0)]
    );
    let guest = stored(&front, "guest").await.unwrap();
    assert!(guest.scram(Mechanism::Sha256).is_none());
    assert!(guest.scram(Mechanism::Sha512).is_some());
    assert!(guest.verify_password("guest"), "the password hash stays");
    let not_found = ResponseError::ResourceNotFound.code();
    // Again, and for a user that does not exist (which is not created).
    assert_eq!(
        alter(
            &mut c,
            vec![delete("guest", SHA_256), delete("nobody", SHA_512)],
            vec![]
        )
        .await,
        [
            ("guest".to_owned(), not_found),
            ("nobody".to_owned(), not_found)
        ]
    );
    assert_eq!(stored(&front, "nobody").await, None);
    // A deletion that fails undoes the user's upsertion in the same request.
    assert_eq!(
        alter(
            &mut c,
            vec![delete("guest", SHA_256)],
            vec![upsert("guest", SHA_512, 4096, "other")]
        )
        .await,
        [("guest".to_owned(), not_found)]
    );
    assert_eq!(stored(&front, "guest").await.unwrap(), guest);
    front.stop().await;
}

#[tokio::test]
async fn invalid_alterations_get_kafkas_codes_for_their_user_only() {
    let front = Front::start().await;
    let mut c = front.client();
    let unacceptable = ResponseError::UnacceptableCredential.code();
    let answer = alter(
        &mut c,
        vec![delete("unknown-mechanism", 0), delete("twice", SHA_256)],
        vec![
            upsert("", SHA_256, 4096, "pw"),
            upsert("too-few", SHA_256, 4095, "pw"),
            upsert("too-many", SHA_512, 16385, "pw"),
            upsert("negative", SHA_512, -1, "pw"),
            upsert("twice", SHA_256, 4096, "pw"),
            upsert("fine", SHA_256, 16384, "pw"),
        ],
    )
    .await;
    assert_eq!(
        answer,
        [
            (
                "unknown-mechanism".to_owned(),
                ResponseError::UnsupportedSaslMechanism.code()
            ),
            ("twice".to_owned(), ResponseError::DuplicateResource.code()),
            (String::new(), unacceptable),
            ("too-few".to_owned(), unacceptable),
            ("too-many".to_owned(), unacceptable),
            ("negative".to_owned(), unacceptable),
            ("fine".to_owned(), 0),
        ]
    );
    for name in [
        "unknown-mechanism",
        "twice",
        "",
        "too-few",
        "too-many",
        "negative",
    ] {
        assert_eq!(stored(&front, name).await, None, "{name}");
    }
    assert!(stored(&front, "fine").await.is_some());
    // An empty salt, a salted password that is not one hash long.
    let empty_salt = upsert("bad-salt", SHA_256, 4096, "pw").with_salt(Default::default());
    let short = upsert("short", SHA_512, 4096, "pw").with_salted_password(vec![1; 32].into());
    let request =
        AlterUserScramCredentialsRequest::default().with_upsertions(vec![empty_salt, short]);
    let r = c.call(0, request).await;
    let messages: Vec<(String, i16, String)> = r
        .results
        .iter()
        .map(|r| {
            (
                r.user.to_string(),
                r.error_code,
                r.error_message.as_ref().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        messages,
        [
            (
                "bad-salt".to_owned(),
                unacceptable,
                "salt is empty".to_owned()
            ),
            (
                "short".to_owned(),
                unacceptable,
                "salted password is 32 bytes, not the 64 of SCRAM-SHA-512".to_owned()
            ),
        ]
    );
    front.stop().await;
}

#[tokio::test]
async fn describe_answers_all_users_with_scram_or_each_named_once() {
    let front = Front::start().await;
    let store = front.ctx.users.store();
    store
        .put(&User {
            password_hash: Some(PasswordHash::new("pw")),
            ..User::new("hash-only")
        })
        .await
        .unwrap();
    let mut c = front.client();
    alter(&mut c, vec![], vec![upsert("alice", SHA_512, 5000, "pw")]).await;
    for all in [None, Some(&[][..])] {
        let r = describe(&mut c, all).await;
        assert_eq!(
            described(&r),
            [
                ("alice".to_owned(), 0, vec![(SHA_512, 5000)]),
                (
                    "guest".to_owned(),
                    0,
                    vec![(SHA_256, 4096), (SHA_512, 4096)]
                ),
            ],
            "hash-only has no SCRAM credential: left out"
        );
    }
    let r = describe(&mut c, Some(&["nobody", "alice", "hash-only", "alice"])).await;
    assert_eq!(r.error_code, 0);
    let not_found = ResponseError::ResourceNotFound.code();
    assert_eq!(
        described(&r),
        [
            ("nobody".to_owned(), not_found, vec![]),
            (
                "alice".to_owned(),
                ResponseError::DuplicateResource.code(),
                vec![]
            ),
            ("hash-only".to_owned(), not_found, vec![]),
        ]
    );
    assert_eq!(
        r.results[0].error_message.as_deref(),
        Some("Attempt to describe a user credential that does not exist: nobody")
    );
    front.stop().await;
}

#[tokio::test]
async fn describing_needs_describe_and_altering_needs_alter_on_the_cluster() {
    let front = guarded().await;
    let mut alice = client_of(&front, "alice");
    let denied = ResponseError::ClusterAuthorizationFailed.code();
    // Named users: refused each (not the request: librdkafka aborts on a request's error).
    let r = describe(&mut alice, Some(&["guest", "guest"])).await;
    assert_eq!(r.error_code, 0);
    assert_eq!(described(&r), [("guest".to_owned(), denied, vec![])]);
    let r = describe(&mut alice, None).await;
    assert_eq!((r.error_code, r.results.len()), (denied, 0));
    assert_eq!(
        alter(
            &mut alice,
            vec![delete("guest", SHA_256)],
            vec![upsert("alice", SHA_256, 4096, "pw")]
        )
        .await,
        [("guest".to_owned(), denied), ("alice".to_owned(), denied)]
    );
    assert_eq!(stored(&front, "alice").await, None);
    let mut admin = client_of(&front, "admin");
    assert_eq!(
        alter(
            &mut admin,
            vec![],
            vec![upsert("alice", SHA_256, 4096, "pw")]
        )
        .await,
        [("alice".to_owned(), 0)]
    );
    assert_eq!(
        describe(&mut admin, Some(&["alice"])).await.results[0].error_code,
        0
    );
    front.stop().await;
}
