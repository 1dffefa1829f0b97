//! The management API with clients Ferry did not write: `rabbitmqadmin` (downloaded from
//! the suite's private RabbitMQ node, not committed), Python's requests and pika, each
//! answer's shape compared with the node's (tests/python/management_api.py); and tags and
//! permissions answering each request as the node does (tests/python/management_tags.py);
//! Ferry's own Kafka endpoints read with Python after rdkafka produced, consumed and
//! committed, their records browsed and a Kafka connection closed
//! (tests/python/management_kafka.py); Ferry's routes added, paused, resumed and
//! removed at runtime, their dead letters listed, replayed and purged, with urllib and pika,
//! across a kill -9 (tests/python/management_routes.py); vhosts made and deleted at runtime
//! (tests/python/management_vhosts.py); changes to users and permissions reaching open
//! connections as on the node (tests/python/amqp_user_changes.py); and messages up to
//! `amqp.max_message_size` published through the API whole, a larger one refused naming
//! the limit (a plain HTTP post); the node endpoints monitoring tools poll (`/api/nodes`
//! and the rest) compared with the node's, their figures with /proc, and both resource
//! alarms raised (tests/python/management_nodes.py).

use crate::common::clients::{python_script, run};
use crate::common::daemon::{Daemon, Setup};
use crate::common::kafka::{PATIENCE, client_config, consumer, producer};
use crate::common::rabbitmq::{RabbitNode, unique};
use rdkafka::Message;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;
use serde_json::{Value, json};

#[tokio::test]
async fn rabbitmqadmin_and_python_manage_ferry_as_they_manage_rabbitmq() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped(dir.path()).start();
    let node = RabbitNode::get();
    let admin = dir.path().join("rabbitmqadmin");
    let url = format!("{}/cli/rabbitmqadmin", node.http_uri());
    run("curl", &["-sf", "-o", admin.to_str().unwrap(), &url], b"").await;
    let output = run(
        "python3",
        &[
            &python_script("management_api.py"),
            &ferry.management_uri(),
            &ferry.amqp_uri(),
            &node.http_uri(),
            node.uri(),
            admin.to_str().unwrap(),
        ],
        b"",
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "OK");
}

#[tokio::test]
async fn node_endpoints_answer_as_rabbitmqs_with_this_process_figures_and_alarms() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped(dir.path()).start();
    let alarmed_dir = tempfile::tempdir().unwrap();
    // A mark of 1 MiB and a free-disk limit of 1 EiB: both alarms at once.
    let alarmed = Setup::shipped(alarmed_dir.path())
        .env("FERRY__DAEMON__MAX_MEMORY_MB", "1")
        .env("FERRY__STORE__MIN_FREE_DISK_MB", "1099511627776")
        .start();
    let node = RabbitNode::get();
    let admin = dir.path().join("rabbitmqadmin");
    let url = format!("{}/cli/rabbitmqadmin", node.http_uri());
    run("curl", &["-sf", "-o", admin.to_str().unwrap(), &url], b"").await;
    let data = dir.path().join("data");
    let output = run(
        "python3",
        &[
            &python_script("management_nodes.py"),
            &ferry.management_uri(),
            &ferry.pid().to_string(),
            data.to_str().unwrap(),
            &node.http_uri(),
            admin.to_str().unwrap(),
            &unique("nodes"),
            &alarmed.management_uri(),
        ],
        b"",
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "OK");
}

