//! The user store on every engine: users with tags listed, replaced and deleted with their
//! grants; permissions and topic permissions set (validated), cleared and listed by
//! scope; seeding from `[[users]]` authoritative for the users it lists; version-1 user
//! records upgraded.

use crate::common::store::TestStore;
use ferry_auth::User;
use ferry_auth::password::PasswordHash;
use ferry_auth::permissions::{Permissions, TopicPermission, VhostPermissions};
use ferry_auth::store::{Scope, SeedUser, UserStore, UserStoreError};
use ferry_auth::{PermissionConfig, TopicPermissionConfig, UserConfig};
use ferry_test_support::for_each_engine;

for_each_engine!(
    users_are_listed_replaced_and_deleted_with_their_grants,
    permissions_are_validated_set_cleared_and_listed_by_scope,
    topic_permissions_are_kept_per_exchange_and_cleared_one_or_all,
    seeding_replaces_the_grants_of_listed_users_and_keeps_the_others,
    a_version_1_user_is_upgraded_to_full_permissions_on_its_vhosts,
);

fn store_of(store: &TestStore) -> UserStore {
    UserStore::new(
        store.db.clone(),
        std::str::from_utf8(&store.prefix).unwrap(),
    )
}

fn config(name: &str) -> UserConfig {
    UserConfig {
        name: name.into(),
        password_hash: Some(PasswordHash::new("pw").to_string()),
        ..UserConfig::default()
    }
}

fn user(name: &str, tags: &[&str]) -> User {
    User::from_config(0, &config(name))
        .unwrap()
        .with_tags(tags.iter().map(|t| t.to_string()))
}

fn grant(vhost: &str, user: &str, configure: &str) -> VhostPermissions {
    VhostPermissions {
        vhost: vhost.into(),
        user: user.into(),
        permissions: Permissions {
            configure: configure.into(),
            ..Permissions::full()
        },
    }
}

fn topic(vhost: &str, user: &str, exchange: &str, write: &str) -> TopicPermission {
    TopicPermission {
        vhost: vhost.into(),
        user: user.into(),
        exchange: exchange.into(),
        write: write.into(),
        read: ".*".into(),
    }
}

async fn users_are_listed_replaced_and_deleted_with_their_grants(store: TestStore) {
    let users = store_of(&store);
    users.seed(&[]).await.unwrap();
    users
        .put(&user("bob", &["monitoring", "administrator", "monitoring"]))
        .await
        .unwrap();
    users.put(&user("alice", &[])).await.unwrap();
    let listed = users.list().await.unwrap();
    let names: Vec<&str> = listed.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["alice", "bob"]);
    assert_eq!(listed[1].tags, ["administrator", "monitoring"]);
    assert!(listed[1].verify_password("pw"));

    users
        .set_permissions(&grant("/", "bob", ".*"))
        .await
        .unwrap();
    users
        .set_permissions(&grant("other", "bob", "^b"))
        .await
        .unwrap();
    users
        .set_permissions(&grant("/", "alice", "^a"))
        .await
        .unwrap();
    users
        .set_topic_permission(&topic("/", "bob", "amq.topic", "^bob\\."))
        .await
        .unwrap();
    users.put(&user("bob", &["management"])).await.unwrap();
    assert_eq!(
        users.get("bob").await.unwrap().unwrap().tags,
        ["management"],
        "a put replaces the record"
    );
    assert_eq!(
        users
            .list_permissions(Scope::User("bob"))
            .await
            .unwrap()
            .len(),
        2,
        "a put keeps the user's permissions"
    );

    assert!(users.delete("bob").await.unwrap());
    assert!(!users.delete("bob").await.unwrap(), "already gone");
    assert_eq!(users.get("bob").await.unwrap(), None);
    assert_eq!(
        users.list_permissions(Scope::All).await.unwrap(),
        [grant("/", "alice", "^a")],
        "bob's permissions went with him, alice's stayed"
    );
    assert_eq!(users.list_topic_permissions(Scope::All).await.unwrap(), []);
}

