//! One task per consumer group: it owns the group's state — a classic [`Group`] or a
//! consumer-protocol [`ConsumerGroup`] (KIP-848) — takes commands in arrival order,
//! answers joins and syncs when the protocol allows, expires members on time, and persists
//! the group after every change of membership or generation (a consumer-protocol
//! heartbeat is answered only once what it changed is stored). Its writes are fenced by
//! this instance's lease on the group: once another instance took the group over, the
//! task stops (its waiting members are told NOT_COORDINATOR).
//!
//! An empty group takes the kind of the first member's protocol; a member of the other
//! protocol is refused while the group has members (`INCONSISTENT_GROUP_PROTOCOL` to a
//! JoinGroup, `GROUP_ID_NOT_FOUND` to a ConsumerGroupHeartbeat, as Kafka without its
//! online migration).

use super::consumer::{
    ConsumerGroup, ConsumerGroupView, ConsumerHeartbeat, HeartbeatAnswer, TopicCatalog,
};
use super::state::{Group, GroupSettings, JoinRequest, Joined, MemberRef, Reply, Synced};
use super::store::{Fence, GroupStore, Stored};
use super::subscription;
use bytes::Bytes;
use ferry_telemetry::compat::kafka_exporter;
use ferry_telemetry::kafka as m;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

/// A member as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct MemberView {
    /// Member id.
    pub id: String,
    /// A static member's `group.instance.id`.
    pub instance_id: Option<String>,
    /// Client id.
    pub client_id: String,
    /// Client address.
    pub client_host: String,
    /// Metadata for the chosen protocol.
    pub metadata: Bytes,
    /// Assignment.
    pub assignment: Bytes,
}

/// A group as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct GroupView {
    /// Phase name.
    pub state: &'static str,
    /// Protocol type.
    pub protocol_type: String,
    /// Chosen protocol.
    pub protocol: String,
    /// Members.
    pub members: Vec<MemberView>,
}

/// The protocol type of consumer groups (whose members' subscriptions Kafka reads).
const CONSUMER: &str = "consumer";

/// What a group task can be asked.
pub(crate) enum Command {
    /// JoinGroup.
    Join(JoinRequest, oneshot::Sender<Joined>),
    /// SyncGroup.
    Sync {
        /// Who syncs.
        member: MemberRef,
        /// Generation.
        generation: i32,
        /// The leader's assignment (empty from followers).
        assignments: Vec<(String, Bytes)>,
        /// Where the answer goes.
        reply: oneshot::Sender<Synced>,
    },
    /// Heartbeat.
    Heartbeat {
        /// Who sends it.
        member: MemberRef,
        /// Generation.
        generation: i32,
        /// Where the error code goes.
        reply: oneshot::Sender<i16>,
    },
    /// LeaveGroup.
    Leave {
        /// Who leaves.
        members: Vec<MemberRef>,
        /// Where the per-member error codes go.
        reply: oneshot::Sender<Vec<i16>>,
    },
    /// Checks whether an OffsetCommit may proceed.
    CheckCommit {
        /// Who commits.
        member: MemberRef,
        /// Generation.
        generation: i32,
        /// Where the error code goes.
        reply: oneshot::Sender<i16>,
    },
    /// ConsumerGroupHeartbeat.
    ConsumerHeartbeat(ConsumerHeartbeat, oneshot::Sender<HeartbeatAnswer>),
    /// ConsumerGroupDescribe: the group, if it is a consumer-protocol one.
    ConsumerDescribe(oneshot::Sender<Option<ConsumerGroupView>>),
    /// DescribeGroups.
    Describe(oneshot::Sender<GroupView>),
    /// DeleteGroups: refused while the group has members.
    Delete(oneshot::Sender<i16>),
    /// OffsetDelete.
    DeleteOffsets {
        /// The (topic, partition) offsets to delete.
        partitions: Vec<(String, i32)>,
        /// Where the per-partition codes (or the group's code) go.
        reply: oneshot::Sender<Result<Vec<i16>, i16>>,
    },
}

/// The state of one group: of the protocol its members speak.
pub(crate) enum Kind {
    /// JoinGroup/SyncGroup members.
    Classic(Group),
    /// ConsumerGroupHeartbeat members.
    Consumer(ConsumerGroup),
}

