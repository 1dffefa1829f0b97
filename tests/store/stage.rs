//! The stage's behaviour, on every engine: FIFO, priority lanes, counters, pop_k, leases,
//! returns to the original position, holder expiry, the delivery limit and dead-letter
//! stage, expiry, idempotent appends, large bodies, and the registry.

use crate::common::store::TestStore;
use ferry_stage::{
    AppendOutcome, Consumer, DeadLetterReason, Holders, NewMessage, Release, Stage, StageError,
    StageOptions, Stages, now_ms,
};
use ferry_stage::{Incarnation, Scope};
use ferry_test_support::for_each_engine;
use std::time::Duration;

for_each_engine!(
    pop_returns_messages_in_append_order,
    higher_priority_first_and_fifo_within_a_priority,
    counters_track_push_pop_and_in_flight,
    pop_k_takes_at_most_k_in_one_transaction,
    idle_consumer_sleeps_until_a_message_arrives,
    ack_removes_for_good_and_a_repeated_ack_is_harmless,
    nack_returns_message_to_original_position,
    expired_holder_returns_its_leases,
    a_restart_returns_its_earlier_incarnations_leases_and_not_another_instances,
    a_restart_returns_leases_taken_after_their_holder_was_released,
    delivery_limit_moves_message_to_dead_letter_stage,
    reject_dead_letters_or_drops,
    expired_message_is_dead_lettered_not_delivered,
    append_with_same_producer_sequence_is_a_duplicate,
    bodies_larger_than_a_value_are_chunked,
    oversized_body_is_refused,
    registry_creates_opens_and_refuses_inequivalent_redeclare,
    purge_removes_ready_messages_only,
    competing_consumers_share_without_duplicates,
    drop_head_dead_letters_the_oldest_with_reason_max_length,
    expire_head_stops_at_the_first_live_message,
    consumer_lease_size_follows_set_batch_and_forget_drops_acked_ids,
    delete_in_removes_a_stage_inside_a_larger_transaction,
);

async fn stage(store: &TestStore, name: &str, options: StageOptions) -> (Stages, Stage) {
    let prefix = String::from_utf8(store.prefix.clone()).unwrap();
    let stages = Stages::new(store.db.clone(), &prefix);
    stages.ensure_schema().await.unwrap();
    let s = stages.create(name, &options).await.unwrap();
    (stages, s)
}

/// A dead-letter stage "dlq" and a stage `name` dead-lettering into it with `options`.
async fn with_dead_letter(
    store: &TestStore,
    name: &str,
    options: StageOptions,
) -> (Stages, Stage, Stage) {
    let (stages, dlq) = stage(store, "dlq", StageOptions::default()).await;
    let options = StageOptions {
        dead_letter: Some("dlq".into()),
        ..options
    };
    let q = stages.create(name, &options).await.unwrap();
    (stages, dlq, q)
}

/// A holder alive for a minute.
async fn holder(stages: &Stages) -> u64 {
    Holders::new(stages)
        .register(Duration::from_secs(60))
        .await
        .unwrap()
}

fn bodies(ds: &[ferry_stage::Delivery]) -> Vec<String> {
    ds.iter()
        .map(|d| String::from_utf8(d.body.to_vec()).unwrap())
        .collect()
}

async fn append_all(stage: &Stage, items: &[(&str, u8)]) {
    let msgs: Vec<NewMessage> = items
        .iter()
        .map(|(b, p)| NewMessage::new(b.to_string()).priority(*p))
        .collect();
    stage.append(&msgs).await.unwrap();
}