async fn permissions_are_validated_set_cleared_and_listed_by_scope(store: TestStore) {
    let users = store_of(&store);
    users.put(&user("alice", &[])).await.unwrap();
    users.put(&user("bob", &[])).await.unwrap();
    for g in [
        grant("/", "bob", "^b"),
        grant("/", "alice", "^a"),
        grant("orders", "alice", ""),
    ] {
        users.set_permissions(&g).await.unwrap();
    }
    assert_eq!(
        users.permissions("orders", "alice").await.unwrap(),
        Some(grant("orders", "alice", "").permissions)
    );
    assert_eq!(users.permissions("orders", "bob").await.unwrap(), None);
    assert_eq!(
        users.list_permissions(Scope::All).await.unwrap(),
        [
            grant("/", "alice", "^a"),
            grant("/", "bob", "^b"),
            grant("orders", "alice", "")
        ]
    );
    assert_eq!(
        users.list_permissions(Scope::Vhost("/")).await.unwrap(),
        [grant("/", "alice", "^a"), grant("/", "bob", "^b")]
    );
    assert_eq!(
        users.list_permissions(Scope::User("alice")).await.unwrap(),
        [grant("/", "alice", "^a"), grant("orders", "alice", "")]
    );

    let bad = VhostPermissions {
        permissions: Permissions {
            read: "(".into(),
            ..Permissions::full()
        },
        ..grant("/", "alice", ".*")
    };
    let error = users.set_permissions(&bad).await.unwrap_err();
    assert!(
        matches!(&error, UserStoreError::BadPattern(p) if p.field == "read"),
        "{error}"
    );
    assert!(
        matches!(
            users.set_permissions(&grant("/", "ghost", ".*")).await,
            Err(UserStoreError::NoSuchUser(name)) if name == "ghost"
        ),
        "permissions need an existing user"
    );
    assert_eq!(
        users.permissions("/", "alice").await.unwrap(),
        Some(grant("/", "alice", "^a").permissions),
        "a refused set changes nothing"
    );

    assert!(users.clear_permissions("/", "alice").await.unwrap());
    assert!(!users.clear_permissions("/", "alice").await.unwrap());
    assert_eq!(
        users.list_permissions(Scope::User("alice")).await.unwrap(),
        [grant("orders", "alice", "")]
    );
}

async fn topic_permissions_are_kept_per_exchange_and_cleared_one_or_all(store: TestStore) {
    let users = store_of(&store);
    users.put(&user("alice", &[])).await.unwrap();
    users.put(&user("bob", &[])).await.unwrap();
    for t in [
        topic("/", "alice", "amq.topic", "^{username}\\."),
        topic("/", "alice", "events", "^e"),
        topic("/", "bob", "amq.topic", "^b"),
        topic("other", "alice", "amq.topic", ".*"),
    ] {
        users.set_topic_permission(&t).await.unwrap();
    }
    users
        .set_topic_permission(&topic("/", "alice", "events", "^ev"))
        .await
        .unwrap();
    assert_eq!(
        users.topic_permissions("/", "alice").await.unwrap(),
        [
            topic("/", "alice", "amq.topic", "^{username}\\."),
            topic("/", "alice", "events", "^ev")
        ],
        "one per exchange, the last set wins"
    );
    assert_eq!(
        users
            .list_topic_permissions(Scope::Vhost("other"))
            .await
            .unwrap(),
        [topic("other", "alice", "amq.topic", ".*")]
    );
    assert_eq!(
        users
            .list_topic_permissions(Scope::User("bob"))
            .await
            .unwrap(),
        [topic("/", "bob", "amq.topic", "^b")]
    );
    assert_eq!(
        users
            .list_topic_permissions(Scope::All)
            .await
            .unwrap()
            .len(),
        4
    );
    let error = users
        .set_topic_permission(&topic("/", "alice", "x", "{username"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, UserStoreError::BadPattern(p) if p.field == "write"),
        "{error}"
    );
    assert!(matches!(
        users
            .set_topic_permission(&topic("/", "ghost", "amq.topic", ".*"))
            .await,
        Err(UserStoreError::NoSuchUser(_))
    ));

    assert!(
        users
            .clear_topic_permissions("/", "alice", Some("events"))
            .await
            .unwrap()
    );
    assert!(
        !users
            .clear_topic_permissions("/", "alice", Some("events"))
            .await
            .unwrap()
    );
    assert_eq!(
        users.topic_permissions("/", "alice").await.unwrap(),
        [topic("/", "alice", "amq.topic", "^{username}\\.")]
    );
    assert!(
        users
            .clear_topic_permissions("/", "bob", None)
            .await
            .unwrap()
    );
    assert_eq!(users.topic_permissions("/", "bob").await.unwrap(), []);
    assert_eq!(
        users
            .list_topic_permissions(Scope::All)
            .await
            .unwrap()
            .len(),
        2,
        "alice's on amq.topic in / and in other stay"
    );
}

