//! The classic consumer group protocol as a pure state machine: no I/O, no clocks (every
//! call takes `now`), so each rule is unit-tested here and the actor around it only
//! delivers replies and persists.
//!
//! Phases, as Kafka names them: `Empty` → (a join) → `PreparingRebalance`, which waits
//! until every known member has (re)joined or the rebalance timeout passes (members that
//! did not rejoin are dropped; an empty group first waits
//! `group_initial_rebalance_delay_ms` for more members) → `CompletingRebalance`, a new
//! generation whose leader computes the assignment → (the leader's SyncGroup) → `Stable`.
//! A join with new metadata, a leave or a missed session timeout starts a new rebalance.
//!
//! **Static members** (KIP-345) join with a `group.instance.id`. One that comes back
//! with it and no member id — a consumer restarted within its session timeout — takes
//! over its old membership under a new member id: its assignment is kept, and a stable
//! group whose chosen protocol stays the same does not rebalance. The old member id is
//! fenced from then on (`FENCED_INSTANCE_ID`), so of two consumers with one instance id
//! the older one stops.
//!
//! **Member ids are given before a member joins** (KIP-394, JoinGroup v4+): a dynamic
//! member's first join (no member id) is answered at once with `MEMBER_ID_REQUIRED` and
//! the id it is to join with. Until it does, the id is pending: a rebalance under way
//! waits for it too (within the rebalance timeout), up to its session timeout, after
//! which it is forgotten. A client that
//! abandons a join it sent therefore never leaves a member behind that every rebalance
//! must wait out.

use super::consumer::ConsumerSettings;
use bytes::Bytes;
use kafka_protocol::ResponseError;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Where a group is in the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// No members.
    Empty,
    /// Waiting for members to (re)join.
    PreparingRebalance,
    /// Waiting for the leader's assignment.
    CompletingRebalance,
    /// Members have their assignments.
    Stable,
}

impl Phase {
    /// The name DescribeGroups and ListGroups report.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::PreparingRebalance => "PreparingRebalance",
            Self::CompletingRebalance => "CompletingRebalance",
            Self::Stable => "Stable",
        }
    }
}

/// Timeouts that bound every member's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupSettings {
    /// Shortest session timeout a member may ask for.
    pub min_session: Duration,
    /// Longest session timeout a member may ask for.
    pub max_session: Duration,
    /// How long an empty group's first rebalance waits for more members.
    pub initial_delay: Duration,
    /// What members of consumer-protocol groups (KIP-848) are held to.
    pub consumer: ConsumerSettings,
}

/// One member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its id (`client_id-uuid`).
    pub id: String,
    /// Its `group.instance.id`, when it is a static member.
    pub instance_id: Option<String>,
    /// The client id it connected with.
    pub client_id: String,
    /// The address it connected from.
    pub client_host: String,
    /// How long it may go without a heartbeat.
    pub session_timeout: Duration,
    /// How long a rebalance waits for it to rejoin.
    pub rebalance_timeout: Duration,
    /// The protocols it supports, in preference order, with its metadata for each.
    pub protocols: Vec<(String, Bytes)>,
    /// Its assignment in the current generation.
    pub assignment: Bytes,
    /// Its last join, sync or heartbeat.
    last_seen: Instant,
    /// Whether it has joined the rebalance under way.
    joined: bool,
    /// Whether it has sent SyncGroup in this generation.
    synced: bool,
}

/// A join request.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    /// The member id; empty for a new member (or a static member coming back).
    pub member_id: String,
    /// The `group.instance.id` of a static member.
    pub instance_id: Option<String>,
    /// The client id.
    pub client_id: String,
    /// The client's address.
    pub client_host: String,
    /// Requested session timeout.
    pub session_timeout: Duration,
    /// Requested rebalance timeout.
    pub rebalance_timeout: Duration,
    /// `consumer` for Kafka consumers.
    pub protocol_type: String,
    /// Supported protocols (assignors) with metadata, in preference order.
    pub protocols: Vec<(String, Bytes)>,
    /// Whether a new dynamic member first gets its id with `MEMBER_ID_REQUIRED` (KIP-394:
    /// JoinGroup v4 and later) rather than joining at once.
    pub requires_known_member_id: bool,
}

/// The answer to a join.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Joined {
    /// 0 or a Kafka error code.
    pub error: i16,
    /// The new generation.
    pub generation: i32,
    /// The chosen protocol.
    pub protocol: Option<String>,
    /// The protocol type.
    pub protocol_type: Option<String>,
    /// The leader's member id.
    pub leader: String,
    /// The member's id.
    pub member_id: String,
    /// Every member with its metadata (for the leader only).
    pub members: Vec<(String, Bytes)>,
}

impl Joined {
    /// The answer refusing `member_id`'s join with `e`.
    pub fn error(member_id: &str, e: ResponseError) -> Self {
        Self {
            error: e.code(),
            generation: -1,
            protocol: None,
            protocol_type: None,
            leader: String::new(),
            member_id: member_id.to_owned(),
            members: Vec::new(),
        }
    }
}

/// The answer to a sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced {
    /// 0 or a Kafka error code.
    pub error: i16,
    /// The member's assignment.
    pub assignment: Bytes,
}

impl Synced {
    /// The answer refusing a sync with `e`.
    pub fn error(e: ResponseError) -> Self {
        Self {
            error: e.code(),
            assignment: Bytes::new(),
        }
    }
}

/// Who sends a request: a member id and, for a static member, its `group.instance.id`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemberRef {
    /// The member id.
    pub id: String,
    /// The static member's instance id.
    pub instance_id: Option<String>,
}

impl MemberRef {
    /// Member `id`, static when `instance_id` is given (Kafka's nullable field).
    pub fn new(id: &str, instance_id: Option<&str>) -> Self {
        Self {
            id: id.to_owned(),
            instance_id: instance_id.map(str::to_owned),
        }
    }
}

/// A reply owed to a member whose join or sync was waiting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Answer the member's pending join.
    Join(String, Joined),
    /// Answer the member's pending sync.
    Sync(String, Synced),
}

