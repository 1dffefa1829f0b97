//! The store conformance suite: one set of test bodies, run against every engine
//! (the embedded engine always; FoundationDB where `FDB_CLUSTER_FILE` names a cluster and
//! ferry is built with `--features fdb`).

use crate::common::store::TestStore;
use ferry_store::embedded::DiskFault;
use ferry_store::error::code;
use ferry_store::keys::key_after;
use ferry_store::{RangeOption, RunOptions, StoreError, Transaction};
use ferry_test_support::for_each_engine;
use foundationdb_tuple::{Subspace, Versionstamp};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

for_each_engine!(
    reads_see_own_writes_and_clears,
    range_reads_honour_limit_reverse_and_own_writes,
    read_write_conflict_is_detected,
    write_skew_is_detected,
    snapshot_reads_never_conflict,
    limited_range_read_conflicts_only_on_what_it_returned,
    explicit_conflict_ranges_conflict,
    versionstamp_order_equals_commit_order,
    versionstamps_increase_across_restart,
    versionstamped_values_carry_the_commit_versionstamp,
    atomic_add_is_conflict_free_under_16_writers,
    watch_fires_when_the_value_changes,
    watch_of_an_uncommitted_transaction_is_cancelled,
    oversized_key_is_key_too_large,
    oversized_value_is_value_too_large,
    oversized_transaction_is_transaction_too_large,
    transaction_older_than_the_age_limit_is_too_old,
    retry_loop_survives_commit_unknown_result_without_double_effect,
    injected_conflicts_are_retried_to_completion,
    a_full_disk_stops_the_store_until_a_restart_recovers_it,
    a_failed_fsync_stops_the_store_until_a_restart_recovers_it,
    a_failed_write_stops_the_store_until_a_restart_recovers_it,
    a_full_disk_at_fsync_stops_the_store_until_a_restart_recovers_it,
);

async fn put(store: &TestStore, pairs: &[(&str, &str)]) {
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = pairs
        .iter()
        .map(|(k, v)| (store.key(k), v.as_bytes().to_vec()))
        .collect();
    store
        .db
        .run(|tx| {
            let pairs = pairs.clone();
            async move {
                for (k, v) in &pairs {
                    tx.set(k, v);
                }
                Ok::<_, StoreError>(())
            }
        })
        .await
        .unwrap();
}

async fn get(store: &TestStore, key: &str) -> Option<Vec<u8>> {
    let tx = store.db.begin().unwrap();
    tx.get(&store.key(key), true).await.unwrap()
}

fn all(store: &TestStore) -> RangeOption {
    RangeOption::prefix(&store.prefix)
}

fn keys_of(store: &TestStore, kvs: &[ferry_store::KeyValue]) -> Vec<String> {
    kvs.iter()
        .map(|kv| String::from_utf8_lossy(&kv.key[store.prefix.len()..]).into_owned())
        .collect()
}

async fn reads_see_own_writes_and_clears(store: TestStore) {
    put(&store, &[("a", "1"), ("b", "2"), ("c", "3")]).await;
    let tx = store.db.begin().unwrap();
    tx.set(&store.key("a"), b"one");
    tx.clear(&store.key("b"));
    tx.clear_range(&store.key("c"), &store.key("d"));
    tx.set(&store.key("c2"), b"new");
    assert_eq!(
        tx.get(&store.key("a"), false).await.unwrap().as_deref(),
        Some(&b"one"[..])
    );
    assert_eq!(tx.get(&store.key("b"), false).await.unwrap(), None);
    assert_eq!(tx.get(&store.key("c"), false).await.unwrap(), None);
    assert_eq!(
        tx.get(&store.key("c2"), false).await.unwrap().as_deref(),
        Some(&b"new"[..])
    );
    tx.commit().await.unwrap();
    assert_eq!(get(&store, "a").await.as_deref(), Some(&b"one"[..]));
    assert_eq!(get(&store, "b").await, None);
    assert_eq!(get(&store, "c").await, None);
    assert_eq!(get(&store, "c2").await.as_deref(), Some(&b"new"[..]));
}