#[tokio::test]
async fn tags_and_permissions_refuse_and_allow_api_requests_as_rabbitmq_does() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped(dir.path()).start();
    let node = RabbitNode::get();
    // Users and queues named apart from other tests on the shared node.
    let prefix = crate::common::rabbitmq::unique("tags");
    let output = run(
        "python3",
        &[
            &python_script("management_tags.py"),
            &ferry.management_uri(),
            &node.http_uri(),
            &prefix,
        ],
        b"",
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "OK",
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn kafka_topics_and_groups_show_offsets_and_lag_to_monitoring_users() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped(dir.path()).start();
    let (topic, group) = (unique("mgmt-topic"), unique("mgmt-group"));
    let admin: AdminClient<DefaultClientContext> = client_config(&ferry.kafka_bootstrap(), &[])
        .create()
        .unwrap();
    let created = admin
        .create_topics(
            &[NewTopic::new(&topic, 2, TopicReplication::Fixed(1)).set("retention.ms", "3600000")],
            &AdminOptions::new(),
        )
        .await
        .unwrap();
    assert!(created.iter().all(Result::is_ok), "{created:?}");
    let p = producer(&ferry.kafka_bootstrap(), &[]);
    for i in 0..5 {
        let value = i.to_string();
        p.send(
            FutureRecord::<(), _>::to(&topic)
                .partition(0)
                .payload(&value),
            Timeout::After(PATIENCE),
        )
        .await
        .expect("acknowledged");
    }
    let c = consumer(
        &ferry.kafka_bootstrap(),
        &group,
        &[("client.id", "lag-reader")],
    );
    c.subscribe(&[&topic]).unwrap();
    for expected in 0..2 {
        let m = tokio::time::timeout(PATIENCE, c.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!((m.partition(), m.offset()), (0, expected));
        if expected == 1 {
            c.commit_message(&m, CommitMode::Sync).unwrap();
        }
    }
    let output = run(
        "python3",
        &[
            &python_script("management_kafka.py"),
            &ferry.management_uri(),
            &ferry.kafka_bootstrap(),
            &topic,
            &group,
        ],
        b"",
    )
    .await;
    let answers: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&output.stderr));
    });
    let answer = |key: &str| answers[key].clone();

    let expected_topic = json!({
        "name": topic,
        "config": {"retention.ms": 3_600_000, "retention.bytes": -1},
        "partitions": [
            {"partition": 0, "log_start_offset": 0, "high_watermark": 5, "last_stable_offset": 5},
            {"partition": 1, "log_start_offset": 0, "high_watermark": 0, "last_stable_offset": 0},
        ],
    });
    // Every setting's effective value (as DescribeConfigs shows it), checked apart.
    let without_configs = |mut shown: Value| {
        let configs = shown.as_object_mut().unwrap().remove("configs").unwrap();
        assert_eq!(configs["retention.ms"], "3600000", "{configs}");
        assert_eq!(configs["cleanup.policy"], "delete", "{configs}");
        shown
    };
    for user in ["guest", "kmon"] {
        let one = answer(&format!("{user} topic"));
        assert_eq!(
            json!([one[0], without_configs(one[1].clone())]),
            json!([200, expected_topic])
        );
        let all = answer(&format!("{user} topics"));
        let all: Vec<Value> = all[1]
            .as_array()
            .unwrap()
            .iter()
            .cloned()
            .map(without_configs)
            .collect();
        assert_eq!(
            json!([answer(&format!("{user} topics"))[0], all]),
            json!([200, [expected_topic]])
        );
        let shown = answer(&format!("{user} group"));
        assert_eq!(shown[0], 200);
        let shown = shown[1].clone();
        assert_eq!(answer(&format!("{user} groups")), json!([200, [shown]]));
        assert_eq!(shown["group_id"], json!(group));
        assert_eq!(shown["state"], "Stable", "{shown}");
        assert_eq!(shown["protocol_type"], "consumer");
        assert_ne!(shown["protocol"], "");
        let members = shown["members"].as_array().unwrap();
        assert_eq!(members.len(), 1, "{shown}");
        assert_eq!(members[0]["client_id"], "lag-reader");
        assert_eq!(
            shown["offsets"],
            json!([{"topic": topic, "partition": 0, "committed_offset": 2, "high_watermark": 5, "lag": 3}])
        );
        assert_eq!(shown["total_lag"], 3);
        assert_eq!(answer(&format!("{user} missing_topic"))[0], 404);
        assert_eq!(answer(&format!("{user} missing_group"))[0], 404);

        // The record browser's look: two records from offset 1, and where to go on.
        let look = answer(&format!("{user} records"));
        assert_eq!(look[0], 200, "{look}");
        let text = |s: &str| json!({"base64": base64_of(s), "text": s});
        let record = |offset: i64| {
            let mut r = look[1]["records"][usize::try_from(offset - 1).unwrap()].clone();
            assert!(r["timestamp"].as_i64().unwrap() > 0, "{r}");
            r.as_object_mut().unwrap().remove("timestamp");
            r
        };
        assert_eq!(
            [record(1), record(2)],
            [1, 2].map(|o: i64| json!({"offset": o, "key": null, "headers": [], "value": text(&o.to_string())}))
        );
        let mut page = look[1].clone();
        page.as_object_mut().unwrap().remove("records");
        assert_eq!(
            page,
            json!({"topic": topic, "partition": 0, "log_start_offset": 0, "high_watermark": 5,
                   "last_stable_offset": 5, "from_offset": 1, "next_offset": 3})
        );
        let from_time = answer(&format!("{user} records_from_time"));
        assert_eq!(from_time[1]["records"][0]["offset"], 0, "{from_time}");
        assert_eq!(from_time[1]["records"].as_array().map(Vec::len), Some(1));
        let missing = answer(&format!("{user} records_missing_partition"));
        assert_eq!(
            missing,
            json!([400, {"error": "bad_request", "reason": format!("topic '{topic}' has no partition 2")}])
        );
        assert_eq!(answer(&format!("{user} records_missing_topic"))[0], 404);

        // The group's member is among the live Kafka clients, by the client id it sent.
        let clients = answer(&format!("{user} clients"));
        assert_eq!(clients[0], 200, "{clients}");
        let reader = clients[1]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["client_id"] == "lag-reader")
            .unwrap_or_else(|| panic!("no client 'lag-reader' in {clients}"));
        assert_eq!(reader["listener"], "PLAINTEXT", "{reader}");
        assert_eq!(reader["ssl"], false, "{reader}");
        assert_eq!(reader["peer_host"], "127.0.0.1", "{reader}");
        assert_eq!(
            reader["port"].as_u64().map(|p| p.to_string()),
            ferry
                .kafka_bootstrap()
                .rsplit(':')
                .next()
                .map(str::to_owned),
            "{reader}"
        );
    }
    let acl = json!({
        "resource_type": "TOPIC",
        "pattern_type": "PREFIXED",
        "name": format!("{topic}-acl"),
        "principal": "User:alice",
        "host": "*",
        "operation": "READ",
        "permission": "ALLOW",
    });
    assert_eq!(answer("guest acls"), json!([200, [acl]]));
    let not_administrator =
        json!([401, {"error": "not_authorised", "reason": "Not administrator user"}]);
    assert_eq!(answer("kmon acls"), not_administrator);
    assert_eq!(answer("kmgmt acls"), not_administrator);
    let not_monitor = json!([401, {"error": "not_authorised", "reason": "Not monitor user"}]);
    for what in [
        "topics",
        "topic",
        "groups",
        "group",
        "missing_topic",
        "missing_group",
        "records",
        "clients",
    ] {
        assert_eq!(answer(&format!("kmgmt {what}")), not_monitor, "{what}");
    }
    // A Kafka connection closed through the API: by the administrator only (it is no
    // monitoring user's own), gone from the list, and a second close finds nothing.
    assert_eq!(answer("close by kmon"), json!(401));
    assert_eq!(answer("close by guest"), json!(204));
    assert_eq!(answer("closed still listed"), json!(false));
    assert_eq!(answer("close again"), json!(404));
}

