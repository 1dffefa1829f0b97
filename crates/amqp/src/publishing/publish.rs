//! Publishing on one channel: routing each complete message, storing messages in group
//! commits, publisher confirms, and transactions.
//!
//! **Group commit.** While one append transaction of the channel is committing, the next
//! publishes wait ([`GroupCommit`]); when it finishes they are appended together in the
//! next transaction. So a publisher with many confirms outstanding gets large
//! transactions, and one with one outstanding gets one message per transaction.
//!
//! **Confirms after commit.** basic.ack (or basic.nack, for a message a queue refused
//! with `x-overflow: reject-publish`) is sent only after the message's transaction
//! committed; a run of acks goes as one `multiple` ack. The channel holds it until the
//! connection's own consumers of the queues it stored to delivered what it stored
//! ([`super::confirm_order`]).
//!
//! **Idempotency.** Every append carries (the channel's random producer id, the publish's
//! sequence number), so the retry of a commit whose outcome was unknown stores nothing
//! twice.
//!
//! **Permissions.** Write on the exchange and, on a topic exchange the user has a topic
//! permission on, topic write on the routing key; decided once per exchange (and routing
//! key) per channel by the [`PublishGate`], so a steady publisher runs no regular
//! expression per message.
//!
//! **Transactions.** After tx.select, publishes (and acknowledgements, see
//! [`crate::consuming::consumers`]) are held until tx.commit stores them all in one store
//! transaction. A held publish whose copies would take that transaction's copied bodies
//! past [`spill::COMMIT_BUDGET`] is spilled first ([`spill::spills_beside`]), as a large
//! fanout is, so the commit stays one transaction — all of them visible, or none.
//!
//! **Large messages.** A body written to a spill before the message arrived here
//! ([`crate::message::large`]) is held by the channel's lease holder until the commit that
//! stores the message, which lets go of it (a spill the holder no longer holds fails the
//! commit: it may have been freed). A message discarded before its commit (tx.rollback, a
//! failed commit) lets go in the channel's next commit, or when its holder is released. A
//! smaller body whose copies in the queues it routes to would not fit one transaction
//! together is handed back to the channel to be spilled the same way first
//! ([`Answer::spill_first`]); a commit takes messages while their copied bodies stay within
//! [`spill::RUN_BYTES`] (a message alone, up to [`spill::COMMIT_BUDGET`]).

use super::delayed::{self, Hold};
use super::enqueue::{
    Entry, QueueBatch, Stored, enqueue_in, expires_at, hint_expiries, parse_expiration,
};
use crate::authorize::PublishGate;
use crate::consuming::settle::{Settlement, settle_in};
use crate::message::stored::StoredMessage;
use crate::state::broker::Broker;
use crate::state::context::ConnectionContext;
use crate::state::direct_reply::{self, Reply};
use crate::state::topology::exchange::delay_of;
use crate::state::topology::{ExchangeKind, Queue};
use crate::wire::codec::{self, ContentHeader};
use crate::wire::errors::{AmqpError, TxError};
use amq_protocol::protocol::{AMQPClass, basic};
use bytes::Bytes;
use ferry_stage::GroupCommit;
use ferry_stage::{NewMessage, Spill, Spills, StageError, now_ms, spill};
use ferry_store::Transaction;
use ferry_telemetry::amqp as metric;
use ferry_telemetry::compat::rabbitmq::state::{self as rabbitmq, Routed};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// Bytes of publishes waiting for a commit above which the channel stops reading frames
/// (the client then feels TCP back-pressure).
const PENDING_BYTES_MAX: usize = 32 * 1024 * 1024;

/// A complete basic.publish: method, header and body.
#[derive(Debug)]
pub struct Incoming {
    /// The method.
    pub publish: basic::Publish,
    /// The content header.
    pub header: Box<ContentHeader>,
    /// The body (empty when it is in a spill).
    pub body: Bytes,
    /// The spill the body was written to, for a large one.
    pub spill: Option<Spill>,
    /// When its last frame arrived (for the confirm latency).
    pub received: Instant,
}