async fn pop_returns_messages_in_append_order(store: TestStore) {
    let (_, q) = stage(&store, "fifo", StageOptions::default()).await;
    let mut expected = Vec::new();
    for batch in 0..10 {
        let msgs: Vec<NewMessage> = (0..10)
            .map(|i| NewMessage::new(format!("m{:03}", batch * 10 + i)))
            .collect();
        expected.extend(
            msgs.iter()
                .map(|m| String::from_utf8(m.body.to_vec()).unwrap()),
        );
        q.append(&msgs).await.unwrap();
    }
    let mut got = Vec::new();
    loop {
        let batch = q.pop(7).await.unwrap();
        if batch.is_empty() {
            break;
        }
        got.extend(bodies(&batch));
    }
    assert_eq!(got, expected);
}

async fn higher_priority_first_and_fifo_within_a_priority(store: TestStore) {
    let options = StageOptions {
        max_priority: 10,
        ..StageOptions::default()
    };
    let (_, q) = stage(&store, "prio", options).await;
    append_all(
        &q,
        &[
            ("low1", 1),
            ("high1", 9),
            ("mid1", 5),
            ("high2", 9),
            ("low2", 1),
            ("capped", 200),
            ("top", 10),
        ],
    )
    .await;
    let got = bodies(&q.pop(100).await.unwrap());
    // 200 is capped to the stage's maximum 10 and shares its lane with "top", FIFO.
    assert_eq!(
        got,
        ["capped", "top", "high1", "high2", "mid1", "low1", "low2"]
    );
    let (_, flat) = stage(&store, "flat", StageOptions::default()).await;
    append_all(&flat, &[("a", 0), ("b", 9), ("c", 3)]).await;
    assert_eq!(
        bodies(&flat.pop(10).await.unwrap()),
        ["a", "b", "c"],
        "a stage without priorities is plain FIFO"
    );
}

async fn counters_track_push_pop_and_in_flight(store: TestStore) {
    let (stages, q) = stage(&store, "count", StageOptions::default()).await;
    let msgs: Vec<NewMessage> = (0..10).map(|i| NewMessage::new(vec![i])).collect();
    q.append(&msgs).await.unwrap();
    q.pop(3).await.unwrap();
    let holder = holder(&stages).await;
    let leased = q.lease(holder, 2).await.unwrap();
    let d = q.depth().await.unwrap();
    assert_eq!((d.pushed, d.popped, d.in_flight, d.ready), (10, 3, 2, 5));
    q.ack(holder, &[leased[0].id]).await.unwrap();
    let d = q.depth().await.unwrap();
    assert_eq!((d.pushed, d.popped, d.in_flight, d.ready), (10, 4, 1, 5));
}

async fn pop_k_takes_at_most_k_in_one_transaction(store: TestStore) {
    let (_, q) = stage(&store, "popk", StageOptions::default()).await;
    let msgs: Vec<NewMessage> = (0..10).map(|i| NewMessage::new(vec![i])).collect();
    q.append(&msgs).await.unwrap();
    assert_eq!(q.pop(4).await.unwrap().len(), 4);
    assert_eq!(q.pop(100).await.unwrap().len(), 6);
    assert!(q.pop(4).await.unwrap().is_empty());
}

async fn idle_consumer_sleeps_until_a_message_arrives(store: TestStore) {
    let (stages, q) = stage(&store, "idle", StageOptions::default()).await;
    let holders = Holders::new(&stages);
    let holder = holders.register(Duration::from_secs(60)).await.unwrap();
    let mut consumer = Consumer::new(q.clone(), holders, holder, 10);
    let waiting = tokio::spawn(async move { consumer.next().await.map(|d| bodies(&d)) });
    // The point: for a while, with nothing to consume, the consumer sleeps.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiting.is_finished(), "nothing to consume yet");
    append_all(&q, &[("wake", 0)]).await;
    let got = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(got, ["wake"]);
}

