//! `ferry`'s admin commands as an operator runs them: the real binary against a running
//! daemon's management API, each effect checked with a client Ferry did not write —
//! lapin for queues, rdkafka for topics and consumer groups (`kafka-consumer-groups
//! --reset-offsets` semantics: a dry run unless `--execute`, refused while the group has
//! members) — tables with their header line, `--json` parsed, refusals on one line
//! without the password, and definitions exported and imported back.

use crate::common::amqp::{channel, declare, publish_confirmed, ready, reply_code};
use crate::common::daemon::{Daemon, Setup};
use crate::common::kafka::{PATIENCE, client_config, consumer, producer};
use crate::common::rabbitmq::unique;
use crate::common::tls::TlsFiles;
use lapin::options::QueueDeclareOptions;
use lapin::types::FieldTable;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, StreamConsumer};
use rdkafka::metadata::Metadata;
use rdkafka::producer::FutureRecord;
use rdkafka::util::Timeout;
use rdkafka::{Message, Offset, TopicPartitionList};
use serde_json::Value;
use std::collections::BTreeSet;
use std::process::Output;
use std::time::Duration;

/// Longest one `ferry` command may run.
const CLI_TIMEOUT: Duration = Duration::from_secs(60);
/// The partitions of the topic the group tests create.
const PARTITIONS: i32 = 3;
/// The records produced to each partition.
const PER_PARTITION: i64 = 3;
/// The timestamp of the first record of each partition (2023-11-14T22:13:20Z); each next
/// record is one second later.
const FIRST_TIMESTAMP: i64 = 1_700_000_000_000;

/// Runs `ferry ARGS` against `daemon`'s management API (`FERRY_URL`), as guest unless
/// `args` say otherwise.
async fn ferry(daemon: &Daemon, args: &[&str]) -> Output {
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .env("FERRY_URL", daemon.management_uri())
        .env_remove("FERRY_USER")
        .env_remove("FERRY_PASSWORD")
        .env_remove("FERRY_CA_FILE")
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(CLI_TIMEOUT, run)
        .await
        .unwrap_or_else(|_| panic!("ferry {args:?} ran past {CLI_TIMEOUT:?}"))
        .unwrap()
}

