//! The mixed crash harness: every kind of client at once against one `ferry run`, killed
//! with SIGKILL again and again while messages flow.
//!
//! - **AMQP**: two publishers with confirms to a durable queue, two consumers with a
//!   prefetch and manual acks.
//! - **Kafka**: two idempotent producers to a topic of four partitions, a consumer group of
//!   two members committing their positions.
//! - **Route**: a publisher with confirms to an exchange on the AMQP front, a bridge route
//!   from it to a topic on the Kafka front, and a group reading that topic.
//!
//! Every client sends at a fixed pace, so all of them are mid-flow at every kill; the kills
//! come at progress points (when the slowest client has had its share of messages
//! confirmed), and each is followed by a restart on the same data and ports. Clients
//! reconnect and go on: publishers send unconfirmed messages again (a new attempt),
//! consumers subscribe again, librdkafka retries and rejoins by itself.
//!
//! Afterwards, per protocol ([`crate::tally`]): confirmed messages never received, copies
//! received twice without the protocol's mark (must both be 0), the clients' own re-sends,
//! the marked repeats, and the time from each restart to the first redelivery or read.
//! `FERRY_SOAK=1` (`scripts/test.sh --soak`) runs the full size; the default suite a small
//! one.

use crate::amqp::{IN_PROCESS, consume};
use crate::common::amqp::{channel, declare, declare_exchange};
use crate::common::crash::{
    Flow, Restart, kill_at, kill_points, produce_until_acknowledged, publish_until_confirmed,
};
use crate::common::daemon::{Daemon, Setup, sum_of};
use crate::kafka::{Committed, RECONNECT, read_as_member};
use crate::tally::{How, Seen, Tally, recoveries, spread};
use lapin::ExchangeKind;
use lapin::types::FieldTable;
use std::collections::HashSet;
use std::ops::Range;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The AMQP queue.
const QUEUE: &str = "crash.amqp";
/// AMQP publishers to [`QUEUE`].
const PUBLISHERS: usize = 2;
/// AMQP consumers of [`QUEUE`].
const CONSUMERS: usize = 2;
/// The Kafka topic.
const TOPIC: &str = "crash.kafka";
/// Idempotent producers to [`TOPIC`].
const PRODUCERS: usize = 2;
/// The consumer group reading [`TOPIC`].
const GROUP: &str = "crash.kafka.group";
/// Members of [`GROUP`].
const MEMBERS: usize = 2;
/// The exchange the route reads from on the AMQP front.
const ROUTE_EXCHANGE: &str = "crash.route";
/// The topic the route writes to on the Kafka front.
const ROUTE_TOPIC: &str = "crash.route.out";
/// The consumer group reading [`ROUTE_TOPIC`].
const ROUTE_GROUP: &str = "crash.route.group";
/// The route, appended to the shipped config.
const ROUTE: &str = r#"
[[routes]]
name = "crash-route"
from = { amqp_exchange = "crash.route" }
to = [{ kafka_topic = "crash.route.out" }]
key = "message_id"
"#;
/// Partitions of the topics (both auto-created).
const PARTITIONS: &str = "4";
/// Unacknowledged deliveries each AMQP consumer may hold (four times what it holds while
/// it processes them).
const PREFETCH: u16 = 4 * IN_PROCESS as u16;
/// How long the readers go on after everything arrived, to see late duplicates.
const QUIET: Duration = Duration::from_secs(2);

/// How big a run is.
#[derive(Debug, Clone, Copy)]
struct Size {
    /// SIGKILLs (each followed by a restart).
    kills: usize,
    /// Messages each client sends.
    messages: usize,
    /// First sends per second of each client.
    rate: u32,
}

impl Size {
    /// The default suite's run: a few kills, under a minute of flow.
    const SMALL: Self = Self {
        kills: 5,
        messages: 4_000,
        rate: 250,
    };
    /// The full run (`FERRY_SOAK=1`): more than 20 kills.
    const FULL: Self = Self {
        kills: 25,
        messages: 25_000,
        rate: 250,
    };

