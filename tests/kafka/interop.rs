//! Independent clients against Ferry's Kafka front, run as processes with timeouts:
//! `kcat` (Debian's, librdkafka-based) producing and consuming keys and headers, and
//! `kafka-python` (pure Python, its own protocol code) negotiating versions through
//! ApiVersions, running a consumer group, and — killed with SIGKILL — leaving a group that
//! rebalances when its session times out; and kafka-python's transactional producer and
//! `read_committed` consumer, read back by librdkafka too; kafka-python with
//! SCRAM-SHA-256 and kcat with SCRAM-SHA-512 over SASL_PLAINTEXT. `scripts/setup.sh`
//! installs both.

use crate::common::clients::{kcat_through, python_script, run};
use crate::common::fronts::{KafkaServer, SCRAM_USER};
use crate::common::kafka::{PATIENCE, consumer};
use crate::common::wait;
use rdkafka::TopicPartitionList;
use rdkafka::consumer::Consumer;
use rdkafka::util::Timeout;
use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

fn script() -> String {
    python_script("kafka_group.py")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_produces_and_consumes_keys_values_and_headers() {
    let broker = KafkaServer::start().await;
    let b = broker.bootstrap();
    let lines = "alpha:first\nbeta:second\ngamma:third\n";
    run(
        "kcat",
        &[
            "-b",
            &b,
            "-P",
            "-t",
            "kc",
            "-K",
            ":",
            "-H",
            "source=kcat",
            "-H",
            "n=1",
        ],
        lines.as_bytes(),
    )
    .await;
    let out = run(
        "kcat",
        &[
            "-b",
            &b,
            "-C",
            "-t",
            "kc",
            "-o",
            "beginning",
            "-e",
            "-q",
            "-f",
            "%o %k %s %h\\n",
        ],
        b"",
    )
    .await;
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "0 alpha first source=kcat,n=1\n1 beta second source=kcat,n=1\n2 gamma third source=kcat,n=1\n"
    );
    let listing = run("kcat", &["-b", &b, "-L", "-t", "kc"], b"").await;
    let listing = String::from_utf8(listing.stdout).unwrap();
    assert!(listing.contains(&format!("broker 0 at {b}")), "{listing}");
    assert!(listing.contains("partition 0, leader 0"), "{listing}");
    broker.stop().await;
}

