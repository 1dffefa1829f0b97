//! Delayed-message exchanges (type `x-delayed-message`, the archived RabbitMQ plugin's):
//! holding a message published with a positive `x-delay` header in the store, and routing
//! it by the exchange's `x-delayed-type` when it is due — durably, across restarts.
//!
//! **Holding** ([`hold_in`]). The publish's own transaction writes the message under its
//! exchange, keyed by its due time and then its commit versionstamp, so messages due at the
//! same millisecond keep their publish order; the publisher's confirm follows that commit.
//! A hold carries the channel's idempotency key, so the retry of a commit whose outcome was
//! unknown holds nothing twice.
//!
//! **Releasing** ([`run`]). Every instance runs a mover. It looks at the head of every
//! delayed-message exchange and, in one transaction per batch, takes the messages due, sets
//! their `x-delay` to minus their delay (as the plugin does, so no delayed-message exchange
//! holds them again), routes them by the exchange's bindings as they are then, and stores
//! them in their queues: a message is held or queued, never both and never neither. Two
//! movers racing for a message conflict; the loser retries and finds it gone. A message
//! that routes nowhere when it is due is dropped, as the plugin drops it. The mover sleeps
//! until the earliest due time, or until a message is held anywhere (a change counter every
//! hold bumps), and looks again at least every [`RESCAN`] for exchanges its instance had not
//! loaded when the counter moved.

use super::enqueue::{Entry, QueueBatch, enqueue_in, expires_at, hint_expiries, parse_expiration};
use crate::message::large::Prespill;
use crate::message::stored::StoredMessage;
use crate::state::broker::Broker;
use crate::state::topology::VHost;
use crate::state::topology::exchange::{DELAY_HEADER, delay_of};
use crate::state::topology::records::{self, TopologyKeys};
use crate::wire::codec;
use amq_protocol::types::AMQPValue;
use bytes::Bytes;
use ferry_stage::{NewMessage, Spill, Spills, StageError, now_ms, spill};
use ferry_store::keys::key_after;
use ferry_store::{ChangeCounter, RangeOption, StoreError, Transaction, chunked};
use ferry_telemetry::amqp as metric;
use foundationdb_tuple::{Versionstamp, pack, unpack};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Messages one release transaction takes at most.
const PER_PASS: usize = 256;
/// Stored bytes one release transaction copies into queues at most (a first message goes
/// alone whatever it copies), well inside FoundationDB's 10 MB transaction limit.
const PASS_BYTES: usize = 4 * 1024 * 1024;
/// The longest the mover sleeps without looking (see the module's header).
const RESCAN: Duration = Duration::from_secs(10);
/// How long the mover waits after the store failed.
const RETRY: Duration = Duration::from_secs(1);

/// A message for a delayed-message exchange to hold.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hold<'a> {
    /// The delayed-message exchange.
    pub exchange: &'a str,
    /// When it is due, ms since the epoch.
    pub due_ms: u64,
    /// Its stored form ([`StoredMessage::encode`]).
    pub stored: &'a Bytes,
    /// The spill its body is in, for a large message.
    pub spill: Option<Spill>,
    /// The publishing channel's (producer, sequence), when it has one.
    pub idempotency: Option<(u64, u64)>,
}

