//! Where the kill -9 runs strike, and the clients that outlive them.
//!
//! Kills come at progress points, not at random times, so that every crash lands while
//! messages flow, however slow or fast the machine. The publisher and the producer here
//! send each message until Ferry confirms it, across kills: a message whose confirm was
//! lost with the connection is sent again. Every send carries its attempt number in the
//! header [`ATTEMPT`], so a reader can tell a copy the client itself made (another
//! attempt) from a duplicate Ferry made (the same attempt twice).

use super::daemon::Daemon;
use super::kafka::{PATIENCE, producer};
use super::wait;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::FutureRecord;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The header (AMQP) or record header (Kafka) holding a send's attempt number, 1 for the
/// first send of a message, as decimal text.
pub const ATTEMPT: &str = "attempt";

/// Messages sent back to back, before their confirms are awaited, when a flow is not paced.
const BURST: usize = 1_000;

/// With `total` messages and `kills` crashes, the counts of arrived messages after which
/// each crash comes: k·total/(kills+1) for k = 1..=kills, so the flow is split into
/// `kills + 1` equal parts and the last part runs without a crash.
pub fn kill_points(total: usize, kills: usize) -> Vec<usize> {
    (1..=kills).map(|k| k * total / (kills + 1)).collect()
}

/// One kill -9 and the restart after it.
#[derive(Debug, Clone)]
pub struct Restart {
    /// The killed process's `/metrics` just before the kill: its counters since it
    /// started, which the restart resets (sum them over the restarts).
    pub last_metrics: String,
    /// When the new process started, right after the killed one was gone.
    pub started: Instant,
    /// When the new process answered `/healthz`.
    pub healthy: Instant,
}

/// SIGKILLs `ferry` each time `progress()` reaches one of `points`, each kill followed by
/// a restart on the same store and ports; returns the last process and the restarts.
/// Panics when a point is not reached within `limit`.
pub fn kill_at(
    mut ferry: Daemon,
    points: Vec<usize>,
    limit: Duration,
    progress: impl Fn() -> usize + Send + 'static,
) -> tokio::task::JoinHandle<(Daemon, Vec<Restart>)> {
    tokio::task::spawn_blocking(move || {
        let mut restarts = Vec::with_capacity(points.len());
        for point in points {
            wait::until_blocking(&format!("{point} messages confirmed"), limit, || {
                (progress() >= point).then_some(())
            });
            let last_metrics = ferry.metrics();
            ferry.kill();
            let started = Instant::now();
            ferry.restart();
            restarts.push(Restart {
                last_metrics,
                started,
                healthy: Instant::now(),
            });
        }
        (ferry, restarts)
    })
}

/// The messages one client sends until each is confirmed, across kills.
#[derive(Debug, Clone)]
pub struct Flow {
    /// The message ids; each message's body (value) is its id as decimal text.
    pub ids: Range<usize>,
    /// First sends per second, or `None` for as fast as the confirms come back.
    pub rate: Option<u32>,
    /// When the client gives up (and panics) with messages still unconfirmed.
    pub deadline: Instant,
    /// How many of the messages are confirmed so far (for [`kill_at`]).
    pub confirmed: Arc<AtomicUsize>,
}

impl Flow {
    /// `ids`, unpaced, with a new confirmed count.
    pub fn new(ids: Range<usize>, deadline: Instant) -> Self {
        Self {
            ids,
            rate: None,
            deadline,
            confirmed: Arc::default(),
        }
    }

    /// Paced at `rate` first sends per second.
    pub fn paced(self, rate: u32) -> Self {
        Self {
            rate: Some(rate),
            ..self
        }
    }

    /// Messages confirmed so far.
    pub fn progress(&self) -> usize {
        self.confirmed.load(Ordering::Relaxed)
    }
}

/// A flow being sent: how often each message was sent, and which are confirmed.
struct Sending<'a> {
    /// The flow.
    flow: &'a Flow,
    /// When sending began, for the pace.
    start: Instant,
    /// Sends per message (by index into the flow's ids): the last one's attempt number.
    sends: Vec<u32>,
    /// Whether each message is confirmed.
    confirmed: Vec<bool>,
    /// Messages not confirmed yet.
    left: usize,
}

impl<'a> Sending<'a> {
    fn new(flow: &'a Flow) -> Self {
        Self {
            flow,
            start: Instant::now(),
            sends: vec![0; flow.ids.len()],
            confirmed: vec![false; flow.ids.len()],
            left: flow.ids.len(),
        }
    }

    /// Whether every message is confirmed; panics when the deadline passed first.
    fn is_done(&self) -> bool {
        assert!(
            self.left == 0 || Instant::now() < self.flow.deadline,
            "{} of {} messages never confirmed",
            self.left,
            self.flow.ids.len()
        );
        self.left == 0
    }

    /// The waves of messages (as indexes into the flow's ids) still to send: the
    /// unconfirmed ones, in id order, a wave sent back to back before its confirms are
    /// awaited.
    fn waves(&self) -> Vec<Vec<usize>> {
        let wave = self.flow.rate.map_or(BURST, |r| (r as usize / 10).max(1));
        let todo: Vec<usize> = (0..self.confirmed.len())
            .filter(|i| !self.confirmed[*i])
            .collect();
        todo.chunks(wave).map(<[usize]>::to_vec).collect()
    }

