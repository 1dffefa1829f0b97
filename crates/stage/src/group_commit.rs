//! Group commit: the one pipeline for every path that batches items into store commits
//! (AMQP publishes, AMQP acknowledgements, the bridge's RabbitMQ source).
//!
//! Items queue while one commit is in flight; when it finishes, the next commit takes what
//! queued meanwhile. So a client with many items outstanding gets large transactions, and
//! one with a single item outstanding gets one transaction per item, without waiting for
//! a timer. The commit runs in a task of its own, so its owner goes on reading its socket
//! (or its upstream) while the store commits.
//!
//! The commit function decides what an item becomes in the store and what the outcome
//! carries back (typically the items themselves, to confirm or acknowledge them after the
//! commit: never inside it).

use std::future::Future;
use std::time::Instant;
use tokio::task::{JoinError, JoinHandle};

/// Items waiting for a store commit, and the commit in flight.
pub struct GroupCommit<I, O> {
    /// Items queued for the next commit, in arrival order.
    pending: Vec<I>,
    /// When the oldest pending item was queued.
    since: Option<Instant>,
    /// The commit under way, whose task yields its outcome.
    in_flight: Option<JoinHandle<O>>,
}

impl<I, O> Default for GroupCommit<I, O> {
    fn default() -> Self {
        Self {
            pending: Vec::new(),
            since: None,
            in_flight: None,
        }
    }
}

impl<I, O: Send + 'static> GroupCommit<I, O> {
    /// Queues `item` for the next commit.
    pub fn push(&mut self, item: I) {
        self.since.get_or_insert_with(Instant::now);
        self.pending.push(item);
    }

    /// Queues `items` for the next commit, in order.
    pub fn extend(&mut self, items: impl IntoIterator<Item = I>) {
        let before = self.pending.len();
        self.pending.extend(items);
        if self.pending.len() > before {
            self.since.get_or_insert_with(Instant::now);
        }
    }

    /// The items queued for the next commit.
    pub fn pending(&self) -> &[I] {
        &self.pending
    }

    /// When the oldest queued item was queued; `None` when nothing is queued.
    pub fn waiting_since(&self) -> Option<Instant> {
        self.since
    }

    /// Whether a commit is under way.
    pub fn is_committing(&self) -> bool {
        self.in_flight.is_some()
    }

    /// Whether nothing is queued and no commit is under way.
    pub fn is_idle(&self) -> bool {
        self.pending.is_empty() && self.in_flight.is_none()
    }

    /// Starts a commit of the first `count` queued items (every one, when fewer are
    /// queued) with `commit`, unless a commit is under way or nothing is queued. Returns
    /// whether a commit started.
    pub fn start<F, Fut>(&mut self, count: usize, commit: F) -> bool
    where
        F: FnOnce(Vec<I>) -> Fut,
        Fut: Future<Output = O> + Send + 'static,
    {
        if self.in_flight.is_some() || self.pending.is_empty() {
            return false;
        }
        let count = count.clamp(1, self.pending.len());
        let batch: Vec<I> = self.pending.drain(..count).collect();
        // What stays queued arrived after what now commits.
        self.since = (!self.pending.is_empty()).then(Instant::now);
        self.in_flight = Some(tokio::spawn(commit(batch)));
        true
    }

    /// The outcome of the commit under way, once it finishes. Never resolves when no
    /// commit is under way, so it can wait in a `select!` beside other work; dropping it
    /// before it resolves leaves the commit running.
    ///
    /// # Errors
    /// The task's [`JoinError`] when the commit panicked.
    pub async fn committed(&mut self) -> Result<O, JoinError> {
        let Some(task) = self.in_flight.as_mut() else {
            return std::future::pending().await;
        };
        let done = task.await;
        self.in_flight = None;
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn items_queue_while_one_commit_is_in_flight() {
        let mut pipeline: GroupCommit<u32, Vec<u32>> = GroupCommit::default();
        assert!(pipeline.is_idle());
        pipeline.extend([1, 2, 3]);
        let (release, hold) = tokio::sync::oneshot::channel::<()>();
        assert!(pipeline.start(2, |batch| async move {
            let _ = hold.await;
            batch
        }));
        assert_eq!(pipeline.pending(), &[3]);
        pipeline.push(4);
        assert!(
            !pipeline.start(10, |batch| async move { batch }),
            "one commit at a time"
        );
        release.send(()).unwrap();
        assert_eq!(pipeline.committed().await.unwrap(), vec![1, 2]);
        assert!(pipeline.start(10, |batch| async move { batch }));
        assert_eq!(pipeline.committed().await.unwrap(), vec![3, 4]);
        assert!(pipeline.is_idle());
        assert_eq!(pipeline.waiting_since(), None);
    }

    #[tokio::test]
    async fn committed_waits_forever_when_nothing_commits() {
        let mut pipeline: GroupCommit<u32, ()> = GroupCommit::default();
        let waited =
            tokio::time::timeout(std::time::Duration::from_millis(20), pipeline.committed()).await;
        assert!(waited.is_err());
    }
}
