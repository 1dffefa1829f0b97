//! The front's virtual hosts: those of `amqp.vhosts` (always there; the config file adds
//! and removes them) and those created at runtime through the management API, kept in the
//! store so every instance over one store serves the same ones.
//!
//! A vhost record (`(P, "amqp", "vhost", NAME)`) holds a runtime vhost's metadata, or a
//! configured vhost's when it was given some; every change bumps `(P, "amqp",
//! "vhosts-ver")`. [`VHosts::sync`] makes the in-memory set follow the records (a new
//! vhost's topology is loaded; a gone one is dropped), and [`follow`] runs it on every
//! change, starts and stops each vhost's topology watch, and closes the connections of a
//! deleted vhost (320 CONNECTION_FORCED "vhost 'NAME' is deleted").
//!
//! Deleting a vhost removes its queues with their messages, its exchanges and bindings
//! and its record in the store; its users' permissions there go with it (the management
//! API clears them, as RabbitMQ does).

use super::registry::Connections;
use super::topology::records::TopologyKeys;
use super::topology::{Queue, VHost};
use crate::wire::errors::{AmqpError, TxError};
use ferry_stage::Stages;
use ferry_store::{ChangeCounter, Database, RangeOption, StoreError, Transaction};
use parking_lot::RwLock;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Format version of a vhost record.
const FORMAT: u16 = 1;
/// How long [`follow`] waits before watching again after the store failed.
const STORE_RETRY: Duration = Duration::from_secs(1);

/// What RabbitMQ keeps about a vhost besides its name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VhostMeta {
    /// Free text.
    pub description: String,
    /// Tags (free words).
    pub tags: Vec<String>,
    /// RabbitMQ's `default_queue_type`, as given (Ferry's queues take their type from
    /// `x-queue-type` alone).
    pub default_queue_type: Option<String>,
}

impl VhostMeta {
    fn encode(&self) -> Vec<u8> {
        foundationdb_tuple::pack(&(
            FORMAT,
            self.description.as_str(),
            self.tags.join(","),
            self.default_queue_type.clone().unwrap_or_default(),
        ))
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Self> {
        let (_, description, tags, queue_type): (u16, String, String, String) =
            foundationdb_tuple::unpack(bytes).ok()?;
        Some(Self {
            description,
            tags: tags
                .split(',')
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect(),
            default_queue_type: (!queue_type.is_empty()).then_some(queue_type),
        })
    }
}

/// Why a vhost cannot be deleted.
#[derive(Debug, thiserror::Error)]
pub enum VhostError {
    /// It is one of `amqp.vhosts`.
    #[error("vhost '{0}' is in amqp.vhosts of the config; remove it there")]
    Configured(String),
    /// The front failed.
    #[error(transparent)]
    Amqp(#[from] AmqpError),
}

/// One vhost being served.
struct Entry {
    vhost: Arc<VHost>,
    meta: VhostMeta,
}

/// The vhosts this instance serves.
pub struct VHosts {
    /// `amqp.vhosts`, in config order.
    configured: Vec<String>,
    /// Every vhost served now, by name.
    entries: RwLock<BTreeMap<String, Entry>>,
    db: Database,
    stages: Stages,
    keys: TopologyKeys,
    /// Bumped by every vhost made, changed or deleted.
    version: ChangeCounter,
    /// Told of every queue a vhost opens (its background work starts).
    opened: UnboundedSender<Arc<Queue>>,
    /// Serializes [`VHosts::sync`]s.
    syncing: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for VHosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.entries.read().keys()).finish()
    }
}

impl VHosts {
    /// The vhosts of `configured` and of the store's records, topologies loaded.
    ///
    /// # Errors
    /// The vhost and the error when a topology cannot be loaded.
    pub async fn open(
        configured: Vec<String>,
        db: Database,
        stages: Stages,
        keys: TopologyKeys,
        opened: UnboundedSender<Arc<Queue>>,
    ) -> Result<Self, (String, AmqpError)> {
        let vhosts = Self {
            configured,
            entries: RwLock::new(BTreeMap::new()),
            db,
            stages,
            version: ChangeCounter::new(keys.vhosts_version()),
            keys,
            opened,
            syncing: tokio::sync::Mutex::new(()),
        };
        vhosts.sync().await?;
        Ok(vhosts)
    }

