//! What a share group's figures are, for the management API and the metrics: per
//! share-partition its start offset, its end offset (what was fed into its stage so far),
//! the records in flight (acquired by a member and not acknowledged yet), waiting (fed and
//! not acquired) and archived (rejected, or past `share.delivery.count.limit`), and its lag
//! (the records not settled yet: those waiting or in flight, and those produced past the end
//! offset — Kafka's lag of KIP-1226, DescribeShareGroupOffsets v1's); and the group's members
//! with their assignments and its state.
//!
//! The groups are those recorded as share groups in the store (`(P,"k","g",group,"smeta")`,
//! written when a first member joins), and any with members here; the partitions those the
//! group has started (`(P,"k","g",group,"sp",…)`). The records' figures are the stage's
//! counters, read with snapshot reads, so a look neither conflicts with the members'
//! fetches and acknowledgements nor takes a group's coordination. Members and the state are
//! as this instance holds them (members live at the instance coordinating the group). A look
//! leaves what the instance knows of the group, and so what its Kafka requests answer, as
//! it was (an instance not serving a group answers ShareGroupDescribe `GROUP_ID_NOT_FOUND`).
//!
//! [`run`] publishes the figures every 5 s as `ferry_kafka_share_in_flight`,
//! `ferry_kafka_share_archived` and `ferry_kafka_share_lag`, by group, topic and partition.

use super::ShareGroups;
use super::partition::{ShareError, SharePartition};
use crate::coordinator::groups::lag::lag;
use crate::partition::log::Log;
use ferry_store::{RangeOption, StoreError};
use ferry_telemetry::kafka as m;
use std::collections::BTreeSet;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// How often the figures are published as metrics.
const INTERVAL: Duration = Duration::from_secs(5);

/// One share-partition's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharePartitionFigures {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The share-partition start offset: the lowest offset not yet settled (waiting or
    /// acquired), else the end offset.
    pub start_offset: i64,
    /// The share-partition end offset: the next offset to feed into its stage.
    pub end_offset: i64,
    /// The partition's high watermark.
    pub high_watermark: i64,
    /// Records acquired by a member and not yet acknowledged.
    pub in_flight: i64,
    /// Records fed and not acquired.
    pub waiting: i64,
    /// Records archived since the share-partition was made: rejected, or released (or
    /// their lock ended) past the delivery count limit.
    pub archived: i64,
    /// The records not settled yet: waiting, in flight, and produced past the end offset.
    pub lag: i64,
}

/// A member of a share group, as this instance holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMemberFigures {
    /// Its member id.
    pub id: String,
    /// Its epoch.
    pub epoch: i32,
    /// The client id it sent.
    pub client_id: String,
    /// The host it connected from.
    pub client_host: String,
    /// The topics it subscribes to, sorted.
    pub subscribed: Vec<String>,
    /// Its assigned partitions, by topic (sorted).
    pub assigned: Vec<(String, Vec<i32>)>,
}

/// A share group's figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareGroupFigures {
    /// Its id.
    pub id: String,
    /// `Stable` with members here, else `Empty`.
    pub state: &'static str,
    /// Its group epoch here (0 when it has had no member here).
    pub epoch: i32,
    /// Its members here, by id.
    pub members: Vec<ShareMemberFigures>,
    /// Its started share-partitions, by topic and partition.
    pub partitions: Vec<SharePartitionFigures>,
}

impl ShareGroupFigures {
    /// `figure` summed over the group's share-partitions.
    pub fn total(&self, figure: impl Fn(&SharePartitionFigures) -> i64) -> i64 {
        self.partitions.iter().map(figure).sum()
    }
}

/// A share-partition's error as the store's, for the API (its text names the cause).
pub(crate) fn store_error(e: ShareError) -> StoreError {
    match e {
        ShareError::Store(e) => e,
        other => StoreError::Storage(other.to_string()),
    }
}

