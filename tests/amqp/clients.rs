//! The `ferry` binary's AMQP front driven by independent clients and by crashes: pika
//! (Python) and Debian's amqp-tools, large messages (16 and 100 MiB), declares, deletes, binds and exclusive use, direct
//! reply-to and quorum queues' delivery limit, answered as the test suite's RabbitMQ node
//! answers the same script, the metrics it exports, a `kill -9`
//! in the middle of publishing with confirms, and a SIGTERM drain. Clients run as child
//! processes with bounded waits.

use crate::common::amqp::{WAIT, connect, declare, drain, publish_confirmed, reply_code};
use crate::common::daemon::{Daemon, EXIT, Setup};
use crate::common::rabbitmq::RabbitNode;
use crate::common::wait;
use futures::StreamExt;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Event};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use tempfile::TempDir;

/// Upper bound on a client process's run.
const CLIENT: Duration = Duration::from_secs(60);

/// `ferry run` with the shipped config and its store in `dir`.
fn start(dir: &TempDir) -> Daemon {
    Setup::shipped(dir.path()).start()
}

/// Runs a client command to completion within [`CLIENT`].
pub(crate) fn run_client(command: &mut Command) -> Output {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the client runs (scripts/setup.sh installs it)");
    let finished = wait::try_until_blocking(CLIENT, || child.try_wait().unwrap());
    if finished.is_none() {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!(
            "client did not finish in {CLIENT:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    child.wait_with_output().unwrap()
}

pub(crate) fn succeeded(out: &Output) -> String {
    assert!(
        out.status.success(),
        "client failed ({}): {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The JSON the script `tests/python/NAME` prints when run with `args` (a survey of one
/// broker's answers, to compare Ferry's with the suite's RabbitMQ node's).
fn survey(name: &str, args: &[&str]) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(name);
    let out = run_client(Command::new("python3").arg(script).args(args));
    serde_json::from_str(succeeded(&out).trim()).unwrap()
}

/// The outcome of every case of `tests/python/amqp_declare_survey.py` against `url`.
fn declare_survey(url: &str, suffix: &str) -> serde_json::Value {
    survey("amqp_declare_survey.py", &[url, suffix])
}

#[test]
fn declares_deletes_binds_and_exclusive_use_answer_as_rabbitmq_does() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(&dir);
    let suffix = format!("{:08x}", fastrand::u32(..));
    let ferry = declare_survey(
        &format!("amqp://guest:guest@127.0.0.1:{}/%2f", daemon.ports().amqp),
        &suffix,
    );
    let rabbitmq = declare_survey(RabbitNode::get().uri(), &suffix);
    // The cases that differed before (amqplib's checkExchange sends an empty type).
    assert_eq!(
        ferry["passive_exchange_with_an_empty_type"],
        serde_json::json!([0, ""])
    );
    assert_eq!(
        ferry["passive_queue_with_other_flags_and_bad_arguments"],
        serde_json::json!([0, ""])
    );
    assert_eq!(
        ferry["exclusive_queue_redeclared_without_exclusive"][0],
        serde_json::json!(405)
    );
    // And every case, reply code and text, as the RabbitMQ node answers it.
    assert_eq!(
        ferry, rabbitmq,
        "Ferry:\n{ferry:#}\nRabbitMQ:\n{rabbitmq:#}"
    );
}

/// The outcome of every case of `tests/python/amqp_direct_reply.py` against `url`.
fn direct_reply_survey(url: &str, suffix: &str) -> serde_json::Value {
    survey("amqp_direct_reply.py", &[url, suffix])
}

#[test]
fn direct_reply_to_carries_a_pika_rpc_reply_as_rabbitmq_does() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(&dir);
    let suffix = format!("{:08x}", fastrand::u32(..));
    let ferry = direct_reply_survey(
        &format!("amqp://guest:guest@127.0.0.1:{}/%2f", daemon.ports().amqp),
        &suffix,
    );
    let rabbitmq = direct_reply_survey(RabbitNode::get().uri(), &suffix);
    assert_eq!(
        ferry["rpc_round_trip"],
        serde_json::json!({
            "request": "fib 10",
            "reply_to_is_address": true,
            "passive_declare_of_the_address": [0, 1],
            "replies": [{"routing_key_is_address": true, "exchange": "", "redelivered": false,
                         "correlation_id": "c-1", "body": "55"}],
        })
    );
    assert_eq!(
        ferry, rabbitmq,
        "Ferry:\n{ferry:#}\nRabbitMQ:\n{rabbitmq:#}"
    );
}

#[test]
fn quorum_queues_count_returns_and_dead_letter_past_the_limit_as_rabbitmq_does() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(&dir);
    let suffix = format!("{:08x}", fastrand::u32(..));
    let quorum = |url: &str| survey("amqp_quorum_survey.py", &[url, &suffix]);
    let ferry = quorum(&format!(
        "amqp://guest:guest@127.0.0.1:{}/%2f",
        daemon.ports().amqp
    ));
    let rabbitmq = quorum(RabbitNode::get().uri());
    // x-delivery-limit 2: three deliveries, the last return dead-letters it.
    assert_eq!(
        ferry["delivery_limit_2"],
        serde_json::json!({
            "deliveries": [[false, 0], [true, 1], [true, 2]],
            "dead_lettered": ["delivery_limit", 1],
        })
    );
    assert_eq!(
        ferry, rabbitmq,
        "Ferry:\n{ferry:#}\nRabbitMQ:\n{rabbitmq:#}"
    );
}