/// A consumer group.
#[derive(Debug, Clone)]
pub struct Group {
    /// The group id.
    pub id: String,
    /// Its phase.
    pub phase: Phase,
    /// Its generation.
    pub generation: i32,
    /// The members' protocol type.
    pub protocol_type: Option<String>,
    /// The protocol chosen in this generation.
    pub protocol: Option<String>,
    /// The leader's member id.
    pub leader: Option<String>,
    /// The members, by id.
    pub members: BTreeMap<String, Member>,
    /// Member ids given with `MEMBER_ID_REQUIRED` and not yet joined with, each with when
    /// it is forgotten (its session timeout after it was given).
    pending: BTreeMap<String, Instant>,
    /// When the rebalance under way stops waiting for joins or for the sync.
    deadline: Option<Instant>,
    /// Whether the rebalance under way started from an empty group (it then waits out the
    /// initial delay even when everyone has joined).
    initial: bool,
    /// Whether something worth persisting changed.
    dirty: bool,
    /// Rebalances completed since the last [`Group::take_rebalances`].
    rebalances: u64,
    /// The bounds on members' timeouts.
    settings: GroupSettings,
}

impl Group {
    /// A new, empty group.
    pub fn new(id: &str, settings: GroupSettings) -> Self {
        Self {
            id: id.to_owned(),
            phase: Phase::Empty,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            pending: BTreeMap::new(),
            deadline: None,
            initial: false,
            dirty: false,
            rebalances: 0,
            settings,
        }
    }

    /// A group as persisted, at `now`: its members' sessions restart now. A group
    /// persisted mid-rebalance rebalances again.
    #[allow(clippy::too_many_arguments)]
    pub fn restore(
        id: &str,
        settings: GroupSettings,
        generation: i32,
        protocol_type: Option<String>,
        protocol: Option<String>,
        leader: Option<String>,
        members: Vec<StoredMember>,
        stable: bool,
        now: Instant,
    ) -> Self {
        let mut group = Self::new(id, settings);
        group.generation = generation;
        group.protocol_type = protocol_type;
        group.protocol = protocol;
        group.leader = leader;
        for m in members {
            group.members.insert(
                m.id.clone(),
                Member {
                    id: m.id,
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout: m.session_timeout,
                    rebalance_timeout: m.rebalance_timeout,
                    protocols: m.protocols,
                    assignment: m.assignment,
                    last_seen: now,
                    joined: false,
                    synced: true,
                },
            );
        }
        if !group.members.is_empty() {
            if stable {
                group.phase = Phase::Stable;
            } else {
                group.begin_rebalance(now);
            }
        }
        group
    }

    /// The bounds on its members' timeouts.
    pub fn settings(&self) -> GroupSettings {
        self.settings
    }

    /// Whether something worth persisting changed since the last call.
    pub fn take_dirty(&mut self) -> bool {
        std::mem::take(&mut self.dirty)
    }

    /// Rebalances completed since the last call.
    pub fn take_rebalances(&mut self) -> u64 {
        std::mem::take(&mut self.rebalances)
    }

