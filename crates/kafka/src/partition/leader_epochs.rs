//! Leader epochs (KIP-101, KIP-320): which leader wrote which offsets, so a consumer that
//! sees the leader change can check that its position is still in the log.
//!
//! A partition's leader epoch is the epoch of its sequencer lease ([`crate::partition::lease`]),
//! bumped by every claim: a restart, a takeover after a lapse, a handover between
//! instances. The claim records where the epoch begins — the high watermark at the claim —
//! under `("ep", epoch)`, and the sequencer stamps the epoch into every batch it appends
//! (the batch's partition leader epoch, outside its CRC). Metadata names the current epoch;
//! OffsetForLeaderEpoch answers the end offset of an epoch from the records, as Kafka's
//! `LeaderEpochFileCache` does; Fetch, ListOffsets and OffsetForLeaderEpoch refuse a
//! request that names another epoch than the current one (`FENCED_LEADER_EPOCH` for an
//! older, `UNKNOWN_LEADER_EPOCH` for a newer one), so the client refreshes its metadata.

use crate::keys::{PartitionKeys, decode_i64, encode_i64};
use crate::partition::lease::Lease;
use ferry_store::{RangeOption, StoreError, Transaction};
use kafka_protocol::ResponseError;

/// Kafka's "no epoch".
pub(crate) const UNDEFINED_EPOCH: i32 = -1;
/// Kafka's "no end offset".
pub(crate) const UNDEFINED_OFFSET: i64 = -1;
/// Epoch records kept per partition; older ones are dropped at a claim. An epoch older
/// than every record is answered with the first record's start, as Kafka answers an epoch
/// older than its cache.
const KEPT: usize = 256;

/// A lease epoch as the leader epoch Kafka's wire carries (an int32).
pub(crate) fn leader_epoch(lease_epoch: i64) -> i32 {
    i32::try_from(lease_epoch).unwrap_or(i32::MAX)
}

/// Records that leader epoch `epoch` begins at offset `start`, within the transaction
/// that claims the lease, and drops the records beyond the newest [`KEPT`].
///
/// # Errors
/// The store's error.
pub(crate) async fn begin_in(
    tx: &Transaction,
    keys: &PartitionKeys,
    epoch: i64,
    start: i64,
) -> Result<(), StoreError> {
    tx.set(&keys.leader_epoch(epoch), &encode_i64(start));
    let (begin, _) = keys.leader_epochs();
    let kept_older = tx
        .get_range(
            &RangeOption::new(begin.clone(), keys.leader_epoch(epoch))
                .reverse()
                .limit(KEPT - 1),
            true,
        )
        .await?;
    if kept_older.len() == KEPT - 1
        && let Some(oldest_kept) = kept_older.last()
    {
        tx.clear_range(&begin, &oldest_kept.key);
    }
    Ok(())
}

/// The partition's current leader epoch: its lease's, held or lapsed (a snapshot read);
/// `None` before any sequencer claimed it.
///
/// # Errors
/// The store's error, or an undecodable lease.
pub(crate) async fn current(
    tx: &Transaction,
    keys: &PartitionKeys,
) -> Result<Option<i32>, StoreError> {
    Ok(Lease::read(tx, &keys.lease(), true)
        .await?
        .map(|l| leader_epoch(l.epoch)))
}

/// Whether a request naming leader epoch `requested` (-1: none) may be answered when the
/// partition's epoch is `current`.
///
/// # Errors
/// `FENCED_LEADER_EPOCH` for an older epoch than the current one, `UNKNOWN_LEADER_EPOCH`
/// for a newer one (or for any epoch while the partition has none yet).
pub(crate) fn check(requested: i32, current: Option<i32>) -> Result<(), ResponseError> {
    if requested < 0 {
        return Ok(());
    }
    match current {
        Some(c) if requested == c => Ok(()),
        Some(c) if requested < c => Err(ResponseError::FencedLeaderEpoch),
        _ => Err(ResponseError::UnknownLeaderEpoch),
    }
}

/// The end offset of leader epoch `requested` — the first offset of the next recorded
/// epoch, or `log_end` for the current one — with the newest recorded epoch at or below
/// `requested`, as Kafka's `LeaderEpochFileCache.endOffsetFor`: `(-1, -1)` for an epoch
/// beyond every record (or none asked); `(requested, first record's start)` for an epoch
/// older than every record.
///
/// # Errors
/// The store's error, or an undecodable record.
pub(crate) async fn end_offset(
    tx: &Transaction,
    keys: &PartitionKeys,
    requested: i32,
    current: i32,
    log_end: i64,
) -> Result<(i32, i64), StoreError> {
    if requested < 0 {
        return Ok((UNDEFINED_EPOCH, UNDEFINED_OFFSET));
    }
    if requested == current {
        return Ok((requested, log_end));
    }
    let (begin, end) = keys.leader_epochs();
    let after = keys.leader_epoch(i64::from(requested) + 1);
    let higher = tx
        .get_range(&RangeOption::new(after.clone(), end).limit(1), true)
        .await?;
    let Some(higher) = higher.first() else {
        return Ok((UNDEFINED_EPOCH, UNDEFINED_OFFSET));
    };
    let higher_start = decode_i64(Some(higher.value.as_slice()));
    let floor = tx
        .get_range(&RangeOption::new(begin, after).reverse().limit(1), true)
        .await?;
    let floor_epoch = floor
        .first()
        .and_then(|kv| keys.leader_epoch_of(&kv.key))
        .map_or(requested, leader_epoch);
    Ok((floor_epoch, higher_start))
}