async fn range_reads_honour_limit_reverse_and_own_writes(store: TestStore) {
    put(&store, &[("a", "1"), ("c", "3"), ("e", "5"), ("g", "7")]).await;
    let tx = store.db.begin().unwrap();
    tx.set(&store.key("b"), b"2");
    tx.clear(&store.key("e"));
    tx.atomic_add(&store.key("f"), 6);
    let forward = tx.get_range(&all(&store), false).await.unwrap();
    assert_eq!(keys_of(&store, &forward), ["a", "b", "c", "f", "g"]);
    let f = forward.iter().find(|kv| kv.key == store.key("f")).unwrap();
    assert_eq!(f.value, 6i64.to_le_bytes());
    let first_two = tx.get_range(&all(&store).limit(2), false).await.unwrap();
    assert_eq!(keys_of(&store, &first_two), ["a", "b"]);
    let last_two = tx
        .get_range(&all(&store).limit(2).reverse(), false)
        .await
        .unwrap();
    assert_eq!(keys_of(&store, &last_two), ["g", "f"]);
    let mid = RangeOption::new(store.key("b"), store.key("g"));
    assert_eq!(
        keys_of(&store, &tx.get_range(&mid, true).await.unwrap()),
        ["b", "c", "f"]
    );
    drop(tx);
    // Nothing of the uncommitted transaction is visible to others.
    let other = store.db.begin().unwrap();
    let stored = other.get_range(&all(&store), true).await.unwrap();
    assert_eq!(keys_of(&store, &stored), ["a", "c", "e", "g"]);
}

async fn read_write_conflict_is_detected(store: TestStore) {
    put(&store, &[("k", "0")]).await;
    let reader = store.db.begin().unwrap();
    reader.get(&store.key("k"), false).await.unwrap();
    reader.set(&store.key("out"), b"x");
    put(&store, &[("k", "1")]).await;
    let err = reader.commit().await.unwrap_err();
    assert_eq!(err.code(), Some(code::NOT_COMMITTED), "{err}");
    assert!(err.is_retryable());
    assert_eq!(
        get(&store, "out").await,
        None,
        "a refused commit applies nothing"
    );
}

async fn write_skew_is_detected(store: TestStore) {
    // Two on-call doctors; each transaction checks the other is on call, then leaves.
    put(&store, &[("alice", "on"), ("bob", "on")]).await;
    let t1 = store.db.begin().unwrap();
    let t2 = store.db.begin().unwrap();
    for t in [&t1, &t2] {
        assert!(t.get(&store.key("alice"), false).await.unwrap().is_some());
        assert!(t.get(&store.key("bob"), false).await.unwrap().is_some());
    }
    t1.set(&store.key("alice"), b"off");
    t2.set(&store.key("bob"), b"off");
    t1.commit().await.unwrap();
    let err = t2.commit().await.unwrap_err();
    assert_eq!(err.code(), Some(code::NOT_COMMITTED));
    assert_eq!(get(&store, "bob").await.as_deref(), Some(&b"on"[..]));
}

async fn snapshot_reads_never_conflict(store: TestStore) {
    put(&store, &[("k", "0")]).await;
    let reader = store.db.begin().unwrap();
    reader.get(&store.key("k"), true).await.unwrap();
    reader.get_range(&all(&store), true).await.unwrap();
    reader.set(&store.key("out"), b"x");
    put(&store, &[("k", "1"), ("k2", "2")]).await;
    reader.commit().await.unwrap();
    assert_eq!(get(&store, "out").await.as_deref(), Some(&b"x"[..]));
}

