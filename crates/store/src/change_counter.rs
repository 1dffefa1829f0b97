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
    /// The transaction ends before the wait: one kept open would pin its read version, and
    /// the embedded engine could reuse no page freed after it for as long as the counter
    /// stays still (hours for ACLs: the store's file grew with every byte written).
    ///
    /// # Errors
    /// The store's error.
    pub async fn changed_since(&self, db: &Database, seen: i64) -> Result<(), StoreError> {
        let tx = db.begin()?;
        let watch = tx.watch(&self.key);
        let now = self.read_in(&tx).await?;
        tx.commit().await?;
        drop(tx);
        if now != seen {
            return Ok(());
        }
        watch.await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreConfig;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_for_a_change_does_not_keep_the_store_from_reusing_space() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            path: dir.path().join("data"),
            ..StoreConfig::default()
        };
        let db = Database::open(&config).await.unwrap();
        let counter = ChangeCounter::new(b"counter".to_vec());
        let waiting = {
            let (db, counter) = (db.clone(), counter.clone());
            tokio::spawn(async move { counter.changed_since(&db, 0).await })
        };
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        // 400 commits of 200 KB each, written and cleared: 80 MB through the store, of which
        // at most 400 KB is ever live.
        let value = vec![7u8; 50_000];
        for i in 0..400u32 {
            db.run(|tx| {
                let value = value.clone();
                async move {
                    tx.clear_range(b"k", b"l");
                    for k in 0..4u32 {
                        let key = [b"k".as_slice(), &i.to_be_bytes(), &k.to_be_bytes()].concat();
                        tx.set(&key, value.clone());
                    }
                    Ok::<_, StoreError>(())
                }
            })
            .await
            .unwrap();
        }
        let size = std::fs::metadata(config.path.join("data.redb"))
            .unwrap()
            .len();
        // With the waiter's transaction open, nothing freed could be reused: 80 MB and more.
        assert!(size < 40_000_000, "the data file grew to {size} bytes");
        assert!(!waiting.is_finished());
        waiting.abort();
        db.close().await;
    }
}