/// Holds `holds`, in order, within `tx`; returns how many were held (a hold whose
/// sequence is not above its producer's last held one at that exchange is a duplicate).
///
/// # Errors
/// The store's error.
pub(crate) async fn hold_in(
    tx: &Transaction,
    keys: &TopologyKeys,
    spills: &Spills,
    vhost: &str,
    holds: &[Hold<'_>],
) -> Result<usize, StoreError> {
    // Per (exchange, producer): the last sequence held, and whether this batch moved it.
    let mut last: HashMap<(&str, u64), (Option<u64>, bool)> = HashMap::new();
    let mut held = 0;
    for hold in holds {
        if let Some((producer, sequence)) = hold.idempotency {
            let entry = match last.entry((hold.exchange, producer)) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => {
                    let key = keys.delayed_producer(vhost, hold.exchange, producer);
                    let stored = tx.get(&key, false).await?;
                    let seen = stored.and_then(|v| unpack::<(u64,)>(&v).ok()).map(|(s,)| s);
                    e.insert((seen, false))
                }
            };
            if entry.0.is_some_and(|seen| sequence <= seen) {
                continue;
            }
            *entry = (Some(sequence), true);
        }
        let user_version = tx.next_user_version();
        let index = keys.new_delayed(vhost, hold.exchange, hold.due_ms, user_version);
        if let Some(spill) = hold.spill {
            spills.add_ref_in(tx, spill.id);
        }
        let value = records::encode_delayed(hold.stored.len(), hold.spill);
        tx.set_versionstamped_key(&index, value);
        let stamp = Versionstamp::incomplete(user_version);
        for (i, chunk) in chunked::split(hold.stored) {
            tx.set_versionstamped_key(&keys.delayed_chunk(vhost, hold.exchange, &stamp, i), chunk);
        }
        tx.atomic_add(&keys.delayed_count(vhost, hold.exchange), 1);
        held += 1;
    }
    for ((exchange, producer), (sequence, moved)) in last {
        if let (Some(sequence), true) = (sequence, moved) {
            tx.set(
                &keys.delayed_producer(vhost, exchange, producer),
                pack(&(sequence,)),
            );
        }
    }
    if held > 0 {
        ChangeCounter::new(keys.delayed_version()).bump(tx);
    }
    Ok(held)
}

/// How many messages `exchange` holds (a snapshot read).
///
/// # Errors
/// The store's error.
pub(crate) async fn held(
    tx: &Transaction,
    keys: &TopologyKeys,
    vhost: &str,
    exchange: &str,
) -> Result<i64, StoreError> {
    Ok(tx
        .get(&keys.delayed_count(vhost, exchange), true)
        .await?
        .and_then(|v| v.try_into().ok())
        .map_or(0, i64::from_le_bytes))
}

