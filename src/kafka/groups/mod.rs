//! The classic consumer group coordinator: JoinGroup, SyncGroup, Heartbeat and LeaveGroup
//! go to a task per group ([`actor`]) that runs the protocol ([`state`]) and persists the
//! group ([`store`]) so it survives a restart; committed offsets are written to the store
//! directly after the group task checked the member and generation.
//!
//! This instance coordinates every group (FindCoordinator names it). With several
//! instances sharing a store, groups would be spread by a lease per group, as partitions
//! are; see `docs/kafka.md`.

pub mod actor;
pub mod lag;
pub mod state;
pub mod store;

use actor::{Command, GroupView};
use parking_lot::Mutex;
use state::{GroupSettings, JoinRequest, Joined, Synced};
use std::collections::HashMap;
use std::sync::Arc;
use store::GroupStore;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// Commands a group task queues before its senders wait.
const MAILBOX: usize = 256;

/// A reply that will come from a group task.
pub type Pending<T> = oneshot::Receiver<T>;

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
    /// The mailbox of every group task started.
    groups: Mutex<HashMap<String, mpsc::Sender<Command>>>,
    /// The group tasks.
    tasks: Mutex<JoinSet<()>>,
    /// Stops the group tasks.
    shutdown: CancellationToken,
}

impl Coordinator {
    /// A coordinator for the groups in `store`.
    pub fn new(store: GroupStore, settings: GroupSettings, shutdown: CancellationToken) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                settings,
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
    pub async fn join(&self, group: &str, req: JoinRequest) -> Pending<Joined> {
        let (tx, rx) = oneshot::channel();
        self.send(group, Command::Join(req, tx)).await;
        rx
    }

    /// Queues a SyncGroup; followers' answers come with the leader's assignment.
    pub async fn sync(
        &self,
        group: &str,
        member: String,
        generation: i32,
        assignments: Vec<(String, bytes::Bytes)>,
    ) -> Pending<Synced> {
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
        .await;
        rx
    }

    /// Queues a Heartbeat.
    pub async fn heartbeat(&self, group: &str, member: String, generation: i32) -> Pending<i16> {
        let (reply, rx) = oneshot::channel();
        self.send(
            group,
            Command::Heartbeat {
                member,
                generation,
                reply,
            },
        )
        .await;
        rx
    }

    /// Queues a LeaveGroup.
    pub async fn leave(&self, group: &str, members: Vec<String>) -> Pending<Vec<i16>> {
        let (reply, rx) = oneshot::channel();
        self.send(group, Command::Leave { members, reply }).await;
        rx
    }

    /// Whether `member` of `generation` may commit offsets now (0) or not (an error code).
    pub async fn check_commit(&self, group: &str, member: String, generation: i32) -> i16 {
        let (reply, rx) = oneshot::channel();
        self.send(
            group,
            Command::CheckCommit {
                member,
                generation,
                reply,
            },
        )
        .await;
        rx.await
            .unwrap_or(kafka_protocol::ResponseError::CoordinatorNotAvailable.code())
    }

    /// The group as DescribeGroups shows it.
    pub async fn describe(&self, group: &str) -> Option<GroupView> {
        let (reply, rx) = oneshot::channel();
        self.send(group, Command::Describe(reply)).await;
        rx.await.ok()
    }

    /// Deletes an empty group and its offsets: 0 or an error code.
    pub async fn delete(&self, group: &str) -> i16 {
        let (reply, rx) = oneshot::channel();
        self.send(group, Command::Delete(reply)).await;
        rx.await
            .unwrap_or(kafka_protocol::ResponseError::CoordinatorNotAvailable.code())
    }

    /// Waits for every group task to stop (after the shutdown token fired).
    pub async fn stopped(&self) {
        let mut tasks = std::mem::take(&mut *self.inner.tasks.lock());
        while tasks.join_next().await.is_some() {}
    }

    /// Sends `command` to the group's task, starting the task (which loads the group)
    /// first if needed. A command to a stopped task is dropped; its caller sees the reply
    /// channel closed.
    async fn send(&self, group: &str, command: Command) {
        let mailbox = {
            let mut groups = self.inner.groups.lock();
            groups
                .entry(group.to_owned())
                .or_insert_with(|| {
                    let (tx, rx) = mpsc::channel(MAILBOX);
                    self.inner.tasks.lock().spawn(actor::run(
                        group.to_owned(),
                        self.inner.settings,
                        self.inner.store.clone(),
                        rx,
                        self.inner.shutdown.clone(),
                    ));
                    tx
                })
                .clone()
        };
        let _ = mailbox.send(command).await;
    }
}
