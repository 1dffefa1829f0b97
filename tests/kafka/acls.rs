//! Kafka ACLs with real clients: kafka-python's `KafkaAdminClient` creates, describes and
//! deletes ACLs as a super user (SCRAM); librdkafka, as a restricted user (PLAIN), is held
//! to them — produce refused then allowed, a prefixed ACL, deny over allow, Metadata
//! hiding what it may not describe, a group and a transactional id refused, CreateTopics
//! refused — and the ACLs survive a restart and hold on another instance over the store. `kafka.allow_everyone_if_no_acl_found` is off
//! here, as production runs.

use crate::common::clients::python_steps;
use crate::common::fronts::{KafkaServer, OTHER_USER, SCRAM_USER};
use crate::common::kafka::{PATIENCE, client_config, consumer, producer};
use crate::common::wait;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use std::collections::BTreeSet;

/// The super user (`kafka.super_users`), logging in with SCRAM-SHA-256.
fn admin_login() -> Vec<(&'static str, &'static str)> {
    vec![
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanisms", "SCRAM-SHA-256"),
        ("sasl.username", SCRAM_USER.0),
        ("sasl.password", SCRAM_USER.1),
    ]
}

/// The restricted user, logging in with PLAIN.
fn user_login() -> Vec<(&'static str, &'static str)> {
    vec![
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanisms", "PLAIN"),
        ("sasl.username", OTHER_USER.0),
        ("sasl.password", OTHER_USER.1),
    ]
}

/// A front requiring SASL, with the SCRAM user as super user and no access where no ACL
/// allows it.
pub(crate) async fn guarded() -> KafkaServer {
    KafkaServer::start_with(|c| {
        c.require_sasl = true;
        c.super_users = vec![format!("User:{}", SCRAM_USER.0)];
        c.allow_everyone_if_no_acl_found = false;
    })
    .await
}

/// Runs the kafka-python admin `steps` (tests/python/kafka_acls.py) as `login`
/// (user, password, mechanism); its output lines.
async fn admin_steps(broker: &KafkaServer, login: (&str, &str, &str), steps: &str) -> Vec<String> {
    python_steps("kafka_acls.py", &broker.bootstrap(), login, steps).await
}

/// The super user's admin steps.
async fn as_admin(broker: &KafkaServer, steps: &str) -> Vec<String> {
    admin_steps(broker, (SCRAM_USER.0, SCRAM_USER.1, "SCRAM-SHA-256"), steps).await
}

/// Creates `topics` (one partition each) as the super user.
async fn create_topics(broker: &KafkaServer, topics: &[&str]) {
    let admin: AdminClient<DefaultClientContext> =
        client_config(&broker.bootstrap(), &admin_login())
            .create()
            .unwrap();
    let new: Vec<NewTopic> = topics
        .iter()
        .map(|t| NewTopic::new(t, 1, TopicReplication::Fixed(1)))
        .collect();
    for result in admin.create_topics(&new, &options()).await.unwrap() {
        result.expect("the super user creates topics");
    }
}

fn options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Timeout::After(PATIENCE)))
}

