//! Consumer lag as a metric: every few seconds, for each group and each partition it
//! committed an offset for, the records between that offset and the high watermark
//! (`ferry_kafka_group_lag{group,topic,partition}`).

use super::store::GroupStore;
use crate::kafka::log::Log;
use crate::kafka::topics::Topics;
use crate::store::Database;
use crate::telemetry::kafka as m;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// How often lag is measured.
const INTERVAL: Duration = Duration::from_secs(5);

/// Publishes lag every [`INTERVAL`] until `shutdown`.
pub async fn run(db: Database, topics: Topics, groups: GroupStore, shutdown: CancellationToken) {
    loop {
        if let Err(e) = publish(&db, &topics, &groups).await {
            debug!(error = %e, "cannot measure consumer lag");
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(INTERVAL) => {}
        }
    }
}

/// Measures and sets every group's lag once.
///
/// # Errors
/// The store's error.
pub async fn publish(
    db: &Database,
    topics: &Topics,
    groups: &GroupStore,
) -> Result<(), crate::store::StoreError> {
    for (group, _) in groups.list().await? {
        for (topic, partition, committed) in groups.offsets(&group, None).await? {
            let (Some(committed), Some(t)) = (committed, topics.get(&topic)) else {
                continue;
            };
            let Some(p) = t.partition(partition) else {
                continue;
            };
            let tx = db.begin()?;
            let bounds = Log::new(&p.keys)
                .bounds(&tx, true)
                .await
                .map_err(|e| crate::store::StoreError::Storage(e.to_string()))?;
            let lag = (bounds.high_watermark - committed.offset).max(0);
            metrics::gauge!(
                m::GROUP_LAG,
                m::LABEL_GROUP => group.clone(),
                m::LABEL_TOPIC => topic.clone(),
                m::LABEL_PARTITION => partition.to_string()
            )
            .set(lag as f64);
        }
    }
    Ok(())
}