async fn ack_removes_for_good_and_a_repeated_ack_is_harmless(store: TestStore) {
    let (stages, q) = stage(&store, "ack", StageOptions::default()).await;
    append_all(&q, &[("a", 0), ("b", 0), ("c", 0)]).await;
    let holder = holder(&stages).await;
    let leased = q.lease(holder, 3).await.unwrap();
    let ids: Vec<_> = leased.iter().map(|d| d.id).collect();
    assert_eq!(q.ack(holder, &ids[..2]).await.unwrap(), 2);
    assert_eq!(
        q.ack(holder, &ids[..2]).await.unwrap(),
        0,
        "already acknowledged"
    );
    assert_eq!(
        q.ack(holder + 1, &ids[2..]).await.unwrap(),
        0,
        "not this holder's lease"
    );
    assert_eq!(Holders::new(&stages).release(holder).await.unwrap(), 1);
    assert_eq!(bodies(&q.pop(10).await.unwrap()), ["c"]);
}

async fn nack_returns_message_to_original_position(store: TestStore) {
    let (stages, q) = stage(&store, "nack", StageOptions::default()).await;
    append_all(&q, &[("a", 0), ("b", 0), ("c", 0)]).await;
    let holder = holder(&stages).await;
    let first = q.lease(holder, 1).await.unwrap();
    assert_eq!(bodies(&first), ["a"]);
    assert!(!first[0].redelivered());
    let second = q.lease(holder, 1).await.unwrap();
    assert_eq!(bodies(&second), ["b"]);
    assert_eq!(
        q.release(holder, &[first[0].id], Release::Requeue)
            .await
            .unwrap(),
        1
    );
    let again = q.lease(holder, 10).await.unwrap();
    assert_eq!(
        bodies(&again),
        ["a", "c"],
        "a is back before c, in its original place"
    );
    assert_eq!(again[0].id, first[0].id);
    assert!(again[0].redelivered());
    assert_eq!(again[0].envelope.delivery_count, 2);
}

async fn expired_holder_returns_its_leases(store: TestStore) {
    let (stages, q) = stage(&store, "expiry", StageOptions::default()).await;
    append_all(&q, &[("a", 0), ("b", 0), ("c", 0)]).await;
    let holders = Holders::new(&stages);
    let dead = holders.register(Duration::from_millis(50)).await.unwrap();
    let alive = holders.register(Duration::from_secs(60)).await.unwrap();
    assert_eq!(bodies(&q.lease(dead, 2).await.unwrap()), ["a", "b"]);
    // The point: the dead holder's 50 ms TTL passes.
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(holders.reap_expired().await.unwrap(), 2);
    let d = q.depth().await.unwrap();
    assert_eq!((d.ready, d.in_flight), (3, 0));
    assert_eq!(bodies(&q.lease(alive, 10).await.unwrap()), ["a", "b", "c"]);
    assert_eq!(
        holders.reap_expired().await.unwrap(),
        0,
        "the live holder keeps its leases"
    );
}

async fn a_restart_returns_its_earlier_incarnations_leases_and_not_another_instances(
    store: TestStore,
) {
    let (stages, q) = stage(&store, "restart", StageOptions::default()).await;
    append_all(&q, &[("a", 0), ("b", 0), ("c", 0), ("d", 0)]).await;
    let prefix = String::from_utf8(store.prefix.clone()).unwrap();
    let begin = async |instance, scope| {
        Incarnation::begin(stages.db(), &prefix, instance, scope)
            .await
            .unwrap()
    };
    let holders_of =
        |incarnation: &Incarnation| Holders::new(&stages.clone().owned_by(incarnation.owner()));
    // Two instances share the store, each with a holder alive for a minute.
    let other = begin(1, Scope::Shared).await;
    let before = begin(2, Scope::Shared).await;
    let alive = holders_of(&other)
        .register(Duration::from_secs(60))
        .await
        .unwrap();
    let died = holders_of(&before)
        .register(Duration::from_secs(60))
        .await
        .unwrap();
    let kept = q.lease(alive, 1).await.unwrap();
    assert_eq!(bodies(&kept), ["a"]);
    assert_eq!(bodies(&q.lease(died, 2).await.unwrap()), ["b", "c"]);

    // Instance 2 starts again: its earlier holder's deadline is a minute away, yet its
    // leases come back at once; instance 1's stay with it.
    let after = begin(2, Scope::Shared).await;
    let holders = holders_of(&after);
    let mine = holders.register(Duration::from_secs(60)).await.unwrap();
    assert_eq!(holders.release_outlived(&after).await.unwrap(), 2);
    assert_eq!(holders.release_outlived(&after).await.unwrap(), 0, "once");
    let again = q.lease(mine, 10).await.unwrap();
    assert_eq!(bodies(&again), ["b", "c", "d"], "back in their places");
    let redelivered: Vec<bool> = again.iter().map(|d| d.redelivered()).collect();
    assert_eq!(redelivered, [true, true, false]);
    assert_eq!(
        q.ack(alive, &[kept[0].id]).await.unwrap(),
        1,
        "the live instance kept its lease"
    );

    // In a store of one instance (the embedded engine), every holder but the starting
    // incarnation's own belonged to a dead process.
    let sole = begin(2, Scope::Sole).await;
    assert_eq!(holders_of(&sole).release_outlived(&sole).await.unwrap(), 3);
    assert_eq!(q.depth().await.unwrap().in_flight, 0);
}

