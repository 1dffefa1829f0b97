//! The embedded engine's log, window and checkpoint against a model: seeded random commits
//! (sets, clears, range clears, atomic adds, versionstamped keys) checked against a plain
//! map after every step, with readers kept open across later commits and checkpoints,
//! checkpoints and reopenings at random moments; a log whose last record is torn at every
//! byte recovers to the last whole commit; a failed write or fsync of the data file during
//! a checkpoint stops the engine and loses nothing committed; readers racing a writer and
//! the checkpoints it sets off see whole commits.

use ferry_store::embedded::{DiskFault, LOG_DIR, Options};
use ferry_store::{Database, RangeOption, StoreError, Transaction};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const KEYS: usize = 24;

fn key(i: usize) -> Vec<u8> {
    format!("k{i:02}").into_bytes()
}

fn options(path: &Path) -> Options {
    Options {
        // A small window: checkpoints also start on their own, mid-scenario.
        window_bytes: 64 << 10,
        ..Options::new(path)
    }
}

async fn open(path: &Path) -> Database {
    Database::open_embedded(options(path)).await.unwrap()
}

/// Commits one `set`.
async fn set(db: &Database, key: Vec<u8>, value: Vec<u8>) {
    db.run(|tx| {
        let (key, value) = (key.clone(), value.clone());
        async move {
            tx.set(&key, value);
            Ok::<_, StoreError>(())
        }
    })
    .await
    .unwrap();
}

/// FoundationDB's ADD, as the model applies it.
fn add(existing: Option<&Vec<u8>>, param: &[u8]) -> Vec<u8> {
    let existing = existing.map_or(&[][..], Vec::as_slice);
    let mut carry = 0u16;
    param
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let sum = u16::from(*existing.get(i).unwrap_or(&0)) + u16::from(*p) + carry;
            carry = sum >> 8;
            sum as u8
        })
        .collect()
}

/// Everything `tx` reads in the key space, checked forwards, backwards and with a limit
/// against `model`.
async fn check(tx: &Transaction, model: &Model, rng: &mut fastrand::Rng, moment: &str) {
    let all = RangeOption::new(b"k".to_vec(), b"l".to_vec());
    let forward: Model = tx
        .get_range(&all, true)
        .await
        .unwrap()
        .into_iter()
        .map(|kv| (kv.key, kv.value))
        .collect();
    assert_eq!(&forward, model, "{moment}: the range read differs");
    let mut reverse = tx.get_range(&all.clone().reverse(), true).await.unwrap();
    reverse.reverse();
    let reverse: Model = reverse.into_iter().map(|kv| (kv.key, kv.value)).collect();
    assert_eq!(&reverse, model, "{moment}: the reverse range read differs");
    let (a, b) = (rng.usize(0..KEYS), rng.usize(0..=KEYS));
    let limit = rng.usize(1..5);
    let limited = RangeOption::new(key(a.min(b)), key(a.max(b))).limit(limit);
    let got: Vec<Vec<u8>> = tx
        .get_range(&limited, true)
        .await
        .unwrap()
        .into_iter()
        .map(|kv| kv.key)
        .collect();
    let want: Vec<Vec<u8>> = model
        .range(key(a.min(b))..key(a.max(b)))
        .map(|(k, _)| k.clone())
        .take(limit)
        .collect();
    assert_eq!(got, want, "{moment}: the limited range read differs");
    for i in 0..KEYS {
        assert_eq!(
            tx.get(&key(i), true).await.unwrap().as_ref(),
            model.get(&key(i)),
            "{moment}: key {i} differs"
        );
    }
}

