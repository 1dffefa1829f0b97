//! Share groups (KIP-932): queue semantics over a topic's partitions, served from the
//! stage's leases ([`partition`]).
//!
//! This instance keeps each share group's members ([`membership`]), settings
//! ([`config`], stored and followed: [`configs`]), share sessions ([`sessions`]) and which
//! member holds which acquired record under which holder, until when ([`locks`]); the records themselves, their delivery counts and
//! their locks live in the store, so a kill -9 loses no acknowledgement and returns every
//! acquired record. Members and sessions are not stored: after a restart, clients join
//! again (a heartbeat of an unknown member is `UNKNOWN_MEMBER_ID`, which makes them).
//! Archived records go on to the group's dead-letter topic ([`dead_letters`]).

pub(crate) mod config;
mod configs;
pub(crate) mod dead_letters;
pub(crate) mod fetch;
pub(crate) mod figures;
mod locks;
pub(crate) mod membership;
pub(crate) mod partition;
pub(crate) mod sessions;

use crate::keys::KafkaKeys;
use crate::metadata::topics::Topics;
use config::ShareConfig;
use ferry_stage::{Holders, Stages};
use ferry_store::{ChangeCounter, Database};
use kafka_protocol::ResponseError;
use locks::Lock;
use membership::{Answer, Heartbeat, ShareGroup, TopicShape};
use parking_lot::Mutex;
use partition::{ShareError, SharePartition};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;
use tracing::warn;

/// A share-partition: (topic id, partition).
pub(crate) type Place = (u64, i32);

/// What this instance knows of one share group.
#[derive(Default)]
struct Group {
    /// Its members.
    members: ShareGroup,
    /// Its settings.
    config: ShareConfig,
    /// The records its members hold, by share-partition and offset.
    locks: HashMap<Place, BTreeMap<i64, Lock>>,
}

impl Group {
    /// Forgets `member`'s locks; returns their holders.
    fn drop_member(&mut self, member: &str) -> Vec<u64> {
        let mut holders = Vec::new();
        for locks in self.locks.values_mut() {
            locks.retain(|_, l| {
                if l.member == member {
                    holders.push(l.holder);
                }
                l.member != member
            });
        }
        holders.sort_unstable();
        holders.dedup();
        holders
    }
}

/// The share groups this instance serves; cheap to clone.
#[derive(Clone)]
pub(crate) struct ShareGroups {
    inner: Arc<Inner>,
}

struct Inner {
    db: Database,
    keys: KafkaKeys,
    topics: Topics,
    stages: Stages,
    holders: Holders,
    groups: Mutex<HashMap<String, Group>>,
    partitions: Mutex<HashMap<(String, Place), SharePartition>>,
    /// Bumped with every change of a group's settings and every deletion of a group.
    configs_version: ChangeCounter,
    /// Held through each reload of the settings, so a reload that read the store earlier
    /// never finishes after one that read it later (and puts older settings back).
    reloading: tokio::sync::Mutex<()>,
    sessions: sessions::ShareSessions,
    /// Wakes the lock expiry loop when a lock is taken.
    locked: tokio::sync::Notify,
    /// Wakes the dead-letter loop when a share-partition is opened.
    opened: tokio::sync::Notify,
}

/// What acknowledging a share-partition's records found wrong, as Kafka's error code.
pub(crate) type AckError = (ResponseError, String);

impl ShareGroups {
    /// The share groups over `topics`, their stages among `stages`.
    pub(crate) fn new(db: Database, keys: KafkaKeys, topics: Topics, stages: Stages) -> Self {
        Self {
            inner: Arc::new(Inner {
                holders: Holders::new(&stages),
                configs_version: ChangeCounter::new(keys.share_configs_version()),
                reloading: tokio::sync::Mutex::new(()),
                db,
                keys,
                topics,
                stages,
                groups: Mutex::default(),
                partitions: Mutex::default(),
                sessions: sessions::ShareSessions::default(),
                locked: tokio::sync::Notify::new(),
                opened: tokio::sync::Notify::new(),
            }),
        }
    }

    /// The share sessions.
    pub(crate) fn sessions(&self) -> &sessions::ShareSessions {
        &self.inner.sessions
    }

