//! Consumer groups in the store: each group's generation, protocol, leader and members
//! (written whenever they change, so a restarted Ferry resumes the group where it was),
//! and its committed offsets (written by OffsetCommit, one key per partition).
//!
//! Every write is fenced: it checks, in its own transaction, that this instance still holds
//! the group's coordinator lease ([`Fence`]), and writes nothing otherwise.
//!
//! A group on the consumer protocol (KIP-848, [`super::consumer`]) is stored under its own
//! keys (`cmeta`, `cm`); saving a group of one kind clears the other's, so an empty group
//! changes kind by being saved.
//!
//! Transactional offset commits (TxnOffsetCommit) are pending offsets under the group and
//! the producer, moved to `("o", …)` by the transaction's commit
//! ([`crate::coordinator::transactions`]).

use super::assignors::{Assignment, TopicId};
use super::consumer::{ConsumerGroup, ConsumerMember, MemberState, Subscription};
use super::state::{Group, Phase, StoredMember};
use crate::keys::KafkaKeys;
use crate::partition::lease::Lease;
use bytes::Bytes;
use ferry_stage::Liveness;
use ferry_stage::now_ms;
use ferry_store::{Database, RangeOption, StoreError, Transaction};
use foundationdb_tuple::{pack, unpack};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Format version of every value here.
const FORMAT: u16 = 1;

/// A committed offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommittedOffset {
    /// The next offset the group will consume.
    pub offset: i64,
    /// The leader epoch the consumer saw; -1 if unknown.
    pub leader_epoch: i32,
    /// The consumer's metadata string.
    pub metadata: Option<String>,
}

/// The coordinator lease a group's writes check: this instance's claim on the group.
#[derive(Debug, Clone)]
pub struct Fence {
    /// The lease's key.
    pub key: Vec<u8>,
    /// This instance's node and the epoch it claimed.
    pub holder: (i32, i64),
    /// The lease's term (a write renews it).
    pub liveness: Liveness,
}

impl Fence {
    /// Whether the lease is still held (a conflicting read: a takeover fails the
    /// transaction).
    async fn holds(&self, tx: &Transaction) -> Result<bool, StoreError> {
        Lease::hold(tx, &self.key, self.holder, self.liveness, now_ms()).await
    }
}

/// A group as persisted.
#[derive(Debug, Clone, Default)]
pub struct StoredGroup {
    /// Its generation.
    pub generation: i32,
    /// Its members' protocol type.
    pub protocol_type: Option<String>,
    /// The protocol of its generation.
    pub protocol: Option<String>,
    /// Its leader.
    pub leader: Option<String>,
    /// Whether it was stable when persisted.
    pub stable: bool,
    /// Its members.
    pub members: Vec<StoredMember>,
}

/// A group as stored: of the classic protocol or of the consumer protocol.
#[derive(Debug, Clone)]
pub enum Stored {
    /// JoinGroup/SyncGroup members.
    Classic(StoredGroup),
    /// ConsumerGroupHeartbeat members.
    Consumer(StoredConsumerGroup),
}

/// A consumer-protocol group as persisted.
#[derive(Debug, Clone, Default)]
pub struct StoredConsumerGroup {
    /// Group epoch and assignment epoch.
    pub epochs: (i32, i32),
    /// The subscribed topics the target assignment was computed from.
    pub topics: BTreeMap<String, (TopicId, i32)>,
    /// The members (their sessions start at loading) with their target assignments.
    pub members: Vec<(ConsumerMember, Assignment)>,
}

impl StoredConsumerGroup {
    /// The group stored (held to settings that matter only to a group's running task).
    pub fn group(self, id: &str) -> ConsumerGroup {
        ConsumerGroup::restore(id, CONSUMER_LISTING, self.epochs, self.topics, self.members)
    }
}