/// The standard output of `ferry ARGS`, which must succeed.
async fn ok(daemon: &Daemon, args: &[&str]) -> String {
    let out = ferry(daemon, args).await;
    assert!(
        out.status.success(),
        "ferry {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The JSON `ferry ARGS --json` prints.
async fn json(daemon: &Daemon, args: &[&str]) -> Value {
    let text = ok(daemon, &[args, &["--json"]].concat()).await;
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("ferry {args:?} --json: {e}: {text}"))
}

/// The standard error of `ferry ARGS`, which must fail with exit code 1 and one line.
async fn refused(daemon: &Daemon, args: &[&str]) -> String {
    let out = ferry(daemon, args).await;
    assert_eq!(out.status.code(), Some(1), "ferry {args:?} exit code");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    stderr
}

#[tokio::test(flavor = "multi_thread")]
async fn queues_are_listed_purged_and_deleted_as_lapin_sees_them() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Setup::shipped(dir.path()).start();
    let (_conn, ch) = channel(&daemon.amqp_uri()).await;
    let queue = unique("admin-q");
    declare(&ch, &queue, FieldTable::default()).await;
    publish_confirmed(&ch, "", &queue, &["1", "2", "3", "4", "5"]).await;

    let table = ok(&daemon, &["queues", "list"]).await;
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["VHOST", "NAME", "TYPE", "READY", "UNACKED", "CONSUMERS"]
    );
    let row = lines.find(|l| l.contains(&queue)).expect("the queue's row");
    assert_eq!(
        row.split_whitespace().collect::<Vec<_>>(),
        ["/", queue.as_str(), "classic", "5", "0", "0"]
    );
    let shown = json(&daemon, &["queues", "show", &queue]).await;
    assert_eq!(
        (shown["name"].as_str(), shown["messages_ready"].as_u64()),
        (Some(queue.as_str()), Some(5))
    );

    let said = ok(&daemon, &["queues", "purge", &queue, "--vhost", "/"]).await;
    assert_eq!(said.trim(), format!("purged queue '{queue}' in vhost '/'"));
    assert_eq!(ready(&ch, &queue).await, 0, "lapin sees the queue empty");

    ok(&daemon, &["queues", "delete", &queue]).await;
    let passive = ch
        .queue_declare(
            queue.as_str().into(),
            QueueDeclareOptions {
                passive: true,
                ..QueueDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await;
    assert_eq!(
        passive.map(|_| ()).map_err(|e| reply_code(&e)),
        Err(Some(404))
    );
    let gone = refused(&daemon, &["queues", "show", &queue]).await;
    assert!(gone.contains("404"), "{gone}");

    let status = json(&daemon, &["status"]).await;
    assert_eq!(status["product_name"], "Ferry");
    let health = ok(&daemon, &["health"]).await;
    assert_eq!(
        health,
        "CHECK          STATUS\nalarms         ok\nvirtual-hosts  ok\n"
    );
}

/// The partitions of `topic` as a fresh rdkafka client sees them.
fn partitions(bootstrap: &str, topic: &str) -> usize {
    let c: BaseConsumer = client_config(bootstrap, &[]).create().unwrap();
    let metadata: Metadata = c.fetch_metadata(Some(topic), PATIENCE).unwrap();
    metadata.topics()[0].partitions().len()
}

/// The offsets group `group` has committed on `topic`, by partition, as rdkafka's
/// OffsetFetch reads them (without joining the group).
fn committed(bootstrap: &str, group: &str, topic: &str) -> Vec<i64> {
    let c: BaseConsumer = client_config(bootstrap, &[("group.id", group)])
        .create()
        .unwrap();
    let mut wanted = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        wanted.add_partition(topic, p);
    }
    let found = c.committed_offsets(wanted, PATIENCE).unwrap();
    (0..PARTITIONS)
        .map(|p| match found.find_partition(topic, p).unwrap().offset() {
            Offset::Offset(o) => o,
            other => panic!("partition {p}: {other:?}"),
        })
        .collect()
}

/// Every (partition, offset) a new member of `group` reads from `topic` until it has
/// read `count`; the member is closed after.
async fn read_as_member(
    bootstrap: &str,
    group: &str,
    topic: &str,
    count: usize,
) -> BTreeSet<(i32, i64)> {
    let c = consumer(bootstrap, group, &[]);
    c.subscribe(&[topic]).unwrap();
    let mut read = BTreeSet::new();
    while read.len() < count {
        let m = tokio::time::timeout(PATIENCE, c.recv())
            .await
            .expect("a record in time")
            .unwrap();
        read.insert((m.partition(), m.offset()));
    }
    read
}