    /// The value of `key` in the store (a snapshot read).
    async fn stored(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ShareError> {
        Ok(self
            .inner
            .db
            .run(|tx| async move { tx.get(key, true).await })
            .await?)
    }

    /// The shape of topic `name` for the assignment.
    fn shape(&self, name: &str) -> Option<TopicShape> {
        self.inner.topics.get(name).map(|t| TopicShape {
            uuid: t.meta.uuid,
            partitions: t.meta.partitions,
        })
    }

    /// Applies a member's heartbeat; returns the answer and the heartbeat interval, once
    /// every partition the member is assigned has its share-partition started.
    ///
    /// # Errors
    /// Kafka's error for the heartbeat, or the store's (`COORDINATOR_NOT_AVAILABLE`).
    pub(crate) async fn heartbeat(
        &self,
        group: &str,
        heartbeat: Heartbeat,
    ) -> Result<(Answer, ShareConfig), (ResponseError, String)> {
        let unavailable = |e: ShareError| {
            warn!(group, error = %e, "cannot load a share group");
            (ResponseError::CoordinatorNotAvailable, e.to_string())
        };
        if heartbeat.member_epoch == membership::JOIN_EPOCH {
            if self.is_consumer_group(group).await.map_err(unavailable)? {
                return Err((
                    ResponseError::GroupIdNotFound,
                    format!("Group {group} is not a share group."),
                ));
            }
            self.list(group).await.map_err(unavailable)?;
        }
        let stored = self.stored_config(group).await.map_err(unavailable)?;
        let now = Instant::now();
        let shape = |name: &str| self.shape(name);
        let (answer, config, freed) = {
            let mut known = self.known(group, stored);
            let g = &mut *known;
            let mut freed = Vec::new();
            for gone in g.members.expire(now, &shape) {
                freed.extend(g.drop_member(&gone));
                self.inner.sessions.close_member(group, &gone);
            }
            let answer = g
                .members
                .heartbeat(heartbeat, now, g.config.session, &shape);
            (answer, g.config.clone(), freed)
        };
        self.release(freed).await;
        let answer = answer?;
        for (topic, partitions) in answer.assignment.iter().flatten() {
            for &p in partitions {
                let started = match self.partition(group, topic, p, &config).await {
                    Ok(sp) => sp.initialize(&self.inner.db, config.reset).await,
                    Err(e) => Err(e),
                };
                started.map_err(unavailable)?;
            }
        }
        Ok((answer, config))
    }

    /// Ends `member`'s share session: the records it still holds go back to the group (a
    /// member that leaves the group closes its session after its last acknowledgements).
    pub(crate) async fn close_session(&self, group: &str, member: &str) {
        self.inner.sessions.close_member(group, member);
        let freed = self
            .inner
            .groups
            .lock()
            .get_mut(group)
            .map(|g| g.drop_member(member))
            .unwrap_or_default();
        tracing::debug!(group, member, holders = freed.len(), "share session closed");
        self.release(freed).await;
    }

    /// `group`'s state as ListGroups names it (`Stable` with members, else `Empty`), when
    /// this instance knows the group.
    pub(crate) fn state(&self, group: &str) -> Option<&'static str> {
        self.inner.groups.lock().get(group).map(|g| {
            if g.members.members.is_empty() {
                "Empty"
            } else {
                "Stable"
            }
        })
    }

    /// `group`'s epoch and members (with their assignments) as this instance knows them.
    pub(crate) fn describe(&self, group: &str) -> Option<(i32, Vec<(String, membership::Member)>)> {
        self.inner.groups.lock().get(group).map(|g| {
            let members = g
                .members
                .members
                .iter()
                .map(|(id, m)| (id.clone(), m.clone()))
                .collect();
            (g.members.epoch, members)
        })
    }

    /// Whether `group` is a consumer group (classic or KIP-848) in the store, which a share
    /// group may not also be.
    async fn is_consumer_group(&self, group: &str) -> Result<bool, ShareError> {
        let keys = self.inner.keys.group(group);
        Ok(self
            .inner
            .db
            .run(|tx| {
                let keys = &keys;
                async move {
                    let share = tx.get(&keys.share_meta(), true).await?;
                    let classic = tx.get(&keys.meta(), true).await?;
                    let consumer = tx.get(&keys.consumer_meta(), true).await?;
                    Ok::<_, ferry_store::StoreError>(
                        share.is_none() && (classic.is_some() || consumer.is_some()),
                    )
                }
            })
            .await?)
    }

    /// Records `group` as a share group (ListGroups lists it).
    async fn list(&self, group: &str) -> Result<(), ShareError> {
        let (listing, meta) = (
            self.inner.keys.group_listing(group),
            self.inner.keys.group(group).share_meta(),
        );
        self.inner
            .db
            .run(|tx| {
                let (listing, meta) = (&listing, &meta);
                async move {
                    if tx.get(meta, false).await?.is_none() {
                        tx.set(listing, Vec::new());
                        tx.set(meta, Vec::new());
                    }
                    Ok::<_, ferry_store::StoreError>(())
                }
            })
            .await?;
        Ok(())
    }

    /// Whether `group` is a share group (known here, or recorded in the store).
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn exists(&self, group: &str) -> Result<bool, ShareError> {
        if self.inner.groups.lock().contains_key(group) {
            return Ok(true);
        }
        let key = self.inner.keys.group(group).share_meta();
        Ok(self.stored(&key).await?.is_some())
    }

    /// The partitions `group` has share-partitions of, as (topic name, partition).
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn started(&self, group: &str) -> Result<Vec<(String, i32)>, ShareError> {
        let keys = self.inner.keys.group(group);
        let kvs = self
            .inner
            .db
            .run(|tx| {
                let keys = &keys;
                async move {
                    let (b, e) = keys.share_partitions();
                    tx.get_range(&ferry_store::RangeOption::new(b, e), true)
                        .await
                }
            })
            .await?;
        let topics = self.inner.topics.all();
        Ok(kvs
            .iter()
            .filter_map(|kv| {
                let (topic_id, partition) = keys.share_partition_of(&kv.key)?;
                let topic = topics.iter().find(|t| t.meta.id == topic_id)?;
                Some((topic.meta.name.clone(), partition))
            })
            .collect())
    }