/// What a publish answers at once.
#[derive(Debug, Default)]
pub(crate) struct Answer {
    /// Frames to send (basic.return for an unroutable mandatory message).
    pub frames: Vec<u8>,
    /// For a returned large message: its properties and spill, whose content follows the
    /// frames ([`crate::message::large::send_content`]).
    pub returned: Option<(Bytes, Spill)>,
    /// A message whose copies in the queues (and delayed-message exchanges) it routes to
    /// would not fit one transaction together ([`spill::spills`]), handed back untouched:
    /// the channel writes its body to a spill and accepts it again, so its commit stores
    /// it once, by reference ([`crate::message::large`]).
    pub spill_first: Option<Incoming>,
}

/// A routed message waiting to be stored.
#[derive(Debug)]
struct Accepted {
    /// Its confirm delivery tag, in confirm mode.
    tag: Option<u64>,
    /// Its idempotency sequence.
    sequence: u64,
    /// The queues it goes to (none: unroutable, confirmed at once with the batch).
    queues: Vec<Arc<Queue>>,
    /// The delayed-message exchanges that hold it first, and for how long (ms).
    delayed: (Vec<String>, u64),
    /// Its stage body (its head, when the body is in a spill).
    stored: Bytes,
    /// The spill its body is in, for a large one.
    spill: Option<Spill>,
    /// Its priority property.
    priority: u8,
    /// Its `expiration` property, ms.
    ttl: Option<u64>,
    /// When it arrived.
    received: Instant,
}

/// A finished commit of the confirm pipeline.
pub(crate) struct Committed {
    batch: Vec<Accepted>,
    batches: Vec<QueueBatch>,
    result: Result<Stored, AmqpError>,
}

impl Committed {
    /// The queues the commit stored messages to (none when it failed).
    pub(crate) fn stored_to(&self) -> impl Iterator<Item = &str> {
        let stored = if self.result.is_ok() {
            &self.batches[..]
        } else {
            &[]
        };
        stored.iter().map(|b| b.queue.name.as_str())
    }
}

/// One channel's publishing state.
pub(crate) struct Publisher {
    /// Random per channel: with `sequence`, the idempotency key of every append.
    producer: u64,
    /// The last publish's sequence.
    sequence: u64,
    /// In confirm mode, the last confirm tag handed out.
    confirm: Option<u64>,
    /// Whether tx.select was called.
    transactional: bool,
    /// Publishes held for tx.commit.
    held: Vec<Accepted>,
    /// Bytes tx.commit copies of the held publishes' bodies ([`Accepted::stored_bytes`]).
    held_bytes: usize,
    /// Publishes waiting for (or in) a store commit.
    commits: GroupCommit<Accepted, Committed>,
    /// Bytes of the publishes waiting for a commit.
    pending_bytes: usize,
    /// The channel's publish permission decisions.
    gate: PublishGate,
    /// The channel's lease holder, which holds the spills of large messages until their
    /// commit.
    spill_holder: Option<u64>,
    /// Spills of messages discarded before their commit, to let go of in the next one.
    abandoned: Vec<Spill>,
}

impl Default for Publisher {
    fn default() -> Self {
        Self {
            producer: fastrand::u64(1..),
            sequence: 0,
            confirm: None,
            transactional: false,
            held: Vec::new(),
            held_bytes: 0,
            commits: GroupCommit::default(),
            pending_bytes: 0,
            gate: PublishGate::default(),
            spill_holder: None,
            abandoned: Vec::new(),
        }
    }
}

impl Publisher {
    /// confirm.select.
    ///
    /// # Errors
    /// 406 on a transactional channel.
    pub(crate) fn select_confirm(&mut self) -> Result<(), AmqpError> {
        if self.transactional {
            return Err(AmqpError::precondition_failed(
                "cannot switch from tx to confirm mode",
            ));
        }
        self.confirm.get_or_insert(0);
        Ok(())
    }