/// What `tests/python/amqp_cut_connections.py` saw against the AMQP listener at `uri`'s
/// host and port, with heartbeats of `heartbeat_s`.
fn cut_survey(uri: &str, heartbeat_s: u16) -> Vec<serde_json::Value> {
    let host_port = uri.rsplit_once('@').map_or(uri, |(_, r)| r);
    let host_port = host_port.split('/').next().unwrap();
    let (host, port) = host_port.rsplit_once(':').unwrap();
    let cuts = survey(
        "amqp_cut_connections.py",
        &[host, port, &heartbeat_s.to_string()],
    );
    cuts.as_array()
        .expect("the script prints a list of cuts")
        .clone()
}

#[test]
fn a_connection_cut_at_any_byte_ends_promptly_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(&dir);
    let ferry_uri = format!("amqp://guest:guest@127.0.0.1:{}/%2f", daemon.ports().amqp);
    for heartbeat_s in [0, 1] {
        let ferry = cut_survey(&ferry_uri, heartbeat_s);
        let rabbitmq = cut_survey(RabbitNode::get().uri(), heartbeat_s);
        for cut in &ferry {
            // pika gives up after its 10 s socket timeout at the latest; a prompt end
            // means the cut was seen, not waited out.
            assert!(
                cut["seconds"].as_f64().unwrap() < 5.0,
                "heartbeat {heartbeat_s} s: {cut} (RabbitMQ: {rabbitmq:?})"
            );
        }
        let reached = |cuts: &[serde_json::Value]| -> Vec<serde_json::Value> {
            cuts.iter().map(|c| c["reached"].clone()).collect()
        };
        assert_eq!(
            reached(&ferry),
            reached(&rabbitmq),
            "heartbeat {heartbeat_s} s, Ferry: {ferry:?}, RabbitMQ: {rabbitmq:?}"
        );
        assert_eq!(ferry.last().unwrap()["reached"], "done");
    }
    // Every cut connection's state is gone.
    daemon.wait_for("no AMQP connection left open", WAIT, |d| {
        d.metric("ferry_amqp_connections", &[]) == 0.0
    });
}

#[test]
fn pika_publishes_and_receives_16_and_100_mib_messages_whole() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Setup::shipped(dir.path())
        .env("FERRY__AMQP__MAX_MESSAGE_SIZE", "134217728")
        .start();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/amqp_large.py");
    let out = run_client(
        Command::new("python3")
            .arg(script)
            .arg(daemon.ports().amqp.to_string())
            .args(["16", "100"]),
    );
    let findings: serde_json::Value = serde_json::from_str(succeeded(&out).trim()).unwrap();
    for mib in [16u64, 100] {
        let whole = serde_json::json!({"len": mib * 1024 * 1024, "same": true});
        let by_size = &findings[mib.to_string()];
        assert_eq!(by_size["consumed"], whole, "{mib} MiB consumed: {findings}");
        assert_eq!(by_size["got"], whole, "{mib} MiB by basic.get: {findings}");
    }
    daemon.wait_for("the spills freed", Duration::from_secs(30), |d| {
        d.metrics()
            .lines()
            .any(|l| l.trim() == "ferry_stage_spill_bytes 0")
    });
}

