//! The store watch: every few seconds, `ferry_store_up` from a ping, the embedded store's
//! free disk space and alarm, and the stage gauges from the stages' counters.
//!
//! Store outages are logged on the transition only (down once, back once), not on every
//! tick, so a long outage does not flood the log.

use ferry_stage::Stages;
use ferry_store::{Database, StoreError};
use ferry_telemetry::names;
use std::time::Duration;
use tokio::time::MissedTickBehavior;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

/// Time between two refreshes.
pub const PERIOD: Duration = Duration::from_secs(5);

/// Refreshes the store and stage metrics every [`PERIOD`], starting at once, until
/// `shutdown` is cancelled (also mid-refresh: a store that hangs does not hold up shutdown).
///
/// # Errors
/// The store's failure, when it stopped accepting transactions (a failed write on the
/// embedded engine): then it also cancels `shutdown`, so the daemon exits and its
/// supervisor's restart recovers the store.
pub async fn run(
    db: Database,
    prefix: String,
    shutdown: CancellationToken,
) -> Result<(), StoreError> {
    let stages = Stages::new(db.clone(), &prefix);
    let mut ticks = tokio::time::interval(PERIOD);
    // After a slow refresh, wait a full period rather than refreshing back to back.
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut was_up = None;
    loop {
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return Ok(()),
            () = async {
                ticks.tick().await;
                was_up = Some(refresh(&db, &stages, was_up).await);
            } => {}
        }
        if let Some(failure) = db.failure() {
            error!(error = %failure, "the store failed; stopping so a restart can recover it");
            shutdown.cancel();
            return Err(failure);
        }
    }
}

/// One refresh; returns whether the store answered. `was_up` is the previous answer, if any.
async fn refresh(db: &Database, stages: &Stages, was_up: Option<bool>) -> bool {
    let up = match db.ping().await {
        Ok(()) => {
            if was_up == Some(false) {
                info!("the store answers again");
            }
            true
        }
        Err(e) => {
            if was_up != Some(false) {
                warn!(error = %e, "the store does not answer");
            }
            false
        }
    };
    metrics::gauge!(names::STORE_UP).set(if up { 1.0 } else { 0.0 });
    if let Some(free) = db.disk_free_bytes() {
        metrics::gauge!(names::STORE_DISK_FREE_BYTES).set(free as f64);
        let alarm = db.disk_alarm().is_some();
        metrics::gauge!(names::STORE_DISK_ALARM).set(if alarm { 1.0 } else { 0.0 });
    }
    if up && let Err(e) = stages.publish_metrics().await {
        warn!(error = %e, "cannot read the stage counters");
    }
    up
}