    /// The front's keys.
    pub(crate) fn keys(&self) -> &TopologyKeys {
        &self.keys
    }

    /// The vhost `name`, if it is served.
    pub fn get(&self, name: &str) -> Option<Arc<VHost>> {
        self.entries.read().get(name).map(|e| e.vhost.clone())
    }

    /// Every vhost served, by name.
    pub fn list(&self) -> Vec<Arc<VHost>> {
        self.entries
            .read()
            .values()
            .map(|e| e.vhost.clone())
            .collect()
    }

    /// Every vhost served with its metadata, by name.
    pub fn list_with_meta(&self) -> Vec<(Arc<VHost>, VhostMeta)> {
        self.entries
            .read()
            .values()
            .map(|e| (e.vhost.clone(), e.meta.clone()))
            .collect()
    }

    /// The metadata of vhost `name`, if it is served.
    pub fn meta(&self, name: &str) -> Option<VhostMeta> {
        self.entries.read().get(name).map(|e| e.meta.clone())
    }

    /// Whether `name` is in `amqp.vhosts`.
    pub(crate) fn is_configured(&self, name: &str) -> bool {
        self.configured.iter().any(|c| c == name)
    }

    /// Creates vhost `name` (or replaces its metadata); returns whether it existed. Served
    /// here at once, by every other instance within a watch round-trip.
    ///
    /// # Errors
    /// 541 when the store fails.
    pub async fn put(&self, name: &str, meta: &VhostMeta) -> Result<bool, AmqpError> {
        let existed = self.get(name).is_some();
        self.db
            .run(|tx| {
                self.write_record_in(&tx, name, meta);
                async { Ok::<_, TxError>(()) }
            })
            .await?;
        self.sync().await.map_err(|(_, e)| e)?;
        Ok(existed)
    }

    /// An empty vhost `name` that is not served (yet): a definitions import plans a new
    /// vhost's topology on it, writes it with [`VHosts::write_record_in`] in the import's
    /// transaction, then [`VHosts::sync`]s, which serves the vhost as stored. Queues it
    /// opens start no background work.
    pub fn scratch(&self, name: &str) -> Arc<VHost> {
        let (nobody, _) = tokio::sync::mpsc::unbounded_channel();
        Arc::new(VHost::new(
            name.to_owned(),
            self.db.clone(),
            self.stages.clone(),
            self.keys.clone(),
            nobody,
        ))
    }

    /// Writes, in `tx`, the record of vhost `name` with `meta` (creating it).
    pub fn write_record_in(&self, tx: &Transaction, name: &str, meta: &VhostMeta) {
        tx.set(&self.keys.vhost_record(name), meta.encode());
        self.version.bump(tx);
    }

    /// Deletes vhost `name`: its queues with their messages, exchanges, bindings and
    /// record; returns whether it existed. Connections to it are closed by [`follow`].
    ///
    /// # Errors
    /// [`VhostError::Configured`] for one of `amqp.vhosts`; 541 when the store fails.
    pub async fn delete(&self, name: &str) -> Result<bool, VhostError> {
        if self.is_configured(name) {
            return Err(VhostError::Configured(name.to_owned()));
        }
        let Some(vhost) = self.get(name) else {
            return Ok(false);
        };
        vhost.remove_all().await?;
        let (record, topology) = (self.keys.vhost_record(name), self.keys.vhost_topology(name));
        self.db
            .run(|tx| {
                tx.clear(&record);
                // What another instance declared meanwhile goes too.
                tx.clear_range(&topology.0, &topology.1);
                self.version.bump(&tx);
                async { Ok::<_, TxError>(()) }
            })
            .await
            .map_err(AmqpError::from)?;
        self.sync().await.map_err(|(_, e)| e)?;
        Ok(true)
    }

