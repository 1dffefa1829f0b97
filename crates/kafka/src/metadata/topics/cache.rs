//! The cache of topics every request reads instead of the store ([`Topics`]), and what
//! changes topics: create, delete, add partitions, set their settings.
//!
//! Every change bumps `(P,"k","topic","version")`, which every instance's cache watches,
//! so all instances see a new topic without polling. The cache remembers the version it
//! was read at and never goes back to an older one: refreshes run concurrently (the one
//! following changes, and the one after each change made here), and the one that read
//! first may finish last.

use super::TopicError;
use super::stored::{TopicMeta, decode_id, new_uuid};
use crate::keys::{KafkaKeys, PartitionKeys, stage_name};
use crate::metadata::settings::TopicConfig;
use ferry_stage::Stage;
use ferry_stage::{StageOptions, Stages};
use ferry_store::{Database, RangeOption, Transaction};
use ferry_telemetry::kafka as m;
use foundationdb_tuple::{pack, unpack};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Longest topic name Kafka allows.
const MAX_NAME_LEN: usize = 249;
/// Most partitions a topic may have.
const MAX_PARTITIONS: i32 = 10_000;

/// One partition of a cached topic.
#[derive(Debug, Clone)]
pub struct Partition {
    /// The topic's name (for metric labels and answers).
    pub topic: Arc<str>,
    /// The topic's id.
    pub topic_id: u64,
    /// Its index in the topic.
    pub index: i32,
    /// Its keys.
    pub keys: PartitionKeys,
    /// The stage producers append to.
    pub stage: Stage,
}

/// A cached topic.
#[derive(Debug)]
pub struct Topic {
    /// What the store says about it.
    pub meta: TopicMeta,
    /// Its partitions, by index.
    pub partitions: Vec<Partition>,
}

impl Topic {
    /// Partition `index`, if the topic has it.
    pub fn partition(&self, index: i32) -> Option<&Partition> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.get(i))
    }
}

/// Every topic in one store, cached; cheap to clone.
#[derive(Clone)]
pub struct Topics {
    /// The store.
    db: Database,
    /// The Kafka keyspace.
    keys: KafkaKeys,
    /// The stages, for each partition's staging queue.
    stages: Stages,
    /// The cache.
    cache: Arc<RwLock<Cached>>,
    /// Bumped after every refresh that installs a cache, for whoever follows topic changes.
    refreshed: Arc<tokio::sync::watch::Sender<u64>>,
}

/// The topics as read at one version of the topic list.
#[derive(Default)]
struct Cached {
    /// The value of the topics version key the topics were read with.
    version: i64,
    /// The topics, by name.
    by_name: HashMap<String, Arc<Topic>>,
}

impl Topics {
    /// The topics of `db` under the key prefix of `stages`.
    pub fn new(db: Database, keys: KafkaKeys, stages: Stages) -> Self {
        Self {
            db,
            keys,
            stages,
            cache: Arc::default(),
            refreshed: Arc::new(tokio::sync::watch::Sender::new(0)),
        }
    }

