//! RabbitMQ's permissions on the AMQP front: a pika script run as a user with restricted
//! permissions and topic permissions against Ferry and against the test suite's RabbitMQ
//! node (same user, same grants), whose every reply code and text must agree; and lapin on
//! the hot paths — a refused publish closes its channel with 403, permission changes reach
//! open connections, a deleted user's connection is closed, `{username}` in a topic
//! permission.

use super::clients::{run_client, succeeded};
use crate::common::amqp::{WAIT, connect, reply_code, reply_text};
use crate::common::daemon::Setup;
use crate::common::fronts::{AmqpServer, PERM_USER};
use crate::common::rabbitmq::RabbitNode;
use crate::common::wait;
use ferry_auth::permissions::{Permissions, VhostPermissions};
use futures::StreamExt;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::{BasicProperties, Channel};
use std::path::Path;
use std::process::Command;

/// The restricted user's permissions on `/` (as the survey script's header says).
const CONFIGURE: &str = "^perm-ok-";
const WRITE: &str = r"^(perm-ok-|perm-w-|amq\.default$|amq\.topic$|amq\.direct$)";
const READ: &str = r"^(perm-ok-|perm-r-|amq\.topic$|amq\.direct$)";
const TOPIC_WRITE: &str = r"^{username}\.";
const TOPIC_READ: &str = r"^({vhost}\.|{client_id}$)";
const PASSWORD: &str = "perm-pass";

/// A TOML basic string of `text`.
fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The outcome of every case of `tests/python/amqp_permissions_survey.py`.
fn permissions_survey(
    amqp: &str,
    user: &str,
    suffix: &str,
    other_vhost: &str,
) -> serde_json::Value {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/amqp_permissions_survey.py");
    let url = |who: &str, vhost: &str| format!("amqp://{who}@{amqp}/{vhost}");
    let as_user = format!("{user}:{PASSWORD}");
    let out = run_client(
        Command::new("python3")
            .arg(script)
            .arg(url(&as_user, "%2f"))
            .arg(url("guest:guest", "%2f"))
            .arg(suffix)
            .arg(url(&as_user, other_vhost))
            .arg(url(&as_user, &format!("perm-missing-{suffix}"))),
    );
    serde_json::from_str(succeeded(&out).trim()).unwrap()
}