#[test]
fn pika_round_trips_properties_byte_for_byte_and_sees_rabbitmq_semantics() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(&dir);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/amqp_pika.py");
    let out = run_client(
        Command::new("python3")
            .arg(script)
            .arg(daemon.ports().amqp.to_string()),
    );
    let findings: serde_json::Value = serde_json::from_str(succeeded(&out).trim()).unwrap();
    assert_eq!(findings["body"], "hello from pika");
    assert_eq!(
        findings["header_order"],
        serde_json::json!(["zeta", "alpha", "mid"]),
        "headers keep the publisher's wire order"
    );
    assert_eq!(
        findings["headers"],
        serde_json::json!({"zeta": "last-first", "alpha": 1, "mid": {"nested": true}})
    );
    assert_eq!(
        findings["properties"],
        serde_json::json!(["text/plain", 2, 3, "c-1", "m-1"])
    );
    assert_eq!(findings["returned"], true);
    assert_eq!(
        findings["routed"],
        serde_json::json!(["orders.new.eu", "orders.old.eu", "orders.new.eu"]),
        "the nacked message came back after the one already in flight (pika's prefetch is unlimited)"
    );
    assert_eq!(
        findings["dead"],
        serde_json::json!({"body": "rejected by pika", "reason": "rejected", "queue": "pika-picky", "count": 1})
    );
    assert_eq!(
        findings["missing"],
        serde_json::json!([404, "NOT_FOUND - no queue 'pika-missing' in vhost '/'"])
    );
    assert_eq!(findings["after_error"], 0);
}

#[test]
fn amqp_tools_publish_and_consume_through_ferry() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(&dir);
    let url = daemon.amqp_uri();
    succeeded(&run_client(
        Command::new("amqp-declare-queue").args(["-u", &url, "-q", "tools", "-d"]),
    ));
    for body in ["from amqp-publish 1\n", "from amqp-publish 2\n"] {
        succeeded(&run_client(Command::new("amqp-publish").args([
            "-u",
            &url,
            "-r",
            "tools",
            "-p",
            "-C",
            "text/plain",
            "-H",
            "x-origin: amqp-tools",
            "-b",
            body,
        ])));
    }
    let consumed = succeeded(&run_client(
        Command::new("amqp-consume").args(["-u", &url, "-q", "tools", "-c", "2", "cat"]),
    ));
    assert_eq!(consumed, "from amqp-publish 1\nfrom amqp-publish 2\n");

    // And the other way: lapin publishes with a header, amqp-get reads it.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let conn = connect(&url).await;
        let ch = conn.create_channel().await.unwrap();
        publish_confirmed(&ch, "", "tools", &["from lapin"]).await;
    });
    let got = succeeded(&run_client(
        Command::new("amqp-get").args(["-u", &url, "-q", "tools"]),
    ));
    assert_eq!(got, "from lapin");
}

#[test]
fn metrics_count_amqp_traffic_and_errors_by_reply_code() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = Setup::shipped(dir.path())
        .env("FERRY__AMQP__RESOURCE_CHECK_MS", "50")
        .start();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let _conn = runtime.block_on(async {
        let conn = connect(&daemon.amqp_uri()).await;
        let ch = conn.create_channel().await.unwrap();
        declare(&ch, "measured", FieldTable::default()).await;
        publish_confirmed(&ch, "", "measured", &["1", "2", "3"]).await;
        assert_eq!(drain(&ch, "measured").await.len(), 3);
        publish_confirmed(&ch, "", "measured", &["left"]).await;
        let bad = conn.create_channel().await.unwrap();
        let missing = bad
            .basic_get("missing".into(), Default::default())
            .await
            .unwrap_err();
        assert_eq!(reply_code(&missing), Some(404));
        conn
    });
    let labels = "{vhost=\"/\",queue=\"measured\"}";
    let expected = [
        "ferry_amqp_connections 1".to_owned(),
        format!("ferry_amqp_published_total{labels} 4"),
        format!("ferry_amqp_delivered_total{labels} 3"),
        "ferry_amqp_errors_total{code=\"404\"} 1".to_owned(),
        "ferry_amqp_confirms_total{vhost=\"/\",outcome=\"ack\"} 4".to_owned(),
        "ferry_amqp_confirm_seconds_count 4".to_owned(),
        format!("ferry_amqp_queue_ready{labels} 1"),
        "ferry_amqp_blocked 0".to_owned(),
    ];
    let mut missing = Vec::new();
    let seen = wait::try_until_blocking(WAIT, || {
        let metrics = daemon.metrics();
        missing = expected
            .iter()
            .filter(|e| !metrics.contains(e.as_str()))
            .collect();
        missing.is_empty().then_some(())
    });
    assert!(
        seen.is_some(),
        "missing {missing:?} in:\n{}",
        daemon.metrics()
    );
}