/// Issue 33: an AMQP channel closing mid-delivery could lease after its holder was
/// released, leaving messages in flight for a holder nobody renews, reaps or releases. A
/// starting instance returns them.
async fn a_restart_returns_leases_taken_after_their_holder_was_released(store: TestStore) {
    let (stages, q) = stage(&store, "orphaned", StageOptions::default()).await;
    append_all(&q, &[("a", 0), ("b", 0), ("c", 0)]).await;
    let prefix = String::from_utf8(store.prefix.clone()).unwrap();
    let incarnation = Incarnation::begin(stages.db(), &prefix, 1, Scope::Shared)
        .await
        .unwrap();
    let holders = Holders::new(&stages.clone().owned_by(incarnation.owner()));
    let closed = holders.register(Duration::from_secs(60)).await.unwrap();
    assert_eq!(holders.release(closed).await.unwrap(), 0);
    // The race: a lease step that started before the release commits after it.
    assert_eq!(bodies(&q.lease(closed, 2).await.unwrap()), ["a", "b"]);
    assert_eq!(
        holders.reap_expired().await.unwrap(),
        0,
        "no deadline to pass"
    );

    let restarted = Incarnation::begin(stages.db(), &prefix, 1, Scope::Shared)
        .await
        .unwrap();
    let holders = Holders::new(&stages.clone().owned_by(restarted.owner()));
    assert_eq!(holders.release_outlived(&restarted).await.unwrap(), 2);
    let d = q.depth().await.unwrap();
    assert_eq!((d.ready, d.in_flight), (3, 0));
    let mine = holders.register(Duration::from_secs(60)).await.unwrap();
    assert_eq!(bodies(&q.lease(mine, 10).await.unwrap()), ["a", "b", "c"]);
    assert_eq!(
        holders.release_outlived(&restarted).await.unwrap(),
        0,
        "once"
    );
}

async fn delivery_limit_moves_message_to_dead_letter_stage(store: TestStore) {
    let options = StageOptions {
        max_deliveries: 2,
        ..StageOptions::default()
    };
    let (stages, dlq, q) = with_dead_letter(&store, "limited", options).await;
    append_all(&q, &[("poison", 0), ("fine", 0)]).await;
    let holder = holder(&stages).await;
    for round in 1..=2 {
        let got = q.lease(holder, 1).await.unwrap();
        assert_eq!(bodies(&got), ["poison"], "delivery {round}");
        q.release(holder, &[got[0].id], Release::Requeue)
            .await
            .unwrap();
    }
    assert_eq!(bodies(&q.lease(holder, 10).await.unwrap()), ["fine"]);
    let dead = dlq.pop(10).await.unwrap();
    assert_eq!(bodies(&dead), ["poison"]);
    let info = dead[0].envelope.dead_letter.unwrap();
    assert_eq!(info.reason, DeadLetterReason::DeliveryLimit);
    assert_eq!(info.from_stage, q.id());
    assert_eq!(q.depth().await.unwrap().dead_lettered, 1);
}

