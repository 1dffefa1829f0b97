//! The stage: durable queues from FoundationDB's queue recipes (skeleton).

use crate::store::{Database, StoreError};

/// Every stage in one store.
#[derive(Clone)]
pub struct Stages {
    db: Database,
}

impl Stages {
    /// The stages under the key prefix `prefix`.
    pub fn new(db: Database, prefix: &str) -> Self {
        let _ = prefix;
        Self { db }
    }

    /// Reads every stage's counters and sets the stage gauges (`ferry_stage_*`).
    ///
    /// # Errors
    /// The store's error when the counters cannot be read.
    pub async fn publish_metrics(&self) -> Result<(), StoreError> {
        self.db.ping().await
    }
}
