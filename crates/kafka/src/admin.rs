//! What the management API may see of the Kafka front, and nothing else of its internals:
//! the topics with each partition's offsets (log start, high watermark, last stable
//! offset), the consumer groups as persisted with each committed offset's lag, the share
//! groups with each share-partition's figures (in flight, waiting, archived, lag;
//! [`crate::share::figures`]), and the ACLs. Everything is read from the store (snapshot reads): a look from the API neither
//! takes a group's coordination nor conflicts with producers and consumers.
//!
//! The ACLs are shown as the front's own model of them (re-exported below): the
//! management API names nothing of the front but this module.
//!
//! What the API may change — topics, their settings, a group's offsets — is in
//! [`changes`], through the operations the front's Kafka requests use; the records of a
//! partition, read as Fetch reads them, in [`records`].

mod changes;
mod records;

use super::Context;
use crate::coordinator::groups::lag::lag;
use crate::coordinator::groups::store::{GroupKind, Stored};
use crate::metadata::settings::SETTINGS;
use crate::metadata::topics::Topic;
use crate::partition::log::{Log, LogError};
use crate::share::figures::store_error;
use ferry_store::StoreError;
use std::collections::HashMap;
use std::sync::Arc;

// The ACL model as `KafkaAdmin::acls` returns it: the set, each binding, and the values of
// its fields.
pub use crate::acls::model::{
    Acl, AclCodes, Operation, PatternType, Permission, ResourcePattern, ResourceType,
};
pub use crate::acls::store::AclSet;
pub use crate::clients::KafkaClient;
pub use crate::metadata::topics::TopicError;
pub use crate::port::KafkaRecord;
pub use crate::share::figures::{ShareGroupFigures, ShareMemberFigures, SharePartitionFigures};
pub use changes::{ResetError, ResetOffset, ResetTo};
pub use records::{BrowseError, BrowseFrom, BrowsedRecord, MAX_RECORDS, RecordsPage};

/// One partition's offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionOffsets {
    /// Its index in the topic.
    pub partition: i32,
    /// The first offset still stored.
    pub log_start_offset: i64,
    /// The next offset to be assigned.
    pub high_watermark: i64,
    /// The offset below which no transaction is open (`read_committed` consumers read up
    /// to it).
    pub last_stable_offset: i64,
}

/// A topic as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicView {
    /// Its name.
    pub name: String,
    /// Its effective `retention.ms` (its own, the dynamic broker default, or
    /// `kafka.retention_ms`).
    pub retention_ms: i64,
    /// Its effective `retention.bytes` (its own, the dynamic broker default, or
    /// `kafka.retention_bytes`).
    pub retention_bytes: i64,
    /// Every setting Ferry supports with its effective value, as DescribeConfigs shows it
    /// (`cleanup.policy` = `delete`, ...).
    pub configs: Vec<(&'static str, String)>,
    /// Its partitions, by index.
    pub partitions: Vec<PartitionOffsets>,
}

/// A member of a group, as persisted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberView {
    /// Its member id.
    pub id: String,
    /// The client id it joined with.
    pub client_id: String,
    /// The host it joined from.
    pub client_host: String,
}

/// One committed offset of a group and how far it is behind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The committed offset (the next the group will consume).
    pub committed_offset: i64,
    /// The partition's high watermark; `None` when the topic or partition is gone.
    pub high_watermark: Option<i64>,
    /// The records between the committed offset and the high watermark; `None` when the
    /// topic or partition is gone.
    pub lag: Option<i64>,
}

/// A consumer group as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSummary {
    /// Its id.
    pub id: String,
    /// `Empty`, `Stable` or `PreparingRebalance`, from what its coordinator last
    /// persisted (as a restarted coordinator would take it up).
    pub state: &'static str,
    /// Its members' protocol type (`consumer`), empty when unknown.
    pub protocol_type: String,
    /// The assignment protocol of its generation, empty when none.
    pub protocol: String,
    /// Its generation.
    pub generation: i32,
    /// Its members.
    pub members: Vec<MemberView>,
    /// Its committed offsets, by topic and partition.
    pub offsets: Vec<GroupOffset>,
}

