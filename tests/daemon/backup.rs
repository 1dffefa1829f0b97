//! Backup and restore as an operator runs them: `GET /api/ferry/backup` (curl, and `ferry
//! backup`) from a daemon under AMQP and Kafka load, `ferry restore` into a new store, a daemon on it
//! serving every message confirmed and every record acknowledged before the backup began,
//! once, and the group offsets committed before it; `ferry backup --config` of a stopped
//! store; and the refusals (a non-administrator, a store that is not empty, a damaged
//! file).

use crate::common::amqp::{channel, declare, drain};
use crate::common::clients::run;
use crate::common::crash::{Flow, produce_until_acknowledged, publish_until_confirmed};
use crate::common::daemon::{Setup, shipped_config};
use crate::common::kafka::{PATIENCE, consumer, send_range};
use crate::common::process::Ferry;
use lapin::types::FieldTable;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::{Message, Offset, TopicPartitionList};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Upper bound on `ferry backup` or `ferry restore`.
const COMMAND: Duration = Duration::from_secs(120);
/// Messages (and records) each load client sends.
const LOAD: usize = 6_000;
/// Their pace, per second.
const RATE: u32 = 1_000;

/// `ferry ARGS` with the shipped config and its store in `dir/data`; asserts it exits 0
/// and returns its standard output.
fn ferry(dir: &Path, args: &[&str]) -> String {
    let outcome = ferry_outcome(dir, args);
    assert_eq!(outcome.0, Some(0), "ferry {args:?}: {}", outcome.2);
    outcome.1
}

/// `ferry ARGS` as [`ferry`] runs it: exit code, standard output, standard error.
fn ferry_outcome(dir: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let config = shipped_config();
    let data = dir.join("data");
    let mut all = args.to_vec();
    all.extend(["--config", config.to_str().unwrap()]);
    let env = [("FERRY__STORE__PATH", data.to_str().unwrap())];
    let outcome = Ferry::spawn(dir, &all, &env).wait(COMMAND);
    (outcome.status.code(), outcome.stdout, outcome.stderr)
}

/// The offset `group` committed on `topic`'s one partition.
fn committed(bootstrap: &str, group: &str, topic: &str) -> Offset {
    let c = consumer(bootstrap, group, &[]);
    let mut wanted = TopicPartitionList::new();
    wanted.add_partition(topic, 0);
    let offsets = c.committed_offsets(wanted, PATIENCE).unwrap();
    offsets.elements()[0].offset()
}