async fn limited_range_read_conflicts_only_on_what_it_returned(store: TestStore) {
    put(&store, &[("q1", "a"), ("q2", "b"), ("q3", "c")]).await;
    let queue = RangeOption::new(store.key("q"), store.key("r"));
    // A consumer reads the head (limit 1); a producer appends at the tail: no conflict.
    let head = store.db.begin().unwrap();
    assert_eq!(
        head.get_range(&queue.clone().limit(1), false)
            .await
            .unwrap()
            .len(),
        1
    );
    head.clear(&store.key("q1"));
    put(&store, &[("q9", "z")]).await;
    head.commit().await.unwrap();
    // Another consumer takes the head while this one reads it: conflict.
    let head = store.db.begin().unwrap();
    head.get_range(&queue.clone().limit(1), false)
        .await
        .unwrap();
    head.clear(&store.key("q2"));
    put(&store, &[("q2", "taken")]).await;
    assert_eq!(
        head.commit().await.unwrap_err().code(),
        Some(code::NOT_COMMITTED)
    );
}

async fn explicit_conflict_ranges_conflict(store: TestStore) {
    let a = store.db.begin().unwrap();
    a.add_read_conflict_range(&store.key("lock"), &key_after(&store.key("lock")));
    a.set(&store.key("a"), b"1");
    let b = store.db.begin().unwrap();
    b.add_write_conflict_range(&store.key("lock"), &key_after(&store.key("lock")));
    b.commit().await.unwrap();
    assert_eq!(
        a.commit().await.unwrap_err().code(),
        Some(code::NOT_COMMITTED)
    );
}

fn stamped_key(store: &TestStore, user_version: u16) -> Vec<u8> {
    Subspace::from_bytes(store.key("vs/"))
        .pack_with_versionstamp(&Versionstamp::incomplete(user_version))
}

async fn append_stamped(store: &TestStore, label: &str) -> [u8; 10] {
    let key = stamped_key(store, 0);
    let label = label.as_bytes().to_vec();
    let (_, info) = store
        .db
        .run_with(RunOptions::default(), |tx| {
            let (key, label) = (key.clone(), label.clone());
            async move {
                tx.set_versionstamped_key(&key, &label);
                Ok::<_, StoreError>(())
            }
        })
        .await
        .unwrap();
    info.versionstamp
        .expect("a writing commit has a versionstamp")
}

async fn stamped_labels(store: &TestStore) -> Vec<(Vec<u8>, String)> {
    let tx = store.db.begin().unwrap();
    let kvs = tx
        .get_range(&RangeOption::prefix(&store.key("vs/")), true)
        .await
        .unwrap();
    kvs.into_iter()
        .map(|kv| (kv.key, String::from_utf8(kv.value).unwrap()))
        .collect()
}

async fn versionstamp_order_equals_commit_order(store: TestStore) {
    let store = Arc::new(store);
    // Sequential commits: each versionstamp is larger than the last.
    let mut last = [0u8; 10];
    for i in 0..20 {
        let vs = append_stamped(&store, &format!("seq{i:02}")).await;
        assert!(vs > last, "versionstamps must increase with commit order");
        last = vs;
    }
    // Concurrent commits: key order equals the order of the versionstamps they received.
    let mut tasks = Vec::new();
    for i in 0..64 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let label = format!("par{i:02}");
            (append_stamped(&store, &label).await, label)
        }));
    }
    let mut by_stamp = Vec::new();
    for t in tasks {
        by_stamp.push(t.await.unwrap());
    }
    by_stamp.sort();
    let stored: Vec<String> = stamped_labels(&store)
        .await
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    let mut expected: Vec<String> = (0..20).map(|i| format!("seq{i:02}")).collect();
    expected.extend(by_stamp.into_iter().map(|(_, l)| l));
    assert_eq!(stored, expected);
}

