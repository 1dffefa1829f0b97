//! What the management API may change of the Kafka front, through the same operations its
//! Kafka requests use, so both are checked alike: topics are created as CreateTopics
//! creates them (this instance takes the new partitions' sequencer leases), deleted as
//! DeleteTopics deletes them, and their settings changed as IncrementalAlterConfigs
//! changes them (SET a value, DELETE one back to its default, in one transaction). A
//! group's offsets are reset as `kafka-consumer-groups --reset-offsets` resets them: the
//! targets are looked up as ListOffsets looks them up, and written as an OffsetCommit of
//! generation -1 (an admin client's), which the group's coordinator accepts only while the
//! group has no members and fences with the group's lease.

use super::{Acl, KafkaAdmin};
use crate::coordinator::groups::state::MemberRef;
use crate::coordinator::groups::store::CommittedOffset;
use crate::metadata::settings::TopicConfig;
use crate::metadata::topics::{Partition, TopicError};
use crate::partition::log::LogError;
use crate::partition::reads::{FoundOffset, OffsetQuery};
use kafka_protocol::ResponseError;
use std::collections::BTreeSet;

/// Where [`KafkaAdmin::reset_offsets`] moves a group's committed offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetTo {
    /// Each partition's log start offset.
    Earliest,
    /// Each partition's high watermark.
    Latest,
    /// This offset, kept within each partition's log start and high watermark (as Kafka
    /// keeps it).
    Offset(i64),
    /// The first offset whose record timestamp (ms since the epoch) is at least this; the
    /// high watermark where no record is that new.
    Timestamp(i64),
}

/// One partition's offset as a reset sets it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetOffset {
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset the group will consume next.
    pub offset: i64,
}

/// Why a reset of a group's offsets was refused.
#[derive(Debug, thiserror::Error)]
pub enum ResetError {
    /// The group has members (Kafka's `kafka-consumer-groups` refuses the same).
    #[error(
        "consumer group '{0}' has active members: its offsets can be reset only while it is empty (stop its consumers first)"
    )]
    ActiveMembers(String),
    /// A topic named does not exist.
    #[error("topic '{0}' does not exist")]
    UnknownTopic(String),
    /// No topic was named and the group has committed no offsets.
    #[error("consumer group '{0}' has no committed offsets: name the topics to reset")]
    NoTopics(String),
    /// Another instance coordinates the group.
    #[error(
        "consumer group '{0}' is coordinated by another Ferry instance: reset it through that instance's management API"
    )]
    NotCoordinator(String),
    /// The coordinator refused the commit for another reason.
    #[error("the coordinator of consumer group '{group}' refused the reset: {error}")]
    Refused {
        /// The group.
        group: String,
        /// Kafka's error.
        error: ResponseError,
    },
    /// The store failed.
    #[error(transparent)]
    Log(#[from] LogError),
}

/// An admin client's member: none (a commit with generation -1).
fn admin() -> MemberRef {
    MemberRef::new("", None)
}

/// What the coordinator's answer `code` to an admin commit means.
fn verdict(group: &str, code: i16) -> Result<(), ResetError> {
    match ResponseError::try_from_code(code) {
        None => Ok(()),
        Some(ResponseError::UnknownMemberId) => Err(ResetError::ActiveMembers(group.into())),
        Some(ResponseError::NotCoordinator) => Err(ResetError::NotCoordinator(group.into())),
        Some(error) => Err(ResetError::Refused {
            group: group.into(),
            error,
        }),
    }
}

