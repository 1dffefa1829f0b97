//! The consumer group coordinator: JoinGroup, SyncGroup, Heartbeat and LeaveGroup (the
//! classic protocol) and ConsumerGroupHeartbeat (the consumer protocol of KIP-848) go to a
//! task per group ([`actor`]) that runs the protocol ([`state`], [`consumer`] with the
//! server-side [`assignors`]) and persists the group ([`store`]) so it survives a restart;
//! committed offsets are written to the store after the group task checked the member and
//! generation (or member epoch).
//!
//! With several instances sharing a store, each group has one coordinator: the holder of
//! the group's [`Lease`]. FindCoordinator (or any group request) claims the lease when no
//! live instance holds it; this instance renews the leases it holds every third of their
//! term and releases them when it stops. A group request to an instance that does not hold
//! the group's lease is answered NOT_COORDINATOR, so the client asks FindCoordinator again.
//! A group task stops once its group has had no members and no request for a lease term;
//! the next renewal then releases that group's lease, so an instance holds leases only for
//! the groups in use.
//! Every write of a group (its state, its offsets, its deletion) checks the lease in the
//! same transaction, so a former coordinator can no longer write once another took over.

pub(crate) mod actor;
pub(crate) mod assignors;
pub(crate) mod consumer;
pub(crate) mod lag;
pub(crate) mod state;
pub(crate) mod store;
pub(crate) mod subscription;

use crate::partition::lease::Lease;
use actor::{Command, Env, GroupView};
use assignors::TopicId;
use consumer::{ConsumerGroupView, ConsumerHeartbeat, HeartbeatAnswer, TopicCatalog};
use ferry_stage::Liveness;
use ferry_stage::now_ms;
use ferry_store::StoreError;
use parking_lot::Mutex;
use state::{GroupSettings, JoinRequest, Joined, MemberRef, Synced};
use std::collections::HashMap;
use std::sync::Arc;
use store::{CommittedOffset, Fence, GroupStore};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Commands a group task queues before its senders wait.
const MAILBOX: usize = 256;

/// A reply that will come from a group task.
pub(crate) type Pending<T> = oneshot::Receiver<T>;

/// This instance does not coordinate the group (another live instance holds its lease, or
/// the store could not tell): the request is answered NOT_COORDINATOR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotCoordinator;

impl NotCoordinator {
    /// The Kafka error code.
    pub fn code(self) -> i16 {
        kafka_protocol::ResponseError::NotCoordinator.code()
    }
}

/// Who this instance is among those sharing the store.
#[derive(Debug, Clone, Copy)]
pub struct Identity {
    /// This instance's node id.
    pub node: i32,
    /// How long a group lease lasts unrenewed, and how often it is renewed.
    pub liveness: Liveness,
}

/// The coordinator of every consumer group; cheap to clone.
#[derive(Clone)]
pub struct Coordinator {
    /// Shared state.
    inner: Arc<Inner>,
}

/// What the coordinator's clones share.
struct Inner {
    /// The groups in the store.
    store: GroupStore,
    /// Bounds on members' timeouts.
    settings: GroupSettings,
    /// The topics consumer-protocol groups assign.
    catalog: Arc<dyn TopicCatalog + Send + Sync>,
    /// This instance.
    identity: Identity,
    /// The groups whose lease this instance holds, with the lease's epoch.
    owned: Mutex<HashMap<String, i64>>,
    /// Serialises this instance's claims, so `owned` records the epoch that committed last.
    claiming: tokio::sync::Mutex<()>,
    /// Groups served outside the group tasks (share groups, [`crate::share`]) and until
    /// when their leases are kept without a task.
    kept: Mutex<HashMap<String, std::time::Instant>>,
    /// The mailbox of every group task started.
    groups: Mutex<HashMap<String, mpsc::Sender<Command>>>,
    /// The group tasks.
    tasks: Mutex<JoinSet<()>>,
    /// Stops the group tasks.
    shutdown: CancellationToken,
}