    /// Changes (to "seen") after every refresh of the cache: a topic created, deleted,
    /// grown or reconfigured on any instance.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.refreshed.subscribe()
    }

    /// The cached topic `name`.
    pub fn get(&self, name: &str) -> Option<Arc<Topic>> {
        self.cache.read().by_name.get(name).cloned()
    }

    /// Every cached topic, sorted by name.
    pub fn all(&self) -> Vec<Arc<Topic>> {
        let mut all: Vec<_> = self.cache.read().by_name.values().cloned().collect();
        all.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));
        all
    }

    /// The cached topic whose UUID is `uuid`.
    pub fn by_uuid(&self, uuid: [u8; 16]) -> Option<Arc<Topic>> {
        self.cache
            .read()
            .by_name
            .values()
            .find(|t| t.meta.uuid == uuid)
            .cloned()
    }

    /// Creates topic `name` with `partitions` partitions and `config`, then refreshes the
    /// cache. With `validate_only`, checks everything and creates nothing.
    ///
    /// # Errors
    /// [`TopicError::InvalidName`], [`TopicError::InvalidPartitions`],
    /// [`TopicError::Exists`], or the store's error.
    pub async fn create(
        &self,
        name: &str,
        partitions: i32,
        config: TopicConfig,
        validate_only: bool,
    ) -> Result<Arc<Topic>, TopicError> {
        check_name(name)?;
        check_partition_count(partitions)?;
        let meta = self
            .db
            .run(|tx| async move {
                if tx
                    .get(&self.keys.topic_by_name(name), false)
                    .await?
                    .is_some()
                {
                    return Err(TopicError::Exists(name.to_owned()));
                }
                let id = match tx.get(&self.keys.next_topic_id(), false).await? {
                    Some(v) => decode_id(&v)?,
                    None => 1,
                };
                let meta = TopicMeta {
                    id,
                    uuid: new_uuid(),
                    name: name.to_owned(),
                    partitions,
                    config,
                };
                if !validate_only {
                    tx.set(&self.keys.next_topic_id(), pack(&(id + 1,)));
                    tx.set(&self.keys.topic_by_name(name), pack(&(id,)));
                    self.write_meta(&tx, &meta);
                }
                Ok(meta)
            })
            .await?;
        if validate_only {
            return Ok(Arc::new(Topic {
                meta,
                partitions: Vec::new(),
            }));
        }
        self.refresh().await?;
        self.get(name)
            .ok_or_else(|| TopicError::Unknown(name.to_owned()))
    }

    /// Deletes topic `name`: its metadata, every partition's log (dropping the log's
    /// references to the spills of its large batches), lease and producer state, and its
    /// stages. A sequencer of the topic fails its next transaction (its lease is gone) and
    /// stops.
    ///
    /// # Errors
    /// [`TopicError::Unknown`], or the store's error.
    pub async fn delete(&self, name: &str) -> Result<(), TopicError> {
        let meta = self
            .db
            .run(|tx| async move {
                let meta = self.meta_in(&tx, name).await?;
                let spills = self.stages.spills();
                for p in 0..meta.partitions {
                    let (b, e) = self
                        .keys
                        .partition(meta.id, p)
                        .spilled_range(i64::MIN, i64::MAX);
                    for kv in tx.get_range(&RangeOption::new(b, e), false).await? {
                        let (id,) = unpack::<(u64,)>(&kv.value).map_err(|e| {
                            TopicError::Corrupt(format!("spilled batch entry: {e:?}"))
                        })?;
                        spills.drop_ref_in(&tx, id);
                    }
                }
                tx.clear(&self.keys.topic_by_name(name));
                tx.clear(&self.keys.topic_meta(meta.id));
                let (b, e) = self.keys.topic_partitions(meta.id);
                tx.clear_range(&b, &e);
                tx.atomic_add(&self.keys.topics_version(), 1);
                Ok::<_, TopicError>(meta)
            })
            .await?;
        for p in 0..meta.partitions {
            self.stages.delete(&stage_name(meta.id, p)).await?;
        }
        self.refresh().await
    }

    /// Grows topic `name` to `count` partitions.
    ///
    /// # Errors
    /// [`TopicError::InvalidPartitions`] when `count` does not grow it,
    /// [`TopicError::Unknown`], or the store's error.
    pub async fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        check_partition_count(count)?;
        self.db
            .run(|tx| async move {
                let mut meta = self.meta_in(&tx, name).await?;
                if count <= meta.partitions {
                    return Err(TopicError::InvalidPartitions(format!(
                        "topic '{name}' has {} partitions; the new count must be larger, not {count}",
                        meta.partitions
                    )));
                }
                meta.partitions = count;
                if !validate_only {
                    self.write_meta(&tx, &meta);
                }
                Ok(())
            })
            .await?;
        self.refresh().await
    }

    /// Replaces topic `name`'s overrides with what `change` makes of them, in one store
    /// transaction (only checked when `validate_only`).
    ///
    /// # Errors
    /// [`TopicError::Unknown`], `change`'s error, or the store's error.
    pub async fn set_config(
        &self,
        name: &str,
        change: impl Fn(TopicConfig) -> Result<TopicConfig, TopicError>,
        validate_only: bool,
    ) -> Result<(), TopicError> {
        let change = &change;
        self.db
            .run(|tx| async move {
                let mut meta = self.meta_in(&tx, name).await?;
                meta.config = change(meta.config)?;
                if !validate_only {
                    self.write_meta(&tx, &meta);
                }
                Ok::<_, TopicError>(())
            })
            .await?;
        self.refresh().await
    }

    /// Reloads the cache from the store, keeping the cached value of every topic whose
    /// metadata did not change; a cache read at a newer version meanwhile is kept.
    ///
    /// # Errors
    /// The store's error, or a partition stage that cannot be opened.
    pub async fn refresh(&self) -> Result<(), TopicError> {
        let tx = self.db.begin()?;
        let version = tx
            .get(&self.keys.topics_version(), true)
            .await?
            .and_then(|v| v.try_into().ok())
            .map_or(0, i64::from_le_bytes);
        let (b, e) = self.keys.topic_metas();
        let kvs = tx.get_range(&RangeOption::new(b, e), true).await?;
        let mut fresh = HashMap::with_capacity(kvs.len());
        for kv in kvs {
            let id = foundationdb_tuple::unpack::<(String, String, String, String, u64)>(&kv.key)
                .map(|(.., id)| id)
                .map_err(|e| TopicError::Corrupt(format!("topic key: {e:?}")))?;
            let meta = TopicMeta::decode(id, &kv.value)?;
            let cached = self.get(&meta.name).filter(|t| t.meta == meta);
            let topic = match cached {
                Some(t) => t,
                None => Arc::new(self.load(meta).await?),
            };
            fresh.insert(topic.meta.name.clone(), topic);
        }
        if self.install(version, fresh) {
            self.refreshed.send_modify(|n| *n += 1);
        }
        Ok(())
    }

    /// Makes `by_name`, read at topics version `version`, the cache — unless the cache was
    /// read at a newer version (a refresh that began later finished first). Returns
    /// whether it did.
    fn install(&self, version: i64, by_name: HashMap<String, Arc<Topic>>) -> bool {
        let mut cache = self.cache.write();
        if version < cache.version {
            return false;
        }
        *cache = Cached { version, by_name };
        true
    }

    /// Keeps the cache fresh until `shutdown`: sleeps on a watch of the topics version
    /// and refreshes whenever any instance changes a topic.
    pub async fn follow_changes(&self, shutdown: CancellationToken) {
        loop {
            let watch = match self.db.begin() {
                Ok(tx) => {
                    let watch = tx.watch(&self.keys.topics_version());
                    match tx.get(&self.keys.topics_version(), false).await {
                        Ok(_) => tx.commit().await.map(|_| watch),
                        Err(e) => Err(e),
                    }
                }
                Err(e) => Err(e),
            };
            let outcome = match watch {
                Ok(watch) => tokio::select! {
                    () = shutdown.cancelled() => return,
                    fired = watch => fired,
                },
                Err(e) => Err(e),
            };
            if let Err(e) = outcome {
                warn!(error = %e, "watching the topic list failed; retrying");
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
                }
            }
            if let Err(e) = self.refresh().await {
                warn!(error = %e, "refreshing the topic list failed");
            }
        }
    }

    /// Builds a cached topic, opening (or creating) each partition's stage.
    async fn load(&self, meta: TopicMeta) -> Result<Topic, TopicError> {
        export_counters(&meta);
        let name: Arc<str> = Arc::from(meta.name.as_str());
        let mut partitions = Vec::with_capacity(meta.partitions as usize);
        for index in 0..meta.partitions {
            let stage = self
                .stages
                .create(&stage_name(meta.id, index), &StageOptions::default())
                .await?;
            partitions.push(Partition {
                topic: name.clone(),
                topic_id: meta.id,
                index,
                keys: self.keys.partition(meta.id, index),
                stage,
            });
        }
        Ok(Topic { meta, partitions })
    }

    async fn meta_in(&self, tx: &Transaction, name: &str) -> Result<TopicMeta, TopicError> {
        let id = tx
            .get(&self.keys.topic_by_name(name), false)
            .await?
            .ok_or_else(|| TopicError::Unknown(name.to_owned()))?;
        let id = decode_id(&id)?;
        let meta = tx
            .get(&self.keys.topic_meta(id), false)
            .await?
            .ok_or_else(|| TopicError::Corrupt(format!("topic '{name}' has no metadata")))?;
        TopicMeta::decode(id, &meta)
    }

    fn write_meta(&self, tx: &Transaction, meta: &TopicMeta) {
        tx.set(&self.keys.topic_meta(meta.id), meta.encode());
        tx.atomic_add(&self.keys.topics_version(), 1);
    }
}

