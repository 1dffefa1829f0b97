//! Routes kept in the store: the ones added at runtime (through the management API) and
//! which routes are paused, so every instance over one store runs the same routes. Routes
//! of the config file are not stored; a pause applies to a route of either origin, by name.
//! Every change bumps a version counter in the same transaction; the bridge's supervisor
//! watches it and starts, stops, pauses or resumes routes when it moves.
//!
//! Layout in `docs/keyspace.md`:
//!
//! ```text
//! (P, "routes", "added", name)   = (1, JSON of the route's table, as in [[routes]])
//! (P, "routes", "paused", name)  = (1, paused at, ms since the epoch)
//! (P, "routes", "version")       = i64 little-endian, atomic add on every change
//! ```

use ferry_config::RouteConfig;
use ferry_store::{
    ChangeCounter, Database, RangeOption, StoreError, Transaction, TransactionError,
};
use foundationdb_tuple::Subspace;
use std::collections::BTreeMap;

/// The format tag of both value kinds.
const FORMAT: i64 = 1;

/// Why the catalog cannot do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The store failed.
    #[error("the route catalog cannot be read or written: {0}")]
    Store(#[from] StoreError),
    /// A stored record does not decode (written by a newer Ferry, or damaged).
    #[error("stored route '{name}' cannot be read: {why}")]
    Corrupt {
        /// The route.
        name: String,
        /// What is wrong with it.
        why: String,
    },
    /// A route of that name is stored with another definition.
    #[error("route '{0}' exists with another definition; delete it first")]
    Inequivalent(String),
}

impl TransactionError for CatalogError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) => Some(e),
            Self::Corrupt { .. } | Self::Inequivalent(_) => None,
        }
    }
}

/// What the store says about routes, read at one version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Stored {
    /// The version counter when read (0 before the first change).
    pub version: i64,
    /// Routes added at runtime, by name.
    pub added: BTreeMap<String, RouteConfig>,
    /// Paused routes (of either origin), with when they were paused.
    pub paused: BTreeMap<String, u64>,
}

/// The route catalog of one store.
#[derive(Clone)]
pub(crate) struct Catalog {
    db: Database,
    added: Subspace,
    paused: Subspace,
    version: ChangeCounter,
}

impl Catalog {
    /// The catalog of `db` under store prefix `prefix`.
    pub(crate) fn new(db: Database, prefix: &str) -> Self {
        let space =
            |name: &str| Subspace::from_bytes(foundationdb_tuple::pack(&(prefix, "routes", name)));
        Self {
            db,
            added: space("added"),
            paused: space("paused"),
            version: ChangeCounter::new(foundationdb_tuple::pack(&(prefix, "routes", "version"))),
        }
    }

    /// The store.
    pub(crate) fn db(&self) -> &Database {
        &self.db
    }

    /// Everything stored, at one version (snapshot reads).
    ///
    /// # Errors
    /// [`CatalogError`] when the store fails or a record does not decode.
    pub(crate) async fn read(&self) -> Result<Stored, CatalogError> {
        let tx = self.db.begin()?;
        self.read_in(&tx, true).await
    }

    /// [`Catalog::read`] within `tx`.
    ///
    /// # Errors
    /// As [`Catalog::read`].
    pub(crate) async fn read_in(
        &self,
        tx: &Transaction,
        snapshot: bool,
    ) -> Result<Stored, CatalogError> {
        let version = self.version.read_in(tx).await?;
        let mut added = BTreeMap::new();
        for (name, value) in self.entries(tx, &self.added, snapshot).await? {
            let (_, json): (i64, String) =
                foundationdb_tuple::unpack(&value).map_err(|e| corrupt(&name, e))?;
            let route: RouteConfig = serde_json::from_str(&json).map_err(|e| corrupt(&name, e))?;
            added.insert(name, route);
        }
        let mut paused = BTreeMap::new();
        for (name, value) in self.entries(tx, &self.paused, snapshot).await? {
            let (_, at): (i64, u64) =
                foundationdb_tuple::unpack(&value).map_err(|e| corrupt(&name, e))?;
            paused.insert(name, at);
        }
        Ok(Stored {
            version,
            added,
            paused,
        })
    }

    /// Stores `route` as added at runtime within `tx`; returns whether it was there
    /// already with the same definition (then nothing changes).
    ///
    /// # Errors
    /// [`CatalogError::Inequivalent`] when a route of that name is stored with another
    /// definition; the store's error.
    pub(crate) async fn add_in(
        &self,
        tx: &Transaction,
        route: &RouteConfig,
    ) -> Result<bool, CatalogError> {
        let key = self.added.pack(&route.name.as_str());
        if let Some(value) = tx.get(&key, false).await? {
            let (_, json): (i64, String) =
                foundationdb_tuple::unpack(&value).map_err(|e| corrupt(&route.name, e))?;
            let stored: RouteConfig =
                serde_json::from_str(&json).map_err(|e| corrupt(&route.name, e))?;
            return if &stored == route {
                Ok(true)
            } else {
                Err(CatalogError::Inequivalent(route.name.clone()))
            };
        }
        let json = serde_json::to_string(route).map_err(|e| corrupt(&route.name, e))?;
        tx.set(&key, foundationdb_tuple::pack(&(FORMAT, json)));
        self.bump(tx);
        Ok(false)
    }