    /// When [`Group::tick`] next has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let sessions = self
            .members
            .values()
            .filter(|m| !self.held_waiting(m))
            .map(|m| m.last_seen + m.session_timeout);
        let pending = self.pending.values().copied();
        sessions.chain(pending).chain(self.deadline).min()
    }

    /// Handles a JoinGroup: returns the member's id and the replies now owed (which may
    /// include this member's own, when it completes the rebalance or needs none).
    pub fn join(&mut self, req: JoinRequest, now: Instant) -> (String, Vec<Reply>) {
        let refuse = |e| {
            (
                req.member_id.clone(),
                vec![Reply::Join(
                    req.member_id.clone(),
                    Joined::error(&req.member_id, e),
                )],
            )
        };
        if req.session_timeout < self.settings.min_session
            || req.session_timeout > self.settings.max_session
        {
            return refuse(ResponseError::InvalidSessionTimeout);
        }
        if req.protocols.is_empty()
            || (!self.members.is_empty()
                && (self.protocol_type.as_deref() != Some(req.protocol_type.as_str())
                    || !self.shares_a_protocol(&req.protocols)))
        {
            return refuse(ResponseError::InconsistentGroupProtocol);
        }
        let was_pending = self.pending.remove(&req.member_id).is_some();
        if !req.member_id.is_empty()
            && !was_pending
            && let Err(e) = self.identify(&req.member_id, req.instance_id.as_deref())
        {
            return refuse(e);
        }
        let id = if req.member_id.is_empty() {
            format!("{}-{:032x}", req.client_id, fastrand::u128(..))
        } else {
            req.member_id.clone()
        };
        if req.member_id.is_empty() && req.instance_id.is_none() && req.requires_known_member_id {
            self.pending.insert(id.clone(), now + req.session_timeout);
            let reply = Joined::error(&id, ResponseError::MemberIdRequired);
            return (id.clone(), vec![Reply::Join(id, reply)]);
        }
        if req.member_id.is_empty()
            && let Some(instance) = req.instance_id.as_deref()
            && let Some(old) = self.static_member(instance).map(|m| m.id.clone())
        {
            return self.rejoin_static(&old, id, req, now);
        }
        let unchanged = self
            .members
            .get(&id)
            .is_some_and(|m| m.protocols == req.protocols);
        let member = self.members.entry(id.clone()).or_insert_with(|| Member {
            id: id.clone(),
            instance_id: req.instance_id.clone(),
            client_id: req.client_id.clone(),
            client_host: req.client_host.clone(),
            session_timeout: req.session_timeout,
            rebalance_timeout: req.rebalance_timeout,
            protocols: Vec::new(),
            assignment: Bytes::new(),
            last_seen: now,
            joined: false,
            synced: false,
        });
        member.session_timeout = req.session_timeout;
        member.rebalance_timeout = req.rebalance_timeout;
        member.protocols = req.protocols;
        member.last_seen = now;
        self.protocol_type = Some(req.protocol_type);
        let is_leader = self.leader.as_deref() == Some(id.as_str());
        if self.phase == Phase::Stable && unchanged && !is_leader {
            // A follower rejoining with the same metadata needs no rebalance.
            let reply = self.joined_reply(&id);
            return (id, vec![Reply::Join(reply.member_id.clone(), reply)]);
        }
        let mut replies = Vec::new();
        if self.phase != Phase::PreparingRebalance {
            replies.extend(self.begin_rebalance(now));
        }
        if let Some(m) = self.members.get_mut(&id) {
            m.joined = true;
        }
        self.dirty = true;
        replies.extend(self.complete_join_if_ready(now));
        (id, replies)
    }

    /// A static member coming back (no member id, its instance id known as `old`): it
    /// takes over `old`'s membership as `id`, and `old` is fenced. A stable group whose
    /// chosen protocol stays the same answers at once without a rebalance — with no member
    /// list and the leader as it was, so a returning leader does not assign again (Kafka's
    /// `updateStaticMemberAndRebalance`); otherwise the join goes on as any rejoin.
    fn rejoin_static(
        &mut self,
        old: &str,
        id: String,
        req: JoinRequest,
        now: Instant,
    ) -> (String, Vec<Reply>) {
        let Some(mut member) = self.members.remove(old) else {
            return (id, Vec::new());
        };
        let unchanged = member.protocols == req.protocols;
        member.id = id.clone();
        member.client_id = req.client_id;
        member.client_host = req.client_host;
        member.session_timeout = req.session_timeout;
        member.rebalance_timeout = req.rebalance_timeout;
        member.protocols = req.protocols;
        member.last_seen = now;
        self.members.insert(id.clone(), member);
        let previous_leader = self.leader.clone().unwrap_or_default();
        if previous_leader == old {
            self.leader = Some(id.clone());
        }
        self.dirty = true;
        if self.phase == Phase::Stable && unchanged {
            let reply = Joined {
                leader: previous_leader,
                members: Vec::new(),
                ..self.joined_reply(&id)
            };
            return (id.clone(), vec![Reply::Join(id, reply)]);
        }
        let mut replies = Vec::new();
        if self.phase != Phase::PreparingRebalance {
            replies.extend(self.begin_rebalance(now));
        }
        if let Some(m) = self.members.get_mut(&id) {
            m.joined = true;
        }
        replies.extend(self.complete_join_if_ready(now));
        (id, replies)
    }

    /// The static member with `instance`, if any.
    fn static_member(&self, instance: &str) -> Option<&Member> {
        self.members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance))
    }

    /// Checks that a request from `member_id` (with `instance_id`, for a static member)
    /// comes from a current member: `FENCED_INSTANCE_ID` when the instance id now belongs
    /// to another member id, `UNKNOWN_MEMBER_ID` when the member id is not in the group.
    fn identify(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), ResponseError> {
        if let Some(current) = instance_id.and_then(|i| self.static_member(i))
            && current.id != member_id
        {
            return Err(ResponseError::FencedInstanceId);
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(ResponseError::UnknownMemberId)
        }
    }

    /// Handles a SyncGroup: the replies now owed (this member's own included unless it
    /// must wait for the leader).
    pub fn sync(
        &mut self,
        member: &MemberRef,
        generation: i32,
        assignments: Vec<(String, Bytes)>,
        now: Instant,
    ) -> Vec<Reply> {
        let member_id = member.id.as_str();
        let refuse = |e| vec![Reply::Sync(member_id.to_owned(), Synced::error(e))];
        if let Err(e) = self.identify(member_id, member.instance_id.as_deref()) {
            return refuse(e);
        }
        let Some(member) = self.members.get_mut(member_id) else {
            return refuse(ResponseError::UnknownMemberId);
        };
        member.last_seen = now;
        if generation != self.generation {
            return refuse(ResponseError::IllegalGeneration);
        }
        match self.phase {
            Phase::Empty | Phase::PreparingRebalance => refuse(ResponseError::RebalanceInProgress),
            Phase::Stable => vec![Reply::Sync(
                member_id.to_owned(),
                Synced {
                    error: 0,
                    assignment: member.assignment.clone(),
                },
            )],
            Phase::CompletingRebalance => {
                member.synced = true;
                if self.leader.as_deref() != Some(member_id) {
                    return Vec::new();
                }
                let mut given: BTreeMap<String, Bytes> = assignments.into_iter().collect();
                for m in self.members.values_mut() {
                    m.assignment = given.remove(&m.id).unwrap_or_default();
                }
                self.phase = Phase::Stable;
                self.deadline = None;
                self.dirty = true;
                self.members
                    .values()
                    .filter(|m| m.synced)
                    .map(|m| {
                        Reply::Sync(
                            m.id.clone(),
                            Synced {
                                error: 0,
                                assignment: m.assignment.clone(),
                            },
                        )
                    })
                    .collect()
            }
        }
    }

    /// Handles a Heartbeat: the error code to answer.
    pub fn heartbeat(&mut self, member: &MemberRef, generation: i32, now: Instant) -> i16 {
        if let Err(e) = self.identify(&member.id, member.instance_id.as_deref()) {
            return e.code();
        }
        let Some(member) = self.members.get_mut(&member.id) else {
            return ResponseError::UnknownMemberId.code();
        };
        member.last_seen = now;
        if generation != self.generation {
            return ResponseError::IllegalGeneration.code();
        }
        match self.phase {
            Phase::PreparingRebalance => ResponseError::RebalanceInProgress.code(),
            _ => 0,
        }
    }

    /// Handles a LeaveGroup for `members`: an error code per member and the replies now
    /// owed. A static member may be named by its instance id alone (an empty member id),
    /// as an administrator removes one.
    pub fn leave(&mut self, members: &[MemberRef], now: Instant) -> (Vec<i16>, Vec<Reply>) {
        let mut codes = Vec::with_capacity(members.len());
        let mut left = false;
        for member in members {
            let id = match member.instance_id.as_deref() {
                Some(instance) if member.id.is_empty() => self
                    .static_member(instance)
                    .map(|m| m.id.clone())
                    .unwrap_or_default(),
                _ => member.id.clone(),
            };
            if member.instance_id.is_none() && self.pending.remove(&id).is_some() {
                // Never a member: nothing to rebalance, but a rebalance may stop waiting.
                codes.push(0);
                continue;
            }
            let known = self.identify(&id, member.instance_id.as_deref());
            match known {
                Ok(()) => {
                    self.members.remove(&id);
                    codes.push(0);
                    left = true;
                }
                Err(e) => codes.push(e.code()),
            }
        }
        let replies = if left {
            self.after_departure(now)
        } else {
            self.complete_join_if_ready(now)
        };
        (codes, replies)
    }

    /// Expires members past their session, pending member ids past theirs, and
    /// rebalances whose time is up.
    pub fn tick(&mut self, now: Instant) -> Vec<Reply> {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| !self.held_waiting(m))
            .filter(|m| m.last_seen + m.session_timeout <= now)
            .map(|m| m.id.clone())
            .collect();
        let mut replies = Vec::new();
        let pending = self.pending.len();
        self.pending.retain(|_, forgotten_at| *forgotten_at > now);
        if self.pending.len() < pending && expired.is_empty() {
            replies.extend(self.complete_join_if_ready(now));
        }
        if !expired.is_empty() {
            for id in &expired {
                self.members.remove(id);
            }
            replies.extend(self.after_departure(now));
        }
        if self.deadline.is_some_and(|d| d <= now) {
            match self.phase {
                Phase::PreparingRebalance => replies.extend(self.complete_join(now)),
                Phase::CompletingRebalance => {
                    // The leader never sent the assignment: drop who did not sync, retry.
                    self.members.retain(|_, m| m.synced);
                    replies.extend(self.after_departure(now));
                    if self.phase == Phase::CompletingRebalance {
                        replies.extend(self.begin_rebalance(now));
                    }
                }
                Phase::Empty | Phase::Stable => self.deadline = None,
            }
        }
        replies
    }

    /// The error code for an OffsetCommit by `member` in `generation` (-1: a commit from
    /// outside group management).
    pub fn check_commit(&self, member: &MemberRef, generation: i32) -> i16 {
        // Generation -1: an admin client, or a consumer that assigns itself partitions
        // (whatever member id it sends: a consumer-protocol client always has one), which
        // may commit to an empty group, as Kafka's `validateOffsetCommit`.
        if generation < 0 && self.members.is_empty() {
            return 0;
        }
        if generation < 0 && member.id.is_empty() {
            return ResponseError::UnknownMemberId.code();
        }
        if let Err(e) = self.identify(&member.id, member.instance_id.as_deref()) {
            return e.code();
        }
        if generation != self.generation {
            return ResponseError::IllegalGeneration.code();
        }
        if self.phase == Phase::CompletingRebalance {
            return ResponseError::RebalanceInProgress.code();
        }
        0
    }

    /// After members left or expired: an empty group becomes `Empty`; otherwise a
    /// rebalance starts (or the one under way may now complete).
    fn after_departure(&mut self, now: Instant) -> Vec<Reply> {
        self.dirty = true;
        if self
            .leader
            .as_ref()
            .is_some_and(|l| !self.members.contains_key(l))
        {
            self.leader = None;
        }
        if self.members.is_empty() {
            self.phase = Phase::Empty;
            self.generation = self.generation.wrapping_add(1);
            self.protocol = None;
            self.leader = None;
            self.deadline = None;
            return Vec::new();
        }
        match self.phase {
            Phase::PreparingRebalance => self.complete_join_if_ready(now),
            _ => self.begin_rebalance(now),
        }
    }

    /// Enters `PreparingRebalance`: every member must join again; syncs still waiting are
    /// told a rebalance is in progress.
    fn begin_rebalance(&mut self, now: Instant) -> Vec<Reply> {
        let replies = if self.phase == Phase::CompletingRebalance {
            self.members
                .values()
                .filter(|m| m.synced && self.leader.as_deref() != Some(m.id.as_str()))
                .map(|m| {
                    Reply::Sync(
                        m.id.clone(),
                        Synced::error(ResponseError::RebalanceInProgress),
                    )
                })
                .collect()
        } else {
            Vec::new()
        };
        self.initial = self.phase == Phase::Empty;
        let wait = if self.initial {
            self.settings.initial_delay
        } else {
            self.max_rebalance_timeout()
        };
        self.phase = Phase::PreparingRebalance;
        self.deadline = Some(now + wait);
        for m in self.members.values_mut() {
            m.joined = false;
            m.synced = false;
        }
        replies
    }

    /// Completes the join phase once every member has joined and no member id is pending
    /// (an empty group's first rebalance waits out its initial delay).
    fn complete_join_if_ready(&mut self, now: Instant) -> Vec<Reply> {
        let everyone = self.members.values().all(|m| m.joined) && self.pending.is_empty();
        if self.phase == Phase::PreparingRebalance
            && everyone
            && !(self.initial && self.deadline.is_some_and(|d| d > now))
        {
            self.complete_join(now)
        } else {
            Vec::new()
        }
    }

    /// Starts the next generation with the members that joined: picks the protocol and the
    /// leader and answers every pending join.
    fn complete_join(&mut self, now: Instant) -> Vec<Reply> {
        self.members.retain(|_, m| m.joined);
        self.dirty = true;
        if self.members.is_empty() {
            return self.after_departure(now);
        }
        // Past i32::MAX (a restored group's stored generation) it wraps, as Kafka's Java
        // int does.
        self.generation = self.generation.wrapping_add(1);
        self.rebalances += 1;
        self.protocol = self.choose_protocol();
        if self
            .leader
            .as_ref()
            .is_none_or(|l| !self.members.contains_key(l))
        {
            self.leader = self.members.keys().next().cloned();
        }
        self.phase = Phase::CompletingRebalance;
        self.deadline = Some(now + self.max_rebalance_timeout());
        for m in self.members.values_mut() {
            m.joined = false;
            m.synced = false;
            m.assignment = Bytes::new();
            m.last_seen = now;
        }
        self.members
            .keys()
            .map(|id| Reply::Join(id.clone(), self.joined_reply(id)))
            .collect()
    }

    /// The join answer for `member_id` in the current generation.
    fn joined_reply(&self, member_id: &str) -> Joined {
        let leader = self.leader.clone().unwrap_or_default();
        let members = if leader == member_id {
            let protocol = self.protocol.as_deref().unwrap_or_default();
            self.members
                .values()
                .map(|m| (m.id.clone(), m.metadata(protocol)))
                .collect()
        } else {
            Vec::new()
        };
        Joined {
            error: 0,
            generation: self.generation,
            protocol: self.protocol.clone(),
            protocol_type: self.protocol_type.clone(),
            leader,
            member_id: member_id.to_owned(),
            members,
        }
    }

    /// The protocol most members prefer among those every member supports.
    fn choose_protocol(&self) -> Option<String> {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            let choice = m
                .protocols
                .iter()
                .map(|(name, _)| name.as_str())
                .find(|name| self.members.values().all(|o| o.supports(name)));
            if let Some(name) = choice {
                *votes.entry(name).or_default() += 1;
            }
        }
        votes
            .into_iter()
            .max_by_key(|(_, n)| *n)
            .map(|(name, _)| name.to_owned())
    }

    /// Whether `protocols` shares a protocol with every current member.
    fn shares_a_protocol(&self, protocols: &[(String, Bytes)]) -> bool {
        protocols
            .iter()
            .any(|(name, _)| self.members.values().all(|m| m.supports(name)))
    }

    /// Whether `m` is waiting on the coordinator rather than on itself: it joined the
    /// rebalance under way, or sent its SyncGroup and waits for the leader's assignment.
    /// Clients send no heartbeats while a join or sync is outstanding, so such a member's
    /// session does not run (Kafka's `shouldKeepAlive`); the rebalance deadline bounds the
    /// wait instead.
    fn held_waiting(&self, m: &Member) -> bool {
        match self.phase {
            Phase::PreparingRebalance => m.joined,
            Phase::CompletingRebalance => m.synced,
            Phase::Empty | Phase::Stable => false,
        }
    }

    fn max_rebalance_timeout(&self) -> Duration {
        self.members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default()
    }
}

