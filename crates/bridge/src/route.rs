//! A route's stages: one per destination (`bridge.ROUTE.INDEX`, every priority its own
//! lane) with its dead-letter stage (`bridge.ROUTE.INDEX.dead`). A source stages each
//! message into every destination's stage in one transaction, so fan-out never loses or
//! duplicates for any one destination, and each destination drains its own stage at its
//! own pace.
//!
//! A source stages a large message's body once, in a spill every destination's entry
//! references: a body above [`spill::SPILL_ABOVE`], or one whose copies in every stage
//! would not fit one transaction together ([`spill::spills`]), is first written to a
//! spill held by the route's lease holder, and the staging commit lets go of the hold
//! ([`RouteStages::prepare`], [`RouteStages::let_go_in`]).

use super::staged;
use bytes::Bytes;
use ferry_amqp::port::AmqpMessage;
use ferry_config::{Endpoint, RouteConfig};
use ferry_stage::{NewMessage, Spill, Spills, Stage, StageError, StageOptions, Stages, spill};
use ferry_store::Transaction;

/// The name of destination `index`'s stage of route `route`.
pub(crate) fn stage_name(route: &str, index: usize) -> String {
    format!("bridge.{route}.{index}")
}

/// The name of destination `index`'s dead-letter stage of route `route`.
pub(crate) fn dead_letter_name(route: &str, index: usize) -> String {
    format!("{}.dead", stage_name(route, index))
}

/// One destination of a route and its stages.
#[derive(Debug, Clone)]
pub struct Destination {
    /// Its place in the route's `to` list.
    pub index: usize,
    /// Where it delivers.
    pub endpoint: Endpoint,
    /// Messages waiting for it.
    pub stage: Stage,
    /// Messages it rejected `max_attempts` times (or could not decode).
    pub dead: Stage,
}

/// A route's destinations and their stages; cheap to clone.
#[derive(Debug, Clone)]
pub struct RouteStages {
    /// The route's name.
    pub name: String,
    /// Its destinations, in `to` order.
    pub destinations: Vec<Destination>,
    /// The spills of its large messages.
    spills: Spills,
}

/// A message a source is about to stage: its stage form, and the spill the route's
/// holder holds for it, to let go of in the staging commit.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// What to stage.
    pub message: NewMessage,
    /// The spill its body was written to, held by the route's holder.
    pub held: Option<Spill>,
}

impl RouteStages {
    /// Creates (or opens) the stages of `route` whose checked destinations are
    /// `endpoints`.
    ///
    /// # Errors
    /// The stage's error, e.g. a stage left by an earlier config with other settings.
    pub async fn open(
        stages: &Stages,
        route: &RouteConfig,
        endpoints: Vec<Endpoint>,
    ) -> Result<Self, StageError> {
        let mut destinations = Vec::with_capacity(endpoints.len());
        for (index, endpoint) in endpoints.into_iter().enumerate() {
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

    /// The stage form of `m`: inline, or, when its body stored once per destination
    /// would not fit one transaction ([`spill::spills`]), its body written to a spill
    /// held by `holder` (no copy of the body is made) and only the rest in the stage.
    ///
    /// # Errors
    /// The store's error while writing the spill.
    pub async fn prepare(&self, holder: u64, m: &AmqpMessage) -> Result<Prepared, StageError> {
        if !spill::spills(m.body.len() as u64, self.destinations.len()) {
            return Ok(Prepared {
                message: staged::from_amqp(m),
                held: None,
            });
        }
        let spill = self.spills.write_all(holder, &m.body).await?;
        let head = AmqpMessage {
            body: Bytes::new(),
            ..m.clone()
        };
        Ok(Prepared {
            message: staged::from_amqp(&head).spill(Some(spill)),
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
    pub fn copied_bytes(&self, m: &NewMessage) -> u64 {
        m.body.len() as u64 * self.destinations.len() as u64
    }

    /// Stages `messages` for every destination within `tx`.
    ///
    /// # Errors
    /// The stage's error.
    pub async fn stage_in(
        &self,
        tx: &Transaction,
        messages: &[NewMessage],
        now: u64,
    ) -> Result<(), StageError> {
        for d in &self.destinations {
            d.stage.append_in(tx, messages, now).await?;
        }
        Ok(())
    }
}
