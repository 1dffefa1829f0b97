//! The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat) as a pure state machine:
//! no I/O, no clocks (every call takes `now`), as [`super::state`] is for the classic one.
//!
//! The coordinator owns the assignment. Every change of membership, of a member's
//! subscription or of the subscribed topics' partitions bumps the **group epoch**; the
//! group's [`ServerAssignor`] then computes a **target assignment** for that epoch. Each
//! member moves towards its target on its own heartbeats, never taking a partition another
//! member still holds (Kafka's `CurrentAssignmentBuilder`):
//! - a member that must give partitions up keeps its epoch and is sent its assignment
//!   without them (`UNREVOKED_PARTITIONS`); once a heartbeat's owned partitions show them
//!   released, it moves on. One that does not within its rebalance timeout is removed;
//! - it then takes the target epoch with whatever of its target is free; partitions still
//!   held by others come on a later heartbeat (`UNRELEASED_PARTITIONS`), else it is
//!   `STABLE`.
//!
//! A member's epoch fences its requests: a heartbeat with a newer epoch than the member's,
//! or an older one that is not the epoch just left with nothing beyond the current
//! assignment owned (a lost response), is `FENCED_MEMBER_EPOCH`; an offset commit with
//! another epoch is `STALE_MEMBER_EPOCH`. A heartbeat to a group that does not exist
//! (restarted from an empty store, say) is `UNKNOWN_MEMBER_ID`, which makes the client
//! rejoin; Kafka answers `GROUP_ID_NOT_FOUND`, on which librdkafka only waits. Members name their own ids (KIP-1082), join with
//! epoch 0, leave with -1; a **static member** (`group.instance.id`) leaves for a while
//! with -2, keeping its partitions for its session timeout, and a member joining with its
//! instance id then takes its place and its assignment without a new group epoch.

use super::assignors::{Assignment, ServerAssignor, Subscriber, TopicId};
use kafka_protocol::ResponseError;
use regex::Regex;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// The member epoch a member joins (or rejoins) with.
pub(crate) const JOIN_EPOCH: i32 = 0;
/// The member epoch a member leaves with.
pub(crate) const LEAVE_EPOCH: i32 = -1;
/// The member epoch a static member leaves with for a while, keeping its partitions.
pub(crate) const STATIC_LEAVE_EPOCH: i32 = -2;

/// What the coordinator imposes on every member of a consumer group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerSettings {
    /// How long a member may go without a heartbeat (`group.consumer.session.timeout.ms`).
    pub session_timeout: Duration,
    /// How often members are to heartbeat (`group.consumer.heartbeat.interval.ms`).
    pub heartbeat_interval: Duration,
}

/// The topics a group's members may be assigned: the seam to the topic list.
pub trait TopicCatalog {
    /// The id and partition count of topic `name`, if it exists.
    fn topic(&self, name: &str) -> Option<(TopicId, i32)>;
    /// Every topic's name (what subscriptions by regular expression match).
    fn names(&self) -> Vec<String>;
}

/// Where a member is in moving to its target assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    /// It has its target assignment (of its epoch).
    Stable,
    /// It must release partitions before it moves to the next epoch.
    UnrevokedPartitions,
    /// It is at the target epoch, waiting for partitions others still hold.
    UnreleasedPartitions,
}

impl MemberState {
    /// Its number in the store.
    pub fn code(self) -> u8 {
        match self {
            Self::Stable => 0,
            Self::UnrevokedPartitions => 1,
            Self::UnreleasedPartitions => 2,
        }
    }

    /// The state stored as `code`.
    pub fn from_code(code: u8) -> Option<Self> {
        [
            Self::Stable,
            Self::UnrevokedPartitions,
            Self::UnreleasedPartitions,
        ]
        .into_iter()
        .find(|s| s.code() == code)
    }
}

/// What a member subscribes to.
#[derive(Debug, Clone, Default)]
pub struct Subscription {
    /// Topics by name.
    pub names: BTreeSet<String>,
    /// Topics whose whole name matches this regular expression (`None`: no pattern).
    pub regex: Option<String>,
    /// The compiled pattern of `regex`.
    pattern: Option<Regex>,
}

impl PartialEq for Subscription {
    fn eq(&self, other: &Self) -> bool {
        self.names == other.names && self.regex == other.regex
    }
}

