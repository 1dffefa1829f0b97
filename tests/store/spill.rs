//! Spills, on every engine: a payload written in several transactions is referenced by the
//! stage entries that name it (one per queue of a fanout, one per dead-lettered copy),
//! freed only when the last reference goes (ack, pop, stage delete), and freed when the
//! lease holder that wrote it is released before any message referenced it (a publisher
//! that died in the middle).

use crate::common::store::TestStore;
use bytes::Bytes;
use ferry_stage::spill::SEGMENT;
use ferry_stage::{
    Holders, NewMessage, Release, RootKeys, Spill, Spills, Stage, StageOptions, Stages,
};
use ferry_store::RangeOption;
use ferry_test_support::for_each_engine;
use std::time::Duration;

for_each_engine!(
    a_spill_shared_by_two_stages_is_freed_after_both_let_go,
    a_spill_whose_writer_is_released_before_its_commit_is_freed,
    deleting_a_stage_drops_its_messages_references,
    a_dead_lettered_copy_keeps_the_spill,
    a_spill_is_read_back_in_pieces_exactly,
);

struct Fixture {
    stages: Stages,
    spills: Spills,
    root: RootKeys,
    holder: u64,
}

async fn fixture(store: &TestStore) -> Fixture {
    let prefix = String::from_utf8(store.prefix.clone()).unwrap();
    let stages = Stages::new(store.db.clone(), &prefix);
    stages.ensure_schema().await.unwrap();
    let holder = Holders::new(&stages)
        .register(Duration::from_secs(60))
        .await
        .unwrap();
    Fixture {
        spills: stages.spills(),
        root: RootKeys::new(&prefix),
        stages,
        holder,
    }
}

fn payload(len: usize) -> Bytes {
    (0..len as u32).map(|i| (i % 253) as u8).collect()
}

/// Writes `body` to a new spill held by the fixture's holder, segment by segment.
async fn write(f: &Fixture, body: &Bytes) -> Spill {
    let id = Spills::new_id();
    let mut offset = 0;
    while offset < body.len() {
        let end = (offset + SEGMENT).min(body.len());
        f.spills
            .write(f.holder, id, offset as u64, &body.slice(offset..end))
            .await
            .unwrap();
        offset = end;
    }
    Spill {
        id,
        len: body.len() as u64,
    }
}

/// Appends a message whose payload is `spill` to each of `stages` and lets go of the
/// writer's hold, in one transaction (as a publish's commit does).
async fn commit(f: &Fixture, spill: Spill, stages: &[&Stage]) {
    f.stages
        .db()
        .run(|tx| async move {
            for s in stages {
                let m = NewMessage::new(&b"head"[..]).spill(Some(spill));
                s.append_in(&tx, &[m], 0).await?;
            }
            assert!(f.spills.let_go_in(&tx, f.holder, spill.id).await?);
            Ok::<_, ferry_stage::StageError>(())
        })
        .await
        .unwrap();
}

/// The bytes spills hold after a collection, and how many chunk keys are left.
async fn collected(f: &Fixture) -> (i64, usize) {
    f.spills.collect().await.unwrap();
    let (b, e) = f.root.all_spill_chunks();
    let tx = f.stages.db().begin().unwrap();
    let chunks = tx.get_range(&RangeOption::new(b, e), true).await.unwrap();
    (f.spills.bytes().await.unwrap(), chunks.len())
}

async fn a_spill_shared_by_two_stages_is_freed_after_both_let_go(store: TestStore) {
    let f = fixture(&store).await;
    let a = f
        .stages
        .create("a", &StageOptions::default())
        .await
        .unwrap();
    let b = f
        .stages
        .create("b", &StageOptions::default())
        .await
        .unwrap();
    let body = payload(2 * SEGMENT + 12_345);
    let spill = write(&f, &body).await;
    commit(&f, spill, &[&a, &b]).await;
    assert_eq!(collected(&f).await, (body.len() as i64, 2 * 40 + 1));
    let got = a.pop(1).await.unwrap();
    assert_eq!(got[0].envelope.spill, Some(spill));
    assert_eq!(&got[0].body[..], b"head");
    assert_eq!(
        collected(&f).await.0,
        body.len() as i64,
        "b still references it"
    );
    let leased = b.lease(f.holder, 1).await.unwrap();
    b.ack(f.holder, &[leased[0].id]).await.unwrap();
    assert_eq!(collected(&f).await, (0, 0));
}

async fn a_spill_whose_writer_is_released_before_its_commit_is_freed(store: TestStore) {
    let f = fixture(&store).await;
    write(&f, &payload(SEGMENT + 1)).await;
    assert_eq!(
        collected(&f).await.0,
        SEGMENT as i64 + 1,
        "held by its writer"
    );
    Holders::new(&f.stages).release(f.holder).await.unwrap();
    assert_eq!(collected(&f).await, (0, 0));
}

async fn deleting_a_stage_drops_its_messages_references(store: TestStore) {
    let f = fixture(&store).await;
    let q = f
        .stages
        .create("q", &StageOptions::default())
        .await
        .unwrap();
    let spill = write(&f, &payload(1000)).await;
    commit(&f, spill, &[&q]).await;
    let leased = q.lease(f.holder, 1).await.unwrap();
    assert_eq!(
        leased.len(),
        1,
        "leased or ready, the stage's index names it"
    );
    assert_eq!(collected(&f).await.0, 1000);
    assert!(f.stages.delete("q").await.unwrap());
    assert_eq!(collected(&f).await, (0, 0));
}

async fn a_dead_lettered_copy_keeps_the_spill(store: TestStore) {
    let f = fixture(&store).await;
    f.stages
        .create("dlq", &StageOptions::default())
        .await
        .unwrap();
    let options = StageOptions {
        dead_letter: Some("dlq".into()),
        ..StageOptions::default()
    };
    let q = f.stages.create("q", &options).await.unwrap();
    let dlq = f.stages.open("dlq").await.unwrap();
    let spill = write(&f, &payload(5000)).await;
    commit(&f, spill, &[&q]).await;
    let leased = q.lease(f.holder, 1).await.unwrap();
    q.release(f.holder, &[leased[0].id], Release::Reject)
        .await
        .unwrap();
    assert_eq!(
        collected(&f).await.0,
        5000,
        "the dead-lettered copy references it"
    );
    let dead = dlq.pop(1).await.unwrap();
    assert_eq!(dead[0].envelope.spill, Some(spill));
    assert_eq!(collected(&f).await, (0, 0));
}

async fn a_spill_is_read_back_in_pieces_exactly(store: TestStore) {
    let f = fixture(&store).await;
    let body = payload(SEGMENT + 250_001);
    let spill = write(&f, &body).await;
    assert_eq!(f.spills.read_all(spill).await.unwrap(), body);
    let piece = f.spills.read(spill, 300_000, 100_000).await.unwrap();
    assert_eq!(piece, body.slice(300_000..400_000));
    assert!(
        f.spills
            .read(
                Spill {
                    id: spill.id + 1,
                    ..spill
                },
                0,
                10
            )
            .await
            .is_err(),
        "a missing spill is an error, not a short read"
    );
}
