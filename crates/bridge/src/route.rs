//! A route's stages: one per destination (`bridge.ROUTE.INDEX`, every priority its own
//! lane) with its dead-letter stage (`bridge.ROUTE.INDEX.dead`). A source hands each
//! message to every destination in one transaction ([`RouteStages::stage_in`]), so
//! fan-out never loses or duplicates for any one destination, and each destination drains
//! its own stage at its own pace.
//!
//! **Straight to a front.** A destination on one of Ferry's own fronts whose stage is
//! empty takes the messages in the source's transaction itself: they are written to the
//! front's queues or topic ([`InStoreSink::write_in`]) instead of the route's stage, so a
//! route from a Kafka front topic moves a batch in one transaction (read, map, store,
//! advance the offset), one from an AMQP front exchange in its lease and one more, and
//! its messages never touch the route's stage. What the destination does not take as
//! it is — refused or not available now, a body that would be spilled, past the
//! transaction's budget — is staged, with every message after it, and the destination's
//! worker delivers it as it delivers any staged message (retries, dead letters). While a
//! destination's stage holds anything, everything for it is staged, so no message
//! overtakes one waiting there.
//!
//! A source stages a large message's body once, in a spill every destination's entry
//! references: a body above [`spill::SPILL_ABOVE`], or one whose copies in every stage
//! would not fit one transaction together ([`spill::spills`]), is first written to a
//! spill held by the route's lease holder, and the staging commit lets go of the hold
//! ([`RouteStages::prepare`], [`RouteStages::let_go_in`]).

use super::sink::{InStoreSink, endpoint_label};
use super::staged::{self, Outgoing};
use bytes::Bytes;
use ferry_amqp::port::AmqpMessage;
use ferry_config::{Endpoint, RouteConfig};
use ferry_stage::{NewMessage, Spill, Spills, Stage, StageError, StageOptions, Stages, spill};
use ferry_store::Transaction;
use ferry_telemetry::bridge as metric;
use std::sync::Arc;

/// The name of destination `index`'s stage of route `route`.
pub(crate) fn stage_name(route: &str, index: usize) -> String {
    format!("bridge.{route}.{index}")
}

/// The name of destination `index`'s dead-letter stage of route `route`.
pub(crate) fn dead_letter_name(route: &str, index: usize) -> String {
    format!("{}.dead", stage_name(route, index))
}

/// One destination of a route and its stages.
#[derive(Clone)]
pub struct Destination {
    /// Its place in the route's `to` list.
    pub index: usize,
    /// Where it delivers.
    pub endpoint: Endpoint,
    /// How it is written to, when it is one of Ferry's fronts.
    pub(crate) in_store: Option<Arc<dyn InStoreSink>>,
    /// Messages waiting for it.
    pub stage: Stage,
    /// Messages it rejected `max_attempts` times (or could not decode).
    pub dead: Stage,
}

/// A route's destinations and their stages; cheap to clone.
#[derive(Clone)]
pub struct RouteStages {
    /// The route's name.
    pub name: String,
    /// Its destinations, in `to` order.
    pub destinations: Vec<Destination>,
    /// The spills of its large messages.
    spills: Spills,
}

/// A message a source hands to its route: the message, and the spill its body is in for
/// a large one (its `body` is then empty).
#[derive(Debug, Clone)]
pub struct Bridged {
    /// The message.
    pub message: AmqpMessage,
    /// Where its body is, when it is not in `message`.
    pub spill: Option<Spill>,
}

impl Bridged {
    /// A message whose body is in it.
    pub fn inline(message: AmqpMessage) -> Self {
        Self {
            message,
            spill: None,
        }
    }

    /// Its stage form.
    fn staged(&self) -> NewMessage {
        staged::from_amqp(&self.message).spill(self.spill)
    }

    /// Its body's bytes, a spilled body's too (for the byte counters).
    pub fn len(&self) -> u64 {
        self.spill
            .map_or(self.message.body.len() as u64, |spill| spill.len)
    }
}

