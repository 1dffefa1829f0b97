//! The authenticator over a real embedded store: password logins against every credential
//! kind, restrictions, seeding, users changed at runtime, certificate logins and the
//! slowdown of failing addresses.

use super::*;
use crate::password::PasswordHash;
use crate::peer::{CertificateNames, TlsPeer};
use crate::scram::ScramCredential;
use ferry_store::StoreConfig;
use std::net::SocketAddr;
use std::time::Duration;

struct Fixture {
    auth: Authenticator,
    db: Database,
    _dir: tempfile::TempDir,
}

fn user(name: &str, password: &str) -> UserConfig {
    UserConfig {
        name: name.into(),
        password_hash: Some(PasswordHash::new(password).to_string()),
        scram_sha_256: None,
        ..UserConfig::default()
    }
}

fn scram_only(name: &str, password: &str) -> UserConfig {
    UserConfig {
        password_hash: None,
        scram_sha_512: Some(ScramCredential::new(Mechanism::Sha512, password, 4096).to_string()),
        ..user(name, password)
    }
}

async fn fixture(users: &[UserConfig]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreConfig {
        path: dir.path().join("store"),
        cache_mb: 16,
        ..StoreConfig::default()
    };
    let db = Database::open(&store).await.unwrap();
    let auth = Authenticator::start(db.clone(), &store.prefix, users)
        .await
        .unwrap();
    Fixture {
        auth,
        db,
        _dir: dir,
    }
}

fn plaintext(last: u8) -> Peer {
    Peer::plaintext(SocketAddr::from(([192, 0, 2, last], 40_000)))
}

fn tls(certificate: Option<CertificateNames>) -> Peer {
    Peer {
        tls: Some(TlsPeer { certificate }),
        ..plaintext(1)
    }
}

#[tokio::test]
async fn plain_logins_verify_against_any_credential_and_refuse_alike() {
    let f = fixture(&[user("hashed", "pw1"), scram_only("scrammed", "pw2")]).await;
    let peer = plaintext(1);
    let login = |name: &'static str, pw: &'static str| {
        let (auth, peer) = (f.auth.clone(), peer.clone());
        async move { auth.password(Front::Amqp, &peer, name, pw).await }
    };
    assert_eq!(login("hashed", "pw1").await.unwrap().name, "hashed");
    assert_eq!(login("scrammed", "pw2").await.unwrap().name, "scrammed");
    assert_eq!(
        login("scrammed", "pw1").await.unwrap_err().to_string(),
        "login refused for user 'scrammed': invalid credentials"
    );
    assert_eq!(
        login("ghost", "pw1").await.unwrap_err().to_string(),
        "login refused for user 'ghost': invalid credentials",
        "an unknown user is refused as a wrong password is"
    );
}

#[tokio::test]
async fn a_user_requiring_tls_is_refused_on_plaintext_only() {
    let f = fixture(&[UserConfig {
        require_tls: true,
        ..user("secure", "pw")
    }])
    .await;
    assert_eq!(
        f.auth
            .password(Front::Kafka, &plaintext(1), "secure", "pw")
            .await
            .unwrap_err(),
        AuthError::TlsRequired("secure".into())
    );
    let over_tls = f
        .auth
        .password(Front::Kafka, &tls(None), "secure", "pw")
        .await;
    assert_eq!(over_tls.unwrap().name, "secure");
}

#[tokio::test]
async fn the_config_replaces_the_users_it_names_and_keeps_the_others() {
    let f = fixture(&[user("app", "old")]).await;
    let extra = User::from_config(0, &user("extra", "pw")).unwrap();
    f.auth.store().put(&extra).await.unwrap();
    // A restart with a new password for `app`.
    let again = Authenticator::start(
        f.db.clone(),
        &StoreConfig::default().prefix,
        &[user("app", "new")],
    )
    .await
    .unwrap();
    let peer = plaintext(1);
    assert!(
        again
            .password(Front::Amqp, &peer, "app", "new")
            .await
            .is_ok()
    );
    assert!(
        again
            .password(Front::Amqp, &peer, "app", "old")
            .await
            .is_err()
    );
    assert!(
        again
            .password(Front::Amqp, &peer, "extra", "pw")
            .await
            .is_ok()
    );
    assert_eq!(
        again.inner.fake_salt_key, f.auth.inner.fake_salt_key,
        "the fake-salt key is made once per store"
    );
}

