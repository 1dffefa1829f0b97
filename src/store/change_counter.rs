//! A change counter: one key that every change to some set of records bumps (atomic add, so
//! writers never conflict on it) in the change's own transaction. A reader that keeps the
//! set in memory reads the counter with it and sleeps on a watch of the key
//! ([`ChangeCounter::changed_since`]) until another change, made by any instance over the
//! store, moves it. The value is an i64, little-endian (0 before the first change).
//!
//! Users and permissions, Kafka ACLs, runtime routes and vhosts each have one.

use super::{Database, StoreError, Transaction};

/// The counter at one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeCounter {
    key: Vec<u8>,
}

impl ChangeCounter {
    /// The counter at `key`.
    pub fn new(key: Vec<u8>) -> Self {
        Self { key }
    }

    /// Notes, in `tx`, a change.
    pub fn bump(&self, tx: &Transaction) {
        tx.atomic_add(&self.key, 1);
    }

    /// The counter as `tx` sees it (a snapshot read: it conflicts with no writer).
    ///
    /// # Errors
    /// The store's error.
    pub async fn read_in(&self, tx: &Transaction) -> Result<i64, StoreError> {
        Ok(tx
            .get(&self.key, true)
            .await?
            .and_then(|v| v.try_into().ok())
            .map_or(0, i64::from_le_bytes))
    }

    /// The counter now.
    ///
    /// # Errors
    /// The store's error.
    pub async fn read(&self, db: &Database) -> Result<i64, StoreError> {
        self.read_in(&db.begin()?).await
    }

    /// Waits until the counter differs from `seen`, returning at once when it already
    /// does (the watch is set before the counter is read, so no change falls between).
    ///
    /// # Errors
    /// The store's error.
    pub async fn changed_since(&self, db: &Database, seen: i64) -> Result<(), StoreError> {
        let tx = db.begin()?;
        let watch = tx.watch(&self.key);
        let now = self.read_in(&tx).await?;
        tx.commit().await?;
        if now != seen {
            return Ok(());
        }
        watch.await
    }
}