/// Kafka's topic name rule.
/// Exports a topic's counters at 0 (the compaction counters when it is compacted), so
/// `increase(...)` sees its first produce, fetch or pass; done whenever the topic is
/// loaded into the cache (at start, created, changed), which leaves a counted one as it is.
fn export_counters(meta: &TopicMeta) {
    let compacted = meta.config.cleanup_policy().compacts();
    let counters = [
        m::PRODUCED_BYTES_TOTAL,
        m::PRODUCED_RECORDS_TOTAL,
        m::FETCHED_BYTES_TOTAL,
        m::FETCHED_RECORDS_TOTAL,
        m::DUPLICATE_BATCHES_TOTAL,
    ]
    .into_iter()
    .chain(
        compacted
            .then_some([
                m::COMPACTION_PASSES_TOTAL,
                m::COMPACTED_RECORDS_TOTAL,
                m::COMPACTED_BYTES_TOTAL,
            ])
            .into_iter()
            .flatten(),
    );
    for name in counters {
        metrics::counter!(name, m::LABEL_TOPIC => meta.name.clone()).increment(0);
    }
}

fn check_name(name: &str) -> Result<(), TopicError> {
    let legal = !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if legal {
        Ok(())
    } else {
        Err(TopicError::InvalidName(name.to_owned()))
    }
}