    /// tx.select.
    ///
    /// # Errors
    /// 406 on a channel in confirm mode.
    pub(crate) fn select_tx(&mut self) -> Result<(), AmqpError> {
        if self.confirm.is_some() {
            return Err(AmqpError::precondition_failed(
                "cannot switch from confirm to tx mode",
            ));
        }
        self.transactional = true;
        Ok(())
    }

    /// Records the lease holder that holds the channel's spills.
    pub(crate) fn hold_spills_as(&mut self, holder: u64) {
        self.spill_holder = Some(holder);
    }

    /// Whether confirm.select was called.
    pub(crate) fn confirming(&self) -> bool {
        self.confirm.is_some()
    }

    /// Whether tx.select was called.
    pub(crate) fn transactional(&self) -> bool {
        self.transactional
    }

    /// Whether so much waits for a commit that the channel should stop reading.
    pub(crate) fn saturated(&self) -> bool {
        self.pending_bytes > PENDING_BYTES_MAX
    }

    /// Whether nothing waits for or is in a commit (tx.select's held publishes aside).
    pub(crate) fn idle(&self) -> bool {
        self.commits.is_idle()
    }

    /// Waits for the commit under way (forever when there is none, so it can sit in a
    /// `select!`).
    ///
    /// # Errors
    /// 541 when the commit task panicked.
    pub(crate) async fn committed(&mut self) -> Result<Committed, AmqpError> {
        self.commits
            .committed()
            .await
            .map_err(|e| AmqpError::internal(format!("a publish commit panicked: {e}")))
    }