async fn versionstamps_increase_across_restart(mut store: TestStore) {
    let before = append_stamped(&store, "before").await;
    store.restart().await;
    let after = append_stamped(&store, "after").await;
    assert!(after > before, "{after:?} must sort after {before:?}");
    let labels: Vec<String> = stamped_labels(&store)
        .await
        .into_iter()
        .map(|(_, l)| l)
        .collect();
    assert_eq!(labels, ["before", "after"]);
}

async fn versionstamped_values_carry_the_commit_versionstamp(store: TestStore) {
    let key = store.key("stamp");
    let value = foundationdb_tuple::pack_with_versionstamp(&Versionstamp::incomplete(7));
    let (_, info) = store
        .db
        .run_with(RunOptions::default(), |tx| {
            let (key, value) = (key.clone(), value.clone());
            async move {
                tx.set_versionstamped_value(&key, &value);
                Ok::<_, StoreError>(())
            }
        })
        .await
        .unwrap();
    let stored = get(&store, "stamp").await.unwrap();
    let vs: Versionstamp = foundationdb_tuple::unpack(&stored).unwrap();
    assert_eq!(vs.transaction_version(), info.versionstamp.unwrap());
    assert_eq!(vs.user_version(), 7);
}

async fn atomic_add_is_conflict_free_under_16_writers(store: TestStore) {
    let store = Arc::new(store);
    let counter = store.key("counter");
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (store, counter) = (store.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..50 {
                // One attempt each: a conflict would surface as an error here.
                store
                    .db
                    .run_with(RunOptions::once(), |tx| {
                        let counter = counter.clone();
                        async move {
                            tx.atomic_add(&counter, 1);
                            Ok::<_, StoreError>(())
                        }
                    })
                    .await
                    .expect("atomic adds never conflict");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let total = get(&store, "counter").await.unwrap();
    assert_eq!(i64::from_le_bytes(total.try_into().unwrap()), 16 * 50);
}

async fn watch_fires_when_the_value_changes(store: TestStore) {
    put(&store, &[("w", "0")]).await;
    let key = store.key("w");
    let tx = store.db.begin().unwrap();
    let watch = tx.watch(&key);
    tx.commit().await.unwrap();
    let mut watch = Box::pin(watch);
    // Not fired while nothing changes.
    assert!(
        tokio::time::timeout(Duration::from_millis(100), &mut watch)
            .await
            .is_err()
    );
    put(&store, &[("w", "1")]).await;
    tokio::time::timeout(Duration::from_secs(10), watch)
        .await
        .expect("the watch fires after the change")
        .expect("the watch resolves without error");
    // A watch made after the change, in a transaction that saw the new value, waits for
    // the next change; an atomic add is a change.
    let tx = store.db.begin().unwrap();
    let watch = tx.watch(&key);
    tx.commit().await.unwrap();
    let adder = store.db.begin().unwrap();
    adder.atomic_add(&store.key("w"), 1);
    adder.commit().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), watch)
        .await
        .unwrap()
        .unwrap();
}

async fn watch_of_an_uncommitted_transaction_is_cancelled(store: TestStore) {
    let tx = store.db.begin().unwrap();
    let watch = tx.watch(&store.key("never"));
    drop(tx);
    let outcome = tokio::time::timeout(Duration::from_secs(10), watch)
        .await
        .unwrap();
    assert!(
        outcome.is_err(),
        "a watch whose transaction never committed fails"
    );
}

async fn oversized_key_is_key_too_large(store: TestStore) {
    let tx = store.db.begin().unwrap();
    let mut key = store.key("k");
    key.resize(10_001, b'x');
    tx.set(&key, b"v");
    let err = tx.commit().await.unwrap_err();
    assert_eq!(err.code(), Some(code::KEY_TOO_LARGE), "{err}");
    assert!(!err.is_retryable());
}

async fn oversized_value_is_value_too_large(store: TestStore) {
    let tx = store.db.begin().unwrap();
    tx.set(&store.key("v"), vec![0u8; 100_001]);
    let err = tx.commit().await.unwrap_err();
    assert_eq!(err.code(), Some(code::VALUE_TOO_LARGE), "{err}");
    // Exactly at the limit is fine.
    let tx = store.db.begin().unwrap();
    tx.set(&store.key("v"), vec![0u8; 100_000]);
    tx.commit().await.unwrap();
}