fn check_partition_count(count: i32) -> Result<(), TopicError> {
    if (1..=MAX_PARTITIONS).contains(&count) {
        Ok(())
    } else {
        Err(TopicError::InvalidPartitions(format!(
            "a topic needs 1 to {MAX_PARTITIONS} partitions, not {count}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::fresh_topics;
    use super::*;

    #[test]
    fn kafka_topic_names_are_checked() {
        for ok in ["orders", "a.b_c-D9", &"x".repeat(249)] {
            check_name(ok).unwrap();
        }
        for bad in ["", ".", "..", "has space", "ü", &"x".repeat(250)] {
            assert!(
                matches!(check_name(bad), Err(TopicError::InvalidName(_))),
                "{bad}"
            );
        }
    }

    #[tokio::test]
    async fn a_refresh_that_read_an_older_topic_list_does_not_replace_a_newer_cache() {
        let (_dir, db, topics) = fresh_topics().await;
        topics
            .create("first", 1, TopicConfig::default(), false)
            .await
            .unwrap();
        // What a refresh that read the list before "second" existed would install, late.
        let (version, by_name) = {
            let cache = topics.cache.read();
            (cache.version, cache.by_name.clone())
        };
        topics
            .create("second", 1, TopicConfig::default(), false)
            .await
            .unwrap();
        assert!(!topics.install(version, by_name), "older than the cache");
        assert!(
            topics.get("second").is_some(),
            "the newer topic stays visible"
        );
        topics.refresh().await.unwrap();
        assert_eq!(topics.all().len(), 2);
        db.close().await;
    }
}