    /// Routes a complete message of channel `channel` of the connection `ctx` and queues
    /// it for storing, or hands a direct reply to its channel
    /// ([`crate::state::direct_reply`]: `reply_address` is this channel's own, while it
    /// consumes replies); returns frames to send at once (basic.return for an unroutable
    /// mandatory message), or the message itself when its body must be spilled first
    /// ([`Answer::spill_first`]).
    ///
    /// # Errors
    /// 404 for a missing exchange, 403 for an internal one or a refused permission, 406
    /// for an invalid `expiration` or a `reply_to` of `amq.rabbitmq.reply-to` on a channel
    /// that does not consume replies, 540 for `immediate`.
    pub(crate) fn accept(
        &mut self,
        ctx: &ConnectionContext,
        channel: u16,
        reply_address: Option<&str>,
        incoming: Incoming,
    ) -> Result<Answer, AmqpError> {
        let (vhost, frame_max) = (&*ctx.vhost, ctx.frame_max);
        let Incoming {
            publish,
            mut header,
            body,
            spill,
            received,
        } = incoming;
        if publish.immediate {
            return Err(AmqpError::not_implemented("immediate=true"));
        }
        let exchange = publish.exchange.as_str();
        let access = self.gate.follow(&ctx.access);
        self.gate.check_exchange(&access, exchange)?;
        // Only a user with topic permissions on this exchange has a routing key to check.
        if access.restricts_topics_on(exchange)
            && vhost
                .topology()
                .exchanges
                .get(exchange)
                .is_some_and(|x| x.kind == ExchangeKind::Topic && !x.internal)
        {
            self.gate
                .check_topic(&access, exchange, publish.routing_key.as_str())?;
        }
        let ttl = match header.properties.expiration() {
            None => None,
            Some(e) => Some(parse_expiration(e.as_str()).map_err(AmqpError::precondition_failed)?),
        };
        let routes = vhost.topology().route(
            &vhost.name,
            publish.exchange.as_str(),
            publish.routing_key.as_str(),
            header.properties.headers().as_ref(),
        )?;
        // tx.commit stores every held publish in one transaction: their copies count too.
        let beside = if self.transactional {
            self.held_bytes as u64
        } else {
            0
        };
        if spill.is_none() && spill::spills_beside(beside, body.len() as u64, routes.copies()) {
            return Ok(Answer {
                spill_first: Some(Incoming {
                    publish,
                    header,
                    body,
                    spill,
                    received,
                }),
                ..Answer::default()
            });
        }
        let routed_somewhere = !routes.is_empty();
        let asks_direct_reply = header.properties.reply_to().as_ref().map(|r| r.as_str())
            == Some(direct_reply::PSEUDO_QUEUE);
        if asks_direct_reply {
            // As RabbitMQ: a routed request needs this channel's reply consumer; its
            // reply_to becomes the channel's address.
            match reply_address {
                Some(address) => {
                    let properties = header.properties.clone().with_reply_to(address.into());
                    header.raw_properties = Bytes::from(codec::encode_properties(&properties));
                    header.properties = properties;
                }
                None if routed_somewhere => {
                    return Err(AmqpError::precondition_failed(
                        "fast reply consumer does not exist",
                    ));
                }
                None => {}
            }
        }
        let properties = &header.properties;
        // A direct reply goes to its channel now, stored nowhere.
        let replied = exchange.is_empty()
            && publish
                .routing_key
                .as_str()
                .starts_with(direct_reply::ADDRESS_PREFIX)
            && ctx.broker.direct_replies.deliver(Reply {
                routing_key: publish.routing_key.to_string(),
                raw_properties: header.raw_properties.clone(),
                body: body.clone(),
            });
        let mut out = Answer::default();
        if !routed_somewhere && !replied && publish.mandatory {
            codec::encode_method(
                &mut out.frames,
                channel,
                AMQPClass::Basic(basic::AMQPMethod::Return(basic::Return {
                    reply_code: 312,
                    reply_text: "NO_ROUTE".into(),
                    exchange: publish.exchange.clone(),
                    routing_key: publish.routing_key.clone(),
                })),
            );
            match spill {
                None => codec::encode_content(
                    &mut out.frames,
                    channel,
                    &header.raw_properties,
                    &body,
                    frame_max,
                ),
                Some(spill) => out.returned = Some((header.raw_properties.clone(), spill)),
            }
            metrics::counter!(metric::RETURNS_TOTAL, metric::LABEL_VHOST => vhost.name.clone())
                .increment(1);
        }
        let routed = match (!routed_somewhere && !replied, publish.mandatory) {
            (false, _) => Routed::ToQueues,
            (true, true) => Routed::Returned,
            (true, false) => Routed::Dropped,
        };
        rabbitmq::message_received(routed, self.confirm.is_some());
        self.sequence += 1;
        let tag = self.confirm.as_mut().map(|t| {
            *t += 1;
            *t
        });
        let stored = if !routed_somewhere {
            Bytes::new()
        } else {
            StoredMessage {
                exchange: publish.exchange.to_string(),
                routing_key: publish.routing_key.to_string(),
                raw_properties: header.raw_properties.clone(),
                body,
            }
            .encode()
        };
        let routed = Accepted {
            tag,
            sequence: self.sequence,
            priority: properties.priority().unwrap_or(0),
            ttl,
            stored,
            spill,
            delayed: (
                routes.delayed,
                delay_of(properties.headers().as_ref()).unwrap_or(0),
            ),
            queues: routes.queues,
            received,
        };
        if self.transactional {
            self.held_bytes += routed.stored_bytes();
            self.held.push(routed);
        } else {
            self.pending_bytes += routed.stored_bytes();
            self.commits.push(routed);
        }
        Ok(out)
    }

