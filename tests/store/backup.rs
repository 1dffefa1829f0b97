//! Backup and restore of the embedded engine ([`ferry_store::backup`]): a backup shows the
//! store at its read version exactly, however long it takes and however much is committed
//! and checkpointed meanwhile (past the transaction age limit, more than the window holds); restore loads it into an
//! empty store key for key, refuses a store that holds anything, and refuses a file that
//! was cut short or damaged anywhere, loading nothing after the damage.

use ferry_store::backup::{Backup, BackupError, BackupReader, restore};
use ferry_store::embedded::Options;
use ferry_store::{Database, RangeOption, StoreError};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A small window and a short age limit, so checkpoints run and snapshots age during a
/// backup.
async fn open(path: &Path) -> Database {
    Database::open_embedded(Options {
        window_bytes: 64 << 10,
        max_transaction_age: Duration::from_millis(200),
        ..Options::new(path)
    })
    .await
    .unwrap()
}

/// Commits `pairs` (a `None` value clears the key).
async fn commit(db: &Database, pairs: &[(Vec<u8>, Option<Vec<u8>>)]) {
    db.run(|tx| async move {
        for (key, value) in pairs {
            match value {
                Some(v) => tx.set(key, v.clone()),
                None => tx.clear(key),
            }
        }
        Ok::<_, StoreError>(())
    })
    .await
    .unwrap();
}

/// Every pair of the store.
async fn everything(db: &Database) -> Model {
    let range = RangeOption::new(Vec::new(), ferry_store::keys::keyspace_end());
    db.run(|tx| {
        let range = range.clone();
        async move { tx.get_range(&range, true).await }
    })
    .await
    .unwrap()
    .into_iter()
    .map(|kv| (kv.key, kv.value))
    .collect()
}

/// A seeded store of `n` keys, values of 1–3000 bytes.
async fn filled(db: &Database, n: usize, seed: u64) -> Model {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut model = Model::new();
    for _ in 0..n.div_ceil(200) {
        let pairs: Vec<_> = (0..200.min(n))
            .map(|_| {
                let key = format!("k{:06}", rng.usize(..n * 4)).into_bytes();
                let value: Vec<u8> = (0..rng.usize(1..3000)).map(|_| rng.u8(..)).collect();
                model.insert(key.clone(), value.clone());
                (key, Some(value))
            })
            .collect();
        commit(db, &pairs).await;
    }
    model
}

/// Restores `bytes` into a new store at `path`; returns it and what restore said.
async fn restored(path: &Path, bytes: &[u8]) -> (Database, Result<u64, BackupError>) {
    let db = open(path).await;
    let result = match BackupReader::open(bytes) {
        Ok(mut reader) => restore(&db, &mut reader).await.map(|t| t.pairs),
        Err(e) => Err(e),
    };
    (db, result)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_backup_shows_its_read_version_while_commits_and_checkpoints_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir.path().join("a")).await;
    let before = filled(&db, 3_000, 7).await;
    let mut backup = Backup::start(&db).await.unwrap();
    let mut bytes = Vec::new();
    let mut rng = fastrand::Rng::with_seed(11);
    // Between frames, overwrite and clear keys the backup has not read yet and has
    // read already — more bytes each time than the window holds, which the backup must
    // not hold back (a commit that waited for it would wait forever here) — and
    // checkpoint; wait past the age limit (and the margin a superseded snapshot is kept
    // beyond it) once.
    let mut frames = 0;
    while let Some(frame) = backup.next_bytes().unwrap() {
        bytes.extend_from_slice(&frame);
        frames += 1;
        let changes: Vec<_> = (0..50)
            .map(|_| {
                let key = format!("k{:06}", rng.usize(..12_000)).into_bytes();
                (key, rng.bool().then(|| vec![b'c'; 2_048]))
            })
            .collect();
        tokio::time::timeout(Duration::from_secs(60), commit(&db, &changes))
            .await
            .expect("a commit waited for the backup");
        db.checkpoint().await.unwrap();
        if frames == 2 {
            tokio::time::sleep(Duration::from_millis(1_500)).await;
        }
    }
    assert!(
        frames > 4,
        "the backup should span several frames ({frames})"
    );
    assert_ne!(everything(&db).await, before, "the store changed meanwhile");

    let (copy, result) = restored(&dir.path().join("b"), &bytes).await;
    assert_eq!(result.unwrap(), before.len() as u64);
    assert_eq!(everything(&copy).await, before);
    copy.close().await;
    db.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn restore_refuses_a_store_that_holds_anything() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir.path().join("a")).await;
    filled(&db, 50, 1).await;
    let mut bytes = Vec::new();
    Backup::start(&db)
        .await
        .unwrap()
        .write_to(&mut bytes)
        .unwrap();
    db.close().await;

    let target = open(&dir.path().join("b")).await;
    commit(&target, &[(b"already".to_vec(), Some(b"here".to_vec()))]).await;
    let mut reader = BackupReader::open(&bytes[..]).unwrap();
    let err = restore(&target, &mut reader).await.unwrap_err();
    assert!(
        matches!(err, BackupError::NotEmpty(ref key) if key == "already"),
        "{err}"
    );
    assert_eq!(everything(&target).await.len(), 1, "nothing was loaded");
    target.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_damaged_or_cut_short_file_is_refused_and_nothing_after_the_damage_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir.path().join("a")).await;
    let model = filled(&db, 2_000, 3).await;
    let mut bytes = Vec::new();
    let (_, totals) = Backup::start(&db)
        .await
        .unwrap()
        .write_to(&mut bytes)
        .unwrap();
    db.close().await;
    assert_eq!(totals.pairs, model.len() as u64);

    let mut rng = fastrand::Rng::with_seed(5);
    for trial in 0..12 {
        let mut damaged = bytes.clone();
        let at = rng.usize(..bytes.len());
        let expect = if trial % 2 == 0 {
            damaged[at] ^= 1 << rng.u8(..8);
            "fails its checksum"
        } else {
            damaged.truncate(at);
            "cut short"
        };
        let (copy, result) = restored(&dir.path().join(format!("t{trial}")), &damaged).await;
        let err = result.unwrap_err().to_string();
        // A flipped bit in the magic line or a frame's length reads differently, but
        // every damage is refused.
        assert!(
            err.contains(expect) || err.contains("not a readable Ferry backup"),
            "trial {trial} at byte {at}: {err}"
        );
        let loaded = everything(&copy).await;
        assert!(
            loaded.len() < model.len(),
            "trial {trial}: the whole file was loaded"
        );
        for (key, value) in &loaded {
            assert_eq!(
                model.get(key),
                Some(value),
                "trial {trial}: a damaged pair was loaded"
            );
        }
        copy.close().await;
    }
}