impl Member {
    fn supports(&self, protocol: &str) -> bool {
        self.protocols.iter().any(|(name, _)| name == protocol)
    }

    /// Its metadata for `protocol`.
    pub fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

/// A member as persisted (everything but its liveness).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMember {
    /// See [`Member::id`].
    pub id: String,
    /// See [`Member::instance_id`].
    pub instance_id: Option<String>,
    /// See [`Member::client_id`].
    pub client_id: String,
    /// See [`Member::client_host`].
    pub client_host: String,
    /// See [`Member::session_timeout`].
    pub session_timeout: Duration,
    /// See [`Member::rebalance_timeout`].
    pub rebalance_timeout: Duration,
    /// See [`Member::protocols`].
    pub protocols: Vec<(String, Bytes)>,
    /// See [`Member::assignment`].
    pub assignment: Bytes,
}

impl From<&Member> for StoredMember {
    fn from(m: &Member) -> Self {
        Self {
            id: m.id.clone(),
            instance_id: m.instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            session_timeout: m.session_timeout,
            rebalance_timeout: m.rebalance_timeout,
            protocols: m.protocols.clone(),
            assignment: m.assignment.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: Duration = Duration::from_secs(10);

    fn settings(initial: u64) -> GroupSettings {
        GroupSettings {
            min_session: Duration::from_secs(1),
            max_session: Duration::from_secs(60),
            initial_delay: Duration::from_millis(initial),
            consumer: ConsumerSettings {
                session_timeout: Duration::from_secs(45),
                heartbeat_interval: Duration::from_secs(5),
            },
        }
    }

    /// A dynamic member's reference.
    fn dynamic(id: &str) -> MemberRef {
        MemberRef::new(id, None)
    }

    fn join_req(member: &str, metadata: &'static [u8]) -> JoinRequest {
        JoinRequest {
            instance_id: None,
            member_id: member.to_owned(),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout: SESSION,
            rebalance_timeout: Duration::from_secs(5),
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), Bytes::from_static(metadata))],
            requires_known_member_id: false,
        }
    }

    /// [`join_req`] as JoinGroup v4+ sends it (KIP-394).
    fn join_v4(member: &str, metadata: &'static [u8]) -> JoinRequest {
        JoinRequest {
            requires_known_member_id: true,
            ..join_req(member, metadata)
        }
    }

    /// A first v4 join: the member id given with `MEMBER_ID_REQUIRED`.
    fn member_id_required(g: &mut Group, now: Instant) -> String {
        let (id, replies) = g.join(join_v4("", b"new"), now);
        let answer = joined(&replies, &id).expect("answered at once");
        assert_eq!(answer.error, ResponseError::MemberIdRequired.code());
        assert_eq!(
            (answer.member_id.as_str(), answer.generation),
            (id.as_str(), -1)
        );
        id
    }

    #[test]
    fn a_first_v4_join_gets_its_member_id_and_joins_with_it() {
        let t0 = Instant::now();
        let mut g = Group::new("g", settings(0));
        let id = member_id_required(&mut g, t0);
        assert!(g.members.is_empty(), "not a member yet");
        assert_eq!(g.phase, Phase::Empty);
        let (joined_as, replies) = g.join(join_v4(&id, b"new"), t0);
        assert_eq!(joined_as, id);
        let answer = joined(&replies, &id).unwrap();
        assert_eq!((answer.error, answer.generation), (0, 1));
        // An id never given is still unknown.
        let replies = g.join(join_v4("c-made-up", b"x"), t0).1;
        assert_eq!(
            joined(&replies, "c-made-up").unwrap().error,
            ResponseError::UnknownMemberId.code()
        );
    }

    #[test]
    fn a_rebalance_waits_for_a_pending_member_id_until_its_session_ends() {
        let t0 = Instant::now();
        let (mut g, a) = stable_with_one(t0);
        // A session (2 s) shorter than the rebalance timeout (5 s).
        let session = Duration::from_secs(2);
        let first_join = JoinRequest {
            session_timeout: session,
            ..join_v4("", b"new")
        };
        let (abandoned, replies) = g.join(first_join, t0);
        assert_eq!(
            joined(&replies, &abandoned).unwrap().error,
            ResponseError::MemberIdRequired.code()
        );
        // The member rejoins (a new generation is wanted); the pending id holds it back.
        let r = g.join(join_v4(&a, b"changed"), t0);
        assert!(joined(&r.1, &a).is_none(), "waits for the pending id");
        assert_eq!(g.phase, Phase::PreparingRebalance);
        assert_eq!(g.next_deadline(), Some(t0 + session));
        assert!(g.tick(t0 + session - Duration::from_millis(1)).is_empty());
        let replies = g.tick(t0 + session);
        assert_eq!(joined(&replies, &a).unwrap().generation, 2);
        assert!(!g.members.contains_key(&abandoned));
        // Forgotten: joining with it now is refused.
        let replies = g.join(join_v4(&abandoned, b"late"), t0 + session).1;
        assert_eq!(
            joined(&replies, &abandoned).unwrap().error,
            ResponseError::UnknownMemberId.code()
        );
    }

    #[test]
    fn a_pending_member_id_that_leaves_is_not_waited_for_and_rebalances_nothing() {
        let t0 = Instant::now();
        let (mut g, a) = stable_with_one(t0);
        let pending = member_id_required(&mut g, t0);
        let (codes, replies) = g.leave(&[dynamic(&pending)], t0);
        assert_eq!((codes, replies.len()), (vec![0], 0));
        assert_eq!(g.phase, Phase::Stable, "a stable group stays stable");
        let pending = member_id_required(&mut g, t0);
        g.join(join_v4(&a, b"changed"), t0);
        let replies = g.leave(&[dynamic(&pending)], t0).1;
        assert_eq!(joined(&replies, &a).unwrap().generation, 2);
    }

    #[test]
    fn a_static_member_joins_at_once_without_member_id_required() {
        let t0 = Instant::now();
        let mut g = Group::new("g", settings(0));
        let join = JoinRequest {
            instance_id: Some("i-a".into()),
            ..join_v4("", b"a")
        };
        let (id, replies) = g.join(join, t0);
        assert_eq!(joined(&replies, &id).unwrap().error, 0);
        assert!(g.members.contains_key(&id));
    }

    fn joined(replies: &[Reply], member: &str) -> Option<Joined> {
        replies.iter().find_map(|r| match r {
            Reply::Join(m, j) if m == member => Some(j.clone()),
            _ => None,
        })
    }

    fn synced(replies: &[Reply], member: &str) -> Option<Synced> {
        replies.iter().find_map(|r| match r {
            Reply::Sync(m, s) if m == member => Some(s.clone()),
            _ => None,
        })
    }

    /// A stable group of one member at generation 1.
    fn stable_with_one(now: Instant) -> (Group, String) {
        let mut g = Group::new("g", settings(0));
        let (a, replies) = g.join(join_req("", b"a"), now);
        let j = joined(&replies, &a).expect("completes at once without initial delay");
        assert_eq!((j.generation, j.leader.as_str()), (1, a.as_str()));
        let r = g.sync(
            &dynamic(&a),
            1,
            vec![(a.clone(), Bytes::from_static(b"p0"))],
            now,
        );
        assert_eq!(
            synced(&r, &a).unwrap().assignment,
            Bytes::from_static(b"p0")
        );
        assert_eq!(g.phase, Phase::Stable);
        (g, a)
    }

    /// Found by fuzzing (`stored_records`, from a seed with the largest stored
    /// generation): a group restored at generation i32::MAX goes on to the next one as
    /// Kafka's does, wrapping, where it panicked.
    #[test]
    fn the_generation_after_i32_max_wraps() {
        // The stored metadata: format 1, generation i32::MAX, "consumer", "range", leader
        // "m0", stable.
        let meta = b"\x15\x01\x18\x7f\xff\xff\xff\x02consumer\x00\x02range\x00\x02m0\x00\x27";
        let stored = crate::coordinator::groups::store::decode_meta(meta).unwrap();
        assert_eq!(stored.generation, i32::MAX);
        let now = Instant::now();
        let member = StoredMember {
            id: "m0".into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout: SESSION,
            rebalance_timeout: Duration::from_secs(5),
            protocols: vec![("range".into(), Bytes::from_static(b"a"))],
            assignment: Bytes::new(),
        };
        let mut g = Group::restore(
            "g",
            settings(0),
            stored.generation,
            stored.protocol_type,
            stored.protocol,
            stored.leader,
            vec![member],
            stored.stable,
            now,
        );
        let replies = g.join(join_req("m0", b"new metadata"), now).1;
        assert_eq!(joined(&replies, "m0").unwrap().generation, i32::MIN);
        g.generation = i32::MAX;
        g.leave(&[dynamic("m0")], now);
        assert_eq!((g.phase, g.generation), (Phase::Empty, i32::MIN));
    }

    /// A join of static member `instance` (member id `member`, empty when it comes back).
    fn static_join(member: &str, instance: &str, metadata: &'static [u8]) -> JoinRequest {
        JoinRequest {
            instance_id: Some(instance.into()),
            ..join_req(member, metadata)
        }
    }

    /// A stable group of static members "i-a" (the leader) and "i-b", generation 2.
    fn stable_static_pair(t0: Instant) -> (Group, String, String) {
        let mut g = Group::new("g", settings(0));
        let (a, replies) = g.join(static_join("", "i-a", b"a"), t0);
        assert!(joined(&replies, &a).is_some());
        g.sync(&MemberRef::new(&a, Some("i-a")), 1, vec![], t0);
        let (b, _) = g.join(static_join("", "i-b", b"b"), t0);
        let replies = g.join(static_join(&a, "i-a", b"a"), t0).1;
        assert_eq!(joined(&replies, &a).unwrap().generation, 2);
        g.sync(&MemberRef::new(&b, Some("i-b")), 2, vec![], t0);
        let assignment = vec![
            (a.clone(), Bytes::from_static(b"p0")),
            (b.clone(), Bytes::from_static(b"p1")),
        ];
        g.sync(&MemberRef::new(&a, Some("i-a")), 2, assignment, t0);
        assert_eq!(g.phase, Phase::Stable);
        (g, a, b)
    }

    #[test]
    fn a_static_member_back_within_its_session_keeps_its_assignment_without_a_rebalance() {
        let t0 = Instant::now();
        let (mut g, a, b) = stable_static_pair(t0);
        // b restarts: it comes back with its instance id and no member id.
        let (b2, replies) = g.join(static_join("", "i-b", b"b"), t0);
        assert_ne!(b2, b);
        let j = joined(&replies, &b2).expect("answered at once");
        assert_eq!(
            (j.error, j.generation, j.leader.as_str()),
            (0, 2, a.as_str())
        );
        assert!(j.members.is_empty());
        assert_eq!(g.phase, Phase::Stable);
        let r = g.sync(&MemberRef::new(&b2, Some("i-b")), 2, vec![], t0);
        assert_eq!(
            synced(&r, &b2).unwrap().assignment,
            Bytes::from_static(b"p1")
        );
        assert_eq!(g.heartbeat(&MemberRef::new(&a, Some("i-a")), 2, t0), 0);
        // The old member id is fenced.
        let fenced = ResponseError::FencedInstanceId.code();
        assert_eq!(g.heartbeat(&MemberRef::new(&b, Some("i-b")), 2, t0), fenced);
        assert_eq!(g.check_commit(&MemberRef::new(&b, Some("i-b")), 2), fenced);
        let stale = g.join(static_join(&b, "i-b", b"b"), t0).1;
        assert_eq!(joined(&stale, &b).unwrap().error, fenced);
    }

    #[test]
    fn a_returning_static_leader_is_told_the_old_leader_so_it_does_not_assign_again() {
        let t0 = Instant::now();
        let (mut g, a, _) = stable_static_pair(t0);
        let (a2, replies) = g.join(static_join("", "i-a", b"a"), t0);
        let j = joined(&replies, &a2).unwrap();
        assert_eq!((j.leader.as_str(), j.members.len()), (a.as_str(), 0));
        assert_eq!(g.leader.as_deref(), Some(a2.as_str()));
        assert_eq!(g.phase, Phase::Stable);
    }

    #[test]
    fn a_static_member_back_with_new_metadata_rebalances() {
        let t0 = Instant::now();
        let (mut g, _, _) = stable_static_pair(t0);
        let (b2, replies) = g.join(static_join("", "i-b", b"b-new"), t0);
        assert!(
            joined(&replies, &b2).is_none(),
            "it waits for the rebalance"
        );
        assert_eq!(g.phase, Phase::PreparingRebalance);
    }

    #[test]
    fn a_static_member_leaves_by_its_instance_id() {
        let t0 = Instant::now();
        let (mut g, a, b) = stable_static_pair(t0);
        let (codes, _) = g.leave(&[MemberRef::new("", Some("i-b"))], t0);
        assert_eq!(codes, [0]);
        assert!(!g.members.contains_key(&b) && g.members.contains_key(&a));
        let (codes, _) = g.leave(&[MemberRef::new("", Some("i-nobody"))], t0);
        assert_eq!(codes, [ResponseError::UnknownMemberId.code()]);
    }

    #[test]
    fn first_rebalance_waits_for_the_initial_delay() {
        let t0 = Instant::now();
        let mut g = Group::new("g", settings(100));
        let (a, replies) = g.join(join_req("", b"a"), t0);
        assert!(replies.is_empty(), "waits for more members");
        let (b, replies) = g.join(join_req("", b"b"), t0 + Duration::from_millis(50));
        assert!(replies.is_empty());
        assert_eq!(g.next_deadline(), Some(t0 + Duration::from_millis(100)));
        let replies = g.tick(t0 + Duration::from_millis(100));
        let (ja, jb) = (joined(&replies, &a).unwrap(), joined(&replies, &b).unwrap());
        assert_eq!(ja.generation, 1);
        assert_eq!(ja.leader, jb.leader);
        let leader = ja.leader.clone();
        let (leader_reply, follower_reply) = if leader == a { (&ja, &jb) } else { (&jb, &ja) };
        assert_eq!(
            leader_reply.members.len(),
            2,
            "the leader sees every member"
        );
        assert!(follower_reply.members.is_empty());
    }

    #[test]
    fn followers_wait_for_the_leaders_assignment() {
        let t0 = Instant::now();
        let (mut g, a) = stable_with_one(t0);
        let (b, replies) = g.join(join_req("", b"b"), t0);
        assert!(
            joined(&replies, &b).is_none(),
            "waits for the leader to rejoin"
        );
        assert_eq!(
            g.heartbeat(&dynamic(&a), 1, t0),
            ResponseError::RebalanceInProgress.code()
        );
        let replies = g.join(join_req(&a, b"a"), t0).1;
        assert_eq!(joined(&replies, &b).unwrap().generation, 2);
        assert!(
            g.sync(&dynamic(&b), 2, vec![], t0).is_empty(),
            "the follower waits"
        );
        let replies = g.sync(
            &dynamic(&a),
            2,
            vec![
                (a.clone(), Bytes::from_static(b"pa")),
                (b.clone(), Bytes::from_static(b"pb")),
            ],
            t0,
        );
        assert_eq!(
            synced(&replies, &b).unwrap().assignment,
            Bytes::from_static(b"pb")
        );
        assert_eq!(
            synced(&replies, &a).unwrap().assignment,
            Bytes::from_static(b"pa")
        );
        assert_eq!(g.phase, Phase::Stable);
        assert_eq!(g.heartbeat(&dynamic(&b), 2, t0), 0);
    }

    #[test]
    fn a_leave_rebalances_the_rest() {
        let t0 = Instant::now();
        let (mut g, a) = stable_with_one(t0);
        let (b, _) = g.join(join_req("", b"b"), t0);
        g.join(join_req(&a, b"a"), t0);
        g.sync(&dynamic(&a), 2, vec![], t0);
        let (codes, _) = g.leave(&[dynamic(&b)], t0);
        assert_eq!(codes, vec![0]);
        assert_eq!(g.phase, Phase::PreparingRebalance);
        let replies = g.join(join_req(&a, b"a"), t0).1;
        assert_eq!(joined(&replies, &a).unwrap().generation, 3);
        let (codes, _) = g.leave(&[dynamic(&a), dynamic("ghost")], t0);
        assert_eq!(codes, vec![0, ResponseError::UnknownMemberId.code()]);
        assert_eq!(g.phase, Phase::Empty);
    }

    #[test]
    fn a_silent_member_expires_after_its_session_timeout() {
        let t0 = Instant::now();
        let (mut g, a) = stable_with_one(t0);
        assert_eq!(g.next_deadline(), Some(t0 + SESSION));
        assert!(g.tick(t0 + SESSION - Duration::from_millis(1)).is_empty());
        assert!(g.members.contains_key(&a));
        g.tick(t0 + SESSION);
        assert!(g.members.is_empty());
        assert_eq!(g.phase, Phase::Empty);
    }

    #[test]
    fn a_follower_waiting_for_a_slow_leader_keeps_its_session() {
        let t0 = Instant::now();
        let short = |member: &str, metadata| JoinRequest {
            session_timeout: Duration::from_secs(2),
            ..join_req(member, metadata)
        };
        let (mut g, a) = stable_with_one(t0);
        let (b, _) = g.join(short("", b"b"), t0);
        g.join(short(&a, b"a"), t0);
        let (leader, follower) = match g.leader.clone().unwrap() {
            l if l == a => (a, b),
            l => (l, a),
        };
        assert!(
            g.sync(&dynamic(&follower), 2, vec![], t0).is_empty(),
            "waits for the leader"
        );
        // The leader takes longer than a session (2 s) to assign, within the rebalance
        // timeout (5 s); it heartbeats meanwhile, the follower (its sync outstanding)
        // cannot.
        let late = t0 + Duration::from_millis(2500);
        assert_eq!(
            g.heartbeat(&dynamic(&leader), 2, t0 + Duration::from_secs(1)),
            0
        );
        assert!(g.tick(late).is_empty());
        assert!(g.members.contains_key(&follower), "held, not expired");
        let replies = g.sync(
            &dynamic(&leader),
            2,
            vec![(follower.clone(), Bytes::from_static(b"pf"))],
            late,
        );
        assert_eq!(
            synced(&replies, &follower).unwrap().assignment,
            Bytes::from_static(b"pf")
        );
        assert_eq!(g.phase, Phase::Stable);
    }

    #[test]
    fn a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() {
        let t0 = Instant::now();
        let (mut g, a) = stable_with_one(t0);
        let (b, _) = g.join(join_req("", b"b"), t0);
        let replies = g.tick(t0 + Duration::from_secs(5));
        let jb = joined(&replies, &b).unwrap();
        assert_eq!((jb.generation, jb.leader.as_str()), (2, b.as_str()));
        assert!(!g.members.contains_key(&a));
    }

    #[test]
    fn losing_the_leader_rebalances_as_soon_as_the_rest_rejoin() {
        let t0 = Instant::now();
        let mut g = Group::new("g", settings(60_000));
        let (a, _) = g.join(join_req("", b"a"), t0);
        let (b, _) = g.join(join_req("", b"b"), t0);
        g.tick(t0 + Duration::from_secs(60));
        let leader = g.leader.clone().unwrap();
        let follower = if leader == a { b } else { a };
        g.leave(&[dynamic(&leader)], t0 + Duration::from_secs(61));
        let r = g
            .join(join_req(&follower, b"x"), t0 + Duration::from_secs(61))
            .1;
        let j = joined(&r, &follower).expect("no initial delay outside an empty group");
        assert_eq!(j.leader, follower);
    }

    #[test]
    fn wrong_generation_unknown_member_and_bad_timeouts_are_refused() {
        let t0 = Instant::now();
        let (mut g, a) = stable_with_one(t0);
        assert_eq!(
            g.heartbeat(&dynamic(&a), 7, t0),
            ResponseError::IllegalGeneration.code()
        );
        assert_eq!(
            g.heartbeat(&dynamic("x"), 1, t0),
            ResponseError::UnknownMemberId.code()
        );
        let r = g.join(join_req("x", b"x"), t0).1;
        assert_eq!(
            joined(&r, "x").unwrap().error,
            ResponseError::UnknownMemberId.code()
        );
        let mut short = join_req("", b"s");
        short.session_timeout = Duration::from_millis(10);
        let r = g.join(short, t0).1;
        assert_eq!(
            joined(&r, "").unwrap().error,
            ResponseError::InvalidSessionTimeout.code()
        );
        let mut other = join_req("", b"o");
        other.protocol_type = "connect".into();
        let r = g.join(other, t0).1;
        assert_eq!(
            joined(&r, "").unwrap().error,
            ResponseError::InconsistentGroupProtocol.code()
        );
    }

    #[test]
    fn a_follower_rejoining_unchanged_keeps_the_generation() {
        let t0 = Instant::now();
        let (mut g, a) = stable_with_one(t0);
        let (b, _) = g.join(join_req("", b"b"), t0);
        g.join(join_req(&a, b"a"), t0);
        g.sync(&dynamic(&a), 2, vec![], t0);
        let (follower, metadata): (&str, &'static [u8]) = if g.leader.as_deref() == Some(a.as_str())
        {
            (&b, b"b")
        } else {
            (&a, b"a")
        };
        let r = g.join(join_req(follower, metadata), t0).1;
        assert_eq!(joined(&r, follower).unwrap().generation, 2);
        assert_eq!(g.phase, Phase::Stable);
    }

    #[test]
    fn commits_are_checked_against_the_generation() {
        let t0 = Instant::now();
        let empty = Group::new("g", settings(0));
        assert_eq!(empty.check_commit(&dynamic(""), -1), 0);
        // A consumer-protocol client outside group management has a member id.
        assert_eq!(empty.check_commit(&dynamic("its-own-uuid"), -1), 0);
        let (g, a) = stable_with_one(t0);
        assert_eq!(g.check_commit(&dynamic(&a), 1), 0);
        assert_eq!(
            g.check_commit(&dynamic(&a), 0),
            ResponseError::IllegalGeneration.code()
        );
        assert_eq!(
            g.check_commit(&dynamic(""), -1),
            ResponseError::UnknownMemberId.code()
        );
    }

    #[test]
    fn a_restored_group_is_stable_with_fresh_sessions() {
        let t0 = Instant::now();
        let (g, a) = stable_with_one(t0);
        let stored: Vec<StoredMember> = g.members.values().map(StoredMember::from).collect();
        let later = t0 + Duration::from_secs(100);
        let mut r = Group::restore(
            "g",
            settings(0),
            g.generation,
            g.protocol_type.clone(),
            g.protocol.clone(),
            g.leader.clone(),
            stored,
            true,
            later,
        );
        assert_eq!(r.phase, Phase::Stable);
        assert_eq!(r.heartbeat(&dynamic(&a), 1, later), 0);
        assert_eq!(r.next_deadline(), Some(later + SESSION));
    }
}