impl GroupSummary {
    /// The lag summed over every partition whose lag is known.
    pub fn total_lag(&self) -> i64 {
        self.offsets.iter().filter_map(|o| o.lag).sum()
    }
}

/// The Kafka front as the management API sees it; cheap to clone.
#[derive(Clone)]
pub struct KafkaAdmin {
    /// The front's shared state.
    ctx: Arc<Context>,
}

impl KafkaAdmin {
    /// The admin side of the front whose connections share `ctx`.
    pub fn new(ctx: Arc<Context>) -> Self {
        Self { ctx }
    }

    /// Every topic, sorted by name, with its partitions' offsets.
    ///
    /// # Errors
    /// [`LogError`] when the store fails or holds an offset this ferry cannot decode.
    pub async fn topics(&self) -> Result<Vec<TopicView>, LogError> {
        let mut topics = self.ctx.topics.all();
        topics.sort_by(|a, b| a.meta.name.cmp(&b.meta.name));
        let mut out = Vec::with_capacity(topics.len());
        for topic in topics {
            out.push(self.view(&topic).await?);
        }
        Ok(out)
    }

    /// Topic `name` with its partitions' offsets; `None` when there is no such topic.
    ///
    /// # Errors
    /// As [`Self::topics`].
    pub async fn topic(&self, name: &str) -> Result<Option<TopicView>, LogError> {
        match self.ctx.topics.get(name) {
            Some(topic) => Ok(Some(self.view(&topic).await?)),
            None => Ok(None),
        }
    }

    async fn view(&self, topic: &Topic) -> Result<TopicView, LogError> {
        let tx = self.ctx.db.begin()?;
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for p in &topic.partitions {
            let readable = Log::new(&p.keys).readable(&tx).await?;
            partitions.push(PartitionOffsets {
                partition: p.index,
                log_start_offset: readable.bounds.start,
                high_watermark: readable.bounds.high_watermark,
                last_stable_offset: readable.stable,
            });
        }
        let (config, defaults) = (&topic.meta.config, self.ctx.defaults());
        Ok(TopicView {
            name: topic.meta.name.clone(),
            retention_ms: defaults.retention_ms(config),
            retention_bytes: defaults.retention_bytes(config),
            configs: SETTINGS
                .iter()
                .map(|s| (s.name, defaults.describe(s, config)))
                .collect(),
            partitions,
        })
    }

    /// Every consumer group (share groups are [`Self::share_groups`]), sorted by id, with
    /// its committed offsets and their lag.
    ///
    /// # Errors
    /// [`LogError`] when the store fails.
    pub async fn groups(&self) -> Result<Vec<GroupSummary>, LogError> {
        let groups = self.ctx.coordinator.store().list().await?;
        let high_watermarks = self.high_watermarks().await?;
        let mut out = Vec::with_capacity(groups.len());
        for g in groups.iter().filter(|g| g.kind != GroupKind::Share) {
            out.push(self.summary(&g.id, &high_watermarks).await?);
        }
        Ok(out)
    }

    /// Consumer group `id` with its committed offsets and their lag; `None` when no such
    /// group is stored, or it is a share group.
    ///
    /// # Errors
    /// As [`Self::groups`].
    pub async fn group(&self, id: &str) -> Result<Option<GroupSummary>, LogError> {
        if !self.ctx.coordinator.store().exists(id).await? || self.is_share_group(id).await? {
            return Ok(None);
        }
        let high_watermarks = self.high_watermarks().await?;
        Ok(Some(self.summary(id, &high_watermarks).await?))
    }

    /// Whether group `id` is recorded as a share group.
    async fn is_share_group(&self, id: &str) -> Result<bool, LogError> {
        let share = self.ctx.share.is_listed(id).await;
        share.map_err(|e| LogError::Store(store_error(e)))
    }

