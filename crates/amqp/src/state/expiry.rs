//! The expiry sweeper: dead-letters expired messages at the head of queues nobody
//! consumes from, so message TTL works without a consumer (consumers also expire what
//! they meet at the head).
//!
//! It does not scan: publishes tell it when their messages expire ([`ExpiryHints`]),
//! every opened queue is checked once, and each check of a queue learns when the message
//! then at its head expires. It sleeps until the earliest such time.

use super::topology::Queue;
use ferry_stage::{StageError, now_ms};
use ferry_store::Database;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Messages one check dead-letters at most (one transaction); a longer run of expired
/// messages is finished by the next check, scheduled at once.
const PER_CHECK: usize = 500;

/// Tells the sweeper when a queue's head may expire; cheap to clone.
#[derive(Debug, Clone)]
pub struct ExpiryHints {
    tx: mpsc::UnboundedSender<(u64, Weak<Queue>)>,
}

impl ExpiryHints {
    /// A sender and the receiver [`run`] takes.
    pub fn new() -> (Self, mpsc::UnboundedReceiver<(u64, Weak<Queue>)>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx }, rx)
    }

    /// `queue` may have a message expiring at `at` (ms since the epoch).
    pub fn hint(&self, queue: &Arc<Queue>, at: u64) {
        let _ = self.tx.send((at, Arc::downgrade(queue)));
    }
}

/// Runs the sweeper until `shutdown`.
pub(crate) async fn run(
    db: Database,
    mut hints: mpsc::UnboundedReceiver<(u64, Weak<Queue>)>,
    shutdown: CancellationToken,
) {
    // Due checks in time order, and each queue's earliest due check (by stage id).
    let mut due: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut queues: HashMap<u64, (u64, Weak<Queue>)> = HashMap::new();
    loop {
        let wait = due
            .first()
            .map(|(at, _)| Duration::from_millis(at.saturating_sub(now_ms())));
        tokio::select! {
            () = shutdown.cancelled() => return,
            hint = hints.recv() => match hint {
                Some((at, queue)) => schedule(&mut due, &mut queues, at, queue),
                None => return,
            },
            () = sleep(wait) => {
                let now = now_ms();
                while let Some(&(at, id)) = due.first() {
                    if at > now {
                        break;
                    }
                    due.pop_first();
                    let Some((_, weak)) = queues.remove(&id) else { continue };
                    let Some(queue) = weak.upgrade() else { continue };
                    if queue.deleted.is_cancelled() {
                        continue;
                    }
                    match check(&db, &queue, now).await {
                        Ok(Some(next)) => schedule(&mut due, &mut queues, next, weak),
                        Ok(None) => {}
                        Err(e) => warn!(queue = %queue.name, error = %e, "cannot expire messages"),
                    }
                }
            }
        }
    }
}

/// Schedules a check of `queue` at `at`, unless one is due sooner.
fn schedule(
    due: &mut BTreeSet<(u64, u64)>,
    queues: &mut HashMap<u64, (u64, Weak<Queue>)>,
    at: u64,
    queue: Weak<Queue>,
) {
    let Some(q) = queue.upgrade() else { return };
    let id = q.stage.id();
    if let Some((current, _)) = queues.get(&id) {
        if *current <= at {
            return;
        }
        due.remove(&(*current, id));
    }
    due.insert((at, id));
    queues.insert(id, (at, queue));
}

/// Dead-letters the expired head of `queue`; returns when to look again.
async fn check(db: &Database, queue: &Queue, now: u64) -> Result<Option<u64>, StageError> {
    let stage = &queue.stage;
    let outcome = db
        .run(|tx| async move { stage.expire_head_in(&tx, PER_CHECK, now).await })
        .await?;
    Ok(if outcome.expired == PER_CHECK {
        Some(now)
    } else {
        outcome.next_expiry_ms
    })
}

async fn sleep(wait: Option<Duration>) {
    match wait {
        Some(d) => tokio::time::sleep(d).await,
        None => std::future::pending().await,
    }
}