impl Subscription {
    /// A subscription to `names` and to the topics matching `regex`.
    ///
    /// # Errors
    /// `regex` does not compile.
    pub fn new(names: BTreeSet<String>, regex: Option<String>) -> Result<Self, regex::Error> {
        let regex = regex.filter(|r| !r.is_empty());
        let pattern = regex
            .as_deref()
            .map(|r| Regex::new(&format!("^(?:{r})$")))
            .transpose()?;
        Ok(Self {
            names,
            regex,
            pattern,
        })
    }

    /// Whether it takes topic `name`.
    pub fn takes(&self, name: &str) -> bool {
        self.names.contains(name) || self.pattern.as_ref().is_some_and(|p| p.is_match(name))
    }
}

/// One member.
#[derive(Debug, Clone)]
pub struct ConsumerMember {
    /// Its id (the client's).
    pub id: String,
    /// Its `group.instance.id`, when it is a static member.
    pub instance_id: Option<String>,
    /// Its `client.rack`.
    pub rack_id: Option<String>,
    /// The client id it connected with.
    pub client_id: String,
    /// The address it connected from.
    pub client_host: String,
    /// How long it has to release partitions.
    pub rebalance_timeout: Duration,
    /// What it subscribes to.
    pub subscription: Subscription,
    /// The server assignor it asked for.
    pub server_assignor: Option<String>,
    /// Its epoch.
    pub epoch: i32,
    /// The epoch before (a heartbeat with it is still accepted after a lost response).
    pub previous_epoch: i32,
    /// Where it is in its reconciliation.
    pub state: MemberState,
    /// The partitions it has.
    pub assigned: Assignment,
    /// The partitions it is to release.
    pub revoking: Assignment,
    /// Its last heartbeat.
    last_seen: Instant,
    /// When it is removed unless it has released `revoking`.
    revocation_deadline: Option<Instant>,
}

impl ConsumerMember {
    /// A member as stored, its session starting `now` (its revocation, if any, too).
    #[allow(clippy::too_many_arguments)]
    pub fn restore(
        id: String,
        instance_id: Option<String>,
        rack_id: Option<String>,
        client: (String, String),
        rebalance_timeout: Duration,
        subscription: Subscription,
        server_assignor: Option<String>,
        epochs: (i32, i32),
        state: MemberState,
        assigned: Assignment,
        revoking: Assignment,
        now: Instant,
    ) -> Self {
        let revocation_deadline =
            (state == MemberState::UnrevokedPartitions).then(|| now + rebalance_timeout);
        Self {
            id,
            instance_id,
            rack_id,
            client_id: client.0,
            client_host: client.1,
            rebalance_timeout,
            subscription,
            server_assignor,
            epoch: epochs.0,
            previous_epoch: epochs.1,
            state,
            assigned,
            revoking,
            last_seen: now,
            revocation_deadline,
        }
    }

    /// Moves it to `epoch` (remembering the one it leaves).
    fn enter_epoch(&mut self, epoch: i32) {
        if epoch != self.epoch {
            self.previous_epoch = self.epoch;
            self.epoch = epoch;
        }
    }
}

/// A ConsumerGroupHeartbeat, decoded.
#[derive(Debug, Clone, Default)]
pub struct ConsumerHeartbeat {
    /// The member id (the client names it).
    pub member_id: String,
    /// The member epoch: 0 joins, -1 leaves, -2 leaves for a while (static), else the
    /// member's current one.
    pub member_epoch: i32,
    /// `group.instance.id`.
    pub instance_id: Option<String>,
    /// `client.rack` (`None`: unchanged).
    pub rack_id: Option<String>,
    /// -1: unchanged.
    pub rebalance_timeout_ms: i32,
    /// `None`: unchanged.
    pub subscribed_topic_names: Option<Vec<String>>,
    /// `None`: unchanged.
    pub subscribed_topic_regex: Option<String>,
    /// `None`: unchanged.
    pub server_assignor: Option<String>,
    /// The partitions the client owns (`None`: unchanged).
    pub owned: Option<Assignment>,
    /// The client id.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    /// 0 or a Kafka error code.
    pub error: i16,
    /// Why, with an error.
    pub message: Option<String>,
    /// The member id.
    pub member_id: String,
    /// The member's epoch.
    pub member_epoch: i32,
    /// How often to heartbeat.
    pub heartbeat_interval: Duration,
    /// The member's assignment, when the request was full or the assignment changed.
    pub assignment: Option<Assignment>,
}