impl ShareGroups {
    /// Every share group, sorted by id: those recorded in the store and those with members
    /// here.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn names(&self) -> Result<Vec<String>, ShareError> {
        let keys = self.inner.keys.clone();
        let stored = self
            .inner
            .db
            .run(|tx| {
                let keys = &keys;
                async move {
                    let (b, e) = keys.group_listings();
                    let mut out = Vec::new();
                    for kv in tx.get_range(&RangeOption::new(b, e), true).await? {
                        let Some(id) = keys.group_of(&kv.key) else {
                            continue;
                        };
                        if tx.get(&keys.group(&id).share_meta(), true).await?.is_some() {
                            out.push(id);
                        }
                    }
                    Ok::<_, StoreError>(out)
                }
            })
            .await?;
        let mut names: BTreeSet<String> = stored.into_iter().collect();
        names.extend(
            self.inner
                .groups
                .lock()
                .iter()
                .filter(|(_, g)| !g.members.members.is_empty())
                .map(|(id, _)| id.clone()),
        );
        Ok(names.into_iter().collect())
    }

    /// Whether `group` is one [`Self::names`] lists.
    ///
    /// # Errors
    /// The store's error.
    pub(crate) async fn is_listed(&self, group: &str) -> Result<bool, ShareError> {
        if self.has_members(group) {
            return Ok(true);
        }
        let key = self.inner.keys.group(group).share_meta();
        Ok(self.stored(&key).await?.is_some())
    }

    /// `group`'s figures (the caller checked that it is a share group).
    ///
    /// # Errors
    /// The store's or a share-partition's error.
    pub(crate) async fn figures(&self, group: &str) -> Result<ShareGroupFigures, ShareError> {
        let mut partitions = Vec::new();
        for (topic, index) in self.started(group).await? {
            if let Some(figures) = self.partition_figures(group, &topic, index).await? {
                partitions.push(figures);
            }
        }
        partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        let (epoch, members) = self.describe(group).unwrap_or_default();
        let members = members
            .into_iter()
            .map(|(id, m)| ShareMemberFigures {
                id,
                epoch: m.epoch,
                client_id: m.client_id,
                client_host: m.client_host,
                subscribed: m.subscribed.into_iter().collect(),
                assigned: m
                    .assigned
                    .into_iter()
                    .map(|(topic, partitions)| (topic, partitions.into_iter().collect()))
                    .collect(),
            })
            .collect();
        Ok(ShareGroupFigures {
            id: group.to_owned(),
            state: self.state(group).unwrap_or("Empty"),
            epoch,
            members,
            partitions,
        })
    }

    /// The figures of `group`'s share-partition of partition `index` of `topic` (also
    /// DescribeShareGroupOffsets' answer); `None` when it is not started (or no longer).
    ///
    /// # Errors
    /// The store's or the share-partition's error.
    pub(crate) async fn partition_figures(
        &self,
        group: &str,
        topic: &str,
        index: i32,
    ) -> Result<Option<SharePartitionFigures>, ShareError> {
        let exists = self
            .inner
            .topics
            .get(topic)
            .and_then(|t| t.partition(index).cloned());
        if exists.is_none() {
            // Deleted since the group's share-partitions were listed.
            return Ok(None);
        }
        let config = self.stored_config(group).await?;
        let sp = self.partition(group, topic, index, &config).await?;
        let Some(end_offset) = sp.end(&self.inner.db).await? else {
            return Ok(None);
        };
        // The start and the stage's depth first and the high watermark after them: a record
        // produced and settled in between makes the lag too high for one look, never
        // negative.
        let start_offset = self.start_of(group, &sp, end_offset).await?;
        let depth = sp.stage.depth().await?;
        let tx = self.inner.db.begin()?;
        let high_watermark = Log::new(&sp.log.keys)
            .bounds(&tx, true)
            .await?
            .high_watermark;
        Ok(Some(SharePartitionFigures {
            topic: topic.to_owned(),
            partition: index,
            start_offset,
            end_offset,
            high_watermark,
            in_flight: depth.in_flight,
            waiting: depth.ready,
            // Archived records are the stage's dead letters (`kafka-share-dead/…`).
            archived: depth.dead_lettered,
            lag: lag(high_watermark, end_offset) + depth.ready + depth.in_flight,
        }))
    }

    /// The start offset of `sp`, whose end offset is `end`: the lowest offset acquired
    /// through this instance or waiting, else the end (without making `group` known here).
    async fn start_of(
        &self,
        group: &str,
        sp: &SharePartition,
        end: i64,
    ) -> Result<i64, ShareError> {
        let acquired = self.inner.groups.lock().get(group).and_then(|g| {
            g.locks
                .get(&(sp.log.topic_id, sp.log.index))
                .and_then(|l| l.keys().next().copied())
        });
        let waiting = sp.first_waiting().await?;
        Ok([acquired, waiting]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(end))
    }

    /// Sets every share group's figures as metrics once.
    pub(crate) async fn publish(&self) -> Result<(), ShareError> {
        for group in self.names().await? {
            let figures = match self.figures(&group).await {
                Ok(figures) => figures,
                Err(e) => {
                    debug!(group, error = %e, "cannot measure a share group");
                    continue;
                }
            };
            for p in figures.partitions {
                let labels = [
                    (m::LABEL_GROUP, group.clone()),
                    (m::LABEL_TOPIC, p.topic),
                    (m::LABEL_PARTITION, p.partition.to_string()),
                ];
                metrics::gauge!(m::SHARE_IN_FLIGHT, &labels).set(p.in_flight as f64);
                metrics::gauge!(m::SHARE_ARCHIVED, &labels).set(p.archived as f64);
                metrics::gauge!(m::SHARE_LAG, &labels).set(p.lag as f64);
            }
        }
        Ok(())
    }
}

/// Publishes the share groups' figures every [`INTERVAL`] until `shutdown`.
pub(crate) async fn run(groups: ShareGroups, shutdown: CancellationToken) {
    loop {
        if let Err(e) = groups.publish().await {
            debug!(error = %e, "cannot measure the share groups");
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(INTERVAL) => {}
        }
    }
}