/// `s` in standard base64, as the API answers bytes.
fn base64_of(s: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// The config file's route of the routes test: it shows beside the runtime ones and the
/// API refuses to change it.
const CONFIG_ROUTE: &str = r#"
[[routes]]
name = "from-config"
from = { amqp_exchange = "cfg-in" }
to = [{ kafka_topic = "cfg-out" }]
"#;

#[test]
fn routes_are_added_paused_resumed_and_removed_and_dead_letters_replayed_at_runtime() {
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = Setup::shipped_with(dir.path(), CONFIG_ROUTE).start();
    let (http, amqp) = (ferry.management_uri(), ferry.amqp_uri());
    // A route added at runtime, its pause and its dead letters live in the store.
    run_then_again_after_a_restart(
        &mut ferry,
        "management_routes.py",
        &[&http, &amqp, "from-config"],
    );
}

/// Runs the Python script `script` with `args` and `run`, kills the daemon with SIGKILL,
/// restarts it, and runs the script again with `after-restart`; each run must print OK.
fn run_then_again_after_a_restart(ferry: &mut Daemon, script: &str, args: &[&str]) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let script = python_script(script);
    let phase = |phase: &str| {
        let all: Vec<&str> = [script.as_str()]
            .into_iter()
            .chain(args.iter().copied())
            .chain([phase])
            .collect();
        let output = runtime.block_on(run("python3", &all, b""));
        assert_eq!(
            String::from_utf8_lossy(&output.stdout).trim(),
            "OK",
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    phase("run");
    ferry.kill_and_restart();
    phase("after-restart");
}

/// `HOST:PORT` of an `amqp://user:pass@HOST:PORT/vhost` URI.
fn host_port(uri: &str) -> String {
    let rest = uri.rsplit_once('@').map_or(uri, |(_, r)| r);
    rest.split('/').next().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn user_and_permission_changes_reach_open_connections_as_on_rabbitmq() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped(dir.path()).start();
    let node = RabbitNode::get();
    let prefix = unique("changes");
    let script = python_script("amqp_user_changes.py");
    let survey = async |http: &str, amqp: &str| -> Value {
        let output = run("python3", &[&script, http, &host_port(amqp), &prefix], b"").await;
        serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
            panic!("{e}: {}", String::from_utf8_lossy(&output.stderr));
        })
    };
    let on_ferry = survey(&ferry.management_uri(), &ferry.amqp_uri()).await;
    let on_rabbitmq = survey(&node.http_uri(), node.uri()).await;
    assert_eq!(on_ferry, on_rabbitmq, "Ferry (left) and RabbitMQ (right)");
    let refused = |queue: &str| {
        json!([
            403,
            format!(
                "ACCESS_REFUSED - access to queue '{queue}' in vhost '/' refused for user 'USER'"
            )
        ])
    };
    assert_eq!(
        on_ferry,
        json!({
            "deleted": [320, "CONNECTION_FORCED - user 'USER' is deleted"],
            "cleared": refused("USER-q"),
            "narrowed": [refused("USER-other"), [0, ""]],
            "granted": [refused("USER-q"), [0, ""]],
            "password": [0, ""],
        })
    );
}

