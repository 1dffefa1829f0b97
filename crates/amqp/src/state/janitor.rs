//! Housekeeping of queues and exchanges nobody deletes explicitly: queues unused for their
//! `x-expires`, and transient (non-durable or exclusive) entities whose owning connection
//! or Ferry instance died without cleaning up.

use super::broker::Broker;
use super::topology::{Queue, VHost};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Deletes `queue` once it has had no consumer and no use for its `x-expires` (RabbitMQ's
/// rule: declare, consume and get count as use). Ends when the queue is deleted.
pub(crate) async fn expire_unused(
    vhost: Arc<VHost>,
    queue: Arc<Queue>,
    shutdown: CancellationToken,
) {
    let Some(ttl) = queue.spec.args.expires.map(Duration::from_millis) else {
        return;
    };
    loop {
        let (consumers, last_used) = {
            let local = queue.local.lock();
            (local.consumers, local.last_used)
        };
        let due = last_used + ttl;
        if consumers == 0 && Instant::now() >= due {
            info!(queue = %queue.name, vhost = %vhost.name, "deleting a queue unused for its x-expires");
            if let Err(e) = vhost.remove_queues(std::slice::from_ref(&queue)).await {
                warn!(queue = %queue.name, error = %e, "cannot delete an expired queue");
            } else {
                return;
            }
        }
        // In use (or just failed): look again one TTL from its last use, at least 1 ms on.
        let wake = due.max(Instant::now())
            + if consumers > 0 {
                ttl
            } else {
                Duration::from_millis(1)
            };
        tokio::select! {
            () = tokio::time::sleep_until(wake.into()) => {}
            () = queue.deleted.cancelled() => return,
            () = shutdown.cancelled() => return,
        }
    }
}

/// Every lease TTL, removes transient entities of dead owners in every virtual host (so
/// after a crash they go one TTL after the restart, when the old holders expire).
pub(crate) async fn reap_orphans(broker: Arc<Broker>, shutdown: CancellationToken) {
    loop {
        for vhost in broker.vhosts.list() {
            if let Err(e) = vhost.reap_orphans(&broker.holders).await {
                warn!(vhost = %vhost.name, error = %e, "cannot remove transient entities of dead owners");
            }
        }
        tokio::select! {
            () = tokio::time::sleep(broker.liveness.ttl()) => {}
            () = shutdown.cancelled() => return,
        }
    }
}