impl Kind {
    /// Whether the group has no members (it may then change kind).
    fn is_empty(&self) -> bool {
        match self {
            Self::Classic(g) => g.members.is_empty(),
            Self::Consumer(g) => g.members.is_empty(),
        }
    }

    /// How many members it has.
    fn members(&self) -> usize {
        match self {
            Self::Classic(g) => g.members.len(),
            Self::Consumer(g) => g.members.len(),
        }
    }

    /// When the group next has something to do on its own.
    fn next_deadline(&self) -> Option<Instant> {
        match self {
            Self::Classic(g) => g.next_deadline(),
            Self::Consumer(g) => g.next_deadline(),
        }
    }

    /// Does what is due at `now`; returns the replies owed.
    fn tick(&mut self, now: Instant) -> Vec<Reply> {
        match self {
            Self::Classic(g) => g.tick(now),
            Self::Consumer(g) => {
                g.tick(now);
                Vec::new()
            }
        }
    }

    /// The classic group, making an empty group of the other kind a classic one.
    fn classic(&mut self, settings: GroupSettings, id: &str) -> Option<&mut Group> {
        if let Self::Consumer(g) = self
            && g.members.is_empty()
        {
            *self = Self::Classic(Group::new(id, settings));
        }
        match self {
            Self::Classic(g) => Some(g),
            Self::Consumer(_) => None,
        }
    }

    /// The consumer-protocol group, making an empty group of the other kind one.
    fn consumer(&mut self, settings: GroupSettings, id: &str) -> Option<&mut ConsumerGroup> {
        if let Self::Classic(g) = self
            && g.members.is_empty()
        {
            *self = Self::Consumer(ConsumerGroup::new(id, settings.consumer));
        }
        match self {
            Self::Consumer(g) => Some(g),
            Self::Classic(_) => None,
        }
    }
}

/// What one group task works with besides its state.
pub(crate) struct Env {
    /// The group's id.
    pub id: String,
    /// Bounds and timeouts of members.
    pub settings: GroupSettings,
    /// Where the group is persisted.
    pub store: GroupStore,
    /// This instance's claim on the group.
    pub fence: Fence,
    /// The topics members are assigned from.
    pub catalog: Arc<dyn TopicCatalog + Send + Sync>,
}

/// A consumer-protocol answer, sent once the group is persisted.
type Deferred = (oneshot::Sender<HeartbeatAnswer>, HeartbeatAnswer);