/// A message a source is about to hand to its route, and the spill the route's holder
/// holds for it, to let go of in the staging commit.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// What to hand over.
    pub message: Bridged,
    /// The spill its body was written to, held by the route's holder.
    pub held: Option<Spill>,
}

/// What [`RouteStages::stage_in`] wrote straight to destinations on Ferry's fronts: for
/// each destination, messages and body bytes. Count it once the transaction committed
/// ([`RouteStages::count_direct`]).
#[derive(Debug, Default)]
#[must_use = "count it once the transaction committed"]
pub struct Direct(Vec<(usize, u64, u64)>);

impl RouteStages {
    /// Creates (or opens) the stages of `route` whose checked destinations are
    /// `endpoints`, each with its sink when it is on one of Ferry's fronts.
    ///
    /// # Errors
    /// The stage's error, e.g. a stage left by an earlier config with other settings.
    pub(crate) async fn open(
        stages: &Stages,
        route: &RouteConfig,
        endpoints: Vec<(Endpoint, Option<Arc<dyn InStoreSink>>)>,
    ) -> Result<Self, StageError> {
        let mut destinations = Vec::with_capacity(endpoints.len());
        for (index, (endpoint, in_store)) in endpoints.into_iter().enumerate() {
            let dead_name = dead_letter_name(&route.name, index);
            let dead = stages
                .create(
                    &dead_name,
                    &StageOptions {
                        max_priority: u8::MAX,
                        ..StageOptions::default()
                    },
                )
                .await?;
            let stage = stages
                .create(
                    &stage_name(&route.name, index),
                    &StageOptions {
                        max_priority: u8::MAX,
                        max_deliveries: route.max_attempts,
                        dead_letter: Some(dead_name),
                    },
                )
                .await?;
            destinations.push(Destination {
                index,
                endpoint,
                in_store,
                stage,
                dead,
            });
        }
        Ok(Self {
            name: route.name.clone(),
            destinations,
            spills: stages.spills(),
        })
    }

    /// The form `m` is handed to the route in: inline, or, when its body stored once per
    /// destination would not fit one transaction ([`spill::spills`]), its body written to
    /// a spill held by `holder` (no copy of the body is made) and only the rest inline.
    ///
    /// # Errors
    /// The store's error while writing the spill.
    pub async fn prepare(&self, holder: u64, m: AmqpMessage) -> Result<Prepared, StageError> {
        if !spill::spills(m.body.len() as u64, self.destinations.len()) {
            return Ok(Prepared {
                message: Bridged::inline(m),
                held: None,
            });
        }
        let spill = self.spills.write_all(holder, &m.body).await?;
        // Written to its spill: the body is not held in memory any longer.
        let head = AmqpMessage {
            body: Bytes::new(),
            ..m
        };
        Ok(Prepared {
            message: Bridged {
                message: head,
                spill: Some(spill),
            },
            held: Some(spill),
        })
    }

    /// Within `tx`, the commit that stages (or drops as duplicates) the messages whose
    /// spills `holder` holds (`held`, from [`Prepared::held`]): `holder` lets go of them,
    /// and the staged entries reference them now.
    ///
    /// # Errors
    /// [`StageError::SpillGone`] when a spill is no longer held (the holder was released
    /// and the spill may be freed), unless an earlier attempt of `tx` may have let go of
    /// it; the store's error.
    pub async fn let_go_in(
        &self,
        tx: &Transaction,
        holder: u64,
        held: &[Spill],
    ) -> Result<(), StageError> {
        for spill in held {
            if !self.spills.let_go_in(tx, holder, spill.id).await? && !tx.maybe_committed() {
                return Err(StageError::SpillGone(spill.id));
            }
        }
        Ok(())
    }

    /// Bytes staging `m` copies into the route's stages (of a spilled message, only the
    /// head).
    pub fn copied_bytes(&self, m: &Bridged) -> u64 {
        m.message.body.len() as u64 * self.destinations.len() as u64
    }