/// One random transaction, applied to the engine and to `model` alike.
async fn commit_random(db: &Database, model: &mut Model, rng: &mut fastrand::Rng) {
    let tx = db.begin().unwrap();
    let mut next = model.clone();
    let mut stamped = Vec::new();
    for _ in 0..rng.usize(1..6) {
        let stamped_keys: Vec<Vec<u8>> = next
            .range(b"kv".to_vec()..b"kw".to_vec())
            .map(|(k, _)| k.clone())
            .collect();
        match rng.u8(0..12) {
            0..=3 => {
                let (k, len) = (key(rng.usize(0..KEYS)), rng.usize(0..400));
                let value = vec![rng.u8(..); len];
                tx.set(&k, value.clone());
                next.insert(k, value);
            }
            4 | 5 => {
                let k = key(rng.usize(0..KEYS));
                tx.clear(&k);
                next.remove(&k);
            }
            6 => {
                let (a, b) = (rng.usize(0..KEYS), rng.usize(0..=KEYS));
                let (begin, end) = (key(a.min(b)), key(a.max(b)));
                tx.clear_range(&begin, &end);
                next.retain(|k, _| !(begin <= *k && *k < end));
            }
            7 | 8 => {
                let k = key(rng.usize(0..KEYS));
                let delta = rng.i64(-1000..1000);
                tx.atomic_add(&k, delta);
                let sum = add(next.get(&k), &delta.to_le_bytes());
                next.insert(k, sum);
            }
            10 if !stamped_keys.is_empty() => {
                // A message's key taken: one stamped key cleared.
                let k = stamped_keys[rng.usize(0..stamped_keys.len())].clone();
                tx.clear(&k);
                next.remove(&k);
            }
            11 => {
                // The head of a queue taken: the first few stamped keys, by one range clear.
                let n = rng.usize(0..=stamped_keys.len().min(4));
                let end = stamped_keys
                    .get(n)
                    .cloned()
                    .unwrap_or_else(|| b"kw".to_vec());
                tx.clear_range(b"kv", &end);
                next.retain(|k, _| !(b"kv".as_slice() <= k.as_slice() && *k < end));
                if end == b"kw" {
                    // This transaction's own stamped keys sort after every earlier one:
                    // a clear to the end of the queue takes them too.
                    stamped.clear();
                }
            }
            _ => {
                // A versionstamped key inside the key space read ("kv" ‖ stamp ‖ its index),
                // above every key the clears reach.
                let mut template = b"kv".to_vec();
                template.extend_from_slice(&[0xff; 10]);
                template.extend_from_slice(&(stamped.len() as u16).to_be_bytes());
                template.extend_from_slice(&2u32.to_le_bytes());
                let value = vec![rng.u8(..); rng.usize(0..50)];
                tx.set_versionstamped_key(&template, value.clone());
                stamped.push(value);
            }
        }
    }
    let info = tx.commit().await.unwrap();
    if let Some(stamp) = info.versionstamp {
        for (i, value) in stamped.into_iter().enumerate() {
            let mut k = b"kv".to_vec();
            k.extend_from_slice(&stamp);
            k.extend_from_slice(&(i as u16).to_be_bytes());
            next.insert(k, value);
        }
    }
    *model = next;
}