impl HeartbeatAnswer {
    /// The answer refusing `req` with `e` (and why), telling the client to heartbeat every
    /// `interval` (librdkafka arms its heartbeat timer only with an interval above 0).
    pub fn refusal(
        req: ConsumerHeartbeat,
        e: ResponseError,
        message: Option<String>,
        interval: Duration,
    ) -> Self {
        Self {
            error: e.code(),
            message,
            member_id: req.member_id,
            member_epoch: req.member_epoch,
            heartbeat_interval: interval,
            assignment: None,
        }
    }
}

/// A member as ConsumerGroupDescribe shows it.
#[derive(Debug, Clone)]
pub struct ConsumerMemberView {
    /// The member.
    pub member: ConsumerMember,
    /// Its target assignment.
    pub target: Assignment,
}

/// A group as ConsumerGroupDescribe shows it.
#[derive(Debug, Clone)]
pub struct ConsumerGroupView {
    /// `Empty`, `Assigning`, `Reconciling` or `Stable`.
    pub state: &'static str,
    /// The group epoch.
    pub epoch: i32,
    /// The target assignment's epoch.
    pub assignment_epoch: i32,
    /// The assignor the target comes from.
    pub assignor: ServerAssignor,
    /// Its members.
    pub members: Vec<ConsumerMemberView>,
}

/// A consumer group on the consumer protocol.
#[derive(Debug, Clone)]
pub struct ConsumerGroup {
    /// The group id.
    pub id: String,
    /// The group epoch.
    pub epoch: i32,
    /// The epoch of `target`.
    pub assignment_epoch: i32,
    /// The members, by id.
    pub members: BTreeMap<String, ConsumerMember>,
    /// Each member's target assignment.
    pub target: BTreeMap<String, Assignment>,
    /// The subscribed topics as the target saw them: name → (id, partition count).
    pub topics: BTreeMap<String, (TopicId, i32)>,
    /// The members' regular expressions that are resolved against the topic list. As in
    /// Kafka, which resolves them in the background, a new one is only after the heartbeat
    /// that brought it: its topics come in a later heartbeat than the literal ones
    /// (librdkafka's tests count on that order).
    resolved: BTreeSet<String>,
    /// What members are held to.
    settings: ConsumerSettings,
    /// Whether something worth persisting changed.
    dirty: bool,
    /// Group epochs begun since the last [`ConsumerGroup::take_rebalances`].
    rebalances: u64,
}

/// A refusal: error and message.
type Refusal = (ResponseError, String);

impl ConsumerGroup {
    /// A new, empty group.
    pub fn new(id: &str, settings: ConsumerSettings) -> Self {
        Self {
            id: id.to_owned(),
            epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            topics: BTreeMap::new(),
            resolved: BTreeSet::new(),
            settings,
            dirty: false,
            rebalances: 0,
        }
    }

    /// A group as stored.
    pub fn restore(
        id: &str,
        settings: ConsumerSettings,
        epochs: (i32, i32),
        topics: BTreeMap<String, (TopicId, i32)>,
        members: Vec<(ConsumerMember, Assignment)>,
    ) -> Self {
        let mut group = Self::new(id, settings);
        (group.epoch, group.assignment_epoch) = epochs;
        group.topics = topics;
        for (member, target) in members {
            group.target.insert(member.id.clone(), target);
            group.resolved.extend(member.subscription.regex.clone());
            group.members.insert(member.id.clone(), member);
        }
        group
    }

    /// What members are held to.
    pub fn settings(&self) -> ConsumerSettings {
        self.settings
    }

    /// Whether something worth persisting changed since the last call.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// Group epochs begun since the last call.
    pub fn take_rebalances(&mut self) -> u64 {
        std::mem::take(&mut self.rebalances)
    }

