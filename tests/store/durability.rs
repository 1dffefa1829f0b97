//! Durability of the embedded engine under `kill -9`: every commit that returned success
//! is present after a restart, and no transaction is partly visible.
//!
//! The test runs its own binary again as a child process (selected by an environment
//! variable) that commits in a loop from several tasks and prints each committed id; the
//! parent kills it with SIGKILL once it has committed [`COMMITS_BEFORE_KILL`] transactions
//! (so the kill lands while the writers commit, however fast or slow the machine), reopens
//! the store and checks.

use ferry_store::StoreConfig;
use ferry_store::{Database, RangeOption, StoreError};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "FERRY_DURABILITY_CHILD_STORE";
/// Transactions a child commits in each round before it is killed.
const COMMITS_BEFORE_KILL: usize = 2_000;
/// Upper bound on a round's commits before the kill.
const ROUND_LIMIT: Duration = Duration::from_secs(120);
const WRITERS: u64 = 8;
/// Keys each transaction writes; all or none of them must be visible.
const PARTS: [&str; 3] = ["a", "b", "c"];

fn config(path: &std::path::Path) -> StoreConfig {
    StoreConfig {
        path: path.to_owned(),
        cache_mb: 32,
        // A small window checkpoints every few hundred commits, so kills land during
        // checkpoints as well as during log appends.
        window_mb: 1,
        ..StoreConfig::default()
    }
}

fn part_key(id: u64, part: &str) -> Vec<u8> {
    format!("t/{id:012}/{part}").into_bytes()
}

/// The child: commits forever, printing `committed <id>` after each successful commit.
async fn write_until_killed(path: &str) {
    let db = Database::open(&config(path.as_ref())).await.unwrap();
    let start: u64 = std::env::var("FERRY_DURABILITY_START")
        .unwrap()
        .parse()
        .unwrap();
    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0.. {
                let id = start + n * WRITERS + w;
                db.run(|tx| async move {
                    for part in PARTS {
                        tx.set(&part_key(id, part), vec![part.as_bytes()[0]; 1024]);
                    }
                    tx.atomic_add(b"count", 1);
                    Ok::<_, StoreError>(())
                })
                .await
                .unwrap();
                println!("committed {id}");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_transactions_survive_kill_9_and_none_is_partial() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        write_until_killed(&path).await;
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let mut acknowledged = Vec::new();
    // This test's name as the test harness knows it (the module path without the crate).
    let name = module_path!()
        .split_once("::")
        .map_or("", |(_, module)| module)
        .to_owned()
        + "::committed_transactions_survive_kill_9_and_none_is_partial";
    for round in 0..4u64 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([name.as_str(), "--exact", "--nocapture"])
            .env(CHILD_ENV, &path)
            .env(
                "FERRY_DURABILITY_START",
                (round * 1_000_000_000).to_string(),
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (ids_tx, ids_rx) = std::sync::mpsc::channel::<u64>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(id) = line.strip_prefix("committed ") {
                    let _ = ids_tx.send(id.parse().unwrap());
                }
            }
        });
        // SIGKILL it once it has committed its share, while its writers go on committing.
        let deadline = Instant::now() + ROUND_LIMIT;
        let mut ids = Vec::new();
        while ids.len() < COMMITS_BEFORE_KILL {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(id) = ids_rx.recv_timeout(left) else {
                break;
            };
            ids.push(id);
        }
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            ids.len() >= COMMITS_BEFORE_KILL,
            "round {round}: the child committed only {} transactions within {ROUND_LIMIT:?}",
            ids.len()
        );
        // The reader ends with the child's stdout.
        ids.extend(ids_rx.iter());
        acknowledged.extend(ids);

        let db = Database::open(&config(&path)).await.unwrap();
        let tx = db.begin().unwrap();
        let stored = tx
            .get_range(&RangeOption::prefix(b"t/"), true)
            .await
            .unwrap();
        let mut parts_by_id = std::collections::BTreeMap::<u64, usize>::new();
        for kv in &stored {
            let id: u64 = std::str::from_utf8(&kv.key[2..14])
                .unwrap()
                .parse()
                .unwrap();
            *parts_by_id.entry(id).or_default() += 1;
        }
        for (id, parts) in &parts_by_id {
            assert_eq!(*parts, PARTS.len(), "transaction {id} is partly visible");
        }
        for id in &acknowledged {
            assert!(
                parts_by_id.contains_key(id),
                "acknowledged commit {id} was lost"
            );
        }
        let count = tx.get(b"count", true).await.unwrap().unwrap();
        assert_eq!(
            i64::from_le_bytes(count.try_into().unwrap()) as usize,
            parts_by_id.len(),
            "the counter matches the transactions present"
        );
        eprintln!(
            "round {round}: {} acknowledged so far, {} present",
            acknowledged.len(),
            parts_by_id.len()
        );
        drop(tx);
        db.close().await;
    }
}
