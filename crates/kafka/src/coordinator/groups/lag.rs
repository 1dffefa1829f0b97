//! Consumer lag as a metric: every few seconds, for each group and each partition it
//! committed an offset for, the records between that offset and the high watermark
//! (`ferry_kafka_group_lag{group,topic,partition}`). The same pass publishes the figures
//! under kafka_exporter's names (`kafka_consumergroup_lag`, `_lag_sum`, `_current_offset`,
//! `_current_offset_sum`, and every partition's `kafka_topic_partition_current_offset`
//! and `_oldest_offset`), so lag alerts written for kafka_exporter work against Ferry. It
//! also exports each stored group's rebalance counter at 0.

use super::store::GroupStore;
use crate::metadata::topics::Topics;
use crate::partition::log::Log;
use ferry_store::{Database, StoreError};
use ferry_telemetry::compat::kafka_exporter as kx;
use ferry_telemetry::kafka as m;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// How often lag is measured.
const INTERVAL: Duration = Duration::from_secs(5);

/// Publishes lag every [`INTERVAL`] until `shutdown`.
pub(crate) async fn run(
    db: Database,
    topics: Topics,
    groups: GroupStore,
    shutdown: CancellationToken,
) {
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

/// Measures and sets every partition's offsets and every group's lag once.
///
/// # Errors
/// The store's error.
pub(crate) async fn publish(
    db: &Database,
    topics: &Topics,
    groups: &GroupStore,
) -> Result<(), StoreError> {
    let high_watermarks = publish_partitions(db, topics).await?;
    for group in groups.list().await?.into_iter().map(|g| g.id) {
        // Exported at 0 for every stored group, so a dashboard's increase() sees a
        // restarted instance's first rebalance of it.
        metrics::counter!(m::GROUP_REBALANCES_TOTAL, m::LABEL_GROUP => group.clone()).increment(0);
        // Per topic: the sums of committed offsets and of lag over its partitions.
        let mut sums: BTreeMap<String, (i64, i64)> = BTreeMap::new();
        for (topic, partition, committed) in groups.offsets(&group, None).await? {
            let (Some(committed), Some(&high_watermark)) =
                (committed, high_watermarks.get(&(topic.clone(), partition)))
            else {
                continue;
            };
            let lag = lag(high_watermark, committed.offset);
            let partition = partition.to_string();
            metrics::gauge!(
                m::GROUP_LAG,
                m::LABEL_GROUP => group.clone(),
                m::LABEL_TOPIC => topic.clone(),
                m::LABEL_PARTITION => partition.clone()
            )
            .set(lag as f64);
            let labels = [
                (kx::LABEL_CONSUMERGROUP, group.clone()),
                (kx::LABEL_TOPIC, topic.clone()),
                (kx::LABEL_PARTITION, partition),
            ];
            metrics::gauge!(kx::CONSUMERGROUP_LAG, &labels).set(lag as f64);
            metrics::gauge!(kx::CONSUMERGROUP_CURRENT_OFFSET, &labels).set(committed.offset as f64);
            let sum = sums.entry(topic).or_default();
            sum.0 += committed.offset;
            sum.1 += lag;
        }
        for (topic, (offsets, lag)) in sums {
            let labels = [
                (kx::LABEL_CONSUMERGROUP, group.clone()),
                (kx::LABEL_TOPIC, topic),
            ];
            metrics::gauge!(kx::CONSUMERGROUP_CURRENT_OFFSET_SUM, &labels).set(offsets as f64);
            metrics::gauge!(kx::CONSUMERGROUP_LAG_SUM, &labels).set(lag as f64);
        }
    }
    Ok(())
}

/// The records between a group's `committed` offset and the partition's
/// `high_watermark` (0 when the committed offset is ahead, as after the log started over).
pub(crate) fn lag(high_watermark: i64, committed: i64) -> i64 {
    (high_watermark - committed).max(0)
}

/// Sets every topic's partition count and every partition's offsets under kafka_exporter's
/// names; returns the high watermarks by (topic, partition).
async fn publish_partitions(
    db: &Database,
    topics: &Topics,
) -> Result<HashMap<(String, i32), i64>, StoreError> {
    let mut high_watermarks = HashMap::new();
    for topic in topics.all() {
        let name = topic.meta.name.clone();
        metrics::gauge!(kx::TOPIC_PARTITIONS, kx::LABEL_TOPIC => name.clone())
            .set(topic.partitions.len() as f64);
        for p in &topic.partitions {
            let tx = db.begin()?;
            let bounds = Log::new(&p.keys)
                .bounds(&tx, true)
                .await
                .map_err(|e| StoreError::Storage(e.to_string()))?;
            let labels = [
                (kx::LABEL_TOPIC, name.clone()),
                (kx::LABEL_PARTITION, p.index.to_string()),
            ];
            metrics::gauge!(kx::TOPIC_PARTITION_CURRENT_OFFSET, &labels)
                .set(bounds.high_watermark as f64);
            metrics::gauge!(kx::TOPIC_PARTITION_OLDEST_OFFSET, &labels).set(bounds.start as f64);
            high_watermarks.insert((name.clone(), p.index), bounds.high_watermark);
        }
    }
    Ok(high_watermarks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_counts_records_past_the_committed_offset_and_never_goes_negative() {
        assert_eq!(lag(5, 2), 3);
        assert_eq!(lag(5, 5), 0);
        assert_eq!(lag(0, 7), 0, "a log that started over is not negative lag");
    }
}