async fn reject_dead_letters_or_drops(store: TestStore) {
    let (stages, dlq, q) = with_dead_letter(&store, "rejecting", StageOptions::default()).await;
    let plain = stages
        .create("plain", &StageOptions::default())
        .await
        .unwrap();
    let holder = holder(&stages).await;
    for s in [&q, &plain] {
        append_all(s, &[("bad", 0)]).await;
        let got = s.lease(holder, 1).await.unwrap();
        s.release(holder, &[got[0].id], Release::Reject)
            .await
            .unwrap();
        let d = s.depth().await.unwrap();
        assert_eq!((d.ready, d.in_flight, d.popped), (0, 0, 1));
    }
    let dead = dlq.pop(10).await.unwrap();
    assert_eq!(
        bodies(&dead),
        ["bad"],
        "only the stage with a dead-letter stage kept it"
    );
    assert_eq!(
        dead[0].envelope.dead_letter.unwrap().reason,
        DeadLetterReason::Rejected
    );
}

async fn expired_message_is_dead_lettered_not_delivered(store: TestStore) {
    let (stages, dlq, q) = with_dead_letter(&store, "ttl", StageOptions::default()).await;
    q.append(&[
        NewMessage::new("stale").expires_ms(now_ms() - 1),
        NewMessage::new("fresh").expires_ms(now_ms() + 60_000),
    ])
    .await
    .unwrap();
    let holder = holder(&stages).await;
    assert_eq!(bodies(&q.lease(holder, 10).await.unwrap()), ["fresh"]);
    let dead = dlq.pop(10).await.unwrap();
    assert_eq!(bodies(&dead), ["stale"]);
    assert_eq!(
        dead[0].envelope.dead_letter.unwrap().reason,
        DeadLetterReason::Expired
    );
}

async fn append_with_same_producer_sequence_is_a_duplicate(store: TestStore) {
    let (_, q) = stage(&store, "idem", StageOptions::default()).await;
    let out = q
        .append(&[
            NewMessage::new("one").idempotency(7, 1),
            NewMessage::new("two").idempotency(7, 2),
        ])
        .await
        .unwrap();
    assert_eq!(out, [AppendOutcome::Appended, AppendOutcome::Appended]);
    let out = q
        .append(&[
            NewMessage::new("two again").idempotency(7, 2),
            NewMessage::new("one again").idempotency(7, 1),
            NewMessage::new("other producer").idempotency(8, 1),
            NewMessage::new("three").idempotency(7, 3),
        ])
        .await
        .unwrap();
    assert_eq!(
        out,
        [
            AppendOutcome::Duplicate,
            AppendOutcome::Duplicate,
            AppendOutcome::Appended,
            AppendOutcome::Appended
        ]
    );
    assert_eq!(
        bodies(&q.pop(10).await.unwrap()),
        ["one", "two", "other producer", "three"]
    );
    assert_eq!(q.depth().await.unwrap().duplicates, 2);
}

async fn bodies_larger_than_a_value_are_chunked(store: TestStore) {
    let (_, q) = stage(&store, "big", StageOptions::default()).await;
    let big: Vec<u8> = (0..250_000u32).map(|i| (i % 251) as u8).collect();
    q.append(&[NewMessage::new(big.clone()), NewMessage::new(Vec::new())])
        .await
        .unwrap();
    let got = q.pop(10).await.unwrap();
    assert_eq!(got[0].body, big);
    assert!(got[1].body.is_empty());
}

async fn oversized_body_is_refused(store: TestStore) {
    let (_, q) = stage(&store, "huge", StageOptions::default()).await;
    let err = q
        .append(&[NewMessage::new(vec![0u8; ferry_stage::MAX_BODY_SIZE + 1])])
        .await
        .unwrap_err();
    assert!(matches!(err, StageError::BodyTooLarge { .. }), "{err}");
    assert_eq!(q.depth().await.unwrap().pushed, 0);
}