async fn run_scenario(seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut db = open(&path).await;
    let mut model = Model::new();
    // Readers opened earlier, with the state they must keep seeing.
    let mut readers: Vec<(Transaction, Model)> = Vec::new();
    for step in 0..300 {
        let moment = format!("seed {seed}, step {step}");
        match rng.u8(0..100) {
            0..=69 => commit_random(&db, &mut model, &mut rng).await,
            70..=79 => {
                if readers.len() == 3 {
                    readers.remove(0);
                }
                readers.push((db.begin().unwrap(), model.clone()));
            }
            80..=89 => db.checkpoint().await.unwrap(),
            90..=94 if !readers.is_empty() => {
                let (tx, seen) = readers.swap_remove(rng.usize(0..readers.len()));
                check(&tx, &seen, &mut rng, &format!("{moment}, an older reader")).await;
            }
            _ => {
                readers.clear();
                db.close().await;
                db = open(&path).await;
            }
        }
        let tx = db.begin().unwrap();
        check(&tx, &model, &mut rng, &moment).await;
    }
    for (tx, seen) in &readers {
        check(
            tx,
            seen,
            &mut rng,
            &format!("seed {seed}, a reader at the end"),
        )
        .await;
    }
    readers.clear();
    db.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn random_commits_read_as_the_model_across_checkpoints_old_readers_and_reopenings() {
    let seeds: Vec<u64> = match std::env::var("FERRY_ENGINE_SEED") {
        Ok(seed) => vec![seed.parse().unwrap()],
        Err(_) => (1..=6).collect(),
    };
    for seed in seeds {
        eprintln!("seed {seed} (rerun one with FERRY_ENGINE_SEED={seed})");
        run_scenario(seed).await;
    }
}

/// The store's only log segment.
fn segment(store: &Path) -> PathBuf {
    let mut segments: Vec<PathBuf> = std::fs::read_dir(store.join(LOG_DIR))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(segments.len(), 1, "{segments:?}");
    segments.pop().unwrap()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_torn_last_record_recovers_to_the_last_whole_commit_at_every_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let db = Database::open_embedded(Options::new(&path)).await.unwrap();
    for i in 0..3u8 {
        set(&db, key(usize::from(i)), vec![i; 100]).await;
    }
    let before_last = std::fs::metadata(segment(&path)).unwrap().len();
    db.run(|tx| async move {
        tx.set(b"k10", b"last".to_vec());
        tx.clear(&key(0));
        Ok::<_, StoreError>(())
    })
    .await
    .unwrap();
    // Commits are answered after the log's fsync; no checkpoint has run (the window is
    // far from half full, and the interval is 30 s), so the log holds all four.
    let crashed = dir.path().join("crashed");
    copy_dir(&path, &crashed);
    let full = std::fs::read(segment(&crashed)).unwrap();
    assert!(full.len() as u64 > before_last);
    for cut in before_last..=full.len() as u64 {
        for damage in ["truncated", "overwritten"] {
            let trial = dir.path().join(format!("trial-{cut}-{damage}"));
            copy_dir(&crashed, &trial);
            let log = segment(&trial);
            let mut bytes = full.clone();
            if damage == "truncated" {
                bytes.truncate(cut as usize);
            } else {
                for b in &mut bytes[cut as usize..] {
                    *b = 0x5a;
                }
            }
            std::fs::write(&log, bytes).unwrap();
            let reopened = Database::open_embedded(Options::new(&trial)).await.unwrap();
            let tx = reopened.begin().unwrap();
            let whole = cut == full.len() as u64;
            assert_eq!(
                tx.get(b"k10", true).await.unwrap().is_some(),
                whole,
                "{damage} at {cut}: the last commit is there only when whole"
            );
            assert_eq!(
                tx.get(&key(0), true).await.unwrap().is_none(),
                whole,
                "{damage} at {cut}: the last commit is applied whole or not at all"
            );
            for i in 1..3 {
                assert_eq!(
                    tx.get(&key(i), true).await.unwrap(),
                    Some(vec![i as u8; 100]),
                    "{damage} at {cut}: an earlier commit is missing"
                );
            }
            drop(tx);
            // Commits go on after the torn tail, and survive another reopening.
            set(&reopened, b"k11".to_vec(), b"after".to_vec()).await;
            reopened.close().await;
            let again = Database::open_embedded(Options::new(&trial)).await.unwrap();
            let tx = again.begin().unwrap();
            assert_eq!(
                tx.get(b"k11", true).await.unwrap().as_deref(),
                Some(&b"after"[..])
            );
            drop(tx);
            again.close().await;
            std::fs::remove_dir_all(&trial).unwrap();
        }
    }
    db.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_checkpoint_stops_the_engine_and_loses_nothing_committed() {
    for (name, inject) in [
        ("write", DiskFault::NoSpace),
        ("write", DiskFault::Io),
        ("fsync", DiskFault::Io),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store");
        let db = Database::open_embedded(Options::new(&path)).await.unwrap();
        for i in 0..KEYS {
            set(&db, key(i), vec![1; 1000]).await;
        }
        let faults = db.faults().unwrap();
        match name {
            "write" => faults.fail_next_checkpoint_write(inject),
            _ => faults.fail_next_checkpoint_sync(inject),
        }
        let err = db.checkpoint().await.unwrap_err();
        assert!(
            matches!(err, StoreError::Failed(_)),
            "{name} {inject:?}: {err}"
        );
        assert!(
            matches!(db.begin(), Err(StoreError::Failed(_))),
            "{name} {inject:?}: the engine goes on after a failed checkpoint"
        );
        db.close().await;
        let reopened = Database::open_embedded(Options::new(&path)).await.unwrap();
        let tx = reopened.begin().unwrap();
        for i in 0..KEYS {
            assert_eq!(
                tx.get(&key(i), true).await.unwrap().map(|v| v.len()),
                Some(1000),
                "{name} {inject:?}: key {i} was lost"
            );
        }
        drop(tx);
        reopened.checkpoint().await.unwrap();
        reopened.close().await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_checkpoint_releases_the_log_segments_it_covers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let db = Database::open_embedded(Options::new(&path)).await.unwrap();
    // About 40 MB through the log: three 16 MiB segments.
    for i in 0..400usize {
        set(&db, key(i % KEYS), vec![7; 100_000]).await;
    }
    let segments = || std::fs::read_dir(path.join(LOG_DIR)).unwrap().count();
    assert!(segments() >= 3, "{} segments", segments());
    db.checkpoint().await.unwrap();
    assert!(
        segments() <= 2,
        "{} segments after a checkpoint: the current one and a spare at most",
        segments()
    );
    db.close().await;
    let reopened = Database::open_embedded(Options::new(&path)).await.unwrap();
    let tx = reopened.begin().unwrap();
    assert_eq!(
        tx.get(&key(0), true).await.unwrap().map(|v| v.len()),
        Some(100_000)
    );
    drop(tx);
    reopened.close().await;
}

/// Readers racing a writer while checkpoints start on their own (a window of 16 KiB):
/// each commit `n` sets the counter `c` to `n` and adds the key `i{n}`, so a reader that
/// sees `c = n` must see exactly `n` such keys — a snapshot published on a checkpoint
/// older than the window still holds would lose some.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn readers_racing_commits_and_checkpoints_see_whole_commits() {
    const COMMITS: u64 = 3_000;
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open_embedded(Options {
        window_bytes: 16 << 10,
        ..Options::new(dir.path())
    })
    .await
    .unwrap();
    let writer = {
        let db = db.clone();
        tokio::spawn(async move {
            for n in 1..=COMMITS {
                db.run(|tx| async move {
                    tx.set(b"c", n.to_be_bytes().to_vec());
                    tx.set(format!("i{n:06}").as_bytes(), vec![7; 200]);
                    Ok::<_, StoreError>(())
                })
                .await
                .unwrap();
            }
        })
    };
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let db = db.clone();
            tokio::spawn(async move {
                let mut reads = 0u64;
                loop {
                    let (n, keys) = db
                        .run(|tx| async move {
                            let n = tx
                                .get(b"c", false)
                                .await?
                                .map_or(0, |v| u64::from_be_bytes(v[..8].try_into().unwrap()));
                            let range = RangeOption::new(b"i".to_vec(), b"j".to_vec());
                            let keys = tx.get_range(&range, false).await?.len() as u64;
                            Ok::<_, StoreError>((n, keys))
                        })
                        .await
                        .unwrap();
                    assert_eq!(keys, n, "a reader saw commit {n} with {keys} of its keys");
                    reads += 1;
                    if n == COMMITS {
                        return reads;
                    }
                }
            })
        })
        .collect();
    writer.await.unwrap();
    for reader in readers {
        assert!(reader.await.unwrap() > 1, "the readers raced the writer");
    }
    db.close().await;
}
