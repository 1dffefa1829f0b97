//! One task per consumer group: it owns the group's [`Group`] state, takes commands in
//! arrival order, answers joins and syncs when the protocol allows, expires members on
//! time, and persists the group after every change of membership or generation. Its writes
//! are fenced by this instance's lease on the group: once another instance took the group
//! over, the task stops (its waiting members are told NOT_COORDINATOR).

use super::state::{Group, GroupSettings, JoinRequest, Joined, MemberRef, Reply, Synced};
use super::store::{Fence, GroupStore};
use super::subscription;
use crate::telemetry::compat::kafka_exporter;
use crate::telemetry::kafka as m;
use bytes::Bytes;
use std::collections::{HashMap, HashSet};
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
pub enum Command {
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

/// Runs the task of group `id` until `commands` closes, `shutdown`, `fence` no longer
/// holds, or the group has had no members and no command for `idle` (the coordinator then
/// lets its lease go; the next request starts a task again).
pub async fn run(
    id: String,
    settings: GroupSettings,
    store: GroupStore,
    fence: Fence,
    idle: Duration,
    mut commands: mpsc::Receiver<Command>,
    shutdown: CancellationToken,
) {
    let mut group = match store.load(&id).await {
        Ok(Some(s)) => Group::restore(
            &id,
            settings,
            s.generation,
            s.protocol_type,
            s.protocol,
            s.leader,
            s.members,
            s.stable,
            Instant::now(),
        ),
        Ok(None) => Group::new(&id, settings),
        Err(e) => {
            warn!(group = %id, error = %e, "cannot load the group; starting it empty");
            Group::new(&id, settings)
        }
    };
    let mut joins: HashMap<String, oneshot::Sender<Joined>> = HashMap::new();
    let mut syncs: HashMap<String, oneshot::Sender<Synced>> = HashMap::new();
    publish_members(&group);
    loop {
        let deadline = group.next_deadline().map(tokio::time::Instant::from_std);
        let replies = tokio::select! {
            () = shutdown.cancelled() => break,
            command = commands.recv() => match command {
                None => break,
                Some(c) => handle(&mut group, &store, &fence, c, &mut joins, &mut syncs).await,
            },
            () = sleep_until(deadline) => group.tick(Instant::now()),
            () = tokio::time::sleep(idle), if group.members.is_empty() => {
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
        // Whoever left or expired is not answered: dropping its sender tells its request.
        joins.retain(|member, _| group.members.contains_key(member));
        syncs.retain(|member, _| group.members.contains_key(member));
        let rebalances = group.take_rebalances();
        if rebalances > 0 {
            metrics::counter!(m::GROUP_REBALANCES_TOTAL, m::LABEL_GROUP => id.clone())
                .increment(rebalances);
        }
        if group.take_dirty() {
            publish_members(&group);
            match store.save(&group, &fence).await {
                Ok(true) => {}
                Ok(false) => {
                    info!(group = %id, "another instance coordinates the group now; stopping");
                    break;
                }
                Err(e) => warn!(group = %id, error = %e, "cannot persist the group"),
            }
        }
    }
}

/// Applies one command; returns the replies owed to waiting members.
async fn handle(
    group: &mut Group,
    store: &GroupStore,
    fence: &Fence,
    command: Command,
    joins: &mut HashMap<String, oneshot::Sender<Joined>>,
    syncs: &mut HashMap<String, oneshot::Sender<Synced>>,
) -> Vec<Reply> {
    let now = Instant::now();
    match command {
        Command::Join(req, reply) => {
            let (member, replies) = group.join(req, now);
            joins.insert(member, reply);
            replies
        }
        Command::Sync {
            member,
            generation,
            assignments,
            reply,
        } => {
            syncs.insert(member.id.clone(), reply);
            group.sync(&member, generation, assignments, now)
        }
        Command::Heartbeat {
            member,
            generation,
            reply,
        } => {
            let _ = reply.send(group.heartbeat(&member, generation, now));
            Vec::new()
        }
        Command::Leave { members, reply } => {
            let (codes, replies) = group.leave(&members, now);
            let _ = reply.send(codes);
            replies
        }
        Command::CheckCommit {
            member,
            generation,
            reply,
        } => {
            let _ = reply.send(group.check_commit(&member, generation));
            Vec::new()
        }
        Command::Describe(reply) => {
            let _ = reply.send(view(group));
            Vec::new()
        }
        Command::Delete(reply) => {
            let code = if !group.members.is_empty() {
                kafka_protocol::ResponseError::NonEmptyGroup.code()
            } else {
                match store.delete(&group.id, fence).await {
                    Ok(true) => {
                        *group = Group::new(&group.id.clone(), group.settings());
                        0
                    }
                    Ok(false) => kafka_protocol::ResponseError::NotCoordinator.code(),
                    Err(e) => {
                        warn!(group = %group.id, error = %e, "cannot delete the group");
                        kafka_protocol::ResponseError::UnknownServerError.code()
                    }
                }
            };
            let _ = reply.send(code);
            Vec::new()
        }
        Command::DeleteOffsets { partitions, reply } => {
            let _ = reply.send(delete_offsets(group, store, fence, &partitions).await);
            Vec::new()
        }
    }
}

/// OffsetDelete of `partitions` in `group`: see [`super::Coordinator::delete_offsets`].
async fn delete_offsets(
    group: &Group,
    store: &GroupStore,
    fence: &Fence,
    partitions: &[(String, i32)],
) -> Result<Vec<i16>, i16> {
    use kafka_protocol::ResponseError;
    let subscribed: HashSet<String> = if group.members.is_empty() {
        match store.exists(&group.id).await {
            Ok(true) => {}
            Ok(false) => return Err(ResponseError::GroupIdNotFound.code()),
            Err(e) => {
                warn!(group = %group.id, error = %e, "cannot look the group up");
                return Err(ResponseError::CoordinatorNotAvailable.code());
            }
        }
        HashSet::new()
    } else if group.protocol_type.as_deref() == Some(CONSUMER) {
        // Kafka's coordinator counts a member whose subscription does not parse as
        // subscribed to nothing.
        let protocol = group.protocol.clone().unwrap_or_default();
        group
            .members
            .values()
            .filter_map(|m| subscription::topics(&m.metadata(&protocol)))
            .flatten()
            .collect()
    } else {
        return Err(ResponseError::NonEmptyGroup.code());
    };
    let deletable: Vec<(String, i32)> = partitions
        .iter()
        .filter(|(topic, _)| !subscribed.contains(topic))
        .cloned()
        .collect();
    if !deletable.is_empty() {
        match store.delete_offsets(&group.id, &deletable, fence).await {
            Ok(true) => {}
            Ok(false) => return Err(ResponseError::NotCoordinator.code()),
            Err(e) => {
                warn!(group = %group.id, error = %e, "cannot delete committed offsets");
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
        Command::Leave { members, reply } => {
            let _ = reply.send(vec![code.code(); members.len()]);
        }
        Command::Delete(reply) => {
            let _ = reply.send(code.code());
        }
        Command::DeleteOffsets { reply, .. } => {
            let _ = reply.send(Err(code.code()));
        }
        // DescribeGroups answers COORDINATOR_NOT_AVAILABLE for a dropped reply.
        Command::Describe(_) => {}
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

fn publish_members(group: &Group) {
    let members = group.members.len() as f64;
    metrics::gauge!(m::GROUP_MEMBERS, m::LABEL_GROUP => group.id.clone()).set(members);
    metrics::gauge!(kafka_exporter::CONSUMERGROUP_MEMBERS, kafka_exporter::LABEL_CONSUMERGROUP => group.id.clone())
        .set(members);
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