    /// The group's state as Kafka names it.
    pub fn state(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.epoch > self.assignment_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// The assignor the group uses: the one most members ask for, else uniform.
    pub fn assignor(&self) -> ServerAssignor {
        let asked = |a: ServerAssignor| {
            self.members
                .values()
                .filter(|m| m.server_assignor.as_deref() == Some(a.name()))
                .count()
        };
        ServerAssignor::ALL
            .into_iter()
            .rev()
            .max_by_key(|&a| asked(a))
            .filter(|&a| asked(a) > 0)
            .unwrap_or(ServerAssignor::Uniform)
    }

    /// The group as ConsumerGroupDescribe shows it.
    pub fn view(&self) -> ConsumerGroupView {
        ConsumerGroupView {
            state: self.state(),
            epoch: self.epoch,
            assignment_epoch: self.assignment_epoch,
            assignor: self.assignor(),
            members: self
                .members
                .values()
                .map(|m| ConsumerMemberView {
                    member: m.clone(),
                    target: self.target.get(&m.id).cloned().unwrap_or_default(),
                })
                .collect(),
        }
    }

    /// When [`ConsumerGroup::tick`] next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.members
            .values()
            .flat_map(|m| {
                [
                    Some(m.last_seen + self.settings.session_timeout),
                    m.revocation_deadline,
                ]
            })
            .flatten()
            .min()
    }

