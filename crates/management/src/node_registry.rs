//! The instances sharing a store, as RabbitMQ's cluster nodes: every instance whose
//! management API runs publishes its own `/api/nodes` entry under `(P, "nodes", name)`,
//! renewed as everything an instance keeps alive is ([`LIVENESS`]: a 15 s term renewed every
//! third of it), so `/api/nodes` on any instance lists
//! them all — running while the deadline holds, `running: false` (as RabbitMQ lists a
//! stopped cluster member) once it has passed, and gone [`FORGET`] later. A stopping
//! instance ends its term at once.
//!
//! With the embedded engine one process is the store's only user: its publications forget
//! every other node (earlier runs under another `kafka.node_id`), as none can be running.
//!
//! Value format 1: the tuple `(1, deadline_ms, json)`, `json` the node's `/api/nodes` entry.

use ferry_stage::now_ms;
use ferry_stage::{Liveness, Scope};
use ferry_store::{Database, RangeOption, StoreError};
use foundationdb_tuple::{Subspace, pack, unpack};
use serde_json::{Value, json};
use std::time::Duration;

/// How long a published entry counts as running, and so how often it is published.
pub const LIVENESS: Liveness = Liveness::new(Duration::from_secs(15));
/// How long after its term a node that stopped is still listed.
const FORGET: Duration = Duration::from_secs(3600);
/// The stored format.
const FORMAT: u16 = 1;

/// A node as the store holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct Registered {
    /// Its name (`ferry-NODE_ID@HOST`).
    pub name: String,
    /// Its `/api/nodes` entry as last published; for a stopped node only RabbitMQ's fields
    /// of one (`name`, `type`, `running: false`).
    pub entry: Value,
}

/// This instance's registration and the others'.
#[derive(Clone)]
pub struct NodeRegistry {
    db: Database,
    nodes: Subspace,
    me: String,
}

impl NodeRegistry {
    /// The registry of the store under `prefix` (`store.prefix`), for the node named `me`.
    pub fn new(db: Database, prefix: &str, me: String) -> Self {
        Self {
            db,
            nodes: Subspace::from_bytes(pack(&(prefix, "nodes"))),
            me,
        }
    }

    /// This node's name.
    pub fn me(&self) -> &str {
        &self.me
    }

    /// Publishes `entry` as this node's, running for a [`LIVENESS`] term; with the embedded
    /// engine, forgets every other node.
    ///
    /// # Errors
    /// The store's error.
    pub async fn publish(&self, entry: &Value) -> Result<(), StoreError> {
        let sole = Scope::of(&self.db) == Scope::Sole;
        self.write(entry, now_ms() + millis(LIVENESS.ttl()), sole)
            .await
    }

    /// Ends this node's term now: it is listed as stopped.
    ///
    /// # Errors
    /// The store's error.
    pub async fn leave(&self, entry: &Value) -> Result<(), StoreError> {
        self.write(entry, now_ms(), false).await
    }

    async fn write(&self, entry: &Value, deadline: u64, alone: bool) -> Result<(), StoreError> {
        let key = self.nodes.pack(&(self.me.as_str(),));
        let value = pack(&(FORMAT, deadline, entry.to_string()));
        let forget_before = now_ms().saturating_sub(millis(FORGET));
        self.db
            .run(|tx| {
                let (key, value) = (&key, &value);
                async move {
                    let (b, e) = self.nodes.range();
                    for kv in tx.get_range(&RangeOption::new(b, e), true).await? {
                        let stale = decode(&kv.value).is_none_or(|(d, _)| d < forget_before);
                        if kv.key != *key && (alone || stale) {
                            tx.clear(&kv.key);
                        }
                    }
                    tx.set(key, value.clone());
                    Ok::<_, StoreError>(())
                }
            })
            .await
    }

    /// Every node in the store, by name, stopped ones as RabbitMQ lists them.
    ///
    /// # Errors
    /// The store's error.
    pub async fn list(&self) -> Result<Vec<Registered>, StoreError> {
        let (b, e) = self.nodes.range();
        let stored = self
            .db
            .run(|tx| {
                let range = RangeOption::new(b.clone(), e.clone());
                async move { tx.get_range(&range, true).await }
            })
            .await?;
        let now = now_ms();
        Ok(stored
            .iter()
            .filter_map(|kv| {
                let (name,) = self.nodes.unpack::<(String,)>(&kv.key).ok()?;
                let (deadline, entry) = decode(&kv.value)?;
                let entry = if deadline > now {
                    entry
                } else {
                    json!({"name": name, "type": "disc", "running": false})
                };
                Some(Registered { name, entry })
            })
            .collect())
    }
}

/// A stored entry's deadline and JSON.
fn decode(value: &[u8]) -> Option<(u64, Value)> {
    let (format, deadline, json) = unpack::<(u16, u64, String)>(value).ok()?;
    (format == FORMAT).then_some(())?;
    Some((deadline, serde_json::from_str(&json).ok()?))
}

/// `d` in whole milliseconds.
fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deadline a test does not reach.
    fn far() -> u64 {
        now_ms() + 3_600_000
    }

    async fn store(dir: &std::path::Path) -> Database {
        let config = ferry_store::StoreConfig {
            path: dir.join("store"),
            ..ferry_store::StoreConfig::default()
        };
        Database::open(&config).await.unwrap()
    }

    #[tokio::test]
    async fn nodes_over_one_store_list_each_other_and_a_stopped_one_as_not_running() {
        let dir = tempfile::tempdir().unwrap();
        let db = store(dir.path()).await;
        let a = NodeRegistry::new(db.clone(), "t", "ferry-1@a".into());
        let b = NodeRegistry::new(db.clone(), "t", "ferry-2@b".into());
        let entry = |name: &str, pid: u32| json!({"name": name, "running": true, "os_pid": pid});
        a.write(&entry("ferry-1@a", 11), far(), false)
            .await
            .unwrap();
        b.write(&entry("ferry-2@b", 22), far(), false)
            .await
            .unwrap();
        let listed = a.list().await.unwrap();
        assert_eq!(
            listed,
            [
                Registered {
                    name: "ferry-1@a".into(),
                    entry: entry("ferry-1@a", 11)
                },
                Registered {
                    name: "ferry-2@b".into(),
                    entry: entry("ferry-2@b", 22)
                },
            ]
        );
        assert_eq!(b.list().await.unwrap(), listed);
        b.leave(&entry("ferry-2@b", 22)).await.unwrap();
        assert_eq!(
            a.list().await.unwrap()[1].entry,
            json!({"name": "ferry-2@b", "type": "disc", "running": false})
        );
        // Another prefix is another deployment.
        let other = NodeRegistry::new(db.clone(), "u", "ferry-3@c".into());
        other
            .write(&entry("ferry-3@c", 33), far(), false)
            .await
            .unwrap();
        assert_eq!(a.list().await.unwrap().len(), 2);
        // The embedded engine's only process forgets the others when it publishes.
        a.publish(&entry("ferry-1@a", 11)).await.unwrap();
        let names: Vec<String> = a
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.name)
            .collect();
        assert_eq!(names, ["ferry-1@a"]);
    }
}