/// Waits until `group` has no members (its consumers closed).
async fn wait_empty(daemon: &Daemon, group: &str) {
    for _ in 0..60 {
        let shown = json(daemon, &["groups", "describe", group]).await;
        if shown["members"].as_array().is_some_and(Vec::is_empty) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("group {group} still has members");
}

#[tokio::test(flavor = "multi_thread")]
async fn topics_and_group_offsets_are_managed_as_kafka_tools_manage_them() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Setup::shipped(dir.path()).start();
    let bootstrap = daemon.kafka_bootstrap();
    let (topic, group) = (unique("admin-topic"), unique("admin-group"));

    let said = ok(
        &daemon,
        &[
            "topics",
            "create",
            &topic,
            "--partitions",
            "3",
            "--config",
            "retention.ms=3600000",
        ],
    )
    .await;
    assert_eq!(said.trim(), format!("created topic '{topic}'"));
    assert_eq!(
        partitions(&bootstrap, &topic),
        3,
        "rdkafka sees three partitions"
    );
    let again = refused(&daemon, &["topics", "create", &topic]).await;
    assert!(
        again.contains("409") && again.contains("already exists"),
        "{again}"
    );
    ok(
        &daemon,
        &[
            "topics",
            "alter",
            &topic,
            "--set",
            "retention.ms=7200000",
            "--delete",
            "cleanup.policy",
        ],
    )
    .await;
    let shown = json(&daemon, &["topics", "show", &topic]).await;
    assert_eq!(shown["configs"]["retention.ms"], "7200000");
    assert_eq!(shown["config"]["retention.ms"], 7_200_000);
    let bad = refused(
        &daemon,
        &["topics", "alter", &topic, "--set", "retention.ms=soon"],
    )
    .await;
    assert!(bad.contains("400") && bad.contains("retention.ms"), "{bad}");

    let p = producer(&bootstrap, &[]);
    for partition in 0..PARTITIONS {
        for i in 0..PER_PARTITION {
            let value = format!("{partition}-{i}");
            p.send(
                FutureRecord::<(), _>::to(&topic)
                    .partition(partition)
                    .timestamp(FIRST_TIMESTAMP + i * 1000)
                    .payload(&value),
                Timeout::After(PATIENCE),
            )
            .await
            .expect("acknowledged");
        }
    }
    let all: BTreeSet<(i32, i64)> = (0..PARTITIONS)
        .flat_map(|p| (0..PER_PARTITION).map(move |o| (p, o)))
        .collect();

    // A member reads everything and commits; while it is in the group, no reset.
    let member: StreamConsumer = consumer(&bootstrap, &group, &[]);
    member.subscribe(&[&topic]).unwrap();
    let mut read = BTreeSet::new();
    while read.len() < all.len() {
        let m = tokio::time::timeout(PATIENCE, member.recv())
            .await
            .unwrap()
            .unwrap();
        read.insert((m.partition(), m.offset()));
    }
    member.commit_consumer_state(CommitMode::Sync).unwrap();
    assert_eq!(committed(&bootstrap, &group, &topic), [3, 3, 3]);
    let busy = refused(
        &daemon,
        &[
            "groups",
            "reset-offsets",
            &group,
            "--to-earliest",
            "--execute",
        ],
    )
    .await;
    assert!(
        busy.contains("409") && busy.contains("active members"),
        "{busy}"
    );
    member.unsubscribe();
    drop(member);
    wait_empty(&daemon, &group).await;

    let described = ok(&daemon, &["groups", "describe", &group]).await;
    assert!(
        described
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == [
                    "TOPIC",
                    "PARTITION",
                    "CURRENT-OFFSET",
                    "LOG-END-OFFSET",
                    "LAG"
                ]),
        "{described}"
    );

    // A dry run shows the new offsets and changes nothing.
    let dry = json(
        &daemon,
        &["groups", "reset-offsets", &group, "--to-earliest"],
    )
    .await;
    let offsets: Vec<i64> = dry
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["offset"].as_i64().unwrap())
        .collect();
    assert_eq!(offsets, [0, 0, 0], "{dry}");
    assert_eq!(committed(&bootstrap, &group, &topic), [3, 3, 3]);

    ok(
        &daemon,
        &[
            "groups",
            "reset-offsets",
            &group,
            "--to-earliest",
            "--execute",
        ],
    )
    .await;
    assert_eq!(committed(&bootstrap, &group, &topic), [0, 0, 0]);
    let reread = read_as_member(&bootstrap, &group, &topic, all.len()).await;
    assert_eq!(
        reread, all,
        "the group reads every record again from offset 0"
    );
    wait_empty(&daemon, &group).await;

    ok(
        &daemon,
        &[
            "groups",
            "reset-offsets",
            &group,
            "--topic",
            &topic,
            "--to-offset",
            "2",
            "--execute",
        ],
    )
    .await;
    assert_eq!(committed(&bootstrap, &group, &topic), [2, 2, 2]);
    // The second record of each partition is the first at or after 22:13:21.
    ok(
        &daemon,
        &[
            "groups",
            "reset-offsets",
            &group,
            "--to-datetime",
            "2023-11-14T22:13:21.000Z",
            "--execute",
        ],
    )
    .await;
    assert_eq!(committed(&bootstrap, &group, &topic), [1, 1, 1]);
    ok(
        &daemon,
        &[
            "groups",
            "reset-offsets",
            &group,
            "--to-latest",
            "--execute",
        ],
    )
    .await;
    assert_eq!(committed(&bootstrap, &group, &topic), [3, 3, 3]);

    let groups = ok(&daemon, &["groups", "list"]).await;
    assert!(groups.starts_with("GROUP "), "{groups}");
    assert!(groups.lines().any(|l| l.starts_with(&group)), "{groups}");

    ok(&daemon, &["topics", "delete", &topic]).await;
    let topics = json(&daemon, &["topics", "list"]).await;
    assert!(
        topics
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["name"] != topic.as_str()),
        "{topics}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn users_permissions_and_definitions_round_trip_and_refusals_keep_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Setup::shipped(dir.path()).start();

    let wrong = refused(
        &daemon,
        &[
            "queues",
            "list",
            "--user",
            "guest",
            "--password",
            "not-the-s3cret",
        ],
    )
    .await;
    assert!(wrong.starts_with("error: GET /api/queues: 401"), "{wrong}");
    assert!(!wrong.contains("not-the-s3cret"), "{wrong}");
    let unreachable = refused(&daemon, &["status", "--url", "http://127.0.0.1:1"]).await;
    assert!(
        unreachable.contains("cannot reach the management API at http://127.0.0.1:1"),
        "{unreachable}"
    );

    let user = unique("admin-user");
    ok(
        &daemon,
        &[
            "users",
            "add",
            &user,
            "--new-password",
            "p4ss",
            "--tags",
            "monitoring",
        ],
    )
    .await;
    ok(
        &daemon,
        &[
            "permissions",
            "set",
            &user,
            "--configure",
            "^$",
            "--read",
            "^x",
        ],
    )
    .await;
    let permissions = json(&daemon, &["permissions", "list", "--user-name", &user]).await;
    assert_eq!(permissions[0]["configure"], "^$");
    assert_eq!(permissions[0]["write"], ".*");
    assert_eq!(permissions[0]["read"], "^x");
    // The new user logs in; a monitoring user may see the overview but not the users.
    let login = ["--user", user.as_str(), "--password", "p4ss"];
    let as_user = |args: &[&'static str]| -> Vec<&str> { [args, &login[..]].concat() };
    ok(&daemon, &as_user(&["status"])).await;
    let changes: [&[&'static str]; 3] = [
        &["users", "list"],
        &["topics", "create", "t"],
        &["groups", "reset-offsets", "g", "--to-latest"],
    ];
    for change in changes {
        let not_admin = refused(&daemon, &as_user(change)).await;
        assert!(
            not_admin.contains("401 Not administrator user"),
            "{change:?}: {not_admin}"
        );
    }

    let (_conn, ch) = channel(&daemon.amqp_uri()).await;
    let queue = unique("admin-defs");
    declare(&ch, &queue, FieldTable::default()).await;
    let file = dir.path().join("definitions.json");
    ok(&daemon, &["definitions", "export", file.to_str().unwrap()]).await;
    let exported: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(
        exported["queues"]
            .as_array()
            .unwrap()
            .iter()
            .any(|q| q["name"] == queue.as_str())
    );

    ok(&daemon, &["queues", "delete", &queue]).await;
    ok(&daemon, &["users", "delete", &user]).await;
    let users = json(&daemon, &["users", "list"]).await;
    assert!(
        users
            .as_array()
            .unwrap()
            .iter()
            .all(|u| u["name"] != user.as_str())
    );
    ok(&daemon, &["definitions", "import", file.to_str().unwrap()]).await;
    assert_eq!(
        ready(&ch, &queue).await,
        0,
        "lapin finds the imported queue"
    );
    let users = json(&daemon, &["users", "list"]).await;
    assert!(
        users
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["name"] == user.as_str()),
        "{users}"
    );
    ok(&daemon, &as_user(&["status"])).await;

    ok(&daemon, &["permissions", "clear", &user]).await;
    let permissions = json(&daemon, &["permissions", "list", "--user-name", &user]).await;
    assert_eq!(permissions, Value::Array(Vec::new()));
    let exchanges = ok(&daemon, &["exchanges", "list", "--vhost", "/"]).await;
    assert!(exchanges.starts_with("VHOST  NAME"), "{exchanges}");
    assert!(
        exchanges.lines().any(|l| l
            .split_whitespace()
            .take(3)
            .eq(["/", "amq.fanout", "fanout"])),
        "{exchanges}"
    );
}