impl KafkaAdmin {
    /// Creates topic `name` with `partitions` (`None`: `kafka.default_partitions`) and the
    /// settings `configs`, as CreateTopics does.
    ///
    /// # Errors
    /// [`TopicError`]: an invalid name, partition count or setting, an existing topic, or
    /// the store's failure.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: Option<i32>,
        configs: &[(String, String)],
    ) -> Result<(), TopicError> {
        let config =
            TopicConfig::parse(configs.iter().map(|(k, v)| (k.as_str(), Some(v.as_str()))))?;
        let partitions = partitions.unwrap_or(self.ctx.config.default_partitions);
        self.ctx.create_topic(name, partitions, config).await?;
        Ok(())
    }

    /// Deletes topic `name` with its logs, stages and producer state, as DeleteTopics does.
    ///
    /// # Errors
    /// [`TopicError::Unknown`] for a missing topic, or the store's failure.
    pub async fn delete_topic(&self, name: &str) -> Result<(), TopicError> {
        self.ctx.topics.delete(name).await
    }

    /// Changes the settings of topic `name` as IncrementalAlterConfigs does: each pair
    /// with a value is SET, each without DELETEd (back to its default); the others are kept.
    ///
    /// # Errors
    /// [`TopicError`]: a missing topic, an unknown setting or a bad value (nothing is
    /// changed then), or the store's failure.
    pub async fn alter_topic_config(
        &self,
        name: &str,
        changes: &[(String, Option<String>)],
    ) -> Result<(), TopicError> {
        let pairs = || changes.iter().map(|(k, v)| (k.as_str(), v.as_deref()));
        self.ctx
            .topics
            .set_config(name, |config| Ok(config.with(pairs())?), false)
            .await
    }

    /// Moves the committed offsets of `group` on every partition of `topics` (none named:
    /// the topics it has committed offsets for) to `to`, and returns the new offsets; with
    /// `dry_run`, only returns them. Refused unless the group has no members.
    ///
    /// # Errors
    /// [`ResetError`]: members present, a missing topic, another instance coordinating
    /// the group, or the store's failure.
    pub async fn reset_offsets(
        &self,
        group: &str,
        topics: &[String],
        to: ResetTo,
        dry_run: bool,
    ) -> Result<Vec<ResetOffset>, ResetError> {
        let topics = self.reset_topics(group, topics).await?;
        let mut offsets = Vec::new();
        for name in topics {
            let topic = self
                .ctx
                .topics
                .get(&name)
                .ok_or_else(|| ResetError::UnknownTopic(name.clone()))?;
            for p in &topic.partitions {
                offsets.push(ResetOffset {
                    topic: name.clone(),
                    partition: p.index,
                    offset: self.target(p, to).await?,
                });
            }
        }
        if dry_run {
            let code = self.ctx.coordinator.check_member(group, admin(), -1).await;
            verdict(group, code)?;
        } else {
            self.commit_offsets(group, &offsets).await?;
        }
        Ok(offsets)
    }

    /// Commits `offsets` for `group` as an admin client commits them (no member,
    /// generation -1, which the group's coordinator accepts only while the group is
    /// empty): a reset's last step, and a definitions import's.
    ///
    /// # Errors
    /// As [`Self::reset_offsets`].
    pub async fn commit_offsets(
        &self,
        group: &str,
        offsets: &[ResetOffset],
    ) -> Result<(), ResetError> {
        let commits: Vec<_> = offsets
            .iter()
            .map(|o| {
                let committed = CommittedOffset {
                    offset: o.offset,
                    leader_epoch: -1,
                    metadata: None,
                };
                (o.topic.clone(), o.partition, committed)
            })
            .collect();
        let code = self
            .ctx
            .coordinator
            .commit(group, admin(), -1, &commits)
            .await;
        verdict(group, code)
    }

    /// Adds `acls` (those already there are kept once), as CreateAcls does.
    ///
    /// # Errors
    /// The store's error.
    pub async fn add_acls(&self, acls: &[Acl]) -> Result<(), ferry_store::StoreError> {
        self.ctx.acls.create(acls).await
    }

    /// The topics a reset of `group` covers: `named`, or those it has committed offsets for.
    async fn reset_topics(&self, group: &str, named: &[String]) -> Result<Vec<String>, ResetError> {
        if !named.is_empty() {
            return Ok(named.to_vec());
        }
        let store = self.ctx.coordinator.store();
        let committed = store.offsets(group, None).await.map_err(LogError::from)?;
        let topics: BTreeSet<String> = committed.into_iter().map(|(t, _, _)| t).collect();
        if topics.is_empty() {
            return Err(ResetError::NoTopics(group.to_owned()));
        }
        Ok(topics.into_iter().collect())
    }

    /// The offset of partition `p` that `to` names, looked up as ListOffsets does.
    /// (A partition with no answer — none can fence a lookup without a leader epoch —
    /// counts as empty.)
    async fn target(&self, p: &Partition, to: ResetTo) -> Result<i64, LogError> {
        let lookup = |query| self.ctx.reads.offset(p, query, -1);
        let offset = |found: Result<Option<FoundOffset>, ResponseError>| {
            found.ok().flatten().map(|f| f.offset)
        };
        let latest = offset(lookup(OffsetQuery::Latest).await?).unwrap_or(0);
        Ok(match to {
            ResetTo::Earliest => offset(lookup(OffsetQuery::Earliest).await?).unwrap_or(0),
            ResetTo::Latest => latest,
            ResetTo::Offset(n) => {
                let earliest = offset(lookup(OffsetQuery::Earliest).await?).unwrap_or(0);
                n.clamp(earliest, latest.max(earliest))
            }
            ResetTo::Timestamp(at) => {
                offset(lookup(OffsetQuery::AtTime(at)).await?).unwrap_or(latest)
            }
        })
    }
}
