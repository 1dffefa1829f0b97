//! SCRAM credentials managed over the Kafka protocol (KIP-554) by confluent-kafka's
//! AdminClient (`tests/python/kafka_scram_credentials.py`, librdkafka's
//! DescribeUserScramCredentials and AlterUserScramCredentials): a user created with
//! SCRAM-SHA-256 and -512 credentials logs in with each through librdkafka, produces and
//! consumes; describe shows mechanisms and iterations; a deleted credential's login is
//! refused while the other still works; and the admin client gets Kafka's error for each
//! refusal, including `CLUSTER_AUTHORIZATION_FAILED` without the cluster ACLs.

use super::acls::guarded;
use super::scram::{authentication_error, produces_and_consumes, sasl};
use crate::common::clients::python_steps;
use crate::common::fronts::{KafkaServer, OTHER_USER, SCRAM_USER};

/// Runs the admin `steps` (see the script) logged in as `login` (user, password,
/// mechanism); its output lines.
async fn admin_steps(broker: &KafkaServer, login: (&str, &str, &str), steps: &str) -> Vec<String> {
    python_steps(
        "kafka_scram_credentials.py",
        &broker.bootstrap(),
        login,
        steps,
    )
    .await
}

/// The SCRAM user's admin steps (a super user where ACLs are enforced).
async fn as_admin(broker: &KafkaServer, steps: &str) -> Vec<String> {
    admin_steps(broker, (SCRAM_USER.0, SCRAM_USER.1, "SCRAM-SHA-256"), steps).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_set_by_an_admin_client_log_in_until_deleted() {
    let broker = KafkaServer::start_with(|c| c.require_sasl = true).await;
    let b = broker.bootstrap();
    assert_eq!(
        as_admin(
            &broker,
            "alter upsert:carol:SCRAM_SHA_256:8192:pass-256 upsert:carol:SCRAM_SHA_512:4096:pass-512\n\
             describe carol\n"
        )
        .await,
        [
            "carol ok",
            "carol SCRAM_SHA_256:8192,SCRAM_SHA_512:4096"
        ]
    );
    produces_and_consumes(&b, &sasl("SCRAM-SHA-256", "carol", "pass-256"), "carol-256").await;
    produces_and_consumes(&b, &sasl("SCRAM-SHA-512", "carol", "pass-512"), "carol-512").await;
    let refused = "login refused for user 'carol': invalid credentials";
    let reason = authentication_error(&b, &sasl("SCRAM-SHA-256", "carol", "pass-512")).await;
    assert!(reason.contains(refused), "{reason}");

    assert_eq!(
        as_admin(
            &broker,
            "alter delete:carol:SCRAM_SHA_256\n\
             describe carol\n\
             describe\n"
        )
        .await,
        [
            "carol ok",
            "carol SCRAM_SHA_512:4096",
            "carol SCRAM_SHA_512:4096",
            "scram-user SCRAM_SHA_256:4096,SCRAM_SHA_512:4096",
        ]
    );
    let reason = authentication_error(&b, &sasl("SCRAM-SHA-256", "carol", "pass-256")).await;
    assert!(reason.contains(refused), "{reason}");
    produces_and_consumes(
        &b,
        &sasl("SCRAM-SHA-512", "carol", "pass-512"),
        "carol-512-after",
    )
    .await;
    // Replacing the credential takes the new password at the next login.
    assert_eq!(
        as_admin(&broker, "alter upsert:carol:SCRAM_SHA_512:4096:renewed\n").await,
        ["carol ok"]
    );
    let reason = authentication_error(&b, &sasl("SCRAM-SHA-512", "carol", "pass-512")).await;
    assert!(reason.contains(refused), "{reason}");
    produces_and_consumes(
        &b,
        &sasl("SCRAM-SHA-512", "carol", "renewed"),
        "carol-renewed",
    )
    .await;
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_client_gets_kafkas_errors_for_refused_alterations_and_descriptions() {
    let broker = guarded().await;
    assert_eq!(
        as_admin(
            &broker,
            "alter upsert:few:SCRAM_SHA_256:4095:pw upsert:many:SCRAM_SHA_512:16385:pw \
             delete:nobody:SCRAM_SHA_512 upsert:twice:SCRAM_SHA_256:4096:pw \
             delete:twice:SCRAM_SHA_256 upsert:fine:SCRAM_SHA_512:16384:pw\n\
             describe nobody fine few\n"
        )
        .await,
        [
            "few UNACCEPTABLE_CREDENTIAL",
            "fine ok",
            "many UNACCEPTABLE_CREDENTIAL",
            "nobody RESOURCE_NOT_FOUND",
            "twice DUPLICATE_RESOURCE",
            "few RESOURCE_NOT_FOUND",
            "fine SCRAM_SHA_512:16384",
            "nobody RESOURCE_NOT_FOUND",
        ]
    );
    let other = (OTHER_USER.0, OTHER_USER.1, "PLAIN");
    assert_eq!(
        admin_steps(
            &broker,
            other,
            "alter upsert:other-user:SCRAM_SHA_256:4096:pw\n\
             describe fine\n"
        )
        .await,
        [
            "other-user CLUSTER_AUTHORIZATION_FAILED",
            "fine CLUSTER_AUTHORIZATION_FAILED",
        ]
    );
    broker.stop().await;
}