    /// Removes the members whose session ended or who did not release partitions in time.
    pub fn tick(&mut self, now: Instant) {
        let session = self.settings.session_timeout;
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.last_seen + session <= now || m.revocation_deadline.is_some_and(|d| d <= now)
            })
            .map(|m| m.id.clone())
            .collect();
        for id in expired {
            self.remove(&id);
        }
    }

    /// Whether `member` of `epoch` may commit offsets now: 0 or an error code, as Kafka
    /// 4's `validateOffsetCommit`: a member epoch below 0 with no members is an admin's or
    /// a standalone consumer's; else the member must exist (`UNKNOWN_MEMBER_ID`) and the
    /// epoch be exactly its own (`STALE_MEMBER_EPOCH`).
    pub fn check_commit(&self, member: &str, epoch: i32) -> i16 {
        if epoch < 0 && self.members.is_empty() {
            return 0;
        }
        match self.members.get(member) {
            None => ResponseError::UnknownMemberId.code(),
            Some(m) if epoch != m.epoch => ResponseError::StaleMemberEpoch.code(),
            Some(_) => 0,
        }
    }

    /// Handles a ConsumerGroupHeartbeat against the topics of `catalog`.
    pub fn heartbeat(
        &mut self,
        req: ConsumerHeartbeat,
        catalog: &dyn TopicCatalog,
        now: Instant,
    ) -> HeartbeatAnswer {
        match self.try_heartbeat(&req, catalog, now) {
            Ok(answer) => answer,
            Err((e, message)) => {
                HeartbeatAnswer::refusal(req, e, Some(message), self.settings.heartbeat_interval)
            }
        }
    }

    fn try_heartbeat(
        &mut self,
        req: &ConsumerHeartbeat,
        catalog: &dyn TopicCatalog,
        now: Instant,
    ) -> Result<HeartbeatAnswer, Refusal> {
        let subscription = validate(req)?;
        let interval = self.settings.heartbeat_interval;
        // Whatever changes in this heartbeat begins one group epoch.
        let mut new_epoch = false;
        let answer = |member_epoch, assignment| HeartbeatAnswer {
            error: 0,
            message: None,
            member_id: req.member_id.clone(),
            member_epoch,
            heartbeat_interval: interval,
            assignment,
        };
        if let Some(instance) = &req.instance_id
            && req.member_epoch != JOIN_EPOCH
            && self
                .static_member(instance)
                .is_some_and(|m| m.id != req.member_id)
        {
            return Err(refusal(
                ResponseError::FencedInstanceId,
                format!("instance id {instance} belongs to another member now"),
            ));
        }
        match req.member_epoch {
            LEAVE_EPOCH | STATIC_LEAVE_EPOCH => {
                let Some(member) = self.members.get_mut(&req.member_id) else {
                    return Err(unknown_member(&req.member_id));
                };
                if req.member_epoch == STATIC_LEAVE_EPOCH && member.instance_id.is_some() {
                    member.enter_epoch(STATIC_LEAVE_EPOCH);
                    self.dirty = true;
                } else {
                    self.remove(&req.member_id);
                }
                return Ok(answer(req.member_epoch, None));
            }
            JOIN_EPOCH => new_epoch = self.join(req, subscription.clone(), now)?,
            epoch => {
                let Some(member) = self.members.get(&req.member_id) else {
                    return Err(unknown_member(&req.member_id));
                };
                let lost_response = epoch == member.previous_epoch
                    && req
                        .owned
                        .as_ref()
                        .is_some_and(|o| within(o, &member.assigned));
                if epoch > member.epoch || (epoch < member.epoch && !lost_response) {
                    return Err(refusal(
                        ResponseError::FencedMemberEpoch,
                        format!(
                            "member epoch {epoch} is not the member's ({})",
                            member.epoch
                        ),
                    ));
                }
            }
        }
        let full = req.member_epoch == JOIN_EPOCH
            || (req.rebalance_timeout_ms != -1
                && req.subscribed_topic_names.is_some()
                && req.owned.is_some());
        new_epoch |= self.update_member(req, subscription, now);
        let topics = self.resolve_topics(catalog);
        if topics != self.topics {
            self.topics = topics;
            new_epoch = true;
        }
        if new_epoch {
            self.bump();
        }
        if self.epoch > self.assignment_epoch {
            self.compute_target();
        }
        let target_epoch = self.assignment_epoch;
        let settled = {
            let m = &self.members[&req.member_id];
            m.epoch == target_epoch && m.state == MemberState::Stable
        };
        // Most heartbeats find their member settled: nothing to reconcile, and no need to
        // gather every member's partitions.
        let changed = !settled && {
            let held = self.held();
            let target = self.target.get(&req.member_id).cloned().unwrap_or_default();
            let member = self
                .members
                .get_mut(&req.member_id)
                .expect("the member was found or joined");
            let before = (member.epoch, member.assigned.clone(), member.state);
            let owned = req.owned.as_ref();
            reconcile(member, &target, target_epoch, owned, &held, now);
            let changed = before.1 != member.assigned;
            self.dirty |= changed || before.0 != member.epoch || before.2 != member.state;
            changed
        };
        let member = &self.members[&req.member_id];
        let assignment = (full || changed).then(|| member.assigned.clone());
        let answer = answer(member.epoch, assignment);
        self.resolve_regexes();
        Ok(answer)
    }

    /// A join (epoch 0): a new member (which begins a group epoch: true), a member
    /// rejoining, or a static member coming back in its old place.
    fn join(
        &mut self,
        req: &ConsumerHeartbeat,
        subscription: Option<Subscription>,
        now: Instant,
    ) -> Result<bool, Refusal> {
        if self.members.contains_key(&req.member_id) {
            return Ok(false);
        }
        if let Some(instance) = &req.instance_id
            && let Some(old) = self.static_member(instance).map(|m| m.id.clone())
        {
            let mut member = self.members.remove(&old).expect("found by instance id");
            if member.epoch != STATIC_LEAVE_EPOCH {
                self.members.insert(old, member);
                return Err(refusal(
                    ResponseError::UnreleasedInstanceId,
                    format!("instance id {instance} is still in use by a member"),
                ));
            }
            member.id.clone_from(&req.member_id);
            member.last_seen = now;
            let target = self.target.remove(&old).unwrap_or_default();
            self.target.insert(req.member_id.clone(), target);
            self.members.insert(req.member_id.clone(), member);
            self.dirty = true;
            return Ok(false);
        }
        let member = ConsumerMember::restore(
            req.member_id.clone(),
            req.instance_id.clone(),
            req.rack_id.clone(),
            (req.client_id.clone(), req.client_host.clone()),
            millis(req.rebalance_timeout_ms),
            subscription.unwrap_or_default(),
            req.server_assignor.clone(),
            (JOIN_EPOCH, JOIN_EPOCH),
            MemberState::Stable,
            Assignment::new(),
            Assignment::new(),
            now,
        );
        self.members.insert(req.member_id.clone(), member);
        Ok(true)
    }

    /// Takes what the heartbeat changes of its member; true when that is a new
    /// subscription or assignor (which begins a group epoch).
    fn update_member(
        &mut self,
        req: &ConsumerHeartbeat,
        subscription: Option<Subscription>,
        now: Instant,
    ) -> bool {
        let member = self
            .members
            .get_mut(&req.member_id)
            .expect("the member was found or joined");
        member.last_seen = now;
        let mut changed = false;
        let mut resubscribed = false;
        if let Some(s) = subscription
            && s != member.subscription
        {
            member.subscription = s;
            resubscribed = true;
        }
        if let Some(assignor) = &req.server_assignor
            && member.server_assignor.as_ref() != Some(assignor)
        {
            member.server_assignor = Some(assignor.clone());
            resubscribed = true;
        }
        if req.rebalance_timeout_ms >= 0
            && millis(req.rebalance_timeout_ms) != member.rebalance_timeout
        {
            member.rebalance_timeout = millis(req.rebalance_timeout_ms);
            changed = true;
        }
        if req.rack_id.is_some() && req.rack_id != member.rack_id {
            member.rack_id.clone_from(&req.rack_id);
            changed = true;
        }
        if member.client_id != req.client_id || member.client_host != req.client_host {
            member.client_id.clone_from(&req.client_id);
            member.client_host.clone_from(&req.client_host);
            changed = true;
        }
        if member.epoch == STATIC_LEAVE_EPOCH {
            // Back (a join with the same member id): it reconciles from the epoch it left.
            member.epoch = member.previous_epoch;
            changed = true;
        }
        self.dirty |= changed;
        resubscribed
    }

    /// Takes the members' new regular expressions as resolved (from the next heartbeat on)
    /// and forgets those no member subscribes with any more.
    fn resolve_regexes(&mut self) {
        let used: BTreeSet<String> = self
            .members
            .values()
            .filter_map(|m| m.subscription.regex.clone())
            .collect();
        self.resolved = used;
    }

    /// The subscribed topics that exist, by name: the members' topic names, and the topics
    /// their resolved regular expressions match.
    fn resolve_topics(&self, catalog: &dyn TopicCatalog) -> BTreeMap<String, (TopicId, i32)> {
        let mut names: BTreeSet<String> = self
            .members
            .values()
            .flat_map(|m| m.subscription.names.iter().cloned())
            .collect();
        let patterns: Vec<&Regex> = self
            .members
            .values()
            .filter(|m| {
                m.subscription
                    .regex
                    .as_ref()
                    .is_some_and(|r| self.resolved.contains(r))
            })
            .filter_map(|m| m.subscription.pattern.as_ref())
            .collect();
        if !patterns.is_empty() {
            names.extend(
                catalog
                    .names()
                    .into_iter()
                    .filter(|n| patterns.iter().any(|p| p.is_match(n))),
            );
        }
        names
            .into_iter()
            .filter_map(|n| catalog.topic(&n).map(|t| (n, t)))
            .collect()
    }

    /// Computes the target assignment of the group epoch.
    fn compute_target(&mut self) {
        let subscribers: Vec<Subscriber<'_>> = self
            .members
            .values()
            .map(|m| Subscriber {
                id: &m.id,
                topics: self
                    .topics
                    .iter()
                    .filter(|(name, _)| m.subscription.takes(name))
                    .map(|(_, (id, _))| *id)
                    .collect(),
                previous: self.target.get(&m.id),
            })
            .collect();
        let partitions = self.topics.values().copied().collect();
        self.target = self.assignor().assign(&subscribers, &partitions);
        self.assignment_epoch = self.epoch;
        self.dirty = true;
    }

    /// Every partition some member has or is releasing.
    fn held(&self) -> BTreeSet<(TopicId, i32)> {
        self.members
            .values()
            .flat_map(|m| [&m.assigned, &m.revoking])
            .flat_map(|a| a.iter().flat_map(|(t, ps)| ps.iter().map(|p| (*t, *p))))
            .collect()
    }

    /// The static member with `instance`.
    fn static_member(&self, instance: &str) -> Option<&ConsumerMember> {
        self.members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance))
    }

    /// Removes member `id`: its partitions are free, and a group epoch begins.
    fn remove(&mut self, id: &str) {
        if self.members.remove(id).is_some() {
            self.target.remove(id);
            // A pattern no member has any more is new again when one subscribes with it.
            let members = &self.members;
            self.resolved.retain(|r| {
                members
                    .values()
                    .any(|m| m.subscription.regex.as_ref() == Some(r))
            });
            self.bump();
        }
    }

    /// Begins a group epoch.
    fn bump(&mut self) {
        self.epoch = self.epoch.checked_add(1).unwrap_or(1);
        self.rebalances += 1;
        self.dirty = true;
    }
}