    /// Forgets the runtime route `name` and its pause within `tx`; returns whether it was
    /// stored.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn remove_in(
        &self,
        tx: &Transaction,
        name: &str,
    ) -> Result<bool, CatalogError> {
        let key = self.added.pack(&name);
        let existed = tx.get(&key, false).await?.is_some();
        if existed {
            tx.clear(&key);
            tx.clear(&self.paused.pack(&name));
            self.bump(tx);
        }
        Ok(existed)
    }

    /// Pauses (`true`) or resumes route `name` within `tx`; returns whether that changed
    /// anything.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn set_paused_in(
        &self,
        tx: &Transaction,
        name: &str,
        paused: bool,
        now_ms: u64,
    ) -> Result<bool, CatalogError> {
        let key = self.paused.pack(&name);
        let was = tx.get(&key, false).await?.is_some();
        if was == paused {
            return Ok(false);
        }
        if paused {
            tx.set(&key, foundationdb_tuple::pack(&(FORMAT, now_ms)));
        } else {
            tx.clear(&key);
        }
        self.bump(tx);
        Ok(true)
    }

    /// Waits until the version counter differs from `seen` (a store watch), returning at
    /// once when it already does.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn changed_since(&self, seen: i64) -> Result<(), StoreError> {
        self.version.changed_since(&self.db, seen).await
    }

    fn bump(&self, tx: &Transaction) {
        self.version.bump(tx);
    }

    /// Every (name, value) pair under `space`.
    async fn entries(
        &self,
        tx: &Transaction,
        space: &Subspace,
        snapshot: bool,
    ) -> Result<Vec<(String, Vec<u8>)>, CatalogError> {
        let (b, e) = space.range();
        let kvs = tx.get_range(&RangeOption::new(b, e), snapshot).await?;
        kvs.into_iter()
            .map(|kv| {
                let (name,): (String,) =
                    space.unpack(&kv.key).map_err(|e| CatalogError::Corrupt {
                        name: String::from_utf8_lossy(&kv.key).into_owned(),
                        why: e.to_string(),
                    })?;
                Ok((name, kv.value))
            })
            .collect()
    }
}

fn corrupt(name: &str, why: impl std::fmt::Display) -> CatalogError {
    CatalogError::Corrupt {
        name: name.to_owned(),
        why: why.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_config::EndpointConfig;
    use ferry_store::StoreConfig;

    fn route(name: &str, topic: &str) -> RouteConfig {
        serde_json::from_value(serde_json::json!({
            "name": name,
            "from": {"amqp_exchange": "in"},
            "to": [{"kafka_topic": topic}],
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn added_and_paused_routes_are_read_back_and_every_change_moves_the_version() {
        let dir = tempfile::tempdir().unwrap();
        let store = StoreConfig {
            path: dir.path().join("data"),
            ..StoreConfig::default()
        };
        let db = Database::open(&store).await.unwrap();
        let catalog = Catalog::new(db.clone(), "ferry");
        assert_eq!(catalog.read().await.unwrap(), Stored::default());

        let r = route("r1", "t");
        let existed = db
            .run(|tx| {
                let (c, r) = (&catalog, &r);
                async move { c.add_in(&tx, r).await }
            })
            .await
            .unwrap();
        assert!(!existed);
        let again = db
            .run(|tx| {
                let (c, r) = (&catalog, &r);
                async move { c.add_in(&tx, r).await }
            })
            .await
            .unwrap();
        assert!(again, "the same definition again changes nothing");
        let other = route("r1", "elsewhere");
        let refused = db
            .run(|tx| {
                let (c, r) = (&catalog, &other);
                async move { c.add_in(&tx, r).await }
            })
            .await;
        assert!(matches!(refused, Err(CatalogError::Inequivalent(n)) if n == "r1"));
        let paused = db
            .run(|tx| {
                let c = &catalog;
                async move { c.set_paused_in(&tx, "from-config", true, 42).await }
            })
            .await
            .unwrap();
        assert!(paused);

        let stored = catalog.read().await.unwrap();
        assert_eq!(stored.version, 2);
        assert_eq!(stored.added.get("r1"), Some(&r));
        assert_eq!(
            stored.added["r1"].to[0],
            EndpointConfig {
                kafka_topic: Some("t".into()),
                ..EndpointConfig::default()
            }
        );
        assert_eq!(stored.paused.get("from-config"), Some(&42));

        let waited = tokio::spawn({
            let c = catalog.clone();
            async move { c.changed_since(2).await }
        });
        let removed = db
            .run(|tx| {
                let c = &catalog;
                async move { c.remove_in(&tx, "r1").await }
            })
            .await
            .unwrap();
        assert!(removed);
        tokio::time::timeout(std::time::Duration::from_secs(5), waited)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let stored = catalog.read().await.unwrap();
        assert!(stored.added.is_empty());
        assert_eq!(stored.version, 3);
        db.close().await;
    }
}