async fn oversized_transaction_is_transaction_too_large(store: TestStore) {
    let tx = store.db.begin().unwrap();
    for i in 0..110 {
        tx.set(&store.key(&format!("big{i:03}")), vec![1u8; 95_000]);
    }
    let err = tx.commit().await.unwrap_err();
    assert_eq!(err.code(), Some(code::TRANSACTION_TOO_LARGE), "{err}");
    assert_eq!(get(&store, "big000").await, None);
}

async fn transaction_older_than_the_age_limit_is_too_old(mut store: TestStore) {
    let limit = store
        .limit_transaction_age(Duration::from_millis(200))
        .await;
    let tx = store.db.begin().unwrap();
    tx.get(&store.key("x"), false).await.unwrap();
    tokio::time::sleep(limit + Duration::from_millis(300)).await;
    let err = tx.get(&store.key("x"), false).await.unwrap_err();
    assert_eq!(err.code(), Some(code::TRANSACTION_TOO_OLD), "{err}");
    assert!(err.is_retryable());
}

/// A non-idempotent read-modify-write (`balance += 1`), made safe by recording each
/// transfer's id in the same transaction and checking it when a retry may follow a commit
/// that was in fact applied.
async fn transfer(
    tx: Transaction,
    store: &TestStore,
    id: u32,
    guarded: bool,
) -> Result<(), StoreError> {
    let marker = store.key(&format!("done/{id}"));
    if guarded && tx.maybe_committed() && tx.get(&marker, false).await?.is_some() {
        return Ok(());
    }
    let balance_key = store.key("balance");
    let balance = tx
        .get(&balance_key, false)
        .await?
        .map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()));
    tx.set(&balance_key, &(balance + 1).to_be_bytes());
    tx.set(&marker, b"");
    Ok(())
}

async fn balance(store: &TestStore) -> u64 {
    get(store, "balance")
        .await
        .map_or(0, |v| u64::from_be_bytes(v.try_into().unwrap()))
}

async fn retry_loop_survives_commit_unknown_result_without_double_effect(store: TestStore) {
    let Some(faults) = store.db.faults() else {
        eprintln!("skipped: this engine cannot inject commit_unknown_result");
        return;
    };
    faults.set_unknown_result_rate(0.3);
    let unknown = AtomicUsize::new(0);
    for id in 0..100 {
        store
            .db
            .run(|tx| {
                if tx.maybe_committed() {
                    unknown.fetch_add(1, Ordering::Relaxed);
                }
                transfer(tx, &store, id, true)
            })
            .await
            .unwrap();
    }
    assert!(unknown.load(Ordering::Relaxed) > 0, "faults were injected");
    assert_eq!(
        balance(&store).await,
        100,
        "each transfer applied exactly once"
    );

    // The same closure without the guard applies some transfers twice: the injected
    // outcome really was "applied but unknown".
    store
        .db
        .run(|tx| {
            let key = store.key("balance");
            async move {
                tx.clear(&key);
                Ok::<_, StoreError>(())
            }
        })
        .await
        .ok();
    for id in 1000..1100 {
        store
            .db
            .run(|tx| transfer(tx, &store, id, false))
            .await
            .unwrap();
    }
    faults.set_unknown_result_rate(0.0);
    assert!(
        balance(&store).await > 100,
        "unguarded retries double-apply"
    );
}

