//! The lease reaper: returns the leased messages of holders whose deadline passed (their
//! process died or stopped renewing) to their stages.
//!
//! It sleeps until the earliest holder deadline (at most one lease TTL), so a crashed
//! consumer's messages become deliverable again about one TTL after its last renewal. The
//! holders of this instance's own earlier run are not left to it: [`super::recovery`]
//! releases them at start, through the same [`Holders::release`].

use ferry_stage::{Holders, now_ms};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Shortest pause between two passes, so a store error does not spin the loop.
const MIN_PAUSE: Duration = Duration::from_millis(100);

/// Reaps expired holders until `shutdown` is cancelled.
pub async fn run(holders: Holders, ttl: Duration, shutdown: CancellationToken) {
    loop {
        let pause = match holders.reap_expired().await {
            Ok(returned) => {
                if returned > 0 {
                    info!(
                        returned,
                        "returned the leases of expired holders to their stages"
                    );
                }
                match holders.next_deadline().await {
                    Ok(Some(deadline)) => Duration::from_millis(deadline.saturating_sub(now_ms())),
                    Ok(None) => ttl,
                    Err(e) => {
                        warn!(error = %e, "cannot read lease holders");
                        ttl
                    }
                }
            }
            Err(e) => {
                warn!(error = %e, "cannot return the leases of expired holders");
                ttl
            }
        };
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(pause.clamp(MIN_PAUSE, ttl)) => {}
        }
    }
}
