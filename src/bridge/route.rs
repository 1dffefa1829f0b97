//! A route's stages: one per destination (`bridge.ROUTE.INDEX`, every priority its own
//! lane) with its dead-letter stage (`bridge.ROUTE.INDEX.dead`). A source stages each
//! message into every destination's stage in one transaction, so fan-out never loses or
//! duplicates for any one destination, and each destination drains its own stage at its
//! own pace.

use crate::config::{Endpoint, RouteConfig};
use crate::stage::{NewMessage, Stage, StageError, StageOptions, Stages};
use crate::store::Transaction;

/// The name of destination `index`'s stage of route `route`.
pub fn stage_name(route: &str, index: usize) -> String {
    format!("bridge.{route}.{index}")
}

/// The name of destination `index`'s dead-letter stage of route `route`.
pub fn dead_letter_name(route: &str, index: usize) -> String {
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
        })
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