    /// The version of the set of vhosts, read now.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn version(&self) -> Result<i64, StoreError> {
        self.version.read(&self.db).await
    }

    /// Waits until the version differs from `seen`.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn changed_since(&self, seen: i64) -> Result<(), StoreError> {
        self.version.changed_since(&self.db, seen).await
    }

    /// Makes the served vhosts those of `amqp.vhosts` and the records: loads the new ones,
    /// drops the gone ones, refreshes metadata.
    ///
    /// # Errors
    /// The vhost and the error when a new vhost's topology cannot be loaded.
    pub async fn sync(&self) -> Result<(), (String, AmqpError)> {
        let _one_at_a_time = self.syncing.lock().await;
        let records = self
            .records()
            .await
            .map_err(|e| (String::new(), AmqpError::from(e)))?;
        let mut wanted: BTreeMap<String, VhostMeta> = self
            .configured
            .iter()
            .map(|name| (name.clone(), VhostMeta::default()))
            .collect();
        wanted.extend(records);
        let known: HashMap<String, Arc<VHost>> = self
            .entries
            .read()
            .iter()
            .map(|(name, e)| (name.clone(), e.vhost.clone()))
            .collect();
        let mut next = BTreeMap::new();
        for (name, meta) in wanted {
            let vhost = match known.get(&name) {
                Some(v) => v.clone(),
                None => {
                    let vhost = Arc::new(VHost::new(
                        name.clone(),
                        self.db.clone(),
                        self.stages.clone(),
                        self.keys.clone(),
                        self.opened.clone(),
                    ));
                    vhost.load().await.map_err(|e| (name.clone(), e))?;
                    vhost
                }
            };
            next.insert(name, Entry { vhost, meta });
        }
        *self.entries.write() = next;
        Ok(())
    }

    /// Every vhost record.
    async fn records(&self) -> Result<BTreeMap<String, VhostMeta>, StoreError> {
        let tx = self.db.begin()?;
        let (b, e) = self.keys.vhost_records();
        let kvs = tx.get_range(&RangeOption::new(b, e), true).await?;
        Ok(kvs
            .iter()
            .filter_map(|kv| {
                let name = self.keys.vhost_record_name(&kv.key)?;
                let meta = VhostMeta::decode(&kv.value).or_else(|| {
                    warn!(vhost = %name, "a vhost record this ferry cannot read; its metadata is left empty");
                    Some(VhostMeta::default())
                })?;
                Some((name, meta))
            })
            .collect())
    }
}

/// Follows the set of vhosts until `shutdown`: syncs on every change, runs `watch` (the
/// topology watch) for each served vhost, and closes the connections of a vhost that is
/// gone.
pub(crate) async fn follow<W, F>(
    vhosts: &VHosts,
    connections: &Connections,
    watch: W,
    shutdown: CancellationToken,
) where
    W: Fn(Arc<VHost>, CancellationToken) -> F,
    F: std::future::Future<Output = ()> + Send + 'static,
{
    let mut watching: BTreeMap<String, CancellationToken> = BTreeMap::new();
    let mut tasks = JoinSet::new();
    let mut seen = vhosts.version().await.unwrap_or(-1);
    loop {
        let served = vhosts.list();
        for vhost in &served {
            if !watching.contains_key(&vhost.name) {
                let token = shutdown.child_token();
                watching.insert(vhost.name.clone(), token.clone());
                tasks.spawn(watch(vhost.clone(), token));
            }
        }
        let gone: Vec<String> = watching
            .keys()
            .filter(|name| !served.iter().any(|v| &v.name == *name))
            .cloned()
            .collect();
        for name in gone {
            if let Some(token) = watching.remove(&name) {
                token.cancel();
            }
            info!(vhost = %name, "vhost deleted; closing its connections");
            for c in connections.list() {
                if c.info.vhost == name {
                    c.close(&format!("vhost '{name}' is deleted"));
                }
            }
        }
        while tasks.try_join_next().is_some() {}
        tokio::select! {
            () = shutdown.cancelled() => break,
            changed = vhosts.changed_since(seen) => {
                if let Err(e) = changed {
                    warn!(error = %e, "cannot watch the store's vhosts");
                    tokio::time::sleep(STORE_RETRY).await;
                    continue;
                }
            }
        }
        let Ok(now) = vhosts.version().await else {
            continue;
        };
        seen = now;
        if let Err((vhost, e)) = vhosts.sync().await {
            warn!(%vhost, error = %e, "cannot load a vhost; trying again shortly");
            tokio::time::sleep(STORE_RETRY).await;
            seen = -1;
        }
    }
    while tasks.join_next().await.is_some() {}
}