/// Every value of `topic` (read from the start by a new group), until `want` are read.
async fn values(bootstrap: &str, topic: &str, want: usize) -> Vec<usize> {
    let c = consumer(bootstrap, &format!("reader-{}", fastrand::u32(..)), &[]);
    c.subscribe(&[topic]).unwrap();
    let deadline = Instant::now() + PATIENCE;
    let mut seen = Vec::new();
    while seen.len() < want && Instant::now() < deadline {
        if let Ok(Ok(m)) = tokio::time::timeout(Duration::from_secs(2), c.recv()).await {
            let value = std::str::from_utf8(m.payload().unwrap()).unwrap();
            seen.push(value.parse().unwrap());
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread")]
async fn an_online_backup_under_load_restores_every_confirmed_message_and_committed_offset() {
    let (dir, restored_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let source = Setup::shipped(dir.path()).start();
    let (uri, bootstrap) = (source.amqp_uri(), source.kafka_bootstrap());
    let (queue, topic, group) = ("backed-up", "backed-up", "backed-up-group");
    let (_connection, ch) = channel(&uri).await;
    declare(&ch, queue, FieldTable::default()).await;
    crate::common::kafka::create_topic(&bootstrap, topic, &[]).await;

    // Offsets committed before the backup: a group reads and commits the first records.
    let p = crate::common::kafka::producer(&bootstrap, &[]);
    send_range(&p, topic, 0, 90).await;
    let reader = consumer(&bootstrap, group, &[]);
    reader.subscribe(&[topic]).unwrap();
    for _ in 0..60 {
        let m = tokio::time::timeout(PATIENCE, reader.recv())
            .await
            .unwrap()
            .unwrap();
        reader.commit_message(&m, CommitMode::Sync).unwrap();
    }
    drop(reader);
    let offsets = committed(&bootstrap, group, topic);
    assert_eq!(offsets, Offset::Offset(60));

    // Load: confirmed publishes and acknowledged produces, paced, while the backup runs.
    let deadline = Instant::now() + Duration::from_secs(90);
    let amqp = Arc::new(Flow::new(0..LOAD, deadline).paced(RATE));
    let kafka = Arc::new(Flow::new(1_000..1_000 + LOAD, deadline).paced(RATE));
    let publishing = {
        let (uri, amqp) = (uri.clone(), amqp.clone());
        tokio::spawn(async move { publish_until_confirmed(&uri, "", queue, &amqp).await })
    };
    let producing = {
        let (bootstrap, kafka) = (bootstrap.clone(), kafka.clone());
        tokio::spawn(
            async move { produce_until_acknowledged(&bootstrap, topic, &[], &kafka).await },
        )
    };
    crate::common::wait::until("load under way", PATIENCE, async || {
        (amqp.progress() > 1_000 && kafka.progress() > 1_000).then_some(())
    })
    .await;
    let (confirmed, acknowledged) = (amqp.progress(), kafka.progress());
    let file = dir.path().join("ferry.backup");
    let url = format!("{}/api/ferry/backup", source.management_uri());
    let curl = run(
        "curl",
        &[
            "-sSf",
            "-u",
            "guest:guest",
            "-o",
            file.to_str().unwrap(),
            &url,
        ],
        b"",
    )
    .await;
    assert!(
        curl.status.success(),
        "{}",
        String::from_utf8_lossy(&curl.stderr)
    );
    // `ferry backup` asks the same endpoint, under the same load, and checks what it got.
    let cli_file = dir.path().join("cli.backup");
    let api = source.management_uri();
    let args = ["backup", "--url", &api, cli_file.to_str().unwrap()];
    let cli = Ferry::spawn(dir.path(), &args, &[]).wait(COMMAND);
    assert_eq!(cli.status.code(), Some(0), "{}", cli.stderr);
    assert!(
        cli.stdout
            .starts_with(&format!("backed up {api} at read version ")),
        "{}",
        cli.stdout
    );
    assert!(
        amqp.progress() < LOAD && kafka.progress() < LOAD,
        "the load should still run after the backup ({} {})",
        amqp.progress(),
        kafka.progress()
    );
    let sends = publishing.await.unwrap();
    assert!(sends.iter().all(|&n| n == 1), "no publish was sent twice");
    assert_eq!(producing.await.unwrap().len(), LOAD);

    // Refusals: a user who is not an administrator; a restore into a store that holds data.
    let watcher = r#"{"password":"pw","tags":"monitoring"}"#;
    source.put_as_guest("/api/users/watcher", watcher).await;
    let refused = run(
        "curl",
        &[
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-u",
            "watcher:pw",
            &url,
        ],
        b"",
    )
    .await;
    assert_eq!(String::from_utf8_lossy(&refused.stdout), "401");
    let refused_file = dir.path().join("refused.backup");
    let args = [
        "backup",
        "--url",
        &api,
        "--user",
        "watcher",
        refused_file.to_str().unwrap(),
    ];
    let refused = Ferry::spawn(dir.path(), &args, &[("FERRY_PASSWORD", "pw")]).wait(COMMAND);
    assert_eq!(refused.status.code(), Some(1));
    assert_eq!(
        refused.stderr,
        "error: GET /api/ferry/backup: 401 Not administrator user\n"
    );
    assert!(!refused_file.exists());
    assert!(!dir.path().join("refused.backup.partial").exists());
    drop(source);
    let (code, _, stderr) = ferry_outcome(dir.path(), &["restore", file.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("the store is not empty"), "{stderr}");

    // The CLI's copy restores too (into a store of its own), the curl one is checked below.
    let cli_dir = tempfile::tempdir().unwrap();
    ferry(cli_dir.path(), &["restore", cli_file.to_str().unwrap()]);
    let said = ferry(restored_dir.path(), &["restore", file.to_str().unwrap()]);
    assert!(said.starts_with("restored "), "{said}");
    let restored = Setup::shipped(restored_dir.path()).start();
    let (_connection, ch) = channel(&restored.amqp_uri()).await;
    let ids: Vec<usize> = drain(&ch, queue)
        .await
        .iter()
        .map(|b| b.parse().unwrap())
        .collect();
    let unique: BTreeSet<usize> = ids.iter().copied().collect();
    assert_eq!(unique.len(), ids.len(), "a message came back twice");
    assert!(
        (0..confirmed).all(|id| unique.contains(&id)),
        "a message confirmed before the backup is missing ({} of the first {confirmed} there)",
        (0..confirmed).filter(|id| unique.contains(id)).count()
    );
    assert!(unique.iter().all(|&id| id < LOAD));

    let bootstrap = restored.kafka_bootstrap();
    assert_eq!(committed(&bootstrap, group, topic), offsets);
    let want = 90 + acknowledged;
    let seen: BTreeSet<usize> = values(&bootstrap, topic, want).await.into_iter().collect();
    let missing: Vec<usize> = (0..90)
        .chain(1_000..1_000 + acknowledged)
        .filter(|v| !seen.contains(v))
        .collect();
    assert!(
        missing.is_empty(),
        "records acknowledged before the backup are missing: {missing:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_store_is_backed_up_directly_and_a_damaged_backup_is_refused() {
    let (dir, restored_dir, damaged_dir) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let mut source = Setup::shipped(dir.path()).start();
    let (_connection, ch) = channel(&source.amqp_uri()).await;
    declare(&ch, "kept", FieldTable::default()).await;
    let bodies: Vec<String> = (0..500).map(|i| format!("m{i}")).collect();
    let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
    crate::common::amqp::publish_confirmed(&ch, "", "kept", &refs).await;
    drop((ch, _connection));
    source.signal(libc::SIGTERM);
    assert_eq!(source.wait_exit(PATIENCE).status.code(), Some(0));

    let file = dir.path().join("offline.backup");
    let said = ferry(dir.path(), &["backup", file.to_str().unwrap()]);
    assert!(said.starts_with("backed up "), "{said}");
    assert!(!dir.path().join("offline.backup.partial").exists());

    let mut bytes = std::fs::read(&file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    let damaged = damaged_dir.path().join("damaged.backup");
    std::fs::write(&damaged, &bytes).unwrap();
    let (code, _, stderr) =
        ferry_outcome(damaged_dir.path(), &["restore", damaged.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("not a readable Ferry backup"), "{stderr}");

    ferry(restored_dir.path(), &["restore", file.to_str().unwrap()]);
    let restored = Setup::shipped(restored_dir.path()).start();
    let (_connection, ch) = channel(&restored.amqp_uri()).await;
    assert_eq!(drain(&ch, "kept").await, bodies);
}
