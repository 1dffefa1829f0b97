//! A differential tester of the AMQP front: seeded random scenarios of what clients do —
//! publishes (persistent, to durable queues; plain, under confirms, mandatory and returned,
//! in transactions committed or rolled back), consumers with a prefetch each, basic.get with
//! and without acknowledgement, ack/nack/reject (single and `multiple`, requeue or not),
//! basic.cancel, basic.qos, basic.recover, channel and connection closes (also while
//! deliveries are in flight), sockets cut by a proxy, and broker restarts — each run against
//! the suite's RabbitMQ node and against Ferry, through lapin.
//!
//! Each run is checked against RabbitMQ's rules by its [`ledger`] (nothing lost or left
//! stranded unacknowledged, nothing acknowledged delivered again, `redelivered` exactly on
//! redeliveries), and Ferry's run is compared with RabbitMQ's for the same operations: what
//! each step did (reply codes of failing methods included), what came to each channel and
//! what each held once the broker was quiet, and each queue's depth at the end — up to the
//! first cut that made an outcome uncertain (an acknowledgement written before the cut may
//! or may not have been read), after which only the rules are checked.
//!
//! A fixed set of seeds runs in the suite. `FERRY_AMQP_DIFF_SEEDS=500` runs seeds 0 to 499
//! instead; `FERRY_AMQP_DIFF_REPLAY='publish ch=0 q=1 how=confirm n=2; …'` runs exactly those
//! operations. A failing scenario is shrunk (operations dropped while it still fails,
//! within [`SHRINK_BUDGET`]) and printed with the replay command of what is left.

mod ledger;
mod ops;
mod proxy;
mod run;

use crate::common::fronts::AmqpServer;
use crate::common::rabbitmq::RabbitNode;
use ops::Op;
use run::{Broker, Outcome};
use std::time::{Duration, Instant};

/// The seeds the suite runs (about a second each): 0 to 35, and seeds that found bugs
/// since fixed — 7, 19 and 26 (room freed by a requeue leased before the requeue
/// committed), 4 and 49 (publishes read just before connection.close dropped).
fn fixed_seeds() -> Vec<u64> {
    (0..36).chain([49]).collect()
}

/// Names how many seeds to run instead of [`fixed_seeds`] (0, 1, …).
const SEEDS_VAR: &str = "FERRY_AMQP_DIFF_SEEDS";
/// Names a replay script to run instead of seeds.
const REPLAY_VAR: &str = "FERRY_AMQP_DIFF_REPLAY";
/// Upper bound on the time spent shrinking one failing scenario.
const SHRINK_BUDGET: Duration = Duration::from_secs(120);
/// Failing scenarios shrunk per test (the others are printed whole).
const SHRINK_AT_MOST: usize = 3;

/// The scenarios to run: a name and its operations.
fn scenarios() -> Vec<(String, Vec<Op>)> {
    if let Ok(script) = std::env::var(REPLAY_VAR) {
        let ops = ops::parse(&script).unwrap_or_else(|e| panic!("{REPLAY_VAR}: {e}"));
        return vec![("the replayed script".to_owned(), ops)];
    }
    let seeds: Vec<u64> = match std::env::var(SEEDS_VAR) {
        Ok(n) => (0..n.parse().expect("FERRY_AMQP_DIFF_SEEDS is a number")).collect(),
        Err(_) => fixed_seeds(),
    };
    seeds
        .into_iter()
        .map(|seed| (format!("seed {seed}"), ops::generate(seed)))
        .collect()
}

/// Runs `ops` on both brokers at once; what went wrong (empty when nothing did).
async fn compare(node: &RabbitNode, ferry: &mut AmqpServer, ops: &[Op]) -> Vec<String> {
    let (rabbitmq, ferry) = tokio::join!(
        run::run(Broker::RabbitMq(node), ops),
        run::run(Broker::Ferry(ferry), ops)
    );
    let mut problems: Vec<String> = (rabbitmq.violations.iter())
        .map(|v| format!("RabbitMQ (the model is wrong?), {v}"))
        .chain(ferry.violations.iter().map(|v| format!("Ferry, {v}")))
        .collect();
    problems.extend(first_difference(&rabbitmq, &ferry));
    problems
}