/// A route of the config file, for `ferry routes`.
const ROUTE: &str = r#"
[[routes]]
name = "admin-route"
from = { amqp_exchange = "admin-in" }
to = [{ kafka_topic = "admin-out" }]
"#;

#[tokio::test(flavor = "multi_thread")]
async fn connections_are_closed_and_routes_paused_and_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Setup::shipped_with(dir.path(), ROUTE).start();

    let conn = crate::common::amqp::connect(&daemon.amqp_uri()).await;
    let listed = json(&daemon, &["connections", "list"]).await;
    let name = listed.as_array().unwrap()[0]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let table = ok(&daemon, &["connections", "list"]).await;
    assert!(table.starts_with("NAME "), "{table}");
    assert!(table.contains(&name), "{table}");
    ok(&daemon, &["connections", "close", &name]).await;
    for _ in 0..100 {
        if !conn.status().connected() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !conn.status().connected(),
        "lapin sees its connection closed"
    );

    let routes = ok(&daemon, &["routes", "list"]).await;
    assert!(routes.starts_with("NAME "), "{routes}");
    assert!(
        routes.lines().any(|l| l.starts_with("admin-route ")),
        "{routes}"
    );
    let said = ok(&daemon, &["routes", "pause", "admin-route"]).await;
    assert_eq!(said.trim(), "paused route 'admin-route'");
    assert_eq!(
        json(&daemon, &["routes", "show", "admin-route"]).await["paused"],
        true
    );
    ok(&daemon, &["routes", "resume", "admin-route"]).await;
    assert_eq!(
        json(&daemon, &["routes", "show", "admin-route"]).await["paused"],
        false
    );
    let replayed = json(
        &daemon,
        &["routes", "replay", "admin-route", "--destination", "0"],
    )
    .await;
    assert_eq!(replayed["replayed"], 0);
    let missing = refused(&daemon, &["routes", "pause", "no-such-route"]).await;
    assert!(missing.contains("404"), "{missing}");
}

#[tokio::test(flavor = "multi_thread")]
async fn https_needs_the_ca_file_that_signed_the_api_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let files = TlsFiles::new(dir.path());
    let mut setup = Setup::shipped(dir.path());
    for (k, v) in files.env() {
        setup = setup.env(&k, &v);
    }
    let daemon = setup.start();
    let url = format!("https://127.0.0.1:{}", daemon.ports().management);
    let ca = files.ca_file.to_str().unwrap();
    let status = json(&daemon, &["status", "--url", &url, "--ca-file", ca]).await;
    assert_eq!(status["product_name"], "Ferry");
    let untrusted = refused(&daemon, &["status", "--url", &url]).await;
    assert!(
        untrusted.contains(&format!("cannot reach the management API at {url}")),
        "{untrusted}"
    );
    let not_pem = refused(
        &daemon,
        &[
            "status",
            "--url",
            &url,
            "--ca-file",
            files.key_file.to_str().unwrap(),
        ],
    )
    .await;
    assert!(not_pem.contains("holds no PEM certificate"), "{not_pem}");
}