/// Checks a heartbeat as Kafka does; returns its subscription, when it names one.
fn validate(req: &ConsumerHeartbeat) -> Result<Option<Subscription>, Refusal> {
    let invalid = |m: &str| Err(refusal(ResponseError::InvalidRequest, m.to_owned()));
    if req.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if req.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if req.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    match req.member_epoch {
        JOIN_EPOCH => {
            if req.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if req.owned.as_ref().is_none_or(|o| !o.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
                return invalid(
                    "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
                );
            }
        }
        STATIC_LEAVE_EPOCH if req.instance_id.is_none() => {
            return invalid("InstanceId can't be null.");
        }
        e if e < STATIC_LEAVE_EPOCH => return invalid("MemberEpoch is invalid."),
        _ => {}
    }
    if let Some(name) = &req.server_assignor
        && ServerAssignor::by_name(name).is_none()
    {
        return Err(refusal(
            ResponseError::UnsupportedAssignor,
            format!("ServerAssignor {name} is not supported (uniform, range)"),
        ));
    }
    if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
        return Ok(None);
    }
    let names = req
        .subscribed_topic_names
        .iter()
        .flatten()
        .cloned()
        .collect();
    Subscription::new(names, req.subscribed_topic_regex.clone())
        .map(Some)
        .map_err(|e| refusal(ResponseError::InvalidRegularExpression, e.to_string()))
}