#[test]
fn failed_logins_are_counted_slowed_and_logged_without_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(&dir);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        for _ in 0..3 {
            let uri = daemon
                .amqp_uri()
                .replace("guest:guest@", "guest:not-the-password@");
            let e = lapin::Connection::connect(&uri, Default::default())
                .await
                .unwrap_err();
            assert_eq!(reply_code(&e), Some(403), "{e}");
        }
        // The right password still works, after the address's delay.
        assert!(connect(&daemon.amqp_uri()).await.status().connected());
    });
    let failures = "ferry_auth_failures_total{front=\"amqp\",reason=\"invalid_credentials\"} 3";
    let seen = wait::try_until_blocking(WAIT, || daemon.metrics().contains(failures).then_some(()));
    assert!(seen.is_some(), "{}", daemon.metrics());
    // Each attempt after the first came while its address was still being slowed down.
    assert!(
        daemon.metric("ferry_auth_slowed_logins_total", &["front=\"amqp\""]) >= 1.0,
        "{}",
        daemon.metrics()
    );
    let log = daemon.log();
    assert!(log.contains("login refused"), "{log}");
    assert!(log.contains("reason=\"invalid_credentials\""), "{log}");
    assert!(!log.contains("not-the-password"), "{log}");
}

#[test]
fn confirmed_messages_survive_kill_9_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut daemon = start(&dir);
    let uri = daemon.amqp_uri();
    let confirmed: Vec<u64> = runtime.block_on(async {
        let conn = connect(&uri).await;
        let ch = conn.create_channel().await.unwrap();
        declare(&ch, "crash-safe", FieldTable::default()).await;
        ch.confirm_select(ConfirmSelectOptions::default())
            .await
            .unwrap();
        // Publish with up to 100 confirms outstanding; kill -9 the daemon once 1,000 are
        // confirmed, while more are in flight.
        let mut pending = std::collections::VecDeque::new();
        let mut confirmed = Vec::new();
        let mut killed = false;
        for i in 0..20_000u64 {
            if confirmed.len() >= 1000 && !killed {
                daemon.signal(libc::SIGKILL);
                killed = true;
            }
            let publish = ch
                .basic_publish(
                    "".into(),
                    "crash-safe".into(),
                    BasicPublishOptions::default(),
                    format!("{i:05}").as_bytes(),
                    BasicProperties::default().with_delivery_mode(2),
                )
                .await;
            let Ok(confirm) = publish else { break };
            pending.push_back((i, confirm));
            if pending.len() >= 100 {
                let (n, confirm) = pending.pop_front().unwrap();
                match tokio::time::timeout(WAIT, confirm).await {
                    Ok(Ok(c)) if c.is_ack() => confirmed.push(n),
                    _ => break,
                }
            }
        }
        assert!(killed, "the daemon was killed mid-stream");
        confirmed
    });
    daemon.wait_exit(EXIT);
    assert!(confirmed.len() >= 1000);

    daemon.restart();
    let stored = runtime.block_on(async {
        let conn = connect(&daemon.amqp_uri()).await;
        let ch = conn.create_channel().await.unwrap();
        drain(&ch, "crash-safe").await
    });
    let stored: Vec<u64> = stored.iter().map(|s| s.parse().unwrap()).collect();
    assert!(
        stored.windows(2).all(|w| w[0] < w[1]),
        "stored in publish order, without duplicates"
    );
    let missing: Vec<&u64> = confirmed.iter().filter(|n| !stored.contains(n)).collect();
    assert!(missing.is_empty(), "confirmed but lost: {missing:?}");
}

#[test]
fn sigterm_closes_connections_with_320_after_storing_what_they_published() {
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut daemon = start(&dir);
    // The channel stays open through the shutdown: a channel dropped here would be closing
    // from lapin's side when the 320 arrives, and lapin then reports only the channel's state.
    let (conn, _channel) = runtime.block_on(async {
        let conn = connect(&daemon.amqp_uri()).await;
        let ch = conn.create_channel().await.unwrap();
        declare(&ch, "drained", FieldTable::default()).await;
        publish_confirmed(&ch, "", "drained", &["before shutdown"]).await;
        (conn, ch)
    });
    let mut events = conn.events_listener();
    daemon.signal(libc::SIGTERM);
    let outcome = daemon.wait_exit(WAIT);
    assert_eq!(outcome.status.code(), Some(0), "{}", outcome.stderr);
    let mut seen = Vec::new();
    let closed = runtime.block_on(async {
        tokio::time::timeout(WAIT, async {
            while let Some(event) = events.next().await {
                if let Event::Error(e) = &event
                    && let Some(code) = reply_code(e)
                {
                    return Some(code);
                }
                seen.push(format!("{event:?}"));
            }
            None
        })
        .await
        .unwrap_or_default()
    });
    assert_eq!(closed, Some(320), "lapin's events before: {seen:?}");

    daemon.restart();
    let kept = runtime.block_on(async {
        let conn = connect(&daemon.amqp_uri()).await;
        let ch = conn.create_channel().await.unwrap();
        drain(&ch, "drained").await
    });
    assert_eq!(kept, ["before shutdown"]);
}