/// What producing one record to `topic` as the restricted user comes to.
async fn produce_as_user(bootstrap: &str, topic: &str) -> Result<(), RDKafkaErrorCode> {
    let p: FutureProducer = producer(bootstrap, &user_login());
    let sent = p
        .send(
            FutureRecord::<(), _>::to(topic).payload("v"),
            Timeout::After(PATIENCE),
        )
        .await;
    match sent {
        Ok(_) => Ok(()),
        Err((KafkaError::MessageProduction(code), _)) => Err(code),
        Err((other, _)) => panic!("producing to {topic}: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acls_managed_with_kafka_python_hold_rdkafka_to_them_across_a_restart() {
    let mut broker = guarded().await;
    create_topics(
        &broker,
        &["acl-orders", "acl-pre-1", "acl-pre-denied", "acl-hidden"],
    )
    .await;
    let me = format!("User:{}", OTHER_USER.0);

    // No ACL: refused.
    assert_eq!(
        produce_as_user(&broker.bootstrap(), "acl-orders").await,
        Err(RDKafkaErrorCode::TopicAuthorizationFailed)
    );

    // A literal ACL, a prefixed ACL and a deny under the prefix.
    let created = as_admin(
        &broker,
        &format!(
            "create TOPIC LITERAL acl-orders {me} * WRITE ALLOW\n\
             create TOPIC PREFIXED acl-pre- {me} * WRITE ALLOW\n\
             create TOPIC LITERAL acl-pre-denied {me} * WRITE DENY\n\
             create CLUSTER LITERAL other-cluster {me} * ALTER ALLOW\n\
             describe ANY ANY - - - ANY ANY\n\
             describe TOPIC MATCH acl-pre-denied - - ANY ANY\n"
        ),
    )
    .await;
    assert_eq!(
        created,
        [
            "created",
            "created",
            "created",
            "failed InvalidRequestError",
            "acls 3",
            &format!("TOPIC LITERAL acl-orders {me} * WRITE ALLOW"),
            &format!("TOPIC LITERAL acl-pre-denied {me} * WRITE DENY"),
            &format!("TOPIC PREFIXED acl-pre- {me} * WRITE ALLOW"),
            "acls 2",
            &format!("TOPIC LITERAL acl-pre-denied {me} * WRITE DENY"),
            &format!("TOPIC PREFIXED acl-pre- {me} * WRITE ALLOW"),
        ]
    );
    assert_eq!(
        produce_as_user(&broker.bootstrap(), "acl-orders").await,
        Ok(())
    );
    assert_eq!(
        produce_as_user(&broker.bootstrap(), "acl-pre-1").await,
        Ok(())
    );
    assert_eq!(
        produce_as_user(&broker.bootstrap(), "acl-pre-denied").await,
        Err(RDKafkaErrorCode::TopicAuthorizationFailed),
        "deny wins over the prefixed allow"
    );

    // Metadata shows only what Write (which implies Describe) covers.
    let c = consumer(&broker.bootstrap(), "acl-meta", &user_login());
    let visible: BTreeSet<String> = tokio::task::spawn_blocking(move || {
        let m = c.fetch_metadata(None, Timeout::After(PATIENCE)).unwrap();
        m.topics().iter().map(|t| t.name().to_owned()).collect()
    })
    .await
    .unwrap();
    assert_eq!(
        visible,
        BTreeSet::from([
            "acl-orders".into(),
            "acl-pre-1".into(),
            "acl-pre-denied".into()
        ])
    );

    // The restricted user may neither manage nor read ACLs.
    assert_eq!(
        admin_steps(
            &broker,
            (OTHER_USER.0, OTHER_USER.1, "PLAIN"),
            &format!(
                "create TOPIC LITERAL acl-hidden {me} * ALL ALLOW\n\
                 describe ANY ANY - - - ANY ANY\n\
                 delete ANY ANY - - - ANY ANY\n"
            ),
        )
        .await,
        [
            "failed ClusterAuthorizationFailedError",
            "error ClusterAuthorizationFailedError",
            "error ClusterAuthorizationFailedError",
        ]
    );

    // Deleting the prefixed ACL takes its topics away again.
    assert_eq!(
        as_admin(&broker, "delete TOPIC PREFIXED acl-pre- - - ANY ANY\n").await,
        [
            "deleted 1",
            &format!("TOPIC PREFIXED acl-pre- {me} * WRITE ALLOW")
        ]
    );
    assert_eq!(
        produce_as_user(&broker.bootstrap(), "acl-pre-1").await,
        Err(RDKafkaErrorCode::TopicAuthorizationFailed)
    );

    // The ACLs are in the store: a restarted front enforces the same.
    broker.restart().await;
    assert_eq!(
        as_admin(&broker, "describe TOPIC ANY - - - ANY ANY\n").await,
        [
            "acls 2",
            &format!("TOPIC LITERAL acl-orders {me} * WRITE ALLOW"),
            &format!("TOPIC LITERAL acl-pre-denied {me} * WRITE DENY"),
        ]
    );
    assert_eq!(
        produce_as_user(&broker.bootstrap(), "acl-orders").await,
        Ok(())
    );
    assert_eq!(
        produce_as_user(&broker.bootstrap(), "acl-hidden").await,
        Err(RDKafkaErrorCode::TopicAuthorizationFailed)
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_groups_transactions_and_topic_creation_need_their_acls() {
    let broker = guarded().await;
    create_topics(&broker, &["acl-read"]).await;
    let me = format!("User:{}", OTHER_USER.0);
    assert_eq!(
        as_admin(
            &broker,
            &format!("create TOPIC LITERAL acl-read {me} * READ ALLOW\n"),
        )
        .await,
        ["created"]
    );

    // Read on the topic but nothing on the group.
    let c = consumer(&broker.bootstrap(), "acl-group", &user_login());
    c.subscribe(&["acl-read"]).unwrap();
    let refused = tokio::time::timeout(PATIENCE, c.recv())
        .await
        .expect("an answer within the patience");
    match refused {
        Err(KafkaError::MessageConsumption(code)) => {
            assert_eq!(code, RDKafkaErrorCode::GroupAuthorizationFailed);
        }
        other => panic!("expected a group authorization error, got {other:?}"),
    }
    drop(c);

    // A transactional id without Write on it.
    let bootstrap = broker.bootstrap();
    let init = tokio::task::spawn_blocking(move || {
        let mut settings = user_login();
        settings.push(("transactional.id", "acl-txn"));
        let p: FutureProducer = producer(&bootstrap, &settings);
        p.init_transactions(Timeout::After(PATIENCE))
    })
    .await
    .unwrap();
    match init {
        Err(KafkaError::Transaction(e)) => {
            assert_eq!(
                e.code(),
                RDKafkaErrorCode::TransactionalIdAuthorizationFailed
            );
        }
        other => panic!("expected a transactional id authorization error, got {other:?}"),
    }

    // CreateTopics without Create on the cluster or the topic.
    let admin: AdminClient<DefaultClientContext> =
        client_config(&broker.bootstrap(), &user_login())
            .create()
            .unwrap();
    let created = admin
        .create_topics(
            &[NewTopic::new("acl-new", 1, TopicReplication::Fixed(1))],
            &options(),
        )
        .await
        .unwrap();
    assert_eq!(
        created,
        vec![Err((
            "acl-new".to_owned(),
            RDKafkaErrorCode::TopicAuthorizationFailed
        ))]
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acl_created_through_one_instance_holds_on_another() {
    let broker = guarded().await;
    let other = broker.peer_with(|c| c.node_id = 1).await;
    create_topics(&broker, &["acl-shared"]).await;
    // The other instance answers the producer's Metadata: refused until its copy of the
    // ACLs, reloaded when its watch on the store's ACL counter fires, has the new one.
    assert_eq!(
        produce_as_user(&other.bootstrap(), "acl-shared").await,
        Err(RDKafkaErrorCode::TopicAuthorizationFailed)
    );
    let me = format!("User:{}", OTHER_USER.0);
    assert_eq!(
        as_admin(
            &broker,
            &format!("create TOPIC LITERAL acl-shared {me} * WRITE ALLOW\n"),
        )
        .await,
        ["created"]
    );
    let bootstrap = other.bootstrap();
    wait::until(
        "the other instance allows the write",
        PATIENCE,
        async || produce_as_user(&bootstrap, "acl-shared").await.ok(),
    )
    .await;
    other.stop().await;
    broker.stop().await;
}