/// Moves `member` towards `target` (of `target_epoch`), as Kafka's
/// `CurrentAssignmentBuilder`: `owned` is what the client says it has (`None`: unknown,
/// so it may still have everything), `held` what every member has or is releasing.
fn reconcile(
    member: &mut ConsumerMember,
    target: &Assignment,
    target_epoch: i32,
    owned: Option<&Assignment>,
    held: &BTreeSet<(TopicId, i32)>,
    now: Instant,
) {
    let from_epoch = match member.state {
        MemberState::Stable if member.epoch == target_epoch => return,
        MemberState::Stable | MemberState::UnreleasedPartitions => member.epoch,
        MemberState::UnrevokedPartitions => {
            if owns_any(owned, &member.revoking) {
                return;
            }
            member.epoch.saturating_add(1).min(target_epoch)
        }
    };
    let mut kept = Assignment::new();
    let mut revoking = Assignment::new();
    let mut adding = Assignment::new();
    let mut unreleased = false;
    let topics: BTreeSet<TopicId> = target
        .keys()
        .chain(member.assigned.keys())
        .copied()
        .collect();
    let none = BTreeSet::new();
    for topic in topics {
        let wanted = target.get(&topic).unwrap_or(&none);
        let has = member.assigned.get(&topic).unwrap_or(&none);
        let keep: BTreeSet<i32> = has.intersection(wanted).copied().collect();
        let give: BTreeSet<i32> = has.difference(wanted).copied().collect();
        let mut take = BTreeSet::new();
        for &p in wanted.difference(has) {
            if held.contains(&(topic, p)) {
                unreleased = true;
            } else {
                take.insert(p);
            }
        }
        for (into, set) in [
            (&mut kept, keep),
            (&mut revoking, give),
            (&mut adding, take),
        ] {
            if !set.is_empty() {
                into.insert(topic, set);
            }
        }
    }
    if !revoking.is_empty() && owns_any(owned, &revoking) {
        member.state = MemberState::UnrevokedPartitions;
        member.enter_epoch(from_epoch);
        member.assigned = kept;
        member.revoking = revoking;
        member.revocation_deadline = Some(now + member.rebalance_timeout);
        return;
    }
    for (topic, partitions) in adding {
        kept.entry(topic).or_default().extend(partitions);
    }
    member.state = if unreleased {
        MemberState::UnreleasedPartitions
    } else {
        MemberState::Stable
    };
    member.enter_epoch(target_epoch);
    member.assigned = kept;
    member.revoking = Assignment::new();
    member.revocation_deadline = None;
}

/// Whether the client may still have any of `partitions` (`owned` unknown: it may).
fn owns_any(owned: Option<&Assignment>, partitions: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    partitions
        .iter()
        .any(|(t, ps)| owned.get(t).is_some_and(|o| !o.is_disjoint(ps)))
}

/// Whether every partition of `inner` is in `outer`.
fn within(inner: &Assignment, outer: &Assignment) -> bool {
    inner
        .iter()
        .all(|(t, ps)| ps.is_empty() || outer.get(t).is_some_and(|o| ps.is_subset(o)))
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

fn refusal(e: ResponseError, message: String) -> Refusal {
    (e, message)
}

fn unknown_member(id: &str) -> Refusal {
    refusal(
        ResponseError::UnknownMemberId,
        format!("member {id} is not in the group"),
    )
}

#[cfg(test)]
mod tests;