#[test]
fn every_permission_check_answers_as_rabbitmq_does() {
    let suffix = format!("{:08x}", fastrand::u32(..));
    let user = format!("perm-user-{suffix}");
    let other_vhost = format!("perm-other-{suffix}");

    let node = RabbitNode::get();
    let ctl = |args: &[&str]| {
        let out = node.ctl(args);
        assert!(
            out.status.success(),
            "rabbitmqctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ctl(&["add_user", &user, PASSWORD]);
    ctl(&["set_permissions", "-p", "/", &user, CONFIGURE, WRITE, READ]);
    ctl(&[
        "set_topic_permissions",
        "-p",
        "/",
        &user,
        "amq.topic",
        TOPIC_WRITE,
        TOPIC_READ,
    ]);
    ctl(&["add_vhost", &other_vhost]);
    let rabbitmq_amqp = node
        .uri()
        .split_once('@')
        .and_then(|(_, rest)| rest.split('/').next())
        .unwrap()
        .to_owned();
    let rabbitmq = permissions_survey(&rabbitmq_amqp, &user, &suffix, &other_vhost);
    ctl(&["delete_user", &user]);
    ctl(&["delete_vhost", &other_vhost]);

    let dir = tempfile::tempdir().unwrap();
    let hash = ferry_auth::password::PasswordHash::new(PASSWORD).to_string();
    let config = format!(
        r#"
[amqp]
vhosts = ["/", "{other_vhost}"]

[[users]]
name = "guest"
password_hash = "{guest}"
loopback_only = true

[[users]]
name = "{user}"
password_hash = "{hash}"
permissions = [{{ vhost = "/", configure = {configure}, write = {write}, read = {read} }}]
topic_permissions = [{{ vhost = "/", exchange = "amq.topic", write = {topic_write}, read = {topic_read} }}]
"#,
        guest = ferry_auth::GUEST_PASSWORD_HASH,
        configure = toml_string(CONFIGURE),
        write = toml_string(WRITE),
        read = toml_string(READ),
        topic_write = toml_string(TOPIC_WRITE),
        topic_read = toml_string(TOPIC_READ),
    );
    let daemon = Setup::config(dir.path(), &config).start();
    let ferry = permissions_survey(
        &format!("127.0.0.1:{}", daemon.ports().amqp),
        &user,
        &suffix,
        &other_vhost,
    );

    // The refusals are there (so the comparison below compares something)…
    let refused = |case: &str| ferry[case][0].as_u64().unwrap_or(0);
    assert_eq!(refused("publish_with_a_refused_topic"), 403);
    assert_eq!(refused("declare_a_refused_queue"), 403);
    assert_eq!(refused("open_a_vhost_without_permissions"), 530);
    assert_eq!(refused("publish_with_an_allowed_topic"), 0);
    // …and every case, reply code and text, is as the RabbitMQ node answers it.
    assert_eq!(
        ferry, rabbitmq,
        "Ferry:\n{ferry:#}\nRabbitMQ:\n{rabbitmq:#}"
    );
}

/// Publishes one message with confirms on `ch`: `Ok` once acknowledged.
async fn publish(ch: &Channel, exchange: &str, routing_key: &str) -> lapin::Result<()> {
    let confirm = ch
        .basic_publish(
            exchange.into(),
            routing_key.into(),
            BasicPublishOptions::default(),
            b"m",
            BasicProperties::default(),
        )
        .await?;
    tokio::time::timeout(WAIT, confirm)
        .await
        .expect("the publish was answered in time")
        .map(|_| ())
}

async fn confirming_channel(conn: &lapin::Connection) -> Channel {
    let ch = conn.create_channel().await.unwrap();
    ch.confirm_select(ConfirmSelectOptions::default())
        .await
        .unwrap();
    ch
}

fn perm_user_uri(server: &AmqpServer) -> String {
    format!("amqp://{}:{}@{}/%2f", PERM_USER.0, PERM_USER.1, server.addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_publish_closes_its_channel_with_403_and_the_connection_lives_on() {
    let server = AmqpServer::start().await;
    let conn = connect(&perm_user_uri(&server)).await;
    let ch = confirming_channel(&conn).await;
    let e = publish(&ch, "amq.direct", "k").await.unwrap_err();
    assert_eq!(reply_code(&e), Some(403), "{e}");
    assert_eq!(
        reply_text(&e),
        "ACCESS_REFUSED - access to exchange 'amq.direct' in vhost '/' refused for user 'perm-user'"
    );
    assert!(!ch.status().connected(), "the channel is closed");
    let again = confirming_channel(&conn).await;
    publish(&again, "amq.topic", "perm-user.ok")
        .await
        .expect("another channel of the same connection publishes");
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_permissions_replace_username_in_the_pattern() {
    let server = AmqpServer::start().await;
    let conn = connect(&perm_user_uri(&server)).await;
    let ch = confirming_channel(&conn).await;
    for _ in 0..3 {
        publish(&ch, "amq.topic", "perm-user.orders")
            .await
            .expect("the user's own prefix is allowed (and stays so from the channel's cache)");
    }
    let e = publish(&ch, "amq.topic", "guest.orders").await.unwrap_err();
    assert_eq!(reply_code(&e), Some(403), "{e}");
    assert_eq!(
        reply_text(&e),
        "ACCESS_REFUSED - access to topic 'guest.orders' in exchange 'amq.topic' in vhost '/' refused for user 'perm-user'"
    );
    server.stop().await;
}

/// Publishes to amq.direct on a new channel of `conn` until the answer is `wanted`
/// (`None`: allowed, `Some(code)`: refused with it), as a change of permissions reaches an
/// open connection through a store watch; returns the refusal's text.
async fn publish_until(conn: &lapin::Connection, wanted: Option<u16>) -> String {
    wait::until(
        "the open connection following the change",
        WAIT,
        async || {
            let outcome = publish(&confirming_channel(conn).await, "amq.direct", "k").await;
            match (outcome, wanted) {
                (Ok(()), None) => Some(String::new()),
                (Err(e), Some(code)) if reply_code(&e) == Some(code) => Some(reply_text(&e)),
                _ => None,
            }
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permission_changes_reach_open_connections_and_a_deleted_users_connection_closes() {
    let server = AmqpServer::start().await;
    let early = connect(&perm_user_uri(&server)).await;
    let e = publish(&confirming_channel(&early).await, "amq.direct", "k")
        .await
        .unwrap_err();
    assert_eq!(reply_code(&e), Some(403), "{e}");
    let full = VhostPermissions {
        vhost: "/".into(),
        user: PERM_USER.0.into(),
        permissions: Permissions::full(),
    };
    server.users().set_permissions(&full).await.unwrap();
    publish_until(&early, None).await;

    assert!(
        server
            .users()
            .clear_permissions("/", PERM_USER.0)
            .await
            .unwrap()
    );
    let e = lapin::Connection::connect(&perm_user_uri(&server), Default::default())
        .await
        .unwrap_err();
    assert_eq!(reply_code(&e), Some(530), "{e}");
    assert_eq!(
        reply_text(&e),
        "NOT_ALLOWED - access to vhost '/' refused for user 'perm-user'"
    );
    // The open connection stays, refused everything, as RabbitMQ's does.
    assert_eq!(
        publish_until(&early, Some(403)).await,
        "ACCESS_REFUSED - access to exchange 'amq.direct' in vhost '/' refused for user 'perm-user'"
    );

    let mut events = early.events_listener();
    assert!(server.users().delete(PERM_USER.0).await.unwrap());
    let closed = tokio::time::timeout(WAIT, async {
        while let Some(event) = events.next().await {
            // The channel refusals above were events too; the close is the connection's.
            if let lapin::Event::Error(e) = event
                && reply_code(&e) != Some(403)
            {
                return Some((reply_code(&e), reply_text(&e)));
            }
        }
        None
    })
    .await
    .expect("the deleted user's connection was not closed");
    assert_eq!(
        closed,
        Some((
            Some(320),
            "CONNECTION_FORCED - user 'perm-user' is deleted".to_owned()
        ))
    );
    server.stop().await;
}