    /// [`Self::FULL`] when `FERRY_SOAK=1`, else [`Self::SMALL`].
    fn from_env() -> Self {
        match std::env::var("FERRY_SOAK").as_deref() {
            Ok("1") => Self::FULL,
            _ => Self::SMALL,
        }
    }

    /// How long the whole run may take: twice the paced flow, 20 s per restart and a
    /// minute to read what is left.
    fn limit(self) -> Duration {
        let flow = Duration::from_secs_f64(self.messages as f64 / f64::from(self.rate));
        2 * flow + Duration::from_secs(20) * self.kills as u32 + Duration::from_secs(60)
    }

    /// `clients` flows of [`Self::messages`] each, with consecutive ids from 0.
    fn flows(self, clients: usize, deadline: Instant) -> Vec<Flow> {
        (0..clients)
            .map(|c| {
                let ids = c * self.messages..(c + 1) * self.messages;
                Flow::new(ids, deadline).paced(self.rate)
            })
            .collect()
    }
}

/// What a part's readers read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reads {
    /// AMQP deliveries, which Ferry marks `redelivered`.
    Deliveries,
    /// Kafka records, read by a group from its committed offsets.
    Records,
}

/// One protocol's part of the run: who sends what, who reads it, what they saw.
struct Part {
    /// Its name in the report.
    name: &'static str,
    /// What its readers read.
    reads: Reads,
    /// The clients' flows, with consecutive ids from 0.
    flows: Vec<Flow>,
    /// The clients sending the flows; each returns its sends per message.
    senders: Vec<JoinHandle<Vec<u32>>>,
    /// The readers.
    readers: Vec<JoinHandle<()>>,
    /// What the readers see, as they see it.
    seen_rx: UnboundedReceiver<Seen>,
    /// Sends per message, in id order, once the senders are done.
    sends: Vec<u32>,
    /// What the readers saw, in the order they saw it.
    seen: Vec<Seen>,
}

impl Part {
    /// A part of `flows` whose readers `readers` starts with a sender of what they see.
    fn new(
        name: &'static str,
        reads: Reads,
        flows: Vec<Flow>,
        readers: impl FnOnce(UnboundedSender<Seen>) -> Vec<JoinHandle<()>>,
    ) -> Self {
        let (seen_tx, seen_rx) = unbounded_channel();
        Self {
            name,
            reads,
            flows,
            senders: Vec::new(),
            readers: readers(seen_tx),
            seen_rx,
            sends: Vec::new(),
            seen: Vec::new(),
        }
    }

    /// Starts a sender per flow: `send(flow)`.
    fn send<F>(&mut self, send: impl Fn(Flow) -> F)
    where
        F: Future<Output = Vec<u32>> + Send + 'static,
    {
        self.senders = self
            .flows
            .iter()
            .cloned()
            .map(send)
            .map(tokio::spawn)
            .collect();
    }

    /// Every message id of the part.
    fn ids(&self) -> Range<usize> {
        let end = self.flows.last().map_or(0, |f| f.ids.end);
        0..end
    }

    /// Waits until the senders are done (every message confirmed) and takes their sends.
    async fn sent(&mut self) {
        for sender in self.senders.drain(..) {
            self.sends.extend(sender.await.expect("a sender failed"));
        }
    }

    /// Takes what the readers see until every message was seen once or `deadline` passed.
    async fn read_all(&mut self, deadline: Instant) {
        let mut missing: HashSet<usize> = self.ids().collect();
        while !missing.is_empty() {
            let next = tokio::time::timeout_at(deadline.into(), self.seen_rx.recv()).await;
            let Ok(Some(s)) = next else { return };
            missing.remove(&s.id);
            self.seen.push(s);
        }
    }

    /// Waits for the readers (stopped) and takes what they saw last.
    async fn finish(&mut self) {
        for reader in self.readers.drain(..) {
            reader.await.expect("a reader failed");
        }
        while let Ok(s) = self.seen_rx.try_recv() {
            self.seen.push(s);
        }
    }