    /// Starts a commit of what is pending (at most [`spill::RUN_BYTES`] of copied
    /// bodies, or one message), unless one is under way.
    pub(crate) fn start_commit(&mut self, broker: &Arc<Broker>, vhost: &str) {
        if self.commits.is_committing() || self.commits.pending().is_empty() {
            return;
        }
        // The first run of messages that fits one transaction (a fanout too large for one
        // was spilled before it was accepted, `crate::message::large`).
        let sizes: Vec<u64> = self
            .commits
            .pending()
            .iter()
            .map(|r| r.stored_bytes() as u64)
            .collect();
        let take = spill::runs(&sizes).first().map_or(0, |run| run.end);
        let bytes = sizes[..take].iter().sum::<u64>() as usize;
        let (db, producer) = (broker.db.clone(), self.producer);
        let (keys, vhost) = (broker.vhosts.keys().clone(), vhost.to_owned());
        let spilled = self
            .commits
            .pending()
            .iter()
            .take(take)
            .any(|r| r.spill.is_some());
        let lets_go = self.lets_go(broker, spilled);
        let started = self.commits.start(take, move |batch| {
            let now = now_ms();
            let batches = plan(&batch, producer, now);
            async move {
                let (batches_ref, batch_ref, keys, vhost) = (&batches, &batch, &keys, &vhost);
                let lets_go = &lets_go;
                let result = db
                    .run(|tx| async move {
                        let stored = enqueue_in(&tx, batches_ref, now).await?;
                        let holds = holds(batch_ref, producer, now);
                        delayed::hold_in(&tx, keys, &lets_go.spills, vhost, &holds).await?;
                        lets_go.let_go_in(&tx, batch_ref).await?;
                        Ok::<_, TxError>(stored)
                    })
                    .await
                    .map_err(AmqpError::from);
                Committed {
                    batch,
                    batches,
                    result,
                }
            }
        });
        if started {
            self.pending_bytes = self.pending_bytes.saturating_sub(bytes);
        }
    }

    /// Takes the finished commit: records its metrics, hints the expiry sweeper, and
    /// returns the confirms to send. A batch the store refused is nacked.
    pub(crate) fn finish_commit(
        &mut self,
        broker: &Broker,
        vhost: &str,
        channel: u16,
        done: Committed,
    ) -> Vec<u8> {
        let Committed {
            batch,
            batches,
            result,
        } = done;
        let rejected = match &result {
            Ok(stored) => {
                record_stored(broker, &batches, stored);
                Some(stored.rejected.as_slice())
            }
            Err(e) => {
                tracing::warn!(error = %e, messages = batch.len(), "cannot store published messages; nacking them");
                self.abandoned.extend(batch.iter().filter_map(|r| r.spill));
                None
            }
        };
        confirms(&batch, rejected, vhost, channel)
    }

    /// tx.commit: stores the held publishes and applies `settlements` in one transaction.
    ///
    /// # Errors
    /// 541 when the store fails.
    pub(crate) async fn commit_tx(
        &mut self,
        broker: &Broker,
        vhost: &str,
        settlements: Vec<Settlement>,
    ) -> Result<(), AmqpError> {
        let held = std::mem::take(&mut self.held);
        self.held_bytes = 0;
        let now = now_ms();
        let batches = plan(&held, self.producer, now);
        let holds = holds(&held, self.producer, now);
        let lets_go = self.lets_go(broker, held.iter().any(|r| r.spill.is_some()));
        let (batches_ref, settlements, holds, held_ref) = (&batches, &settlements, &holds, &held);
        let (keys, lets_go_ref) = (broker.vhosts.keys(), &lets_go);
        let stored = broker
            .db
            .run(|tx| async move {
                let stored = enqueue_in(&tx, batches_ref, now).await?;
                delayed::hold_in(&tx, keys, &lets_go_ref.spills, vhost, holds).await?;
                for s in settlements {
                    settle_in(&tx, s, now).await?;
                }
                lets_go_ref.let_go_in(&tx, held_ref).await?;
                Ok::<_, TxError>(stored)
            })
            .await;
        let stored = stored.inspect_err(|_| {
            self.abandoned.extend(held.iter().filter_map(|r| r.spill));
        })?;
        record_stored(broker, &batches, &stored);
        Ok(())
    }

    /// tx.rollback: forgets the held publishes.
    pub(crate) fn rollback_tx(&mut self) {
        let held = std::mem::take(&mut self.held);
        self.held_bytes = 0;
        self.abandoned.extend(held.iter().filter_map(|r| r.spill));
    }