impl Coordinator {
    /// A coordinator for the groups in `store`, assigning the topics of `catalog`.
    pub fn new(
        store: GroupStore,
        settings: GroupSettings,
        catalog: Arc<dyn TopicCatalog + Send + Sync>,
        identity: Identity,
        shutdown: CancellationToken,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                settings,
                catalog,
                identity,
                owned: Mutex::default(),
                claiming: tokio::sync::Mutex::new(()),
                kept: Mutex::default(),
                groups: Mutex::default(),
                tasks: Mutex::new(JoinSet::new()),
                shutdown,
            }),
        }
    }

    /// The groups in the store.
    pub fn store(&self) -> &GroupStore {
        &self.inner.store
    }

    /// Queues a JoinGroup (in arrival order); the answer comes when the rebalance allows.
    ///
    /// # Errors
    /// [`NotCoordinator`].
    pub async fn join(
        &self,
        group: &str,
        req: JoinRequest,
    ) -> Result<Pending<Joined>, NotCoordinator> {
        let (tx, rx) = oneshot::channel();
        self.send(group, Command::Join(req, tx)).await?;
        Ok(rx)
    }

    /// Queues a SyncGroup; followers' answers come with the leader's assignment.
    ///
    /// # Errors
    /// [`NotCoordinator`].
    pub async fn sync(
        &self,
        group: &str,
        member: MemberRef,
        generation: i32,
        assignments: Vec<(String, bytes::Bytes)>,
    ) -> Result<Pending<Synced>, NotCoordinator> {
        let (reply, rx) = oneshot::channel();
        self.send(
            group,
            Command::Sync {
                member,
                generation,
                assignments,
                reply,
            },
        )
        .await?;
        Ok(rx)
    }

    /// Queues a Heartbeat.
    ///
    /// # Errors
    /// [`NotCoordinator`].
    pub async fn heartbeat(
        &self,
        group: &str,
        member: MemberRef,
        generation: i32,
    ) -> Result<Pending<i16>, NotCoordinator> {
        let (reply, rx) = oneshot::channel();
        self.send(
            group,
            Command::Heartbeat {
                member,
                generation,
                reply,
            },
        )
        .await?;
        Ok(rx)
    }

    /// Queues a LeaveGroup.
    ///
    /// # Errors
    /// [`NotCoordinator`].
    pub async fn leave(
        &self,
        group: &str,
        members: Vec<MemberRef>,
    ) -> Result<Pending<Vec<i16>>, NotCoordinator> {
        let (reply, rx) = oneshot::channel();
        self.send(group, Command::Leave { members, reply }).await?;
        Ok(rx)
    }

    /// Queues a ConsumerGroupHeartbeat; the answer comes once the group is persisted.
    ///
    /// # Errors
    /// [`NotCoordinator`].
    pub async fn consumer_heartbeat(
        &self,
        group: &str,
        req: ConsumerHeartbeat,
    ) -> Result<Pending<HeartbeatAnswer>, NotCoordinator> {
        let (reply, rx) = oneshot::channel();
        self.send(group, Command::ConsumerHeartbeat(req, reply))
            .await?;
        Ok(rx)
    }

    /// The group as ConsumerGroupDescribe shows it; `None` when it is not a
    /// consumer-protocol group.
    ///
    /// # Errors
    /// An error code: NOT_COORDINATOR, or COORDINATOR_NOT_AVAILABLE while stopping.
    pub async fn describe_consumer(&self, group: &str) -> Result<Option<ConsumerGroupView>, i16> {
        let (reply, rx) = oneshot::channel();
        self.send(group, Command::ConsumerDescribe(reply))
            .await
            .map_err(NotCoordinator::code)?;
        rx.await
            .map_err(|_| kafka_protocol::ResponseError::CoordinatorNotAvailable.code())
    }

    /// Commits `offsets` for `member` of `generation` if the group's state allows it now
    /// (0), else an error code; the write is fenced by the group's lease.
    pub async fn commit(
        &self,
        group: &str,
        member: MemberRef,
        generation: i32,
        offsets: &[(String, i32, CommittedOffset)],
    ) -> i16 {
        let check = self.check_member(group, member, generation).await;
        if check != 0 || offsets.is_empty() {
            return check;
        }
        let Some(fence) = self.fence(group) else {
            return NotCoordinator.code();
        };
        match self.inner.store.commit(group, offsets, &fence).await {
            Ok(true) => 0,
            Ok(false) => NotCoordinator.code(),
            Err(e) => {
                warn!(group, error = %e, "cannot store committed offsets");
                kafka_protocol::ResponseError::CoordinatorNotAvailable.code()
            }
        }
    }

    /// Whether `member` of `generation` may commit offsets for `group` now (0), else an
    /// error code (`UNKNOWN_MEMBER_ID`, `FENCED_INSTANCE_ID`, `ILLEGAL_GENERATION`,
    /// `REBALANCE_IN_PROGRESS`, or the coordinator's own).
    pub async fn check_member(&self, group: &str, member: MemberRef, generation: i32) -> i16 {
        let (reply, rx) = oneshot::channel();
        let command = Command::CheckCommit {
            member,
            generation,
            reply,
        };
        if let Err(e) = self.send(group, command).await {
            return e.code();
        }
        rx.await
            .unwrap_or(kafka_protocol::ResponseError::CoordinatorNotAvailable.code())
    }

    /// The group as DescribeGroups shows it.
    ///
    /// # Errors
    /// An error code: NOT_COORDINATOR, or COORDINATOR_NOT_AVAILABLE while stopping.
    pub async fn describe(&self, group: &str) -> Result<GroupView, i16> {
        let (reply, rx) = oneshot::channel();
        self.send(group, Command::Describe(reply))
            .await
            .map_err(NotCoordinator::code)?;
        rx.await
            .map_err(|_| kafka_protocol::ResponseError::CoordinatorNotAvailable.code())
    }

    /// Deletes an empty group and its offsets: 0 or an error code.
    pub async fn delete(&self, group: &str) -> i16 {
        let (reply, rx) = oneshot::channel();
        if let Err(e) = self.send(group, Command::Delete(reply)).await {
            return e.code();
        }
        rx.await
            .unwrap_or(kafka_protocol::ResponseError::CoordinatorNotAvailable.code())
    }

    /// OffsetDelete: deletes the group's committed offsets of `partitions`, as Kafka's
    /// coordinator does: all of them when the group is empty; when it has members and is a
    /// `consumer` group, those of topics no member subscribes to (the others
    /// `GROUP_SUBSCRIBED_TO_TOPIC`); per partition, its error code.
    ///
    /// # Errors
    /// A code for the whole group: `GROUP_ID_NOT_FOUND` (no members, nothing stored),
    /// `NON_EMPTY_GROUP` (members, not a consumer group), NOT_COORDINATOR,
    /// COORDINATOR_NOT_AVAILABLE while stopping.
    pub async fn delete_offsets(
        &self,
        group: &str,
        partitions: Vec<(String, i32)>,
    ) -> Result<Vec<i16>, i16> {
        let (reply, rx) = oneshot::channel();
        self.send(group, Command::DeleteOffsets { partitions, reply })
            .await
            .map_err(NotCoordinator::code)?;
        rx.await
            .map_err(|_| kafka_protocol::ResponseError::CoordinatorNotAvailable.code())?
    }

    /// The state of `group` as its task here holds it, when this instance runs the group's
    /// task (no lease is claimed and no task started for it).
    pub async fn local_state(&self, group: &str) -> Option<&'static str> {
        let mailbox = self
            .inner
            .groups
            .lock()
            .get(group)
            .filter(|m| !m.is_closed())
            .cloned()?;
        let (reply, rx) = oneshot::channel();
        mailbox.send(Command::Describe(reply)).await.ok()?;
        rx.await.ok().map(|view| view.state)
    }

    /// The node coordinating `group`: this one when it holds the group's lease or takes it
    /// now (nobody holds it or it lapsed), else the live holder.
    ///
    /// # Errors
    /// The store's error.
    pub async fn locate(&self, group: &str) -> Result<i32, StoreError> {
        let Identity { node, liveness } = self.inner.identity;
        if self.inner.owned.lock().contains_key(group) {
            return Ok(node);
        }
        let _claiming = self.inner.claiming.lock().await;
        if self.inner.owned.lock().contains_key(group) {
            return Ok(node);
        }
        let key = self.inner.store.keys().group_lease(group);
        let claimed = self
            .inner
            .store
            .db()
            .run(|tx| {
                let key = &key;
                async move { Lease::claim(&tx, key, node, liveness, now_ms()).await }
            })
            .await?;
        match claimed {
            Ok(lease) => {
                // A task left from an earlier claim has stopped or will be fenced out.
                self.inner.groups.lock().remove(group);
                self.inner
                    .owned
                    .lock()
                    .insert(group.to_owned(), lease.epoch);
                info!(group, epoch = lease.epoch, "coordinating group");
                Ok(node)
            }
            Err(holder) => Ok(holder),
        }
    }

    /// Keeps `group`'s lease, which this instance holds, until `until` although no group
    /// task runs for it: a share group, whose members live in [`crate::share`], keeps it for
    /// a session timeout after each heartbeat.
    pub fn keep_until(&self, group: &str, until: std::time::Instant) {
        self.inner.kept.lock().insert(group.to_owned(), until);
    }

    /// Renews the group leases this instance holds every third of their term until `stop`
    /// fires (a lease another instance took stops that group's task), then releases them
    /// all so other instances can take the groups over at once.
    pub async fn run(self, stop: CancellationToken) {
        self.inner
            .identity
            .liveness
            .renew_until(&stop, || self.renew(false))
            .await;
        self.renew(true).await;
    }

    /// One transaction over every group lease held: renews those whose group task runs (or
    /// that are kept, [`Self::keep_until`]) and releases the others (idle, never used after FindCoordinator, or all of them when
    /// `stopping`); forgets the groups whose lease is lost or released.
    async fn renew(&self, stopping: bool) {
        let owned: Vec<(String, i64, bool)> = {
            let groups = self.inner.groups.lock();
            let now = std::time::Instant::now();
            let mut kept = self.inner.kept.lock();
            kept.retain(|_, until| *until > now);
            self.inner
                .owned
                .lock()
                .iter()
                .map(|(g, e)| {
                    let running = !stopping
                        && (groups.get(g).is_some_and(|tx| !tx.is_closed())
                            || kept.contains_key(g));
                    (g.clone(), *e, running)
                })
                .collect()
        };
        if owned.is_empty() {
            return;
        }
        let Identity { node, liveness } = self.inner.identity;
        let keys = self.inner.store.keys();
        let held = self
            .inner
            .store
            .db()
            .run(|tx| {
                let owned = &owned;
                async move {
                    let now = now_ms();
                    let (mut lost, mut released) = (Vec::new(), Vec::new());
                    for (group, epoch, running) in owned {
                        let key = keys.group_lease(group);
                        if !running {
                            Lease::release(&tx, &key, (node, *epoch)).await?;
                            released.push(group.clone());
                        } else if !Lease::hold(&tx, &key, (node, *epoch), liveness, now).await? {
                            lost.push(group.clone());
                        }
                    }
                    Ok::<_, StoreError>((lost, released))
                }
            })
            .await;
        match held {
            Ok((lost, released)) => {
                for group in &lost {
                    info!(group = %group, "group coordination taken over; stopping its task");
                }
                for group in lost.iter().chain(&released) {
                    self.inner.owned.lock().remove(group);
                    self.inner.groups.lock().remove(group);
                }
            }
            Err(e) => warn!(error = %e, "cannot renew or release the group leases"),
        }
    }

    /// What fences this instance's writes of `group`, if it holds the group's lease.
    fn fence(&self, group: &str) -> Option<Fence> {
        let epoch = *self.inner.owned.lock().get(group)?;
        let Identity { node, liveness } = self.inner.identity;
        Some(Fence {
            key: self.inner.store.keys().group_lease(group),
            holder: (node, epoch),
            liveness,
        })
    }

    /// Waits for every group task to stop (after the shutdown token fired).
    pub async fn stopped(&self) {
        let mut tasks = std::mem::take(&mut *self.inner.tasks.lock());
        while tasks.join_next().await.is_some() {}
    }

    /// Sends `command` to the group's task, starting the task (which loads the group)
    /// first if needed. A command to a stopped task is dropped; its caller sees the reply
    /// channel closed.
    ///
    /// # Errors
    /// [`NotCoordinator`] when another instance holds the group's lease (or the store
    /// cannot tell).
    async fn send(&self, group: &str, command: Command) -> Result<(), NotCoordinator> {
        match self.locate(group).await {
            Ok(node) if node == self.inner.identity.node => {}
            Ok(_) => return Err(NotCoordinator),
            Err(e) => {
                warn!(group, error = %e, "cannot read the group's lease");
                return Err(NotCoordinator);
            }
        }
        let fence = self.fence(group).ok_or(NotCoordinator)?;
        let mut command = command;
        loop {
            let mailbox = {
                let mut groups = self.inner.groups.lock();
                let entry = groups.entry(group.to_owned());
                let tx = match entry {
                    // A task that stopped (idle) is started again.
                    std::collections::hash_map::Entry::Occupied(e) if !e.get().is_closed() => {
                        e.into_mut()
                    }
                    e => {
                        let (tx, rx) = mpsc::channel(MAILBOX);
                        let mut tasks = self.inner.tasks.lock();
                        // Forget the tasks that stopped (idle groups) as new ones start.
                        while tasks.try_join_next().is_some() {}
                        let env = Env {
                            id: group.to_owned(),
                            settings: self.inner.settings,
                            store: self.inner.store.clone(),
                            fence: fence.clone(),
                            catalog: self.inner.catalog.clone(),
                        };
                        tasks.spawn(actor::run(
                            env,
                            self.inner.identity.liveness.ttl(),
                            rx,
                            self.inner.shutdown.clone(),
                        ));
                        e.insert_entry(tx).into_mut()
                    }
                };
                tx.clone()
            };
            match mailbox.send(command).await {
                Ok(()) => return Ok(()),
                // The task stopped between the lookup and the send: start it again, unless
                // the whole coordinator is stopping.
                Err(mpsc::error::SendError(c)) if !self.inner.shutdown.is_cancelled() => {
                    command = c;
                }
                Err(_) => return Ok(()),
            }
        }
    }
}

/// The topics of the Kafka front, as consumer-protocol groups assign them.
impl TopicCatalog for crate::metadata::topics::Topics {
    fn topic(&self, name: &str) -> Option<(TopicId, i32)> {
        self.get(name).map(|t| {
            let partitions = i32::try_from(t.partitions.len()).unwrap_or(i32::MAX);
            (t.meta.uuid, partitions)
        })
    }

    fn names(&self) -> Vec<String> {
        self.all().iter().map(|t| t.meta.name.clone()).collect()
    }
}
