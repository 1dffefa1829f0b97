//! SASL with librdkafka on the plaintext listener (`security.protocol=SASL_PLAINTEXT`):
//! SCRAM-SHA-256 and SCRAM-SHA-512 logins that produce and consume, and refusals — a wrong
//! password, an unknown user, a user who requires TLS — that librdkafka reports as
//! authentication failures.

use crate::common::fronts::{KafkaServer, SCRAM_USER, TLS_USER};
use crate::common::kafka::{PATIENCE, client_config, consumer, producer};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;
use rdkafka::{ClientContext, Message};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// librdkafka settings logging in as `user` with `mechanism`.
pub(crate) fn sasl<'a>(
    mechanism: &'a str,
    user: &'a str,
    password: &'a str,
) -> Vec<(&'a str, &'a str)> {
    vec![
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanisms", mechanism),
        ("sasl.username", user),
        ("sasl.password", password),
    ]
}

/// Keeps the authentication errors librdkafka reports, with their text.
#[derive(Default)]
struct Errors(Mutex<Vec<String>>);

impl ClientContext for Errors {
    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::Authentication) {
            self.0.lock().unwrap().push(reason.to_owned());
        }
    }
}

impl ConsumerContext for Errors {}

/// The first authentication error a client with `settings` reports (librdkafka keeps
/// reconnecting after one, so a metadata request would only time out).
pub(crate) async fn authentication_error(bootstrap: &str, settings: &[(&str, &str)]) -> String {
    let config = client_config(bootstrap, settings);
    tokio::task::spawn_blocking(move || {
        let client: BaseConsumer<Errors> = config.create_with_context(Errors::default()).unwrap();
        let started = Instant::now();
        while started.elapsed() < PATIENCE {
            let _ = client.fetch_metadata(None, Timeout::After(Duration::from_millis(200)));
            let _ = client.poll(Duration::from_millis(100));
            if let Some(reason) = client.context().0.lock().unwrap().first() {
                return reason.clone();
            }
        }
        panic!("no authentication error within {PATIENCE:?}");
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_produces_and_consumes_with_scram_sha_256_and_512() {
    let broker = KafkaServer::start_with(|c| c.require_sasl = true).await;
    let b = broker.bootstrap();
    let (user, password) = SCRAM_USER;
    for (mechanism, topic) in [
        ("SCRAM-SHA-256", "scram-256"),
        ("SCRAM-SHA-512", "scram-512"),
    ] {
        produces_and_consumes(&b, &sasl(mechanism, user, password), topic).await;
    }
    broker.stop().await;
}

/// Produces three records to `topic` with `settings` (a login), then reads them back with
/// the same settings, in a group named after the topic.
pub(crate) async fn produces_and_consumes(bootstrap: &str, settings: &[(&str, &str)], topic: &str) {
    let p = producer(bootstrap, settings);
    let sent: Vec<String> = (0..3).map(|i| format!("{topic}-{i}")).collect();
    for value in &sent {
        p.send(
            FutureRecord::<(), _>::to(topic).payload(value),
            Timeout::After(PATIENCE),
        )
        .await
        .expect("acknowledged");
    }
    let c = consumer(bootstrap, topic, settings);
    c.subscribe(&[topic]).unwrap();
    let mut read = Vec::new();
    while read.len() < sent.len() {
        let m = tokio::time::timeout(PATIENCE, c.recv())
            .await
            .expect("a record within the patience")
            .expect("a record");
        read.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap());
    }
    assert_eq!(read, sent);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_with_a_wrong_password_or_an_unknown_user_is_refused() {
    let broker = KafkaServer::start_with(|c| c.require_sasl = true).await;
    let b = broker.bootstrap();
    for (mechanism, user, password) in [
        ("SCRAM-SHA-256", SCRAM_USER.0, "wrong"),
        ("SCRAM-SHA-512", "nobody", SCRAM_USER.1),
        ("PLAIN", SCRAM_USER.0, "wrong"),
    ] {
        let reason = authentication_error(&b, &sasl(mechanism, user, password)).await;
        assert!(
            reason.contains(&format!(
                "login refused for user '{user}': invalid credentials"
            )),
            "{mechanism} as {user}: {reason}"
        );
    }
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rdkafka_is_refused_for_a_user_requiring_tls_on_plaintext() {
    let broker = KafkaServer::start_with(|c| c.require_sasl = true).await;
    let (user, password) = TLS_USER;
    let reason = authentication_error(&broker.bootstrap(), &sasl("PLAIN", user, password)).await;
    assert!(
        reason.contains("user 'tls-user' must connect over TLS (its require_tls is set)"),
        "{reason}"
    );
    broker.stop().await;
}