async fn seeding_replaces_the_grants_of_listed_users_and_keeps_the_others(store: TestStore) {
    let users = store_of(&store);
    // What the store holds before the restart: alice (in the config) and bob (not).
    for name in ["alice", "bob"] {
        users.put(&user(name, &["administrator"])).await.unwrap();
        users
            .set_permissions(&grant("/", name, ".*"))
            .await
            .unwrap();
        users
            .set_permissions(&grant("old", name, ".*"))
            .await
            .unwrap();
        users
            .set_topic_permission(&topic("/", name, "amq.topic", ".*"))
            .await
            .unwrap();
    }
    let alice = UserConfig {
        tags: vec!["monitoring".into()],
        permissions: vec![PermissionConfig {
            vhost: "/".into(),
            configure: "^alice-".into(),
            write: ".*".into(),
            read: ".*".into(),
        }],
        vhosts: Some(vec!["orders".into()]),
        topic_permissions: vec![TopicPermissionConfig {
            vhost: "/".into(),
            exchange: "events".into(),
            write: "^{username}\\.".into(),
            read: ".*".into(),
        }],
        ..config("alice")
    };
    let key = users
        .seed(&[SeedUser::from_config(0, &alice).unwrap()])
        .await
        .unwrap();
    assert_eq!(key.len(), 32);

    assert_eq!(
        users.get("alice").await.unwrap().unwrap().tags,
        ["monitoring"]
    );
    assert_eq!(
        users.list_permissions(Scope::User("alice")).await.unwrap(),
        [
            grant("/", "alice", "^alice-"),
            VhostPermissions {
                vhost: "orders".into(),
                user: "alice".into(),
                permissions: Permissions::full()
            }
        ],
        "the config's, and none on 'old'"
    );
    assert_eq!(
        users
            .list_topic_permissions(Scope::User("alice"))
            .await
            .unwrap(),
        [topic("/", "alice", "events", "^{username}\\.")]
    );
    assert_eq!(
        users.get("bob").await.unwrap().unwrap().tags,
        ["administrator"]
    );
    assert_eq!(
        users.list_permissions(Scope::User("bob")).await.unwrap(),
        [grant("/", "bob", ".*"), grant("old", "bob", ".*")],
        "a user only in the store keeps everything"
    );
    assert_eq!(
        users
            .list_topic_permissions(Scope::User("bob"))
            .await
            .unwrap(),
        [topic("/", "bob", "amq.topic", ".*")]
    );
    assert_eq!(
        users.seed(&[]).await.unwrap(),
        key,
        "the fake salt key is written once"
    );
}

async fn a_version_1_user_is_upgraded_to_full_permissions_on_its_vhosts(store: TestStore) {
    let users = store_of(&store);
    let prefix = std::str::from_utf8(&store.prefix).unwrap().to_owned();
    let version_1 = foundationdb_tuple::pack(&(
        1_i64,
        Some(PasswordHash::new("pw").to_string()),
        None::<String>,
        None::<String>,
        vec!["/".to_owned(), "orders".to_owned()],
        false,
        false,
    ));
    let key = foundationdb_tuple::pack(&(prefix.as_str(), "auth", "users", "veteran"));
    store
        .db
        .run(|tx| {
            tx.set(&key, version_1.clone());
            async { Ok::<_, ferry_store::StoreError>(()) }
        })
        .await
        .unwrap();
    assert!(
        users
            .get("veteran")
            .await
            .unwrap()
            .unwrap()
            .verify_password("pw"),
        "a version-1 record is read"
    );
    users.put(&user("alice", &[])).await.unwrap();
    users
        .set_permissions(&grant("orders", "veteran", "^kept$"))
        .await
        .unwrap();

    users.seed(&[]).await.unwrap();
    assert_eq!(
        users
            .list_permissions(Scope::User("veteran"))
            .await
            .unwrap(),
        [
            grant("/", "veteran", ".*"),
            grant("orders", "veteran", "^kept$")
        ],
        "full permissions where it had none; existing ones stay"
    );
    let stored = store
        .db
        .run(|tx| {
            let key = key.clone();
            async move { tx.get(&key, true).await }
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        User::decode_stored("veteran", &stored)
            .unwrap()
            .version_1_vhosts,
        None,
        "rewritten as version 2"
    );
}