/// What a broker holds of `queue` once the clients of a scenario are gone: waits (bounded)
/// until `settled` says the ready count is final, then takes every message with basic.get.
async fn left_in(uri: &str, queue: &str, settled: impl Fn(u32) -> bool) -> Vec<String> {
    let conn = connect(uri).await;
    let ch = conn.create_channel().await.unwrap();
    let ready = wait::try_until(WAIT, async || {
        let n = crate::common::amqp::ready(&ch, queue).await;
        settled(n).then_some(n)
    })
    .await;
    let left = drain(&ch, queue).await;
    assert!(
        ready.is_some(),
        "{queue} never settled: {} ready",
        left.len()
    );
    left
}

/// Issue 33, found with amqp-tools: `amqp-consume -c 2 -p 5` acknowledges its two messages
/// and closes its channel while the broker is still delivering. Every message it did not
/// acknowledge must come back at once — Ferry stranded the ones leased during the close
/// (unacknowledged for good, not even returned by a restart). Five rounds, as the close
/// races the deliveries; the same against the suite's RabbitMQ node.
#[test]
fn amqp_consume_closing_mid_delivery_returns_every_unacknowledged_message() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(&dir);
    let node = RabbitNode::get();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    for (broker, url) in [
        ("Ferry", daemon.amqp_uri()),
        ("RabbitMQ", node.uri().to_owned()),
    ] {
        for round in 0..5 {
            let queue = crate::common::rabbitmq::unique(&format!("closing-{round}"));
            succeeded(&run_client(
                Command::new("amqp-declare-queue").args(["-u", &url, "-q", &queue, "-d"]),
            ));
            for i in 1..=6 {
                let body = format!("m{i}");
                succeeded(&run_client(
                    Command::new("amqp-publish").args(["-u", &url, "-r", &queue, "-b", &body]),
                ));
            }
            let consumed = succeeded(&run_client(
                Command::new("amqp-consume")
                    .args(["-u", &url, "-q", &queue, "-c", "2", "-p", "5", "cat"]),
            ));
            assert_eq!(consumed, "m1m2", "{broker}, round {round}");
            let left = runtime.block_on(left_in(&url, &queue, |ready| ready == 4));
            assert_eq!(left, ["m3", "m4", "m5", "m6"], "{broker}, round {round}");
            if broker == "Ferry" {
                let label = format!("queue=\"{queue}\"");
                assert_eq!(daemon.metric("ferry_amqp_queue_unacked", &[&label]), 0.0);
            }
        }
    }
}

/// Issue 33, found with pika: acknowledgements the broker read just before the client's
/// socket dropped count, as RabbitMQ counts them when its channel gets to them first — the
/// two acknowledged messages stay gone and only the eight others come back (Ferry returned
/// all ten, so two acknowledged messages were delivered again).
#[test]
fn acks_read_before_a_socket_drop_are_applied_as_rabbitmq_applies_them() {
    let dir = tempfile::tempdir().unwrap();
    let daemon = start(&dir);
    let node = RabbitNode::get();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/amqp_acks_then_drop.py");
    for (broker, url) in [
        ("Ferry", daemon.amqp_uri()),
        ("RabbitMQ", node.uri().to_owned()),
    ] {
        let queue = crate::common::rabbitmq::unique("acks-then-drop");
        let out = succeeded(&run_client(
            Command::new("python3").arg(&script).args([&url, &queue]),
        ));
        let seen: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(seen["acked"], serde_json::json!(["m0", "m1"]), "{broker}");
        // Every message but the acknowledged two, in their places; none stranded.
        let left = runtime.block_on(left_in(&url, &queue, |ready| ready >= 8));
        let expected: Vec<String> = (2..10).map(|i| format!("m{i}")).collect();
        if broker == "Ferry" {
            assert_eq!(left, expected, "{broker}");
        } else {
            // RabbitMQ's reader hands the acks to the channel process, which the
            // connection's end stops from another process: now and then (once in CI here,
            // 2026-11-28) the stop overtakes the acks and all ten come back. Ferry applies
            // what it read every time; RabbitMQ either does so or loses both acks.
            let all: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
            assert!(left == expected || left == all, "{broker}: {left:?}");
        }
    }
}