    /// What became of the part's messages.
    fn tally(&self) -> Tally {
        Tally::count(0, &self.sends, &self.seen)
    }
}

/// Starts the daemon with the route, four partitions per auto-created topic and no delay
/// before a group's first rebalance, and declares the AMQP side.
async fn start(dir: &std::path::Path) -> Daemon {
    let ferry = Setup::shipped_with(dir, ROUTE)
        .env("FERRY__KAFKA__DEFAULT_PARTITIONS", PARTITIONS)
        .env("FERRY__KAFKA__GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
        .start();
    let (_conn, ch) = channel(&ferry.amqp_uri()).await;
    declare(&ch, QUEUE, FieldTable::default()).await;
    declare_exchange(&ch, ROUTE_EXCHANGE, ExchangeKind::Topic).await;
    ferry.wait_for_amqp_exchange_source().await;
    ferry
}

/// `CONSUMERS` AMQP consumers of [`QUEUE`], started with a sender of what they see.
fn amqp_consumers(
    uri: String,
    stop: CancellationToken,
) -> impl FnOnce(UnboundedSender<Seen>) -> Vec<JoinHandle<()>> {
    move |seen_tx| {
        (0..CONSUMERS)
            .map(|_| {
                let consumer = consume(uri.clone(), QUEUE, PREFETCH, stop.clone(), seen_tx.clone());
                tokio::spawn(consumer)
            })
            .collect()
    }
}

/// `members` members of `group` reading `topic`, started with a sender of what they see.
fn group_members(
    bootstrap: String,
    (group, topic, members): (&'static str, &'static str, usize),
    stop: CancellationToken,
) -> impl FnOnce(UnboundedSender<Seen>) -> Vec<JoinHandle<()>> {
    let committed = Committed::default();
    move |seen_tx| {
        (0..members)
            .map(|_| {
                let member = read_as_member(
                    bootstrap.clone(),
                    group,
                    topic,
                    committed.clone(),
                    stop.clone(),
                    seen_tx.clone(),
                );
                tokio::spawn(member)
            })
            .collect()
    }
}

/// The three parts, readers started.
fn parts(ferry: &Daemon, size: Size, deadline: Instant, stop: &CancellationToken) -> [Part; 3] {
    let (uri, bootstrap) = (ferry.amqp_uri(), ferry.kafka_bootstrap());
    let amqp = Part::new(
        "AMQP",
        Reads::Deliveries,
        size.flows(PUBLISHERS, deadline),
        amqp_consumers(uri, stop.clone()),
    );
    let kafka = Part::new(
        "Kafka",
        Reads::Records,
        size.flows(PRODUCERS, deadline),
        group_members(bootstrap.clone(), (GROUP, TOPIC, MEMBERS), stop.clone()),
    );
    let route = Part::new(
        "route",
        Reads::Records,
        size.flows(1, deadline),
        group_members(bootstrap, (ROUTE_GROUP, ROUTE_TOPIC, 1), stop.clone()),
    );
    [amqp, kafka, route]
}

/// Starts the senders of the three parts.
fn send(ferry: &Daemon, [amqp, kafka, route]: &mut [Part; 3]) {
    let (uri, bootstrap) = (ferry.amqp_uri(), ferry.kafka_bootstrap());
    let to_queue = uri.clone();
    amqp.send(move |flow| {
        let uri = to_queue.clone();
        async move { publish_until_confirmed(&uri, "", QUEUE, &flow).await }
    });
    kafka.send(move |flow| {
        let bootstrap = bootstrap.clone();
        async move { produce_until_acknowledged(&bootstrap, TOPIC, &RECONNECT, &flow).await }
    });
    route.send(move |flow| {
        let uri = uri.clone();
        async move { publish_until_confirmed(&uri, ROUTE_EXCHANGE, "k", &flow).await }
    });
}

/// Kills and restarts `ferry` at `size`'s progress points of the slowest flow of `parts`.
fn killer(ferry: Daemon, size: Size, parts: &[Part; 3]) -> JoinHandle<(Daemon, Vec<Restart>)> {
    let flows: Vec<Flow> = parts.iter().flat_map(|p| p.flows.clone()).collect();
    let slowest = move || flows.iter().map(Flow::progress).min().unwrap_or(0);
    kill_at(
        ferry,
        kill_points(size.messages, size.kills),
        size.limit(),
        slowest,
    )
}

/// Batches of [`TOPIC`] that Ferry recognised as sent again by an idempotent producer and
/// stored once, summed over every process of the run.
fn resent_batches_stored_once(restarts: &[Restart], last: &Daemon) -> u64 {
    let counted = |metrics: &str| {
        sum_of(
            metrics,
            "ferry_kafka_duplicate_batches_total",
            &[&format!("topic=\"{TOPIC}\"")],
        )
    };
    let total: f64 = restarts.iter().map(|r| counted(&r.last_metrics)).sum();
    (total + counted(&last.metrics())) as u64
}

/// One part's figures, as a line of the report.
fn report(part: &Part, tally: &Tally, restarts: &[Instant]) -> String {
    let any = recoveries(restarts, &part.seen, |s| s.how != How::Held);
    let redeliveries = recoveries(restarts, &part.seen, |s| {
        s.how == How::Delivery { redelivered: true }
    });
    let repeats = match part.reads {
        Reads::Deliveries => format!(
            "redelivered {}, held at a kill and not redelivered {}; restart → first redelivery {}, → first delivery {}",
            tally.redelivered,
            tally.held_not_redelivered,
            spread(&redeliveries),
            spread(&any)
        ),
        Reads::Records => format!(
            "re-read after an uncommitted offset {}, re-read below a committed one {}; restart → first record read {}",
            tally.reread_uncommitted,
            tally.reread_committed,
            spread(&any)
        ),
    };
    format!(
        "{}: messages {}, clients {}, lost {}, unmarked duplicates {}, re-sends {} (re-sent copies received {}); {repeats}",
        part.name,
        tally.messages,
        part.flows.len(),
        tally.lost,
        tally.unmarked_duplicates,
        tally.resends,
        tally.resent_copies,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_at_once_loses_and_duplicates_nothing_under_repeated_kill_9() {
    let size = Size::from_env();
    let started = Instant::now();
    let deadline = started + size.limit();
    let dir = tempfile::tempdir().unwrap();
    let ferry = start(dir.path()).await;
    let stop = CancellationToken::new();
    let mut parts = parts(&ferry, size, deadline, &stop);
    send(&ferry, &mut parts);
    let killer = killer(ferry, size, &parts);

    for part in &mut parts {
        part.sent().await;
    }
    let (ferry, restarts) = killer.await.expect("the killer failed");
    for part in &mut parts {
        part.read_all(deadline).await;
    }
    tokio::time::sleep(QUIET).await;
    stop.cancel();
    for part in &mut parts {
        part.finish().await;
    }

    let resent_batches = resent_batches_stored_once(&restarts, &ferry);
    let starts: Vec<Instant> = restarts.iter().map(|r| r.started).collect();
    let up: Vec<Option<Duration>> = restarts
        .iter()
        .map(|r| Some(r.healthy - r.started))
        .collect();
    eprintln!(
        "crash run: {} kills, {} messages per client at {}/s, {:.1} s; restart → healthy {}; \
         Kafka batches re-sent by librdkafka and stored once {resent_batches}",
        size.kills,
        size.messages,
        size.rate,
        started.elapsed().as_secs_f64(),
        spread(&up)
    );
    let tallies = parts.map(|part| {
        let tally = part.tally();
        eprintln!("{}", report(&part, &tally, &starts));
        (part.name, tally)
    });
    for (name, tally) in tallies {
        assert!(tally.is_exact(), "{name}: {tally:?}");
    }
}