/// Which protocol a group's members speak (ListGroups v5's group type).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupKind {
    /// JoinGroup/SyncGroup.
    Classic,
    /// ConsumerGroupHeartbeat (KIP-848).
    Consumer,
    /// ShareGroupHeartbeat (KIP-932): its members live in [`crate::share`].
    Share,
}

impl GroupKind {
    /// The name ListGroups and DescribeGroups give it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Classic => "Classic",
            Self::Consumer => "Consumer",
            Self::Share => "Share",
        }
    }
}

/// A group as ListGroups lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedGroup {
    /// The group id.
    pub id: String,
    /// Its members' protocol type.
    pub protocol_type: Option<String>,
    /// Its state as last stored.
    pub state: &'static str,
    /// Its protocol.
    pub kind: GroupKind,
}

type MetaTuple = (
    u16,
    i64,
    Option<String>,
    Option<String>,
    Option<String>,
    bool,
);
/// A member as stored before static membership: no instance id.
type MemberTuple = (
    u16,
    String,
    String,
    u64,
    u64,
    Vec<(String, Vec<u8>)>,
    Vec<u8>,
);
/// A member: [`MemberTuple`] and its `group.instance.id` (null for a dynamic member).
type StaticMemberTuple = (
    u16,
    String,
    String,
    u64,
    u64,
    Vec<(String, Vec<u8>)>,
    Vec<u8>,
    Option<String>,
);

/// A consumer-protocol group's metadata: format, group epoch, assignment epoch, and the
/// subscribed topics (name, id, partitions).
type ConsumerMetaTuple = (u16, i64, i64, Vec<(String, Vec<u8>, i64)>);
/// An assignment: (topic id, partitions) per topic.
type AssignmentTuple = Vec<(Vec<u8>, Vec<i64>)>;
/// A consumer-protocol member: format, instance id, rack, client id, client host,
/// rebalance timeout, subscribed names, regex, server assignor, (epoch, previous epoch,
/// state), (assigned, revoking, target).
type ConsumerMemberTuple = (
    u16,
    Option<String>,
    Option<String>,
    String,
    String,
    u64,
    Vec<String>,
    Option<String>,
    Option<String>,
    (i64, i64, i64),
    (AssignmentTuple, AssignmentTuple, AssignmentTuple),
);

/// The groups of one store.
#[derive(Clone)]
pub struct GroupStore {
    /// The store.
    db: Database,
    /// The Kafka keyspace.
    keys: KafkaKeys,
}

impl GroupStore {
    /// The groups under `keys`.
    pub fn new(db: Database, keys: KafkaKeys) -> Self {
        Self { db, keys }
    }

    /// The store.
    pub fn db(&self) -> &Database {
        &self.db
    }

    /// The Kafka keyspace.
    pub fn keys(&self) -> &KafkaKeys {
        &self.keys
    }

    /// Loads group `id`, if it was ever persisted with members or an epoch.
    ///
    /// # Errors
    /// The store's error.
    pub async fn load(&self, id: &str) -> Result<Option<Stored>, StoreError> {
        let keys = self.keys.group(id);
        let tx = self.db.begin()?;
        if let Some(meta) = tx.get(&keys.consumer_meta(), true).await? {
            return load_consumer(&tx, &keys, &meta)
                .await
                .map(|g| Some(Stored::Consumer(g)));
        }
        let Some(meta) = tx.get(&keys.meta(), true).await? else {
            return Ok(None);
        };
        let mut group = decode_meta(&meta)?;
        let (b, e) = keys.members();
        for kv in tx.get_range(&RangeOption::new(b, e), true).await? {
            let id = keys
                .member_of(&kv.key)
                .ok_or_else(|| StoreError::Storage("undecodable group member key".into()))?;
            group.members.push(decode_member(id, &kv.value)?);
        }
        Ok(Some(Stored::Classic(group)))
    }