/// Runs the task of group `env.id` until `commands` closes, `shutdown`, the fence no
/// longer holds, or the group has had no members and no command for `idle` (the
/// coordinator then lets its lease go; the next request starts a task again).
pub(crate) async fn run(
    env: Env,
    idle: Duration,
    mut commands: mpsc::Receiver<Command>,
    shutdown: CancellationToken,
) {
    let id = env.id.clone();
    // At 0 before the first rebalance this task completes, for increase().
    metrics::counter!(m::GROUP_REBALANCES_TOTAL, m::LABEL_GROUP => id.clone()).increment(0);
    let mut group = load(&env).await;
    let mut joins: HashMap<String, oneshot::Sender<Joined>> = HashMap::new();
    let mut syncs: HashMap<String, oneshot::Sender<Synced>> = HashMap::new();
    let mut deferred: Vec<Deferred> = Vec::new();
    publish_members(&id, &group);
    loop {
        let deadline = group.next_deadline().map(tokio::time::Instant::from_std);
        let replies = tokio::select! {
            () = shutdown.cancelled() => break,
            command = commands.recv() => match command {
                None => break,
                Some(c) => handle(&mut group, &env, c, &mut joins, &mut syncs, &mut deferred).await,
            },
            () = sleep_until(deadline) => group.tick(Instant::now()),
            () = tokio::time::sleep(idle), if group.is_empty() => {
                debug!(group = %id, "no members and no requests; stopping its task");
                // Whatever arrived meanwhile goes back to the client, which asks for the
                // coordinator again and reaches the task started after this one.
                commands.close();
                while let Ok(command) = commands.try_recv() {
                    refuse(command);
                }
                break;
            }
        };
        for reply in replies {
            debug!(group = %id, ?reply, "group reply");
            match reply {
                Reply::Join(member, joined) => {
                    if let Some(tx) = joins.remove(&member) {
                        let _ = tx.send(joined);
                    }
                }
                Reply::Sync(member, synced) => {
                    if let Some(tx) = syncs.remove(&member) {
                        let _ = tx.send(synced);
                    }
                }
            }
        }
        let (rebalances, dirty) = match &mut group {
            Kind::Classic(g) => {
                // Whoever left or expired is not answered: dropping its sender tells its
                // request.
                joins.retain(|member, _| g.members.contains_key(member));
                syncs.retain(|member, _| g.members.contains_key(member));
                (g.take_rebalances(), g.take_dirty())
            }
            Kind::Consumer(g) => (g.take_rebalances(), g.take_dirty()),
        };
        if rebalances > 0 {
            metrics::counter!(m::GROUP_REBALANCES_TOTAL, m::LABEL_GROUP => id.clone())
                .increment(rebalances);
        }
        let mut stop = false;
        if dirty {
            publish_members(&id, &group);
            let saved = match &group {
                Kind::Classic(g) => env.store.save(g, &env.fence).await,
                Kind::Consumer(g) => env.store.save_consumer(g, &env.fence).await,
            };
            match saved {
                Ok(true) => {}
                Ok(false) => {
                    info!(group = %id, "another instance coordinates the group now; stopping");
                    stop = true;
                }
                Err(e) => warn!(group = %id, error = %e, "cannot persist the group"),
            }
        }
        for (tx, mut answer) in deferred.drain(..) {
            if stop {
                answer = not_coordinator(answer);
            }
            let _ = tx.send(answer);
        }
        if stop {
            break;
        }
    }
}

/// The group as stored, or a new empty one.
async fn load(env: &Env) -> Kind {
    let id = env.id.as_str();
    match env.store.load(id).await {
        Ok(Some(Stored::Classic(s))) => Kind::Classic(Group::restore(
            id,
            env.settings,
            s.generation,
            s.protocol_type,
            s.protocol,
            s.leader,
            s.members,
            s.stable,
            Instant::now(),
        )),
        Ok(Some(Stored::Consumer(s))) => Kind::Consumer(ConsumerGroup::restore(
            id,
            env.settings.consumer,
            s.epochs,
            s.topics,
            s.members,
        )),
        Ok(None) => Kind::Classic(Group::new(id, env.settings)),
        Err(e) => {
            warn!(group = %id, error = %e, "cannot load the group; starting it empty");
            Kind::Classic(Group::new(id, env.settings))
        }
    }
}

/// `answer` turned into NOT_COORDINATOR (its group could not be persisted here).
fn not_coordinator(answer: HeartbeatAnswer) -> HeartbeatAnswer {
    HeartbeatAnswer {
        error: kafka_protocol::ResponseError::NotCoordinator.code(),
        message: None,
        assignment: None,
        ..answer
    }
}