    /// What the commit starting now lets go of: the spills of its messages (when
    /// `spilled`: some have one), and those abandoned so far (taken now).
    fn lets_go(&mut self, broker: &Broker, spilled: bool) -> LetsGo {
        LetsGo {
            spills: broker.stages.spills(),
            holder: self
                .spill_holder
                .filter(|_| spilled || !self.abandoned.is_empty()),
            abandoned: std::mem::take(&mut self.abandoned),
        }
    }
}

/// The spills a commit lets go of, for the channel's lease holder.
struct LetsGo {
    spills: Spills,
    /// The holder; `None` when there is nothing to let go of.
    holder: Option<u64>,
    abandoned: Vec<Spill>,
}

impl LetsGo {
    /// Within `tx`: lets go of the spills of `batch`, whose messages `tx` stores, and of
    /// the abandoned ones.
    ///
    /// # Errors
    /// [`StageError::SpillGone`] when a spill of `batch` is no longer held (its holder was
    /// released; it may be freed), unless an earlier attempt of `tx` may have committed
    /// (and let go of it); the store's error.
    async fn let_go_in(&self, tx: &Transaction, batch: &[Accepted]) -> Result<(), TxError> {
        let Some(holder) = self.holder else {
            return Ok(());
        };
        for spill in batch.iter().filter_map(|r| r.spill) {
            if !self.spills.let_go_in(tx, holder, spill.id).await? && !tx.maybe_committed() {
                return Err(StageError::SpillGone(spill.id).into());
            }
        }
        for spill in &self.abandoned {
            self.spills.let_go_in(tx, holder, spill.id).await?;
        }
        Ok(())
    }
}

/// Groups a batch by queue, in order, with each message's stage form (every queue of a
/// message shares its stored bytes).
fn plan(batch: &[Accepted], producer: u64, now: u64) -> Vec<QueueBatch> {
    let mut by_stage: HashMap<u64, usize> = HashMap::new();
    let mut batches: Vec<QueueBatch> = Vec::new();
    for (item, r) in batch.iter().enumerate() {
        for queue in &r.queues {
            let at = *by_stage.entry(queue.stage.id()).or_insert_with(|| {
                batches.push(QueueBatch {
                    queue: queue.clone(),
                    messages: Vec::new(),
                });
                batches.len() - 1
            });
            let message = NewMessage::new(r.stored.clone())
                .priority(r.priority)
                .expires_ms(expires_at(queue, r.ttl, now))
                .idempotency(producer, r.sequence)
                .spill(r.spill);
            batches[at].messages.push(Entry { item, message });
        }
    }
    batches
}

/// What the delayed-message exchanges of a batch hold, due `now` plus each message's delay.
fn holds(batch: &[Accepted], producer: u64, now: u64) -> Vec<Hold<'_>> {
    batch
        .iter()
        .flat_map(|r| {
            let (exchanges, delay) = &r.delayed;
            exchanges.iter().map(move |exchange| Hold {
                exchange,
                due_ms: now + delay,
                stored: &r.stored,
                spill: r.spill,
                idempotency: Some((producer, r.sequence)),
            })
        })
        .collect()
}

impl Accepted {
    /// Bytes it adds to a commit: its stored form once per queue and per delayed exchange.
    fn stored_bytes(&self) -> usize {
        self.stored.len() * (self.queues.len() + self.delayed.0.len())
    }
}

/// Counts what a commit stored and tells the expiry sweeper about expiring messages.
fn record_stored(broker: &Broker, batches: &[QueueBatch], stored: &Stored) {
    for (i, batch) in batches.iter().enumerate() {
        let labels = batch.queue.labels();
        metrics::counter!(metric::PUBLISHED_TOTAL, &labels).increment(stored.appended[i] as u64);
        rabbitmq::stored_in_queues(stored.appended[i] as u64);
    }
    hint_expiries(&broker.expiry, batches);
}