/// A kafka-python group member in its own process.
struct Member {
    /// The process (killed when dropped).
    child: tokio::process::Child,
    /// Its output, line by line.
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Member {
    fn spawn(bootstrap: &str, topic: &str, group: &str) -> Self {
        let mut child = Command::new("python3")
            .args([&script(), "member", bootstrap, topic, group])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python3; install it with scripts/setup.sh");
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self { child, lines }
    }

    /// Its next output line.
    async fn line(&mut self) -> String {
        tokio::time::timeout(PATIENCE, self.lines.next_line())
            .await
            .expect("the member reports within the patience")
            .unwrap()
            .expect("the member is still running")
    }
}

/// The next line either member prints, with the member's index (`Lines::next_line` is
/// cancel-safe, so the other member's line is not lost).
async fn next_line(members: &mut [Member; 2]) -> (usize, String) {
    let [a, b] = members;
    tokio::select! {
        l = a.line() => (0, l),
        l = b.line() => (1, l),
    }
}

/// Partitions an `assigned ...` line names.
fn assigned(line: &str) -> Option<Vec<i32>> {
    let rest = line.strip_prefix("assigned")?;
    Some(
        rest.split_whitespace()
            .map(|p| p.parse().unwrap())
            .collect(),
    )
}

/// Produces `records` records to `topic` with kafka-python; returns the broker version it
/// inferred.
async fn python_produce(bootstrap: &str, topic: &str, records: usize) -> String {
    let out = run(
        "python3",
        &[&script(), "produce", bootstrap, topic, &records.to_string()],
        b"",
    )
    .await;
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_negotiates_versions_and_runs_a_consumer_group() {
    let broker = KafkaServer::start().await;
    let b = broker.bootstrap();
    // kafka-python infers the broker version from the ApiVersions table (Produce v9).
    assert_eq!(python_produce(&b, "py", 0).await, "2.8");

    let mut members = [
        Member::spawn(&b, "py", "py-group"),
        Member::spawn(&b, "py", "py-group"),
    ];
    let mut shares: [Vec<i32>; 2] = Default::default();
    tokio::time::timeout(PATIENCE, async {
        loop {
            let (i, line) = next_line(&mut members).await;
            if let Some(p) = assigned(&line) {
                shares[i] = p;
            }
            let mut all: Vec<i32> = shares.concat();
            all.sort_unstable();
            if shares.iter().all(|s| !s.is_empty()) && all == [0, 1, 2, 3] {
                return;
            }
        }
    })
    .await
    .expect("the two members share the four partitions");

    python_produce(&b, "py", 200).await;
    let mut seen: BTreeMap<String, (usize, i32, i64)> = BTreeMap::new();
    while seen.len() < 200 {
        let (i, line) = next_line(&mut members).await;
        assert!(
            assigned(&line).is_none(),
            "no rebalance while consuming: {line}"
        );
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (value, partition, offset) = (
            fields[1],
            fields[2].parse().unwrap(),
            fields[3].parse().unwrap(),
        );
        assert!(shares[i].contains(&partition), "{line} from member {i}");
        let earlier = seen.insert(value.to_owned(), (i, partition, offset));
        assert!(earlier.is_none(), "{value} consumed twice");
    }

    // The members commit after each poll: every partition's commit reaches its end.
    let checker = consumer(&b, "py-group", &[]);
    let ends: Vec<i64> = (0..4)
        .map(|p| {
            checker
                .fetch_watermarks("py", p, Timeout::After(PATIENCE))
                .unwrap()
                .1
        })
        .collect();
    assert_eq!(ends.iter().sum::<i64>(), 200);
    let mut wanted = TopicPartitionList::new();
    for p in 0..4 {
        wanted.add_partition("py", p);
    }
    let what = "the group's commits reaching the end of every partition";
    wait::until(what, PATIENCE, async || {
        let c = checker
            .committed_offsets(wanted.clone(), Timeout::After(PATIENCE))
            .unwrap();
        let offsets: Vec<i64> = (0..4)
            .map(|p| {
                c.find_partition("py", p)
                    .unwrap()
                    .offset()
                    .to_raw()
                    .unwrap_or(-1)
            })
            .collect();
        (offsets == ends).then_some(())
    })
    .await;
    for m in &mut members {
        m.child.start_kill().unwrap();
    }
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_member_is_dropped_when_its_session_times_out() {
    let broker = KafkaServer::start_with(|c| c.default_partitions = 2).await;

    // A kafka-python member joins first (its Metadata request creates the two-partition
    // topic) and takes both partitions.
    let mut python = Member::spawn(&broker.bootstrap(), "held", "mixed");
    loop {
        if assigned(&python.line().await) == Some(vec![0, 1]) {
            break;
        }
    }

    // A librdkafka member joins; the group rebalances between the two.
    let c = consumer(&broker.bootstrap(), "mixed", &[]);
    c.subscribe(&["held"]).unwrap();
    let share = tokio::time::timeout(PATIENCE, async {
        loop {
            let _ = tokio::time::timeout(Duration::from_millis(100), c.recv()).await;
            if c.assignment().unwrap().count() == 1 {
                return;
            }
        }
    })
    .await;
    assert!(share.is_ok(), "the two members share the partitions");

    // SIGKILL: no LeaveGroup. After its 3 s session the survivor gets both partitions.
    python.child.start_kill().unwrap();
    python.child.wait().await.unwrap();
    let all = tokio::time::timeout(PATIENCE, async {
        loop {
            let _ = tokio::time::timeout(Duration::from_millis(100), c.recv()).await;
            if c.assignment().unwrap().count() == 2 {
                return;
            }
        }
    })
    .await;
    assert!(
        all.is_ok(),
        "the survivor takes over after the session timeout"
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_transactions_commit_and_abort_for_both_clients() {
    let broker = KafkaServer::start().await;
    let b = broker.bootstrap();
    let txn = python_script("kafka_txn.py");
    run("python3", &[&txn, "produce", &b, "txn"], b"").await;
    let values = |prefixes: &[&str]| -> Vec<String> {
        prefixes
            .iter()
            .flat_map(|p| (0..5).map(move |i| format!("{p}-{i}")))
            .collect()
    };
    let python_read = |isolation: &'static str, count: usize| {
        let (txn, b) = (txn.clone(), b.clone());
        async move {
            let out = run(
                "python3",
                &[&txn, "read", &b, "txn", isolation, &count.to_string()],
                b"",
            )
            .await;
            String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(python_read("read_committed", 10).await, values(&["a", "c"]));
    assert_eq!(
        python_read("read_uncommitted", 15).await,
        values(&["a", "b", "c"])
    );
    // librdkafka reads what kafka-python committed, and only that.
    let c = consumer(
        &b,
        "rdkafka-reader",
        &[("isolation.level", "read_committed")],
    );
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("txn", 0, rdkafka::Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    let mut read = Vec::new();
    while read.len() < 10 {
        let m = tokio::time::timeout(PATIENCE, c.recv())
            .await
            .expect("a record within the patience")
            .expect("a record");
        read.push(String::from_utf8(rdkafka::Message::payload(&m).unwrap().to_vec()).unwrap());
    }
    assert_eq!(read, values(&["a", "c"]));
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_produces_and_consumes_with_scram_sha_256() {
    let broker = KafkaServer::start_with(|c| c.require_sasl = true).await;
    let (user, password) = SCRAM_USER;
    let out = run(
        "python3",
        &[
            &python_script("kafka_scram.py"),
            &broker.bootstrap(),
            "SCRAM-SHA-256",
            user,
            password,
            "py-scram",
            "5",
        ],
        b"",
    )
    .await;
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "v0\nv1\nv2\nv3\nv4\n"
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kcat_produces_and_consumes_with_scram_sha_512() {
    let broker = KafkaServer::start_with(|c| c.require_sasl = true).await;
    let b = broker.bootstrap();
    let (user, password) = SCRAM_USER;
    let username = format!("sasl.username={user}");
    let secret = format!("sasl.password={password}");
    let sasl = [
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanisms=SCRAM-SHA-512",
        "-X",
        &username,
        "-X",
        &secret,
    ];
    let out = kcat_through(&b, "kc-scram", &sasl, b"a:first\nb:second\n").await;
    assert_eq!(out, "a first\nb second\n");
    broker.stop().await;
}
