//! `Stage::pop_exclusive_in`, the pop of a stage whose one consumer is fenced elsewhere (a
//! Kafka partition's sequencer): FIFO, bounded by count and bytes, and — unlike `pop_in` —
//! never made to retry by appends that commit while it runs. On every engine.

use crate::common::store::TestStore;
use ferry_stage::{NewMessage, Stage, StageOptions, Stages};
use ferry_store::StoreError;
use ferry_test_support::for_each_engine;

for_each_engine!(
    takes_the_head_in_order_bounded_by_count_and_bytes,
    an_append_committing_meanwhile_does_not_conflict,
);

async fn stage(store: &TestStore) -> Stage {
    let prefix = String::from_utf8(store.prefix.clone()).unwrap();
    let stages = Stages::new(store.db.clone(), &prefix);
    stages.ensure_schema().await.unwrap();
    stages
        .create("partition", &StageOptions::default())
        .await
        .unwrap()
}

async fn append(s: &Stage, bodies: &[&str]) {
    let messages: Vec<NewMessage> = bodies
        .iter()
        .map(|b| NewMessage::new(b.to_string()))
        .collect();
    s.append(&messages).await.unwrap();
}

async fn pop_exclusive(s: &Stage, k: usize, max_bytes: usize) -> Vec<String> {
    let taken = s
        .db()
        .run(|tx| async move { s.pop_exclusive_in(&tx, k, max_bytes).await })
        .await
        .unwrap();
    taken
        .into_iter()
        .map(|d| String::from_utf8(d.body.to_vec()).unwrap())
        .collect()
}

async fn takes_the_head_in_order_bounded_by_count_and_bytes(store: TestStore) {
    let s = stage(&store).await;
    append(&s, &["aaaa", "bbbb", "cccc", "dddd", "eeeeeeeeee"]).await;
    assert_eq!(pop_exclusive(&s, 2, 1000).await, ["aaaa", "bbbb"]);
    assert_eq!(
        pop_exclusive(&s, 10, 9).await,
        ["cccc", "dddd"],
        "8 bytes fit, 18 do not"
    );
    assert_eq!(
        pop_exclusive(&s, 10, 1).await,
        ["eeeeeeeeee"],
        "the first message is taken whatever its size"
    );
    assert!(pop_exclusive(&s, 10, 1000).await.is_empty());
    let depth = s.depth().await.unwrap();
    assert_eq!((depth.pushed, depth.popped, depth.ready), (5, 5, 0));
}

async fn an_append_committing_meanwhile_does_not_conflict(store: TestStore) {
    let s = stage(&store).await;
    append(&s, &["first"]).await;

    // pop_in reads the whole (short) ready range, so an append in between conflicts.
    let tx = s.db().begin().unwrap();
    assert_eq!(s.pop_in(&tx, 10, 0).await.unwrap().len(), 1);
    append(&s, &["second"]).await;
    assert!(matches!(tx.commit().await, Err(StoreError::NotCommitted)));

    assert_eq!(pop_exclusive(&s, 10, 1000).await, ["first", "second"]);

    // pop_exclusive_in reads the same short range but conflicts only on what it took.
    append(&s, &["third"]).await;
    let tx = s.db().begin().unwrap();
    let taken = s.pop_exclusive_in(&tx, 10, 1000).await.unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].body, &b"third"[..]);
    append(&s, &["fourth"]).await;
    tx.commit().await.unwrap();
    assert_eq!(pop_exclusive(&s, 10, 1000).await, ["fourth"]);
}