    /// Hands `messages` to every destination within `tx`: straight to a destination on
    /// one of Ferry's fronts while its stage is empty, as far as it takes them as they
    /// are, and the rest into the destination's stage (module header).
    ///
    /// # Errors
    /// The stage's or the destination's error.
    pub async fn stage_in(
        &self,
        tx: &Transaction,
        messages: &[&Bridged],
        now: u64,
    ) -> Result<Direct, StageError> {
        let mut direct = Direct::default();
        if messages.is_empty() {
            return Ok(direct);
        }
        // What staging every message everywhere copies, then what writing straight to a
        // front copies besides (a fanout to several queues): within the commit budget.
        let mut copied: u64 = messages.iter().map(|m| self.copied_bytes(m)).sum();
        let mut staged_forms: Option<Vec<NewMessage>> = None;
        for d in &self.destinations {
            let written = match &d.in_store {
                Some(sink) if d.stage.is_empty_in(tx).await? => {
                    write_directly(tx, sink.as_ref(), messages, &mut copied, now).await?
                }
                _ => vec![false; messages.len()],
            };
            let (n, bytes) = messages
                .iter()
                .zip(&written)
                .filter(|(_, w)| **w)
                .fold((0, 0), |(n, b), (m, _)| (n + 1, b + m.len()));
            if n > 0 {
                direct.0.push((d.index, n, bytes));
            }
            if n == messages.len() as u64 {
                continue;
            }
            let forms =
                staged_forms.get_or_insert_with(|| messages.iter().map(|m| m.staged()).collect());
            let rest: Vec<NewMessage> = forms
                .iter()
                .zip(&written)
                .filter(|(_, w)| !**w)
                .map(|(f, _)| f.clone())
                .collect();
            d.stage.append_in(tx, &rest, now).await?;
        }
        Ok(direct)
    }

    /// Counts what [`RouteStages::stage_in`] wrote straight to destinations as their
    /// deliveries (`ferry_bridge_messages_out_total`, bytes, and a delivery time of 0).
    pub fn count_direct(&self, direct: &Direct) {
        for &(index, n, bytes) in &direct.0 {
            let Some(d) = self.destinations.get(index) else {
                continue;
            };
            let labels = [
                (metric::LABEL_ROUTE, self.name.clone()),
                (metric::LABEL_ENDPOINT, endpoint_label(&d.endpoint)),
            ];
            metrics::counter!(metric::MESSAGES_OUT_TOTAL, &labels).increment(n);
            metrics::counter!(metric::BYTES_OUT_TOTAL, &labels).increment(bytes);
            let latency = metrics::histogram!(metric::DELIVERY_SECONDS, &labels);
            for _ in 0..n {
                latency.record(0.0);
            }
        }
    }
}

/// Writes `messages` straight to `sink` within `tx`, in order, up to the first one it would
/// not take as it is: refused or not available now, a spilled body, a stored form too
/// large for the transaction, or copies that would take `copied` (the transaction's body
/// bytes) past [`spill::COMMIT_BUDGET`]. Returns, for each message, whether it was
/// written; a message the sink refuses as it writes (a full queue) is not.
async fn write_directly(
    tx: &Transaction,
    sink: &dyn InStoreSink,
    messages: &[&Bridged],
    copied: &mut u64,
    now: u64,
) -> Result<Vec<bool>, StageError> {
    let batch: Vec<Outgoing> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| Outgoing::direct(i, m.message.clone(), now))
        .collect();
    let plans = sink.plan(&batch);
    let mut taken = 0;
    for ((m, o), plan) in messages.iter().zip(&batch).zip(&plans) {
        let body = o.message.body.len() as u64;
        let more = body * (plan.copies as u64).saturating_sub(1);
        if !plan.delivers() || plan.large || m.spill.is_some() || {
            *copied + more > spill::COMMIT_BUDGET
        } {
            break;
        }
        *copied += more;
        taken += 1;
    }
    let mut written = vec![false; messages.len()];
    if taken == 0 {
        return Ok(written);
    }
    let writes: Vec<(&Outgoing, &_)> = batch.iter().zip(&plans).take(taken).collect();
    let refused = sink.write_in(tx, &writes, now).await?;
    for w in &mut written[..taken] {
        *w = true;
    }
    for (i, _) in refused {
        written[i] = false;
    }
    Ok(written)
}