async fn registry_creates_opens_and_refuses_inequivalent_redeclare(store: TestStore) {
    let (stages, q) = stage(
        &store,
        "orders",
        StageOptions {
            max_priority: 5,
            ..StageOptions::default()
        },
    )
    .await;
    let again = stages
        .create(
            "orders",
            &StageOptions {
                max_priority: 5,
                ..StageOptions::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(again.id(), q.id());
    let err = stages
        .create("orders", &StageOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, StageError::Inequivalent { .. }), "{err}");
    assert!(err.to_string().contains("orders"));
    assert!(matches!(
        stages.open("nope").await.unwrap_err(),
        StageError::NotFound(_)
    ));
    let err = stages
        .create(
            "x",
            &StageOptions {
                dead_letter: Some("missing".into()),
                ..StageOptions::default()
            },
        )
        .await
        .unwrap_err();
    assert!(matches!(err, StageError::NoDeadLetterStage(_)), "{err}");
    assert_eq!(stages.open("orders").await.unwrap().id(), q.id());
    append_all(&q, &[("gone", 0)]).await;
    assert!(stages.delete("orders").await.unwrap());
    assert!(!stages.delete("orders").await.unwrap());
    let fresh = stages
        .create("orders", &StageOptions::default())
        .await
        .unwrap();
    assert_ne!(fresh.id(), q.id());
    assert!(
        fresh.pop(10).await.unwrap().is_empty(),
        "a deleted stage's messages are gone"
    );
}

async fn purge_removes_ready_messages_only(store: TestStore) {
    let (stages, q) = stage(&store, "purge", StageOptions::default()).await;
    append_all(&q, &[("a", 0), ("b", 0), ("c", 0)]).await;
    let holder = holder(&stages).await;
    let leased = q.lease(holder, 1).await.unwrap();
    assert_eq!(q.purge().await.unwrap(), 2);
    let d = q.depth().await.unwrap();
    assert_eq!((d.ready, d.in_flight), (0, 1));
    assert_eq!(q.ack(holder, &[leased[0].id]).await.unwrap(), 1);
}

async fn competing_consumers_share_without_duplicates(store: TestStore) {
    let (stages, q) = stage(&store, "compete", StageOptions::default()).await;
    let total = 2_000usize;
    for chunk in (0..total).collect::<Vec<_>>().chunks(200) {
        let msgs: Vec<NewMessage> = chunk
            .iter()
            .map(|i| NewMessage::new(i.to_be_bytes().to_vec()))
            .collect();
        q.append(&msgs).await.unwrap();
    }
    let holders = Holders::new(&stages);
    let mut tasks = Vec::new();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    for _ in 0..8 {
        let holder = holders.register(Duration::from_secs(60)).await.unwrap();
        let mut consumer = Consumer::new(q.clone(), holders.clone(), holder, 16);
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            while done.load(std::sync::atomic::Ordering::SeqCst) < total {
                let step = tokio::time::timeout(Duration::from_millis(500), consumer.next()).await;
                let Ok(batch) = step else { continue };
                let batch = batch.unwrap();
                let ids: Vec<_> = batch.iter().map(|d| d.id).collect();
                consumer.ack(&ids).await.unwrap();
                done.fetch_add(batch.len(), std::sync::atomic::Ordering::SeqCst);
                got.extend(
                    batch
                        .into_iter()
                        .map(|d| usize::from_be_bytes(d.body[..].try_into().unwrap())),
                );
            }
            (got, consumer.requests_registered())
        }));
    }
    let mut all = Vec::new();
    let mut requests = 0;
    for t in tasks {
        let (got, r) = tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .unwrap()
            .unwrap();
        all.extend(got);
        requests += r;
    }
    all.sort_unstable();
    assert_eq!(
        all,
        (0..total).collect::<Vec<_>>(),
        "each message delivered exactly once"
    );
    eprintln!("dequeue requests registered under contention: {requests}");
}