/// Applies one command; returns the replies owed to waiting members (consumer-protocol
/// answers go to `deferred`, sent once the group is persisted).
async fn handle(
    group: &mut Kind,
    env: &Env,
    command: Command,
    joins: &mut HashMap<String, oneshot::Sender<Joined>>,
    syncs: &mut HashMap<String, oneshot::Sender<Synced>>,
    deferred: &mut Vec<Deferred>,
) -> Vec<Reply> {
    use kafka_protocol::ResponseError;
    let now = Instant::now();
    let (settings, id) = (env.settings, env.id.as_str());
    match command {
        Command::Join(req, reply) => match group.classic(settings, id) {
            Some(g) => {
                let (member, replies) = g.join(req, now);
                joins.insert(member, reply);
                replies
            }
            None => {
                let refusal =
                    Joined::error(&req.member_id, ResponseError::InconsistentGroupProtocol);
                let _ = reply.send(refusal);
                Vec::new()
            }
        },
        Command::Sync {
            member,
            generation,
            assignments,
            reply,
        } => match group.classic(settings, id) {
            Some(g) => {
                syncs.insert(member.id.clone(), reply);
                g.sync(&member, generation, assignments, now)
            }
            None => {
                let _ = reply.send(Synced::error(ResponseError::UnknownMemberId));
                Vec::new()
            }
        },
        Command::Heartbeat {
            member,
            generation,
            reply,
        } => {
            let code = match group.classic(settings, id) {
                Some(g) => g.heartbeat(&member, generation, now),
                None => ResponseError::UnknownMemberId.code(),
            };
            let _ = reply.send(code);
            Vec::new()
        }
        Command::Leave { members, reply } => match group.classic(settings, id) {
            Some(g) => {
                let (codes, replies) = g.leave(&members, now);
                let _ = reply.send(codes);
                replies
            }
            None => {
                let _ = reply.send(vec![ResponseError::UnknownMemberId.code(); members.len()]);
                Vec::new()
            }
        },
        Command::ConsumerHeartbeat(req, reply) => {
            let answer = match group.consumer(settings, id) {
                Some(g) => g.heartbeat(req, env.catalog.as_ref(), now),
                None => HeartbeatAnswer::refusal(
                    req,
                    ResponseError::GroupIdNotFound,
                    Some(format!("Group {id} is not a consumer group.")),
                    settings.consumer.heartbeat_interval,
                ),
            };
            deferred.push((reply, answer));
            Vec::new()
        }
        Command::CheckCommit {
            member,
            generation,
            reply,
        } => {
            let code = match group {
                Kind::Classic(g) => g.check_commit(&member, generation),
                Kind::Consumer(g) => g.check_commit(&member.id, generation),
            };
            let _ = reply.send(code);
            Vec::new()
        }
        Command::ConsumerDescribe(reply) => {
            let view = match group {
                Kind::Consumer(g) => Some(g.view()),
                Kind::Classic(_) => None,
            };
            let _ = reply.send(view);
            Vec::new()
        }
        Command::Describe(reply) => {
            let _ = reply.send(match group {
                Kind::Classic(g) => view(g),
                Kind::Consumer(g) => consumer_view(g),
            });
            Vec::new()
        }
        Command::Delete(reply) => {
            let code = if !group.is_empty() {
                ResponseError::NonEmptyGroup.code()
            } else {
                match env.store.delete(id, &env.fence).await {
                    Ok(true) => {
                        *group = Kind::Classic(Group::new(id, settings));
                        0
                    }
                    Ok(false) => ResponseError::NotCoordinator.code(),
                    Err(e) => {
                        warn!(group = %id, error = %e, "cannot delete the group");
                        ResponseError::UnknownServerError.code()
                    }
                }
            };
            let _ = reply.send(code);
            Vec::new()
        }
        Command::DeleteOffsets { partitions, reply } => {
            let _ = reply.send(delete_offsets(group, env, &partitions).await);
            Vec::new()
        }
    }
}

/// OffsetDelete of `partitions` in `group`: see [`super::Coordinator::delete_offsets`].
async fn delete_offsets(
    group: &Kind,
    env: &Env,
    partitions: &[(String, i32)],
) -> Result<Vec<i16>, i16> {
    use kafka_protocol::ResponseError;
    let (store, fence, id) = (&env.store, &env.fence, env.id.as_str());
    let subscribed: HashSet<String> = match group {
        _ if group.is_empty() => match store.exists(id).await {
            Ok(true) => HashSet::new(),
            Ok(false) => return Err(ResponseError::GroupIdNotFound.code()),
            Err(e) => {
                warn!(group = %id, error = %e, "cannot look the group up");
                return Err(ResponseError::CoordinatorNotAvailable.code());
            }
        },
        Kind::Classic(g) if g.protocol_type.as_deref() == Some(CONSUMER) => {
            // Kafka's coordinator counts a member whose subscription does not parse as
            // subscribed to nothing.
            let protocol = g.protocol.clone().unwrap_or_default();
            g.members
                .values()
                .filter_map(|m| subscription::topics(&m.metadata(&protocol)))
                .flatten()
                .collect()
        }
        Kind::Classic(_) => return Err(ResponseError::NonEmptyGroup.code()),
        Kind::Consumer(g) => g.topics.keys().cloned().collect(),
    };
    let deletable: Vec<(String, i32)> = partitions
        .iter()
        .filter(|(topic, _)| !subscribed.contains(topic))
        .cloned()
        .collect();
    if !deletable.is_empty() {
        match store.delete_offsets(id, &deletable, fence).await {
            Ok(true) => {}
            Ok(false) => return Err(ResponseError::NotCoordinator.code()),
            Err(e) => {
                warn!(group = %id, error = %e, "cannot delete committed offsets");
                return Err(ResponseError::CoordinatorNotAvailable.code());
            }
        }
    }
    Ok(partitions
        .iter()
        .map(|(topic, _)| {
            if subscribed.contains(topic) {
                ResponseError::GroupSubscribedToTopic.code()
            } else {
                0
            }
        })
        .collect())
}