/// The first step both runs were certain of that they saw differently, or the final depths
/// when neither run became uncertain.
fn first_difference(rabbitmq: &Outcome, ferry: &Outcome) -> Option<String> {
    let both_certain = rabbitmq.steps.iter().zip(&ferry.steps);
    for (r, f) in both_certain.take_while(|(r, f)| r.certain && f.certain) {
        if r.seen != f.seen {
            return Some(format!(
                "{} differs:\n      RabbitMQ: {}\n      Ferry:    {}",
                r.op, r.seen, f.seen
            ));
        }
    }
    let certain = !rabbitmq.uncertain && !ferry.uncertain;
    (certain && rabbitmq.depths != ferry.depths).then(|| {
        format!(
            "final queue depths differ: RabbitMQ {:?}, Ferry {:?}",
            rabbitmq.depths, ferry.depths
        )
    })
}

/// Drops operations of a failing scenario while it still fails, within [`SHRINK_BUDGET`];
/// the operations left and their problems.
async fn shrink(
    node: &RabbitNode,
    ferry: &mut AmqpServer,
    mut ops: Vec<Op>,
    mut problems: Vec<String>,
) -> (Vec<Op>, Vec<String>) {
    let deadline = Instant::now() + SHRINK_BUDGET;
    let mut chunk = ops.len() / 2;
    while chunk > 0 && Instant::now() < deadline {
        let mut at = 0;
        while at < ops.len() && Instant::now() < deadline {
            let mut candidate = ops.clone();
            candidate.drain(at..(at + chunk).min(ops.len()));
            let found = compare(node, ferry, &candidate).await;
            if found.is_empty() {
                at += chunk;
            } else {
                (ops, problems) = (candidate, found);
            }
        }
        chunk /= 2;
    }
    (ops, problems)
}

/// What a failing scenario prints: its problems, its operations (a message's body is
/// `STEP-I`, the I-th message of step STEP) and the command that replays them.
fn report(name: &str, original: usize, ops: &[Op], problems: &[String]) -> String {
    let mut out = format!(
        "{name} fails ({} of its {original} operations kept):\n",
        ops.len()
    );
    for problem in problems {
        out.push_str(&format!("  - {problem}\n"));
    }
    out.push_str("  operations:\n");
    for (i, op) in ops.iter().enumerate() {
        out.push_str(&format!("    {i:>2} {op}\n"));
    }
    out.push_str(&format!(
        "  replay: {REPLAY_VAR}='{}' cargo nextest run --test amqp differential",
        ops::script(ops)
    ));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeded_client_scenarios_end_the_same_on_ferry_as_on_rabbitmq() {
    let node = RabbitNode::get();
    let mut ferry = AmqpServer::start().await;
    let mut reports = Vec::new();
    for (name, ops) in scenarios() {
        let started = Instant::now();
        let problems = compare(&node, &mut ferry, &ops).await;
        eprintln!(
            "{name}: {} operations, {:?}, {}",
            ops.len(),
            started.elapsed(),
            if problems.is_empty() { "ok" } else { "FAILS" }
        );
        if problems.is_empty() {
            continue;
        }
        let original = ops.len();
        let (ops, problems) = if reports.len() < SHRINK_AT_MOST {
            shrink(&node, &mut ferry, ops, problems).await
        } else {
            (ops, problems)
        };
        let report = report(&name, original, &ops, &problems);
        eprintln!("{report}");
        reports.push(report);
    }
    ferry.stop().await;
    assert!(reports.is_empty(), "{}", reports.join("\n\n"));
}

#[test]
fn a_scenario_prints_as_a_script_that_parses_back_to_it() {
    for seed in 0..100 {
        let ops = ops::generate(seed);
        assert_eq!(ops::parse(&ops::script(&ops)).unwrap(), ops, "seed {seed}");
    }
}