    /// Whether `group` has members here.
    pub(crate) fn has_members(&self, group: &str) -> bool {
        self.inner
            .groups
            .lock()
            .get(group)
            .is_some_and(|g| !g.members.members.is_empty())
    }

    /// Starts `group`'s share-partition of partition `index` of `topic` again at `start`
    /// (`None`: forgets it), returning what its members hold first. The group must have
    /// no members (the caller checks).
    ///
    /// # Errors
    /// The share-partition's error.
    pub(crate) async fn restart_at(
        &self,
        group: &str,
        topic: &str,
        index: i32,
        start: Option<i64>,
    ) -> Result<(), ShareError> {
        let config = self.config(group).await?;
        let sp = self.partition(group, topic, index, &config).await?;
        let held = self
            .inner
            .groups
            .lock()
            .get_mut(group)
            .and_then(|g| g.locks.remove(&(sp.log.topic_id, index)))
            .map(|locks| locks.into_values().map(|l| l.holder).collect::<Vec<_>>())
            .unwrap_or_default();
        self.release(held).await;
        sp.restart_at(&self.inner.db, start).await
    }

    /// Deletes `group` (DeleteGroups): its share-partitions with the records waiting and
    /// the archived ones not yet copied to its dead-letter topic, its settings and its
    /// listing, in one transaction. The group must have no members (the caller checks).
    ///
    /// # Errors
    /// The store's or a stage's error.
    pub(crate) async fn delete(&self, group: &str) -> Result<(), ShareError> {
        let stages: Vec<String> = self
            .inner
            .stages
            .list()
            .await?
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| partition::is_stage_of(name, group))
            .collect();
        let keys = self.inner.keys.group(group);
        let listing = self.inner.keys.group_listing(group);
        self.inner
            .db
            .run(|tx| {
                let (stages, keys, listing) = (&stages, &keys, &listing);
                async move {
                    for name in stages {
                        self.inner.stages.delete_in(&tx, name).await?;
                    }
                    let (b, e) = keys.share_partitions();
                    tx.clear_range(&b, &e);
                    tx.clear(&keys.share_config());
                    tx.clear(&keys.share_meta());
                    tx.clear(listing);
                    self.inner.configs_version.bump(&tx);
                    Ok::<_, ShareError>(())
                }
            })
            .await?;
        self.inner.groups.lock().remove(group);
        self.inner.partitions.lock().retain(|(g, _), _| g != group);
        Ok(())
    }

    /// Whether this instance has served heartbeats of `group` (it coordinates the group, or
    /// did), so it knows its members.
    pub(crate) fn serves(&self, group: &str) -> bool {
        self.inner
            .groups
            .lock()
            .get(group)
            .is_some_and(|g| g.members.epoch > 0)
    }

    /// Whether `member` is a member of share group `group` here.
    pub(crate) fn is_member(&self, group: &str, member: &str) -> bool {
        self.inner
            .groups
            .lock()
            .get(group)
            .is_some_and(|g| g.members.members.contains_key(member))
    }

    /// `group`'s view of partition `index` of topic `topic` (opened once).
    ///
    /// # Errors
    /// `ShareError` when the topic or partition is unknown (a log error) or the stage fails.
    pub(crate) async fn partition(
        &self,
        group: &str,
        topic: &str,
        index: i32,
        config: &ShareConfig,
    ) -> Result<SharePartition, ShareError> {
        let log = self
            .inner
            .topics
            .get(topic)
            .and_then(|t| t.partition(index).cloned())
            .ok_or_else(|| {
                ShareError::Log(crate::partition::log::LogError::Corrupt(format!(
                    "no partition {topic}-{index}"
                )))
            })?;
        let key = (group.to_owned(), (log.topic_id, index));
        if let Some(sp) = self.inner.partitions.lock().get(&key) {
            return Ok(sp.clone());
        }
        let mut limit = config.delivery_limit;
        let sp = loop {
            let config = ShareConfig {
                delivery_limit: limit,
                ..config.clone()
            };
            let sp = SharePartition::open(
                &self.inner.stages,
                &self.inner.keys,
                group,
                log.clone(),
                &config,
            )
            .await?;
            // Opening stores the delivery limit in the stage: when the group's settings
            // changed meanwhile, open again with the new one, so it is the limit kept.
            match self.inner.groups.lock().get(group) {
                Some(g) if g.config.delivery_limit != limit => limit = g.config.delivery_limit,
                _ => break sp,
            }
        };
        // One opened meanwhile by another request is the one everyone uses.
        let sp = self
            .inner
            .partitions
            .lock()
            .entry(key)
            .or_insert(sp)
            .clone();
        self.inner.opened.notify_one();
        Ok(sp)
    }
}
