//! Share groups (KIP-932) with confluent-kafka's `ShareConsumer` (librdkafka's share
//! consumer, `tests/python/kafka_share_groups.py`) against the real `ferry` process: members
//! of one group split a topic with every record delivered and accepted once, in implicit
//! and explicit acknowledgement; a released record comes back with its delivery count
//! grown and a rejected one never; a lock that ends returns its records to another member;
//! the delivery count limit archives a record, and archived records go to the group's
//! dead-letter topic with their headers; `read_committed` never delivers aborted records;
//! and after a kill -9 no accepted record is
//! delivered again while the ones acquired and not accepted are; two instances over one
//! store deliver each record once; the management API and `/metrics` show the
//! group's records in flight, archived and its lag; and a lock renewed on raw v2 requests
//! (KIP-1222; librdkafka sends v1 only) outlives its first deadline and the daemon's lease
//! reaper.

use crate::common::clients::{CLIENT_TIMEOUT, python_script, run};
use crate::common::daemon::{Daemon, Setup};
use crate::common::fronts::KafkaServer;
use crate::common::kafka::PATIENCE;
use crate::common::wait;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

/// `ferry run` with its store in `dir`.
fn start(dir: &Path) -> Daemon {
    Setup::shipped(dir).start()
}

/// Runs `kafka_share_groups.py BOOTSTRAP ARGS...`; its output lines.
async fn scenario(bootstrap: &str, args: &[&str]) -> Vec<String> {
    let output = Command::new("python3")
        .arg(python_script("kafka_share_groups.py"))
        .arg(bootstrap)
        .args(args)
        .output()
        .await
        .unwrap();
    let trace = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "kafka_share_groups.py {args:?} failed: {trace}"
    );
    // Shown when the test fails: what the scenario saw, step by step.
    eprintln!("kafka_share_groups.py {args:?}:\n{trace}");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_share_consumers_split_a_topic_each_record_accepted_once() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = start(dir.path());
    let b = ferry.kafka_bootstrap();
    for (mode, group) in [
        ("implicit", "split-implicit"),
        ("explicit", "split-explicit"),
    ] {
        let topic = format!("share-{mode}");
        let out = scenario(&b, &["split", &topic, group, mode, "600", "3"]).await;
        assert_eq!(
            out,
            ["seen 600 distinct 600 members-with-records 3", "left 0"],
            "{mode}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_redelivers_reject_archives_to_the_dead_letter_topic_and_locks_expire() {
    let dir = tempfile::tempdir().unwrap();
    let ferry = start(dir.path());
    let b = ferry.kafka_bootstrap();
    assert_eq!(
        scenario(&b, &["redeliver", "share-re", "re"]).await,
        ["released again 2", "rejected again False"]
    );
    assert_eq!(
        scenario(&b, &["limit", "share-limit", "limit"]).await,
        ["deliveries 2", "after limit none"]
    );
    // Archived records go to the group's dead-letter topic with why, how often and from
    // where; the accepted one does not.
    assert_eq!(
        scenario(&b, &["dead-letters", "share-dl", "dl"]).await,
        [
            "dl-0 reason rejected count 1 from share-dl/0@0 group dl",
            "dl-1 reason delivery_limit count 2 from share-dl/0@1 group dl",
        ]
    );
    // read_committed: the aborted transaction's records are never delivered.
    assert_eq!(
        scenario(&b, &["transactions", "share-txn", "txn"]).await,
        ["committed 5 aborted 0 deliveries 5"]
    );
    let expired = scenario(&b, &["expire", "share-expire", "expire", "2000"]).await;
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert!(
        expired[0].starts_with("redelivered ") && expired[0].ends_with(" count 2"),
        "{expired:?}"
    );
    let words: Vec<&str> = expired[0].split(' ').collect();
    assert_eq!(
        words[1], words[3],
        "every held record came back: {expired:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_keeps_acceptances_and_returns_acquired_records() {
    let dir = tempfile::tempdir().unwrap();
    let mut ferry = start(dir.path());
    let b = ferry.kafka_bootstrap();
    // A member accepts half of what it acquired and vanishes holding the rest.
    let held = scenario(&b, &["hold", "share-crash", "crash"]).await;
    let keys = |prefix: &str| {
        held.iter()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in {held:?}"))
            .to_owned()
    };
    let (accepted, holding) = (keys("accepted "), keys("held "));
    let held_count = holding.split(',').count();
    assert!(!accepted.is_empty() && held_count > 0, "{held:?}");
    ferry.kill_and_restart();
    // The restart returns the held records at once (well before their 30 s lock ends),
    // with their delivery counted; no accepted record comes back.
    let drained = scenario(&b, &["drain", "share-crash", "crash", &accepted, &holding]).await;
    let rest = 60 - accepted.split(',').count();
    assert_eq!(
        drained,
        [
            "accepted again 0".to_owned(),
            format!("held again {held_count} of {held_count} counts [2]"),
            format!("total {rest} of {rest}"),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_over_one_store_deliver_each_record_once() {
    // Two fronts share one store, as two Ferry instances share a FoundationDB cluster: the
    // group's members live at its coordinator, the partitions' records are fetched from
    // whichever instance leads them, and each is acquired once through the store.
    let a = KafkaServer::start_with(|c| c.node_id = 0).await;
    let b = a.peer(1).await;
    let both = format!("{},{}", a.bootstrap(), b.bootstrap());
    let out = scenario(
        &both,
        &["split", "share-pair", "pair", "explicit", "600", "3"],
    )
    .await;
    assert_eq!(
        out,
        ["seen 600 distinct 600 members-with-records 3", "left 0"]
    );
    b.stop().await;
    a.stop().await;
}

/// `GET path` of `ferry`'s management API as `user` (`name:password`): the status and the
/// JSON body (`null` when it is none).
async fn api(ferry: &Daemon, user: &str, path: &str) -> (u16, Value) {
    let url = format!("{}{path}", ferry.management_uri());
    let out = run(
        "curl",
        &["-s", "-u", user, "-w", "\n%{http_code}", &url],
        b"",
    )
    .await;
    let text = String::from_utf8(out.stdout).unwrap();
    let (body, status) = text.rsplit_once('\n').unwrap();
    (
        status.parse().unwrap(),
        serde_json::from_str(body).unwrap_or(Value::Null),
    )
}

/// The value of the series `name{group=…,topic=…,partition="0"}` on `/metrics`, if any.
fn share_metric(ferry: &Daemon, name: &str, group: &str, topic: &str) -> Option<f64> {
    let series = format!(r#"{name}{{group="{group}",topic="{topic}",partition="0"}} "#);
    ferry
        .metrics()
        .lines()
        .find_map(|l| l.strip_prefix(&series)?.parse().ok())
}

/// The share group's figures in the management API and on `/metrics`, with
/// confluent-kafka's `ShareConsumer` holding records: acquired and not acknowledged ones
/// are in flight, rejected ones archived, and the lag (the records not settled) falls to 0
/// once every record is accepted. Monitoring users only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_group_figures_in_the_management_api_and_metrics() {
    const RECORDS: i64 = 10;
    let (topic, group) = ("share-figures", "figures");
    let dir = tempfile::tempdir().unwrap();
    let ferry = start(dir.path());
    let mut member = Command::new("python3")
        .arg(python_script("kafka_share_groups.py"))
        .args([&ferry.kafka_bootstrap(), "figures", topic, group])
        .arg(RECORDS.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut said = BufReader::new(member.stdout.take().unwrap()).lines();
    let mut line = async || {
        tokio::time::timeout(CLIENT_TIMEOUT, said.next_line())
            .await
            .expect("the share consumer's next line in time")
            .unwrap()
            .expect("a line (kafka_share_groups.py failed otherwise)")
    };
    // Its first batch: 2 rejected, 3 accepted, the rest held.
    let batch = line().await;
    assert_eq!(line().await, "holding");
    let taken: i64 = batch
        .strip_prefix("batch ")
        .and_then(|b| b.strip_suffix(" from 0"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{batch:?}"));
    let (status, g) = api(
        &ferry,
        "guest:guest",
        &format!("/api/ferry/kafka/share-groups/{group}"),
    )
    .await;
    assert_eq!(status, 200, "{g}");
    assert_eq!(g["state"], "Stable", "{g}");
    let members = g["members"].as_array().unwrap();
    assert_eq!(members.len(), 1, "{g}");
    assert_eq!(members[0]["client_id"], "figures-member", "{g}");
    assert_eq!(
        members[0]["assignment"],
        json!([{"topic": topic, "partitions": [0]}]),
        "{g}"
    );
    let p = g["partitions"][0].clone();
    assert_eq!(g["partitions"].as_array().map(Vec::len), Some(1), "{g}");
    let figure = |name: &str| p[name].as_i64().unwrap_or_else(|| panic!("{name} in {p}"));
    // The client may have fetched again since (acquiring what its first batch left).
    let in_flight = figure("in_flight");
    assert!(in_flight >= taken - 5, "{p}");
    assert_eq!(in_flight + figure("waiting"), RECORDS - 5, "{p}");
    assert_eq!(
        [
            "start_offset",
            "end_offset",
            "high_watermark",
            "archived",
            "lag"
        ]
        .map(figure),
        [5, RECORDS, RECORDS, 2, RECORDS - 5],
        "{p}"
    );
    assert_eq!(
        ["total_in_flight", "total_archived", "total_lag"].map(|t| g[t].as_i64()),
        [Some(in_flight), Some(2), Some(RECORDS - 5)],
        "{g}"
    );
    let (status, all) = api(&ferry, "guest:guest", "/api/ferry/kafka/share-groups").await;
    assert_eq!((status, all), (200, json!([g])));
    let (status, consumer_groups) = api(&ferry, "guest:guest", "/api/ferry/kafka/groups").await;
    assert_eq!(
        (status, consumer_groups),
        (200, json!([])),
        "a share group is not a consumer group"
    );
    // The metrics, published every 5 s.
    let metric = |name: &str| share_metric(&ferry, name, group, topic);
    wait::until("the share group's metrics", PATIENCE, async || {
        let shown = (
            metric("ferry_kafka_share_in_flight")?,
            metric("ferry_kafka_share_archived")?,
            metric("ferry_kafka_share_lag")?,
        );
        (shown == (in_flight as f64, 2.0, (RECORDS - 5) as f64)).then_some(())
    })
    .await;

    // Only users tagged monitoring or administrator see share groups.
    let body = r#"{"password": "secret", "tags": "management"}"#;
    ferry.put_as_guest("/api/users/watcher", body).await;
    let refused = json!({"error": "not_authorised", "reason": "Not monitor user"});
    for path in [
        "/api/ferry/kafka/share-groups",
        "/api/ferry/kafka/share-groups/figures",
    ] {
        assert_eq!(
            api(&ferry, "watcher:secret", path).await,
            (401, refused.clone())
        );
    }
    let (status, _) = api(
        &ferry,
        "guest:guest",
        "/api/ferry/kafka/share-groups/nobody",
    )
    .await;
    assert_eq!(status, 404);

    // Every record accepted: nothing in flight or waiting, no lag; the archived stay.
    member
        .stdin
        .take()
        .unwrap()
        .write_all(b"go\n")
        .await
        .unwrap();
    assert_eq!(line().await, "accepted all");
    assert!(member.wait().await.unwrap().success());
    let (_, g) = api(
        &ferry,
        "guest:guest",
        &format!("/api/ferry/kafka/share-groups/{group}"),
    )
    .await;
    let p = &g["partitions"][0];
    assert_eq!(
        [
            "start_offset",
            "end_offset",
            "in_flight",
            "waiting",
            "archived",
            "lag"
        ]
        .map(|f| p[f].as_i64()),
        [RECORDS, RECORDS, 0, 0, 2, 0].map(Some),
        "{g}"
    );
    assert_eq!(
        (&g["state"], g["members"].as_array().map(Vec::len)),
        (&json!("Empty"), Some(0)),
        "{g}"
    );
    wait::until("the share group's metrics at 0", PATIENCE, async || {
        let shown = (
            metric("ferry_kafka_share_in_flight")?,
            metric("ferry_kafka_share_archived")?,
            metric("ferry_kafka_share_lag")?,
        );
        (shown == (0.0, 2.0, 0.0)).then_some(())
    })
    .await;
}

/// A record whose lock a member renews (raw ShareAcknowledge v2 with `IsRenewAck`, every
/// 500 ms for over twice the 2 s lock) is still the member's to accept: the daemon's
/// lease reaper, which returns a holder's records at its deadline in the store, sees the
/// renewed deadline too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewed_lock_outlives_its_first_deadline_and_the_lease_reaper() {
    use crate::common::kafka::raw::{Raw, batch};
    use kafka_protocol::messages::incremental_alter_configs_request as incremental;
    use kafka_protocol::messages::share_acknowledge_request as ack;
    use kafka_protocol::messages::share_fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::{
        ApiKey, GroupId, IncrementalAlterConfigsRequest, ResponseKind, ShareAcknowledgeRequest,
        ShareFetchRequest, ShareGroupHeartbeatRequest,
    };
    use kafka_protocol::protocol::StrBytes;
    let text = |s: &str| StrBytes::from_string(s.to_owned());
    let (topic, group) = ("renewed", "renewing");
    let dir = tempfile::tempdir().unwrap();
    // The reaper looks at least every second (it sleeps up to one lease TTL).
    let ferry = Setup::shipped(dir.path())
        .env("FERRY__STAGE__LEASE_TTL_MS", "1000")
        .start();
    let mut raw = Raw::connect(ferry.kafka_bootstrap().parse().unwrap()).await;
    crate::raw::create_topic(&mut raw, topic).await;
    let settings = [
        ("share.auto.offset.reset", "earliest"),
        ("share.record.lock.duration.ms", "2000"),
    ];
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental::AlterConfigsResource::default()
            .with_resource_type(32)
            .with_resource_name(text(group))
            .with_configs(
                settings
                    .iter()
                    .map(|(name, value)| {
                        incremental::AlterableConfig::default()
                            .with_name(text(name))
                            .with_value(Some(text(value)))
                    })
                    .collect(),
            ),
    ]);
    let ResponseKind::IncrementalAlterConfigs(set) = raw
        .request(ApiKey::IncrementalAlterConfigs, 1, &request)
        .await
    else {
        panic!("not an IncrementalAlterConfigs answer");
    };
    assert_eq!(set.responses[0].error_code, 0, "{set:?}");
    let produced = crate::raw::produce_answer(&mut raw, topic, batch(&["a"])).await;
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    let join = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_member_id(text("m1"))
        .with_subscribed_topic_names(Some(vec![crate::raw::name(topic)]));
    let ResponseKind::ShareGroupHeartbeat(joined) =
        raw.request(ApiKey::ShareGroupHeartbeat, 1, &join).await
    else {
        panic!("not a ShareGroupHeartbeat answer");
    };
    assert_eq!(joined.error_code, 0, "{joined:?}");
    let topic_id = joined.assignment.as_ref().unwrap().topic_partitions[0].topic_id;
    let fetch = ShareFetchRequest::default()
        .with_group_id(Some(GroupId(text(group))))
        .with_member_id(Some(text("m1")))
        .with_max_records(10)
        .with_max_bytes(1 << 20)
        .with_max_wait_ms(5_000)
        .with_topics(vec![
            FetchTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![FetchPartition::default().with_partition_index(0)]),
        ]);
    let ResponseKind::ShareFetch(got) = raw.request(ApiKey::ShareFetch, 2, &fetch).await else {
        panic!("not a ShareFetch answer");
    };
    let acquired = &got.responses[0].partitions[0].acquired_records;
    assert_eq!(
        acquired
            .iter()
            .map(|a| (a.first_offset, a.last_offset))
            .collect::<Vec<_>>(),
        [(0, 0)],
        "{got:?}"
    );
    let acknowledge = |epoch: i32, kind: i8, renew: bool| {
        ShareAcknowledgeRequest::default()
            .with_group_id(Some(GroupId(text(group))))
            .with_member_id(Some(text("m1")))
            .with_share_session_epoch(epoch)
            .with_is_renew_ack(renew)
            .with_topics(vec![
                ack::AcknowledgeTopic::default()
                    .with_topic_id(topic_id)
                    .with_partitions(vec![
                        ack::AcknowledgePartition::default()
                            .with_partition_index(0)
                            .with_acknowledgement_batches(vec![
                                ack::AcknowledgementBatch::default()
                                    .with_first_offset(0)
                                    .with_last_offset(0)
                                    .with_acknowledge_types(vec![kind]),
                            ]),
                    ]),
            ])
    };
    let mut epoch = 1;
    for _ in 0..10 {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let ResponseKind::ShareAcknowledge(renewed) = raw
            .request(ApiKey::ShareAcknowledge, 2, &acknowledge(epoch, 4, true))
            .await
        else {
            panic!("not a ShareAcknowledge answer");
        };
        assert_eq!(
            renewed.responses[0].partitions[0].error_code, 0,
            "{renewed:?}"
        );
        assert_eq!(renewed.acquisition_lock_timeout_ms, 2_000);
        epoch += 1;
    }
    let ResponseKind::ShareAcknowledge(accepted) = raw
        .request(ApiKey::ShareAcknowledge, 1, &acknowledge(epoch, 1, false))
        .await
    else {
        panic!("not a ShareAcknowledge answer");
    };
    assert_eq!(
        accepted.responses[0].partitions[0].error_code, 0,
        "still the member's after 5 s: {accepted:?}"
    );
}