/// Releases due messages on this instance until `shutdown`.
pub(crate) async fn run(broker: Arc<Broker>, shutdown: CancellationToken) {
    let keys = broker.vhosts.keys().clone();
    let counter = ChangeCounter::new(keys.delayed_version());
    // The (vhost, exchange) gauges set last time, so a deleted exchange's goes to 0.
    let mut gauged: HashSet<(String, String)> = HashSet::new();
    loop {
        let seen = match counter.read(&broker.db).await {
            Ok(seen) => seen,
            Err(e) => {
                warn!(error = %e, "cannot read the delayed messages' change counter");
                if sleep_or_stop(RETRY, &shutdown).await {
                    return;
                }
                continue;
            }
        };
        let mut next: Option<u64> = None;
        let mut now_gauged = HashSet::new();
        for vhost in broker.vhosts.list() {
            let exchanges: Vec<String> = vhost
                .topology()
                .exchanges
                .values()
                .filter(|x| x.delayed)
                .map(|x| x.name.clone())
                .collect();
            for exchange in exchanges {
                let due = match release_due(&broker, &vhost, &exchange).await {
                    Ok(due) => due,
                    Err(e) => {
                        warn!(vhost = %vhost.name, exchange = %exchange, error = %e, "cannot release delayed messages");
                        Some(now_ms() + RETRY.as_millis() as u64)
                    }
                };
                next = match (next, due) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                if let Ok(tx) = broker.db.begin()
                    && let Ok(n) = held(&tx, &keys, &vhost.name, &exchange).await
                {
                    metrics::gauge!(metric::DELAYED, metric::LABEL_VHOST => vhost.name.clone(), metric::LABEL_EXCHANGE => exchange.clone())
                        .set(n as f64);
                }
                now_gauged.insert((vhost.name.clone(), exchange));
            }
        }
        for (vhost, exchange) in gauged.difference(&now_gauged) {
            metrics::gauge!(metric::DELAYED, metric::LABEL_VHOST => vhost.clone(), metric::LABEL_EXCHANGE => exchange.clone())
                .set(0.0);
        }
        gauged = now_gauged;
        let wait = next.map_or(RESCAN, |at| {
            Duration::from_millis(at.saturating_sub(now_ms())).min(RESCAN)
        });
        tokio::select! {
            () = shutdown.cancelled() => return,
            changed = counter.changed_since(&broker.db, seen) => {
                if changed.is_err() && sleep_or_stop(RETRY, &shutdown).await {
                    return;
                }
            }
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// Sleeps `wait`; true when `shutdown` came first.
async fn sleep_or_stop(wait: Duration, shutdown: &CancellationToken) -> bool {
    tokio::select! {
        () = shutdown.cancelled() => true,
        () = tokio::time::sleep(wait) => false,
    }
}

/// Routes and stores every message of `exchange` due now; returns when the next one is due
/// (`None`: it holds nothing more).
async fn release_due(
    broker: &Broker,
    vhost: &VHost,
    exchange: &str,
) -> Result<Option<u64>, StageError> {
    let mut prespill: Option<(Vec<u8>, Prespill)> = None;
    loop {
        let now = now_ms();
        let written = prespill.as_ref().map(|(key, p)| (key.as_slice(), p.spill));
        let pass = broker
            .db
            .run(|tx| async move { release_pass(&tx, vhost, exchange, now, written).await })
            .await;
        // The queues reference the spill now (or, if the message is gone, nothing does).
        if let Some((_, p)) = prespill.take() {
            p.release(broker).await;
        }
        let pass = pass?;
        hint_expiries(&broker.expiry, &pass.batches);
        if let Some((key, body)) = pass.spill_first {
            prespill = Some((key, Prespill::write(broker, &body).await?));
            continue;
        }
        if !pass.more {
            return Ok(pass.next);
        }
    }
}

/// What one release transaction did.
struct Pass {
    /// What it stored.
    batches: Vec<QueueBatch>,
    /// Whether more may be due.
    more: bool,
    /// When the first message left is due.
    next: Option<u64>,
    /// The first due message (its key, its body) whose copies alone would not fit one
    /// transaction: nothing was taken; it is to be spilled first.
    spill_first: Option<(Vec<u8>, Bytes)>,
}

/// One release transaction: takes up to [`PER_PASS`] due messages (at most [`PASS_BYTES`]
/// copied into their queues, a first message alone up to what one transaction carries),
/// stores them in their queues. `written` is a due message (its key) whose body was
/// written to a spill: it is stored by reference to it. A first message whose copies
/// would not fit one transaction is not taken but returned, to be spilled first.
async fn release_pass(
    tx: &Transaction,
    vhost: &VHost,
    exchange: &str,
    now: u64,
    written: Option<(&[u8], Spill)>,
) -> Result<Pass, StageError> {
    let keys = vhost.keys();
    let name = vhost.name.as_str();
    let (begin, end) = keys.delayed(name, exchange, Some(now));
    let due = tx
        .get_range(&RangeOption::new(begin, end).limit(PER_PASS), false)
        .await?;
    let mut batches: Vec<QueueBatch> = Vec::new();
    let (mut taken, mut bytes) = (0usize, 0usize);
    let mut last_key = None;
    let spills = vhost.spills();
    for kv in &due {
        let (len, held) = records::decode_delayed(&kv.value);
        let key = keys.delayed_of(&kv.key);
        let stored = match &key {
            Some((_, stamp)) => {
                let chunk = |i| keys.delayed_chunk(name, exchange, stamp, i);
                Some(chunked::read(tx, len, chunk).await?)
            }
            None => None,
        };
        let mut released = stored
            .filter(|stored| stored.len() == len)
            .and_then(released);
        let routes = released.as_ref().map(|r| {
            vhost
                .topology()
                .route_from(exchange, &r.message.routing_key, r.headers.as_ref())
        });
        let copies = routes.as_ref().map_or(0, |r| r.queues.len());
        let mut spill = held;
        if let (Some(r), None, Some((_, s))) = (
            released.as_mut(),
            spill,
            written.filter(|(key, _)| *key == kv.key.as_slice()),
        ) {
            // Its body is in the spill written for it: the queues reference that.
            r.message.body = Bytes::new();
            spill = Some(s);
        }
        let body = released.as_ref().map(|r| r.message.encode());
        if let (0, None, Some(r)) = (taken, spill, &released)
            && spill::spills(r.message.body.len() as u64, copies)
        {
            return Ok(Pass {
                batches,
                more: true,
                next: Some(now),
                spill_first: Some((kv.key.clone(), r.message.body.clone())),
            });
        }
        // Its stored form is copied once per queue it reaches (a large message's body is
        // in its spill, which each queue references).
        let copied = body.as_ref().map_or(len, Bytes::len) * copies.max(1);
        if taken > 0 && bytes + copied > PASS_BYTES {
            break;
        }
        taken += 1;
        bytes += copied;
        last_key = Some(kv.key.clone());
        tx.clear(&kv.key);
        // The hold's reference to its spill goes; each queue the message reaches takes one.
        if let Some(held) = held {
            spills.drop_ref_in(tx, held.id);
        }
        let Some((due_ms, stamp)) = key else {
            warn!(
                vhost = name,
                exchange, "dropping a held message whose key does not decode"
            );
            continue;
        };
        for i in 0..chunked::count(len) {
            tx.clear(&keys.delayed_chunk(name, exchange, &stamp, i));
        }
        let (Some(released), Some(routes), Some(body)) = (released, routes, body) else {
            warn!(
                vhost = name,
                exchange, due_ms, "dropping a held message that is incomplete or does not decode"
            );
            continue;
        };
        for queue in routes.queues {
            let message = NewMessage::new(body.clone())
                .priority(released.priority)
                .expires_ms(expires_at(&queue, released.ttl, now))
                .spill(spill);
            let entry = Entry {
                item: taken - 1,
                message,
            };
            match batches.iter_mut().find(|b| Arc::ptr_eq(&b.queue, &queue)) {
                Some(b) => b.messages.push(entry),
                None => batches.push(QueueBatch {
                    queue,
                    messages: vec![entry],
                }),
            }
        }
    }
    let done = |batches, more, next| Pass {
        batches,
        more,
        next,
        spill_first: None,
    };
    if taken == 0 {
        let next = first_due(tx, keys, name, exchange, None).await?;
        return Ok(done(batches, false, next));
    }
    enqueue_in(tx, &batches, now).await?;
    tx.atomic_add(&keys.delayed_count(name, exchange), -(taken as i64));
    if taken < due.len() || taken == PER_PASS {
        return Ok(done(batches, true, Some(now)));
    }
    let next = first_due(tx, keys, name, exchange, last_key.as_deref()).await?;
    Ok(done(batches, false, next))
}

/// When the first message of `exchange` after the key `after` (from the start: `None`) is
/// due (a snapshot read).
async fn first_due(
    tx: &Transaction,
    keys: &TopologyKeys,
    vhost: &str,
    exchange: &str,
    after: Option<&[u8]>,
) -> Result<Option<u64>, StoreError> {
    let (begin, end) = keys.delayed(vhost, exchange, None);
    let begin = after.map_or(begin, key_after);
    let first = tx
        .get_range(&RangeOption::new(begin, end).limit(1), true)
        .await?;
    Ok(first
        .first()
        .and_then(|kv| keys.delayed_of(&kv.key))
        .map(|(due, _)| due))
}

/// A held message made ready to route: `x-delay` set to minus its delay.
struct Released {
    message: StoredMessage,
    headers: Option<amq_protocol::types::FieldTable>,
    priority: u8,
    ttl: Option<u64>,
}

/// Decodes a held message and sets its `x-delay` header to minus its delay, as the plugin
/// does when it routes one.
fn released(stored: Bytes) -> Option<Released> {
    let mut message = StoredMessage::decode(stored).ok()?;
    let properties = message.properties().ok()?;
    let mut headers = properties.headers().clone().unwrap_or_default();
    if let Some(delay) = delay_of(Some(&headers)) {
        let negative = -(delay as i64);
        let value =
            i32::try_from(negative).map_or(AMQPValue::LongLongInt(negative), AMQPValue::LongInt);
        headers.insert(DELAY_HEADER.into(), value);
    }
    let properties = properties.with_headers(headers.clone());
    message.raw_properties = Bytes::from(codec::encode_properties(&properties));
    Some(Released {
        message,
        headers: Some(headers),
        priority: properties.priority().unwrap_or(0),
        ttl: properties
            .expiration()
            .as_ref()
            .and_then(|e| parse_expiration(e.as_str()).ok()),
    })
}