#[test]
fn vhosts_are_made_and_deleted_at_runtime_and_kept_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = Setup::shipped(dir.path()).start();
    let (http, amqp) = (ferry.management_uri(), ferry.ports().amqp.to_string());
    run_then_again_after_a_restart(&mut ferry, "management_vhosts.py", &[&http, &amqp]);
}

/// POSTs a publish of `payload` (base64) to the default exchange with `routing_key`
/// through the management API of `ferry`: the status and the answer.
async fn publish_through_api(ferry: &Daemon, routing_key: &str, payload: &[u8]) -> (u16, String) {
    use base64::Engine as _;
    let body = json!({
        "routing_key": routing_key,
        "payload": base64::engine::general_purpose::STANDARD.encode(payload),
        "payload_encoding": "base64",
        "properties": {"message_id": format!("api-{}", payload.len())},
    })
    .to_string();
    let port = ferry.ports().management;
    tokio::task::spawn_blocking(move || {
        crate::common::http::post(
            port,
            "/api/exchanges/%2F/amq.default/publish",
            body.as_bytes(),
        )
        .expect("the API answers")
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_up_to_max_message_size_are_published_through_the_api_whole_and_larger_refused() {
    use crate::common::amqp::{connect, consume, declare, next, payload, ready};
    use lapin::options::BasicAckOptions;
    const MIB: usize = 1024 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped(dir.path()).start();
    let conn = connect(&ferry.amqp_uri()).await;
    let ch = conn.create_channel().await.unwrap();
    declare(&ch, "api-large", lapin::types::FieldTable::default()).await;

    // 3 MiB: above the HTTP server's default body limit, stored inline; 16 MiB (the
    // default amqp.max_message_size): stored through a spill.
    let bodies = [payload(3 * MIB, 1), payload(16 * MIB, 2)];
    for body in &bodies {
        let (status, answer) = publish_through_api(&ferry, "api-large", body).await;
        assert_eq!(
            (status, serde_json::from_str::<Value>(&answer).ok()),
            (200, Some(json!({"routed": true}))),
            "a publish of {} bytes: {answer}",
            body.len()
        );
    }
    let (status, answer) =
        publish_through_api(&ferry, "api-large", &payload(16 * MIB + 1, 3)).await;
    assert_eq!(status, 400, "{answer}");
    assert!(
        answer.contains("amqp.max_message_size") && answer.contains(&(16 * MIB).to_string()),
        "the refusal names the limit: {answer}"
    );

    assert_eq!(
        ready(&ch, "api-large").await,
        2,
        "the refused one is not stored"
    );
    let mut consumer = consume(&ch, "api-large", false).await;
    for body in &bodies {
        let d = next(&mut consumer).await;
        assert_eq!(d.data.len(), body.len(), "it arrives with its length");
        assert!(d.data == *body, "whole and unchanged");
        let id = d.properties.message_id().as_ref().map(|m| m.to_string());
        assert_eq!(
            id,
            Some(format!("api-{}", body.len())),
            "with its properties"
        );
        d.ack(BasicAckOptions::default()).await.unwrap();
    }
}

/// The API samples every queue's counters and the totals (each vhost's, and over every
/// vhost) every 5 s, as RabbitMQ does, so the first request for a queue and for the
/// overview already has a publish rate — also the overview of a user who sees only some
/// vhosts (the sum of theirs).
#[tokio::test(flavor = "multi_thread")]
async fn the_first_answer_already_has_rates_from_the_five_second_samples() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = Setup::shipped(dir.path()).start();
    let limited = r#"{"password": "secret", "tags": "management"}"#;
    ferry.put_as_guest("/api/users/limited", limited).await;
    let all = r#"{"configure": ".*", "write": ".*", "read": ".*"}"#;
    ferry
        .put_as_guest("/api/permissions/%2f/limited", all)
        .await;
    let (_connection, ch) = crate::common::amqp::channel(&ferry.amqp_uri()).await;
    crate::common::amqp::declare(&ch, "sampled", Default::default()).await;
    // About 20 messages a second for 12 s: two samples or more see the queue grow.
    for _ in 0..240 {
        crate::common::amqp::publish_confirmed(&ch, "", "sampled", &["x"]).await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let get = async |user: &str, path: &str| -> Value {
        let url = format!("{}{path}", ferry.management_uri());
        let out = run("curl", &["-sf", "-u", user, &url], b"").await;
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let queue = get("guest:guest", "/api/queues/%2f/sampled").await;
    let rate = &queue["message_stats"]["publish_details"]["rate"];
    assert!(rate.as_f64().is_some_and(|r| r > 0.0), "{queue}");
    for user in ["guest:guest", "limited:secret"] {
        let overview = get(user, "/api/overview").await;
        let rate = &overview["message_stats"]["publish_details"]["rate"];
        assert!(rate.as_f64().is_some_and(|r| r > 0.0), "{user}: {overview}");
        let depth = &overview["queue_totals"]["messages_details"]["rate"];
        assert!(
            depth.as_f64().is_some_and(|r| r > 0.0),
            "{user}: {overview}"
        );
    }
}