    /// Persists `group`'s generation, protocol, leader and members, if `fence` still
    /// holds (false: nothing written).
    ///
    /// # Errors
    /// The store's error.
    pub async fn save(&self, group: &Group, fence: &Fence) -> Result<bool, StoreError> {
        let keys = self.keys.group(&group.id);
        let meta = pack(&(
            FORMAT,
            i64::from(group.generation),
            group.protocol_type.clone(),
            group.protocol.clone(),
            group.leader.clone(),
            group.phase == Phase::Stable,
        ));
        let members: Vec<(Vec<u8>, Vec<u8>)> = group
            .members
            .values()
            .map(|m| {
                let protocols: Vec<(String, Vec<u8>)> = m
                    .protocols
                    .iter()
                    .map(|(n, b)| (n.clone(), b.to_vec()))
                    .collect();
                let value = pack(&(
                    FORMAT,
                    m.client_id.as_str(),
                    m.client_host.as_str(),
                    m.session_timeout.as_millis() as u64,
                    m.rebalance_timeout.as_millis() as u64,
                    protocols,
                    m.assignment.to_vec(),
                    m.instance_id.as_deref(),
                ));
                (keys.member(&m.id), value)
            })
            .collect();
        let meta = (keys.meta(), meta);
        self.replace(&group.id, fence, meta, keys.consumer_meta(), members)
            .await
    }

    /// Persists consumer-protocol `group`'s epochs, subscribed topics and members, if
    /// `fence` still holds (false: nothing written).
    ///
    /// # Errors
    /// The store's error.
    pub async fn save_consumer(
        &self,
        group: &ConsumerGroup,
        fence: &Fence,
    ) -> Result<bool, StoreError> {
        let keys = self.keys.group(&group.id);
        let topics: Vec<(String, Vec<u8>, i64)> = group
            .topics
            .iter()
            .map(|(name, (id, n))| (name.clone(), id.to_vec(), i64::from(*n)))
            .collect();
        let meta = pack(&(
            FORMAT,
            i64::from(group.epoch),
            i64::from(group.assignment_epoch),
            topics,
        ));
        let members: Vec<(Vec<u8>, Vec<u8>)> = group
            .members
            .values()
            .map(|m| {
                let target = group.target.get(&m.id).map(encode_assignment);
                (
                    keys.consumer_member(&m.id),
                    encode_consumer_member(m, target),
                )
            })
            .collect();
        let meta = (keys.consumer_meta(), meta);
        self.replace(&group.id, fence, meta, keys.meta(), members)
            .await
    }