/// Answers `command` with NOT_COORDINATOR.
fn refuse(command: Command) {
    let code = kafka_protocol::ResponseError::NotCoordinator;
    match command {
        Command::Join(req, reply) => {
            let _ = reply.send(Joined::error(&req.member_id, code));
        }
        Command::Sync { reply, .. } => {
            let _ = reply.send(Synced::error(code));
        }
        Command::Heartbeat { reply, .. } | Command::CheckCommit { reply, .. } => {
            let _ = reply.send(code.code());
        }
        Command::ConsumerHeartbeat(req, reply) => {
            let _ = reply.send(HeartbeatAnswer::refusal(req, code, None, Duration::ZERO));
        }
        Command::Leave { members, reply } => {
            let _ = reply.send(vec![code.code(); members.len()]);
        }
        Command::Delete(reply) => {
            let _ = reply.send(code.code());
        }
        Command::DeleteOffsets { reply, .. } => {
            let _ = reply.send(Err(code.code()));
        }
        // The describes answer COORDINATOR_NOT_AVAILABLE for a dropped reply.
        Command::Describe(_) | Command::ConsumerDescribe(_) => {}
    }
}

fn view(group: &Group) -> GroupView {
    let protocol = group.protocol.clone().unwrap_or_default();
    GroupView {
        state: group.phase.as_str(),
        protocol_type: group.protocol_type.clone().unwrap_or_default(),
        members: group
            .members
            .values()
            .map(|m| MemberView {
                id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                metadata: m.metadata(&protocol),
                assignment: m.assignment.clone(),
            })
            .collect(),
        protocol,
    }
}

/// A consumer-protocol group as DescribeGroups shows it, as Kafka does: protocol type
/// `consumer`, its assignor as the protocol, each member's subscription and assignment
/// in the classic consumer's layout.
fn consumer_view(group: &ConsumerGroup) -> GroupView {
    let names: BTreeMap<[u8; 16], &str> = group
        .topics
        .iter()
        .map(|(name, (topic, _))| (*topic, name.as_str()))
        .collect();
    GroupView {
        state: group.state(),
        protocol_type: CONSUMER.to_owned(),
        protocol: group.assignor().name().to_owned(),
        members: group
            .members
            .values()
            .map(|m| {
                let subscribed: Vec<&str> = group
                    .topics
                    .keys()
                    .map(String::as_str)
                    .filter(|t| m.subscription.takes(t))
                    .collect();
                let assigned: Vec<(String, Vec<i32>)> = m
                    .assigned
                    .iter()
                    .filter_map(|(t, ps)| {
                        Some((names.get(t)?.to_string(), ps.iter().copied().collect()))
                    })
                    .collect();
                MemberView {
                    id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: subscription::encode_subscription(subscribed.into_iter()).into(),
                    assignment: subscription::encode_assignment(&assigned).into(),
                }
            })
            .collect(),
    }
}

fn publish_members(id: &str, group: &Kind) {
    let members = group.members() as f64;
    metrics::gauge!(m::GROUP_MEMBERS, m::LABEL_GROUP => id.to_owned()).set(members);
    metrics::gauge!(kafka_exporter::CONSUMERGROUP_MEMBERS, kafka_exporter::LABEL_CONSUMERGROUP => id.to_owned())
        .set(members);
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