async fn injected_conflicts_are_retried_to_completion(store: TestStore) {
    let Some(faults) = store.db.faults() else {
        eprintln!("skipped: this engine cannot inject conflicts");
        return;
    };
    faults.set_conflict_rate(0.5);
    let attempts = AtomicUsize::new(0);
    for id in 0..50 {
        store
            .db
            .run(|tx| {
                attempts.fetch_add(1, Ordering::Relaxed);
                transfer(tx, &store, id, true)
            })
            .await
            .unwrap();
    }
    faults.set_conflict_rate(0.0);
    assert!(
        attempts.load(Ordering::Relaxed) > 50,
        "conflicts were injected and retried"
    );
    assert_eq!(balance(&store).await, 50);
    // A single attempt reports the injected conflict to the caller.
    faults.set_conflict_rate(1.0);
    let err = store
        .db
        .run_with(RunOptions::once(), |tx| transfer(tx, &store, 999, true))
        .await
        .unwrap_err();
    faults.set_conflict_rate(0.0);
    assert_eq!(err.code(), Some(code::NOT_COMMITTED));
}

async fn a_full_disk_stops_the_store_until_a_restart_recovers_it(store: TestStore) {
    a_disk_failure_stops_the_store_until_a_restart_recovers_it(
        store,
        |faults| faults.fail_next_write(DiskFault::NoSpace),
        "No space left on device",
    )
    .await;
}

async fn a_failed_fsync_stops_the_store_until_a_restart_recovers_it(store: TestStore) {
    a_disk_failure_stops_the_store_until_a_restart_recovers_it(
        store,
        |faults| faults.fail_next_sync(DiskFault::Io),
        "Input/output error",
    )
    .await;
}

async fn a_failed_write_stops_the_store_until_a_restart_recovers_it(store: TestStore) {
    a_disk_failure_stops_the_store_until_a_restart_recovers_it(
        store,
        |faults| faults.fail_next_write(DiskFault::Io),
        "Input/output error",
    )
    .await;
}

async fn a_full_disk_at_fsync_stops_the_store_until_a_restart_recovers_it(store: TestStore) {
    a_disk_failure_stops_the_store_until_a_restart_recovers_it(
        store,
        |faults| faults.fail_next_sync(DiskFault::NoSpace),
        "No space left on device",
    )
    .await;
}

/// `inject` makes the disk fail the next commit's write or fsync with the operating
/// system's error `reason`: that commit fails naming it, and so does every later
/// transaction (the engine never retries an fsync and trusts it); after a restart every
/// earlier commit is there, the failed one entirely or not at all (a failed fsync may
/// still have reached the disk), and the store takes commits again.
async fn a_disk_failure_stops_the_store_until_a_restart_recovers_it(
    mut store: TestStore,
    inject: impl Fn(&ferry_store::embedded::Faults),
    reason: &str,
) {
    let Some(faults) = store.db.faults() else {
        eprintln!("skipped: this engine cannot inject a disk failure");
        return;
    };
    put(&store, &[("kept", "1")]).await;
    inject(faults);
    let tx = store.db.begin().unwrap();
    tx.set(&store.key("failed-a"), b"2");
    tx.set(&store.key("failed-b"), b"3");
    let err = tx.commit().await.unwrap_err();
    assert!(matches!(err, StoreError::Failed(_)), "{err}");
    assert!(err.to_string().contains(reason), "{err}");
    assert!(!err.is_retryable());
    assert!(store.db.failure().is_some());
    // Refused from now on, even though the fault was injected once.
    assert!(matches!(store.db.begin(), Err(StoreError::Failed(_))));
    assert!(store.db.ping().await.is_err(), "readiness sees the failure");
    store.restart().await;
    assert!(store.db.failure().is_none());
    assert_eq!(get(&store, "kept").await.as_deref(), Some(&b"1"[..]));
    let (a, b) = (get(&store, "failed-a").await, get(&store, "failed-b").await);
    assert_eq!(
        a.is_some(),
        b.is_some(),
        "half of a batch survived: {a:?} {b:?}"
    );
    put(&store, &[("after", "4")]).await;
    assert_eq!(get(&store, "after").await.as_deref(), Some(&b"4"[..]));
}