#[tokio::test]
async fn a_user_changed_in_the_store_is_seen_by_the_next_login() {
    let f = fixture(&[user("app", "old")]).await;
    let peer = plaintext(1);
    assert!(
        f.auth
            .password(Front::Amqp, &peer, "app", "old")
            .await
            .is_ok()
    );
    let changed = User::from_config(0, &user("app", "new")).unwrap();
    f.auth.store().put(&changed).await.unwrap();
    assert!(
        f.auth
            .password(Front::Amqp, &plaintext(2), "app", "new")
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_certificate_login_needs_an_existing_user() {
    let f = fixture(&[user("alice", "pw")]).await;
    let peer = tls(Some(CertificateNames::default()));
    assert_eq!(
        f.auth
            .certificate(Front::Amqp, &peer, "alice")
            .await
            .unwrap()
            .name,
        "alice"
    );
    assert_eq!(
        f.auth
            .certificate(Front::Amqp, &peer, "mallory")
            .await
            .unwrap_err(),
        AuthError::InvalidCredentials("mallory".into())
    );
}

#[tokio::test]
async fn a_failing_address_is_slowed_and_others_are_not() {
    let f = fixture(&[user("app", "pw")]).await;
    let (bad, good) = (plaintext(7), plaintext(8));
    assert!(
        f.auth
            .password(Front::Kafka, &bad, "app", "nope")
            .await
            .is_err()
    );
    let now = Instant::now();
    let waits = |peer: &Peer| f.auth.inner.throttle.wait(peer.addr.ip(), now);
    assert!(waits(&bad) > Duration::ZERO && waits(&bad) <= throttle::FIRST_DELAY);
    assert_eq!(waits(&good), Duration::ZERO);
}

#[tokio::test]
async fn a_vhost_is_open_only_with_permissions_read_afresh_at_each_open() {
    use crate::permissions::{Access, Permissions, TopicVariables, VhostPermissions};
    let f = fixture(&[user("app", "pw")]).await;
    let variables = |vhost: &str| TopicVariables::new("app", vhost);
    let access = f
        .auth
        .vhost_access("app", "/", &variables("/"))
        .await
        .unwrap();
    assert_eq!(
        access.check(Access::Configure, access::Resource::Queue("any")),
        Ok(()),
        "vhosts = [\"/\"] grants full permissions"
    );
    assert_eq!(
        f.auth
            .vhost_access("app", "orders", &variables("orders"))
            .await
            .unwrap_err(),
        AuthError::VhostRefused {
            user: "app".into(),
            vhost: "orders".into()
        }
    );
    let grant = VhostPermissions {
        vhost: "orders".into(),
        user: "app".into(),
        permissions: Permissions {
            configure: "".into(),
            ..Permissions::full()
        },
    };
    f.auth.store().set_permissions(&grant).await.unwrap();
    let orders = f
        .auth
        .vhost_access("app", "orders", &variables("orders"))
        .await
        .unwrap();
    assert!(
        orders
            .check(Access::Configure, access::Resource::Queue("q"))
            .is_err()
    );
    assert_eq!(
        orders.check(Access::Read, access::Resource::Queue("q")),
        Ok(())
    );
}

#[test]
fn every_failure_reason_is_exported_at_start() {
    let errors = [
        AuthError::InvalidCredentials(String::new()),
        AuthError::LoopbackOnly(String::new()),
        AuthError::TlsRequired(String::new()),
        AuthError::VhostRefused {
            user: String::new(),
            vhost: String::new(),
        },
        AuthError::Scram(ScramError::NonceMismatch),
        AuthError::Scram(ScramError::Malformed {
            message: "client-first",
            why: "",
        }),
        AuthError::Mechanism(String::new()),
        AuthError::Malformed(String::new()),
        AuthError::Certificate(String::new()),
        AuthError::Store,
    ];
    let given: std::collections::BTreeSet<&str> = errors.iter().map(AuthError::reason).collect();
    let exported: std::collections::BTreeSet<&str> = AuthError::REASONS.into_iter().collect();
    assert_eq!(given, exported);
}