    /// Waits until `wave` is due: its first message's first send at the flow's rate.
    async fn pace(&self, wave: &[usize]) {
        if let Some(rate) = self.flow.rate {
            let offset = Duration::from_secs_f64(wave[0] as f64 / f64::from(rate));
            tokio::time::sleep_until((self.start + offset).into()).await;
        }
    }

    /// Counts a send of message `i`; returns its id and the send's attempt number.
    fn send(&mut self, i: usize) -> (usize, u32) {
        self.sends[i] += 1;
        (self.flow.ids.start + i, self.sends[i])
    }

    /// Counts message `i` confirmed.
    fn confirm(&mut self, i: usize) {
        self.confirmed[i] = true;
        self.left -= 1;
        self.flow.confirmed.fetch_add(1, Ordering::Relaxed);
    }
}

/// A channel in confirm mode on a new connection to `uri`, or the error while the front is
/// down.
async fn confirm_channel(uri: &str) -> lapin::Result<(Connection, Channel)> {
    let conn = Connection::connect(uri, ConnectionProperties::default()).await?;
    let ch = conn.create_channel().await?;
    ch.confirm_select(ConfirmSelectOptions::default()).await?;
    Ok((conn, ch))
}

/// The properties of attempt `attempt` of message `id`: persistent, message-id `m{id}`,
/// header [`ATTEMPT`].
fn properties(id: usize, attempt: u32) -> BasicProperties {
    let mut headers = FieldTable::default();
    headers.insert(
        ATTEMPT.into(),
        AMQPValue::LongString(attempt.to_string().into()),
    );
    BasicProperties::default()
        .with_message_id(format!("m{id}").into())
        .with_delivery_mode(2)
        .with_headers(headers)
}

/// Publishes `flow` to `exchange` with `routing_key` under confirms until each message is
/// confirmed once, reconnecting to `uri` whenever the connection breaks and sending every
/// unconfirmed message again; returns how often each was sent (by index into `flow.ids`).
pub async fn publish_until_confirmed(
    uri: &str,
    exchange: &str,
    routing_key: &str,
    flow: &Flow,
) -> Vec<u32> {
    let mut sending = Sending::new(flow);
    while !sending.is_done() {
        let (_conn, ch) = wait::until_ok(
            "the AMQP front accepting a confirm channel",
            PATIENCE,
            || confirm_channel(uri),
        )
        .await;
        'waves: for wave in sending.waves() {
            sending.pace(&wave).await;
            let mut pending = Vec::with_capacity(wave.len());
            for i in wave {
                let (id, attempt) = sending.send(i);
                let body = id.to_string();
                let publish = ch.basic_publish(
                    exchange.into(),
                    routing_key.into(),
                    BasicPublishOptions::default(),
                    body.as_bytes(),
                    properties(id, attempt),
                );
                match publish.await {
                    Ok(confirm) => pending.push((i, confirm)),
                    Err(_) => break 'waves,
                }
            }
            for (i, confirm) in pending {
                match confirm.await {
                    Ok(c) if c.is_ack() => sending.confirm(i),
                    _ => break 'waves,
                }
            }
        }
    }
    sending.sends
}

/// Produces `flow` to `topic` with an idempotent producer until each record is
/// acknowledged once; returns how often each was handed to the producer (by index into
/// `flow.ids`). librdkafka itself retries a batch across a restart (the same producer id
/// and sequence, which Ferry must store once); a record it gave up on is sent again here,
/// as another attempt. Records are keyed `k{id % 17}` so they spread over the partitions;
/// `settings` go on top of the producer's.
pub async fn produce_until_acknowledged(
    bootstrap: &str,
    topic: &str,
    settings: &[(&str, &str)],
    flow: &Flow,
) -> Vec<u32> {
    let mut idempotent = vec![
        ("enable.idempotence", "true"),
        ("message.timeout.ms", "20000"),
    ];
    idempotent.extend_from_slice(settings);
    let producer = producer(bootstrap, &idempotent);
    let mut sending = Sending::new(flow);
    while !sending.is_done() {
        for wave in sending.waves() {
            sending.pace(&wave).await;
            let mut pending = Vec::with_capacity(wave.len());
            for i in wave {
                let (id, attempt) = sending.send(i);
                let (key, value, attempt) =
                    (format!("k{}", id % 17), id.to_string(), attempt.to_string());
                let headers = OwnedHeaders::new().insert(Header {
                    key: ATTEMPT,
                    value: Some(&attempt),
                });
                let record = FutureRecord::to(topic)
                    .key(&key)
                    .payload(&value)
                    .headers(headers);
                match producer.send_result(record) {
                    Ok(delivery) => pending.push((i, delivery)),
                    Err(_) => break,
                }
            }
            for (i, delivery) in pending {
                if let Ok(Ok(_)) = delivery.await {
                    sending.confirm(i);
                }
            }
        }
    }
    sending.sends
}