    /// Replaces group `id`'s persisted state: its metadata (key, value), clearing the other
    /// kind's metadata key `stale_meta`, and its members (every member of either kind
    /// goes first), if `fence` still holds (false: nothing written).
    async fn replace(
        &self,
        id: &str,
        fence: &Fence,
        meta: (Vec<u8>, Vec<u8>),
        stale_meta: Vec<u8>,
        members: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Result<bool, StoreError> {
        let keys = self.keys.group(id);
        let listing = self.keys.group_listing(id);
        self.db
            .run(|tx| {
                let (keys, meta, stale_meta, members, listing) =
                    (&keys, &meta, &stale_meta, &members, &listing);
                async move {
                    if !fence.holds(&tx).await? {
                        return Ok(false);
                    }
                    for (b, e) in [keys.members(), keys.consumer_members()] {
                        tx.clear_range(&b, &e);
                    }
                    tx.clear(stale_meta);
                    for (k, v) in members {
                        tx.set(k, v);
                    }
                    tx.set(&meta.0, &meta.1);
                    tx.set(listing, b"");
                    Ok::<_, StoreError>(true)
                }
            })
            .await
    }

    /// Removes group `id` with its committed offsets, if `fence` still holds (false:
    /// nothing removed).
    ///
    /// # Errors
    /// The store's error.
    pub async fn delete(&self, id: &str, fence: &Fence) -> Result<bool, StoreError> {
        let (b, e) = self.keys.group(id).all();
        let listing = self.keys.group_listing(id);
        self.db
            .run(|tx| {
                let (b, e, listing) = (&b, &e, &listing);
                async move {
                    if !fence.holds(&tx).await? {
                        return Ok(false);
                    }
                    tx.clear_range(b, e);
                    tx.clear(listing);
                    Ok::<_, StoreError>(true)
                }
            })
            .await
    }

    /// Removes group `id`'s committed offsets of `partitions` (topic, partition), if
    /// `fence` still holds (false: nothing removed).
    ///
    /// # Errors
    /// The store's error.
    pub async fn delete_offsets(
        &self,
        id: &str,
        partitions: &[(String, i32)],
        fence: &Fence,
    ) -> Result<bool, StoreError> {
        let keys = self.keys.group(id);
        self.db
            .run(|tx| {
                let keys = &keys;
                async move {
                    if !fence.holds(&tx).await? {
                        return Ok(false);
                    }
                    for (topic, partition) in partitions {
                        tx.clear(&keys.offset(topic, *partition));
                    }
                    Ok::<_, StoreError>(true)
                }
            })
            .await
    }

    /// Whether group `id` exists (was persisted or committed offsets).
    ///
    /// # Errors
    /// The store's error.
    pub async fn exists(&self, id: &str) -> Result<bool, StoreError> {
        let tx = self.db.begin()?;
        Ok(tx.get(&self.keys.group_listing(id), true).await?.is_some())
    }

    /// Every group, sorted by id, with its protocol type and its state as last stored: as
    /// a restart restores it — `Empty` without members, else `Stable` when it was stable,
    /// else `PreparingRebalance`.
    ///
    /// # Errors
    /// The store's error.
    pub async fn list(&self) -> Result<Vec<ListedGroup>, StoreError> {
        let tx = self.db.begin()?;
        let (b, e) = self.keys.group_listings();
        let mut out = Vec::new();
        for kv in tx.get_range(&RangeOption::new(b, e), true).await? {
            let Some(id) = self.keys.group_of(&kv.key) else {
                continue;
            };
            let keys = self.keys.group(&id);
            if tx.get(&keys.share_meta(), true).await?.is_some() {
                out.push(ListedGroup {
                    id,
                    protocol_type: Some("share".to_owned()),
                    state: "Empty",
                    kind: GroupKind::Share,
                });
                continue;
            }
            if let Some(meta) = tx.get(&keys.consumer_meta(), true).await? {
                let state = load_consumer(&tx, &keys, &meta).await?.group(&id).state();
                out.push(ListedGroup {
                    id,
                    protocol_type: Some("consumer".to_owned()),
                    state,
                    kind: GroupKind::Consumer,
                });
                continue;
            }
            let (protocol_type, stable) = match tx.get(&keys.meta(), true).await? {
                Some(v) => unpack::<MetaTuple>(&v)
                    .ok()
                    .map_or((None, false), |(_, _, t, .., stable)| (t, stable)),
                None => (None, false),
            };
            let (b, e) = keys.members();
            let has_members = !tx
                .get_range(&RangeOption::new(b, e).limit(1), true)
                .await?
                .is_empty();
            let state = match (has_members, stable) {
                (false, _) => Phase::Empty,
                (true, true) => Phase::Stable,
                (true, false) => Phase::PreparingRebalance,
            };
            out.push(ListedGroup {
                id,
                protocol_type,
                state: state.as_str(),
                kind: GroupKind::Classic,
            });
        }
        Ok(out)
    }

    /// Writes committed offsets of group `id` in one transaction, if `fence` still holds
    /// (false: nothing written).
    ///
    /// # Errors
    /// The store's error.
    pub async fn commit(
        &self,
        id: &str,
        offsets: &[(String, i32, CommittedOffset)],
        fence: &Fence,
    ) -> Result<bool, StoreError> {
        let keys = self.keys.group(id);
        let listing = self.keys.group_listing(id);
        let now = now_ms();
        self.db
            .run(|tx| {
                let (keys, listing) = (&keys, &listing);
                async move {
                    if !fence.holds(&tx).await? {
                        return Ok(false);
                    }
                    for (topic, partition, c) in offsets {
                        tx.set(&keys.offset(topic, *partition), encode_offset(c, now));
                    }
                    tx.set(listing, b"");
                    Ok::<_, StoreError>(true)
                }
            })
            .await
    }

    /// Committed offsets of group `id`: of `wanted` (topic, partitions) or of everything.
    ///
    /// # Errors
    /// The store's error.
    pub async fn offsets(
        &self,
        id: &str,
        wanted: Option<&[(String, Vec<i32>)]>,
    ) -> Result<Vec<(String, i32, Option<CommittedOffset>)>, StoreError> {
        let keys = self.keys.group(id);
        let tx = self.db.begin()?;
        match wanted {
            Some(wanted) => {
                let mut out = Vec::new();
                for (topic, partitions) in wanted {
                    for &p in partitions {
                        let v = tx.get(&keys.offset(topic, p), true).await?;
                        out.push((
                            topic.clone(),
                            p,
                            v.as_deref().map(decode_offset).transpose()?,
                        ));
                    }
                }
                Ok(out)
            }
            None => all_offsets(&tx, &keys).await,
        }
    }
}

/// What a group read outside its task is restored with (only its state is read).
const CONSUMER_LISTING: super::consumer::ConsumerSettings = super::consumer::ConsumerSettings {
    session_timeout: Duration::ZERO,
    heartbeat_interval: Duration::ZERO,
};

/// Reads a consumer-protocol group whose metadata is `meta`.
async fn load_consumer(
    tx: &Transaction,
    keys: &crate::keys::GroupKeys,
    meta: &[u8],
) -> Result<StoredConsumerGroup, StoreError> {
    let (_, epoch, assignment_epoch, topics) =
        unpack::<ConsumerMetaTuple>(meta).map_err(|e| corrupt("consumer group metadata", &e))?;
    let topics = topics
        .into_iter()
        .map(|(name, id, n)| Ok((name, (topic_id(&id)?, narrow(n)))))
        .collect::<Result<_, StoreError>>()?;
    let (b, e) = keys.consumer_members();
    let now = Instant::now();
    let mut members = Vec::new();
    for kv in tx.get_range(&RangeOption::new(b, e), true).await? {
        let id = keys
            .member_of(&kv.key)
            .ok_or_else(|| StoreError::Storage("undecodable group member key".into()))?;
        members.push(decode_consumer_member(id, &kv.value, now)?);
    }
    Ok(StoredConsumerGroup {
        epochs: (narrow(epoch), narrow(assignment_epoch)),
        topics,
        members,
    })
}

fn encode_assignment(a: &Assignment) -> AssignmentTuple {
    a.iter()
        .map(|(t, ps)| (t.to_vec(), ps.iter().map(|&p| i64::from(p)).collect()))
        .collect()
}

fn decode_assignment(a: AssignmentTuple) -> Result<Assignment, StoreError> {
    a.into_iter()
        .map(|(t, ps)| {
            Ok((
                topic_id(&t)?,
                ps.into_iter().map(narrow).collect::<BTreeSet<i32>>(),
            ))
        })
        .collect()
}

fn topic_id(bytes: &[u8]) -> Result<TopicId, StoreError> {
    TopicId::try_from(bytes)
        .map_err(|_| StoreError::Storage("undecodable topic id in a group".into()))
}

fn narrow(v: i64) -> i32 {
    i32::try_from(v).unwrap_or(-1)
}

/// The stored value of consumer-protocol member `m` with its target assignment.
fn encode_consumer_member(m: &ConsumerMember, target: Option<AssignmentTuple>) -> Vec<u8> {
    pack(&(
        FORMAT,
        m.instance_id.clone(),
        m.rack_id.clone(),
        m.client_id.as_str(),
        m.client_host.as_str(),
        m.rebalance_timeout.as_millis() as u64,
        m.subscription
            .names
            .iter()
            .cloned()
            .collect::<Vec<String>>(),
        m.subscription.regex.clone(),
        m.server_assignor.clone(),
        (
            i64::from(m.epoch),
            i64::from(m.previous_epoch),
            i64::from(m.state.code()),
        ),
        (
            encode_assignment(&m.assigned),
            encode_assignment(&m.revoking),
            target.unwrap_or_default(),
        ),
    ))
}

/// Decodes the stored value of consumer-protocol member `id`, its session starting `now`.
///
/// # Errors
/// [`StoreError::Storage`] for bytes of another layout.
fn decode_consumer_member(
    id: String,
    bytes: &[u8],
    now: Instant,
) -> Result<(ConsumerMember, Assignment), StoreError> {
    let (
        _,
        instance_id,
        rack_id,
        client_id,
        client_host,
        rebalance,
        names,
        regex,
        assignor,
        (epoch, previous, state),
        (assigned, revoking, target),
    ) = unpack::<ConsumerMemberTuple>(bytes).map_err(|e| corrupt("consumer group member", &e))?;
    let subscription = Subscription::new(names.into_iter().collect(), regex)
        .map_err(|e| corrupt("consumer group member's pattern", &e))?;
    let state = u8::try_from(state)
        .ok()
        .and_then(MemberState::from_code)
        .ok_or_else(|| StoreError::Storage("undecodable consumer member state".into()))?;
    let member = ConsumerMember::restore(
        id,
        instance_id,
        rack_id,
        (client_id, client_host),
        Duration::from_millis(rebalance),
        subscription,
        assignor,
        (narrow(epoch), narrow(previous)),
        state,
        decode_assignment(assigned)?,
        decode_assignment(revoking)?,
        now,
    );
    Ok((member, decode_assignment(target)?))
}

/// Every committed offset under a group's keys.
async fn all_offsets(
    tx: &Transaction,
    keys: &crate::keys::GroupKeys,
) -> Result<Vec<(String, i32, Option<CommittedOffset>)>, StoreError> {
    let (b, e) = keys.offsets();
    let mut out = Vec::new();
    for kv in tx.get_range(&RangeOption::new(b, e), true).await? {
        if let Some((topic, p)) = keys.offset_of(&kv.key) {
            out.push((topic, p, Some(decode_offset(&kv.value)?)));
        }
    }
    Ok(out)
}

/// The stored value of an offset committed at `now`.
pub fn encode_offset(offset: &CommittedOffset, now: u64) -> Vec<u8> {
    pack(&(
        FORMAT,
        offset.offset,
        i64::from(offset.leader_epoch),
        offset.metadata.clone(),
        now,
    ))
}

/// Decodes an offset [`encode_offset`] stored.
///
/// # Errors
/// [`StoreError::Storage`] for bytes of another layout.
pub fn decode_offset(bytes: &[u8]) -> Result<CommittedOffset, StoreError> {
    let (_, offset, leader_epoch, metadata, _) =
        unpack::<(u16, i64, i64, Option<String>, u64)>(bytes)
            .map_err(|e| corrupt("committed offset", &e))?;
    Ok(CommittedOffset {
        offset,
        leader_epoch: i32::try_from(leader_epoch).unwrap_or(-1),
        metadata,
    })
}

/// Decodes a group's stored metadata: a [`StoredGroup`] without its members, which are
/// stored one key each ([`decode_member`]).
///
/// # Errors
/// [`StoreError::Storage`] for bytes of another layout.
pub fn decode_meta(bytes: &[u8]) -> Result<StoredGroup, StoreError> {
    let (_, generation, protocol_type, protocol, leader, stable) =
        unpack::<MetaTuple>(bytes).map_err(|e| corrupt("group metadata", &e))?;
    Ok(StoredGroup {
        generation: i32::try_from(generation).unwrap_or(0),
        protocol_type,
        protocol,
        leader,
        stable,
        members: Vec::new(),
    })
}

/// Decodes the stored value of member `id` of a group.
///
/// # Errors
/// [`StoreError::Storage`] for bytes of another layout.
pub fn decode_member(id: String, bytes: &[u8]) -> Result<StoredMember, StoreError> {
    let (_, client_id, client_host, session, rebalance, protocols, assignment, instance_id) =
        match unpack::<StaticMemberTuple>(bytes) {
            Ok(member) => member,
            Err(_) => {
                let (f, c, h, s, r, p, a) =
                    unpack::<MemberTuple>(bytes).map_err(|e| corrupt("group member", &e))?;
                (f, c, h, s, r, p, a, None)
            }
        };
    Ok(StoredMember {
        id,
        instance_id,
        client_id,
        client_host,
        session_timeout: Duration::from_millis(session),
        rebalance_timeout: Duration::from_millis(rebalance),
        protocols: protocols
            .into_iter()
            .map(|(name, m)| (name, Bytes::from(m)))
            .collect(),
        assignment: Bytes::from(assignment),
    })
}

fn corrupt(what: &str, e: &impl std::fmt::Debug) -> StoreError {
    StoreError::Storage(format!("undecodable {what} in the store: {e:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_stored_before_static_membership_reads_back_as_dynamic() {
        let legacy = pack(&(
            FORMAT,
            "client",
            "/127.0.0.1",
            30_000u64,
            60_000u64,
            vec![("range".to_owned(), b"meta".to_vec())],
            b"assignment".to_vec(),
        ));
        let member = decode_member("m-1".into(), &legacy).unwrap();
        assert_eq!(
            (member.instance_id, member.client_id.as_str()),
            (None, "client")
        );
        let current = pack(&(
            FORMAT,
            "client",
            "/127.0.0.1",
            30_000u64,
            60_000u64,
            vec![("range".to_owned(), b"meta".to_vec())],
            b"assignment".to_vec(),
            Some("instance-1"),
        ));
        let member = decode_member("m-1".into(), &current).unwrap();
        assert_eq!(member.instance_id.as_deref(), Some("instance-1"));
        assert_eq!(member.assignment, Bytes::from_static(b"assignment"));
    }

    #[test]
    fn a_consumer_protocol_member_reads_back_as_stored() {
        let now = Instant::now();
        let assignment = |ps: &[i32]| Assignment::from([([9; 16], ps.iter().copied().collect())]);
        let subscription =
            Subscription::new(["a".to_owned()].into(), Some("^b.*".to_owned())).unwrap();
        let member = ConsumerMember::restore(
            "m-1".into(),
            Some("instance".into()),
            Some("rack".into()),
            ("client".into(), "/127.0.0.1".into()),
            Duration::from_secs(300),
            subscription,
            Some("range".into()),
            (7, 6),
            MemberState::UnrevokedPartitions,
            assignment(&[0, 1]),
            assignment(&[2]),
            now,
        );
        let bytes = encode_consumer_member(&member, Some(encode_assignment(&assignment(&[0]))));
        let (back, target) = decode_consumer_member("m-1".into(), &bytes, now).unwrap();
        assert_eq!(target, assignment(&[0]));
        assert_eq!(
            (
                back.instance_id.as_deref(),
                back.rack_id.as_deref(),
                back.server_assignor.as_deref()
            ),
            (Some("instance"), Some("rack"), Some("range"))
        );
        assert_eq!(
            (back.epoch, back.previous_epoch, back.state),
            (7, 6, member.state)
        );
        assert_eq!(
            (back.assigned, back.revoking),
            (member.assigned, member.revoking)
        );
        assert!(back.subscription == member.subscription && back.subscription.takes("bee"));
        assert_eq!(back.rebalance_timeout, Duration::from_secs(300));
    }
}
