//! Retention: the batches past a topic's `retention.ms` or `retention.bytes` deleted on the
//! sequencer's timer, in bounded transactions fenced by its lease.

use super::{SequencerError, Shared, publish_bounds};
use crate::metadata::topics::Partition;
use crate::partition::log::Log;
use ferry_stage::now_ms;
use tracing::warn;

/// Most batches one retention (or DeleteRecords) transaction deletes.
pub(super) const RETENTION_BATCH: usize = 512;
/// Most retention transactions in one pass (the next pass continues).
const RETENTION_ROUNDS: usize = 64;

/// Deletes `partition`'s batches past its topic's retention, in bounded transactions (none for a
/// topic whose `cleanup.policy` is `compact` alone, as in Kafka).
pub(super) async fn apply(shared: &Shared, partition: &Partition, epoch: i64) {
    let Some(topic) = shared.topics.get(&partition.topic) else {
        return;
    };
    let defaults = shared.broker_settings.topic_defaults();
    let config = defaults.resolve(&topic.meta.config);
    if !config.cleanup_policy().deletes() {
        return;
    }
    let retention_ms = defaults.retention_ms(&config);
    let retention_bytes = defaults.retention_bytes(&config);
    if retention_ms < 0 && retention_bytes < 0 {
        return;
    }
    for _ in 0..RETENTION_ROUNDS {
        let deleted = shared
            .db
            .run(|tx| async move {
                let now = now_ms() as i64;
                if !shared
                    .hold_lease(&tx, &partition.keys, epoch, now as u64)
                    .await?
                {
                    return Ok(0);
                }
                let log = Log::new(&partition.keys);
                let spills = partition.stage.spills();
                let n = log
                    .trim(&tx, &spills, RETENTION_BATCH, i64::MIN, |entry, size| {
                        (retention_ms >= 0
                            && entry.max_timestamp < now.saturating_sub(retention_ms))
                            || (retention_bytes >= 0 && size > retention_bytes)
                    })
                    .await?;
                Ok::<_, SequencerError>(n)
            })
            .await;
        match deleted {
            Ok(n) if n == RETENTION_BATCH => continue,
            Ok(_) => break,
            Err(e) => {
                warn!(topic = %partition.topic, partition = partition.index, error = %e, "retention failed");
                break;
            }
        }
    }
    publish_bounds(&shared.db, partition).await;
}