async fn drop_head_dead_letters_the_oldest_with_reason_max_length(store: TestStore) {
    let (stages, dlq, q) = with_dead_letter(&store, "bounded", StageOptions::default()).await;
    append_all(&q, &[("oldest", 0), ("middle", 0), ("newest", 0)]).await;
    let dropped = stages
        .db()
        .run(|tx| {
            let q = q.clone();
            async move { q.drop_head_in(&tx, 2, now_ms()).await }
        })
        .await
        .unwrap();
    assert_eq!(dropped, 2);
    let holder = holder(&stages).await;
    assert_eq!(bodies(&q.lease(holder, 10).await.unwrap()), ["newest"]);
    let dead = dlq.pop(10).await.unwrap();
    assert_eq!(bodies(&dead), ["oldest", "middle"]);
    assert_eq!(
        dead[0].envelope.dead_letter.unwrap().reason,
        DeadLetterReason::MaxLength
    );
    assert_eq!(DeadLetterReason::MaxLength.as_str(), "maxlen");
}

async fn expire_head_stops_at_the_first_live_message(store: TestStore) {
    let (stages, dlq, q) = with_dead_letter(&store, "sweep", StageOptions::default()).await;
    let now = now_ms();
    q.append(&[
        NewMessage::new("stale 1").expires_ms(now - 2),
        NewMessage::new("stale 2").expires_ms(now - 1),
        NewMessage::new("live").expires_ms(now + 60_000),
        NewMessage::new("stale behind live").expires_ms(now - 1),
    ])
    .await
    .unwrap();
    let outcome = stages
        .db()
        .run(|tx| {
            let q = q.clone();
            async move { q.expire_head_in(&tx, 100, now).await }
        })
        .await
        .unwrap();
    assert_eq!(outcome.expired, 2);
    assert_eq!(outcome.next_expiry_ms, Some(now + 60_000));
    assert_eq!(bodies(&dlq.pop(10).await.unwrap()), ["stale 1", "stale 2"]);
    assert_eq!(q.depth().await.unwrap().ready, 2);
}

async fn consumer_lease_size_follows_set_batch_and_forget_drops_acked_ids(store: TestStore) {
    let (stages, q) = stage(&store, "batched", StageOptions::default()).await;
    append_all(&q, &[("a", 0), ("b", 0), ("c", 0), ("d", 0)]).await;
    let holder = holder(&stages).await;
    let mut consumer = Consumer::new(q.clone(), Holders::new(&stages), holder, 1);
    consumer.set_batch(3);
    let got = consumer.next().await.unwrap();
    assert_eq!(bodies(&got), ["a", "b", "c"]);
    let ids: Vec<_> = got.iter().map(|d| d.id).collect();
    assert_eq!(q.ack(holder, &ids).await.unwrap(), 3);
    consumer.forget(&ids);
    assert_eq!(consumer.outstanding(), 0);
    assert_eq!(bodies(&consumer.next().await.unwrap()), ["d"]);
}

async fn delete_in_removes_a_stage_inside_a_larger_transaction(store: TestStore) {
    let (stages, q) = stage(&store, "doomed", StageOptions::default()).await;
    append_all(&q, &[("x", 0)]).await;
    let marker = store.key("marker");
    let deleted = stages
        .db()
        .run(|tx| {
            let (stages, marker) = (stages.clone(), marker.clone());
            async move {
                tx.set(&marker, b"set with the delete");
                stages.delete_in(&tx, "doomed").await
            }
        })
        .await
        .unwrap();
    assert!(deleted);
    assert!(matches!(
        stages.open("doomed").await,
        Err(StageError::NotFound(_))
    ));
    let tx = store.db.begin().unwrap();
    assert!(tx.get(&marker, false).await.unwrap().is_some());
}