/// The confirm frames of a batch: runs of acks as one `multiple` ack, a nack for each
/// message refused (`rejected`), or every message nacked when the store failed (`None`).
fn confirms(batch: &[Accepted], rejected: Option<&[usize]>, vhost: &str, channel: u16) -> Vec<u8> {
    let mut out = Vec::new();
    let mut run: Option<(u64, usize)> = None;
    let flush = |out: &mut Vec<u8>, run: &mut Option<(u64, usize)>| {
        if let Some((last, len)) = run.take() {
            codec::encode_method(
                out,
                channel,
                AMQPClass::Basic(basic::AMQPMethod::Ack(basic::Ack {
                    delivery_tag: last,
                    multiple: len > 1,
                })),
            );
        }
    };
    let (mut acks, mut nacks) = (0u64, 0u64);
    let latency = metrics::histogram!(metric::CONFIRM_SECONDS);
    for (item, r) in batch.iter().enumerate() {
        let Some(tag) = r.tag else { continue };
        latency.record(r.received.elapsed().as_secs_f64());
        let refused = rejected.is_none_or(|rejected| rejected.contains(&item));
        if refused {
            flush(&mut out, &mut run);
            codec::encode_method(
                &mut out,
                channel,
                AMQPClass::Basic(basic::AMQPMethod::Nack(basic::Nack {
                    delivery_tag: tag,
                    multiple: false,
                    requeue: false,
                })),
            );
            nacks += 1;
        } else {
            run = Some((tag, run.map_or(1, |(_, n)| n + 1)));
            acks += 1;
        }
    }
    flush(&mut out, &mut run);
    rabbitmq::confirmed(acks);
    for (outcome, n) in [("ack", acks), ("nack", nacks)] {
        if n > 0 {
            metrics::counter!(metric::CONFIRMS_TOTAL, metric::LABEL_VHOST => vhost.to_owned(), metric::LABEL_OUTCOME => outcome)
                .increment(n);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::codec::{Frame, decode};
    use bytes::BytesMut;

    fn routed(tag: u64) -> Accepted {
        Accepted {
            tag: Some(tag),
            sequence: tag,
            queues: Vec::new(),
            delayed: (Vec::new(), 0),
            stored: Bytes::new(),
            spill: None,
            priority: 0,
            ttl: None,
            received: Instant::now(),
        }
    }

    fn methods(bytes: Vec<u8>) -> Vec<basic::AMQPMethod> {
        let mut buf = BytesMut::from(&bytes[..]);
        let mut out = Vec::new();
        while let Some(Frame::Method(_, m)) = decode(&mut buf, 4096).unwrap() {
            if let AMQPClass::Basic(b) = *m {
                out.push(b);
            }
        }
        out
    }

    #[test]
    fn a_run_of_acks_becomes_one_multiple_ack_around_a_nack() {
        let batch: Vec<Accepted> = (1..=5).map(routed).collect();
        let got = methods(confirms(&batch, Some(&[2]), "/", 1));
        assert_eq!(
            got,
            [
                basic::AMQPMethod::Ack(basic::Ack {
                    delivery_tag: 2,
                    multiple: true
                }),
                basic::AMQPMethod::Nack(basic::Nack {
                    delivery_tag: 3,
                    multiple: false,
                    requeue: false
                }),
                basic::AMQPMethod::Ack(basic::Ack {
                    delivery_tag: 5,
                    multiple: true
                }),
            ]
        );
    }

    #[test]
    fn a_failed_commit_nacks_every_message() {
        let batch: Vec<Accepted> = (7..=8).map(routed).collect();
        let got = methods(confirms(&batch, None, "/", 1));
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|m| matches!(m, basic::AMQPMethod::Nack(_))));
    }

    #[test]
    fn a_single_ack_is_not_multiple() {
        let got = methods(confirms(&[routed(1)], Some(&[]), "/", 1));
        assert_eq!(
            got,
            [basic::AMQPMethod::Ack(basic::Ack {
                delivery_tag: 1,
                multiple: false
            })]
        );
    }
}