    /// Every share group (KIP-932), sorted by id, with its members here and each started
    /// share-partition's figures.
    ///
    /// # Errors
    /// The store's error.
    pub async fn share_groups(&self) -> Result<Vec<ShareGroupFigures>, StoreError> {
        let share = &self.ctx.share;
        let mut out = Vec::new();
        for id in share.names().await.map_err(store_error)? {
            out.push(share.figures(&id).await.map_err(store_error)?);
        }
        Ok(out)
    }

    /// Share group `id` with its members here and each started share-partition's
    /// figures; `None` when it is not a share group.
    ///
    /// # Errors
    /// The store's error.
    pub async fn share_group(&self, id: &str) -> Result<Option<ShareGroupFigures>, StoreError> {
        let share = &self.ctx.share;
        if !share.is_listed(id).await.map_err(store_error)? {
            return Ok(None);
        }
        Ok(Some(share.figures(id).await.map_err(store_error)?))
    }

    /// This instance's live client connections, oldest first.
    pub fn clients(&self) -> Vec<KafkaClient> {
        self.ctx.clients.list()
    }

    /// Closes this instance's Kafka connection `id`; whether it was live.
    pub fn close_client(&self, id: u64) -> bool {
        self.ctx.clients.close(id)
    }

    /// Every ACL.
    ///
    /// # Errors
    /// The store's error.
    pub async fn acls(&self) -> Result<AclSet, StoreError> {
        self.ctx.acls.list().await
    }

    /// Every partition's high watermark, by topic and partition.
    async fn high_watermarks(&self) -> Result<HashMap<(String, i32), i64>, LogError> {
        let tx = self.ctx.db.begin()?;
        let mut out = HashMap::new();
        for topic in self.ctx.topics.all() {
            for p in &topic.partitions {
                let bounds = Log::new(&p.keys).bounds(&tx, true).await?;
                out.insert((topic.meta.name.clone(), p.index), bounds.high_watermark);
            }
        }
        Ok(out)
    }

    async fn summary(
        &self,
        id: &str,
        high_watermarks: &HashMap<(String, i32), i64>,
    ) -> Result<GroupSummary, LogError> {
        let store = self.ctx.coordinator.store();
        let stored = store.load(id).await?;
        let offsets = store
            .offsets(id, None)
            .await?
            .into_iter()
            .filter_map(|(topic, partition, committed)| {
                let committed = committed?.offset;
                let high_watermark = high_watermarks.get(&(topic.clone(), partition)).copied();
                Some(GroupOffset {
                    lag: high_watermark.map(|hw| lag(hw, committed)),
                    topic,
                    partition,
                    committed_offset: committed,
                    high_watermark,
                })
            })
            .collect::<Vec<_>>();
        let member = |id: &str, client_id: &str, client_host: &str| MemberView {
            id: id.to_owned(),
            client_id: client_id.to_owned(),
            client_host: client_host.to_owned(),
        };
        let (state, protocol_type, protocol, generation, members) = match stored {
            // Listed with only offsets (a consumer that assigns itself partitions): empty.
            None => ("Empty", String::new(), String::new(), 0, Vec::new()),
            Some(Stored::Classic(g)) => (
                match (g.members.is_empty(), g.stable) {
                    (true, _) => "Empty",
                    (false, true) => "Stable",
                    (false, false) => "PreparingRebalance",
                },
                g.protocol_type.unwrap_or_default(),
                g.protocol.unwrap_or_default(),
                g.generation,
                g.members
                    .iter()
                    .map(|m| member(&m.id, &m.client_id, &m.client_host))
                    .collect(),
            ),
            Some(Stored::Consumer(c)) => {
                let g = c.group(id);
                (
                    g.state(),
                    "consumer".to_owned(),
                    g.assignor().name().to_owned(),
                    g.epoch,
                    g.members
                        .values()
                        .map(|m| member(&m.id, &m.client_id, &m.client_host))
                        .collect(),
                )
            }
        };
        Ok(GroupSummary {
            id: id.to_owned(),
            state,
            protocol_type,
            protocol,
            generation,
            members,
            offsets,
        })
    }
}