/// The leader epoch that wrote `offset`: the newest recorded epoch beginning at or before
/// it ([`UNDEFINED_EPOCH`] when none does).
///
/// # Errors
/// The store's error.
pub(crate) async fn epoch_at(
    tx: &Transaction,
    keys: &PartitionKeys,
    offset: i64,
) -> Result<i32, StoreError> {
    let (begin, end) = keys.leader_epochs();
    // Epochs begin at non-decreasing offsets, so the newest beginning at or before
    // `offset` is the last of those read backwards from the newest that starts there.
    let newest_first = tx
        .get_range(&RangeOption::new(begin, end).reverse().limit(KEPT), true)
        .await?;
    Ok(newest_first
        .iter()
        .find(|kv| decode_i64(Some(kv.value.as_slice())) <= offset)
        .and_then(|kv| keys.leader_epoch_of(&kv.key))
        .map_or(UNDEFINED_EPOCH, leader_epoch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::KafkaKeys;
    use ferry_store::Database;
    use ferry_store::StoreConfig;

    async fn open() -> (tempfile::TempDir, Database) {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            path: dir.path().join("store"),
            ..StoreConfig::default()
        };
        let db = Database::open(&config).await.unwrap();
        (dir, db)
    }

    #[test]
    fn a_request_naming_another_epoch_is_fenced_or_unknown() {
        assert_eq!(check(-1, Some(4)), Ok(()));
        assert_eq!(check(-1, None), Ok(()));
        assert_eq!(check(4, Some(4)), Ok(()));
        assert_eq!(check(3, Some(4)), Err(ResponseError::FencedLeaderEpoch));
        assert_eq!(check(5, Some(4)), Err(ResponseError::UnknownLeaderEpoch));
        assert_eq!(check(0, None), Err(ResponseError::UnknownLeaderEpoch));
    }

    #[tokio::test]
    async fn end_offsets_follow_kafkas_leader_epoch_cache() {
        let (_dir, db) = open().await;
        let keys = KafkaKeys::new("t").partition(1, 0);
        // Epochs 2 (offsets 0..10), 3 (none: a claim with no append), 5 (10..25), 6 (25..).
        for (epoch, start) in [(2, 0), (3, 10), (5, 10), (6, 25)] {
            let keys = &keys;
            db.run(|tx| async move { begin_in(&tx, keys, epoch, start).await })
                .await
                .unwrap();
        }
        let keys = &keys;
        let answers = db
            .run(|tx| async move {
                let mut out = Vec::new();
                for requested in [-1, 1, 2, 3, 4, 5, 6, 7] {
                    out.push(end_offset(&tx, keys, requested, 6, 40).await?);
                }
                for offset in [0, 9, 10, 24, 25, 39] {
                    out.push((epoch_at(&tx, keys, offset).await?, offset));
                }
                Ok::<_, StoreError>(out)
            })
            .await
            .unwrap();
        assert_eq!(
            answers,
            vec![
                (UNDEFINED_EPOCH, UNDEFINED_OFFSET), // none asked
                (1, 0),                              // older than every record
                (2, 10),
                (3, 10),
                (3, 10), // no epoch 4: the floor is 3, the next begins at 10
                (5, 25),
                (6, 40),                             // the current epoch ends at the log end
                (UNDEFINED_EPOCH, UNDEFINED_OFFSET), // beyond every record
                (2, 0),
                (2, 9),
                (5, 10), // epoch 3 wrote nothing: 5 is the newest to begin at 10
                (5, 24),
                (6, 25),
                (6, 39),
            ]
        );
        db.close().await;
    }

    #[tokio::test]
    async fn only_the_newest_records_are_kept() {
        let (_dir, db) = open().await;
        let keys = KafkaKeys::new("t").partition(1, 0);
        let keys = &keys;
        for epoch in 1..=(KEPT as i64 + 10) {
            db.run(|tx| async move { begin_in(&tx, keys, epoch, epoch * 10).await })
                .await
                .unwrap();
        }
        let kept = db
            .run(|tx| async move {
                let (begin, end) = keys.leader_epochs();
                tx.get_range(&RangeOption::new(begin, end), true).await
            })
            .await
            .unwrap();
        assert_eq!(kept.len(), KEPT);
        assert_eq!(keys.leader_epoch_of(&kept[0].key), Some(11));
        db.close().await;
    }
}
