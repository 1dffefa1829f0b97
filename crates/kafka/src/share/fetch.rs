//! One ShareFetch's acquisition: records acquired from each share-partition of the session
//! (up to `max_records` in all), the log batches that hold them, and their acquired ranges
//! with delivery counts; with nothing to acquire, a long poll on store watches (offsets
//! fed or records returned to a share-partition's stage, a partition's high watermark)
//! until `max_wait_ms` passes. No polling loop.
//!
//! The batches sent may hold records outside the acquired ranges (a batch is sent whole);
//! the client keeps only the acquired ones. Records acquired beyond the bytes the answer
//! may carry go back to the group at once; offsets with no record to deliver (transaction
//! markers, and under `read_committed` the records of aborted transactions) are settled at
//! once and left out of the acquired ranges.

use super::partition::{Acquired, Settle, ShareError, SharePartition};
use super::{ShareGroups, config::ShareConfig};
use crate::partition::log::{Aborted, is_aborted};
use crate::partition::reads::Reads;
use crate::wire::batch::BatchHeader;
use bytes::Bytes;
use ferry_stage::Spills;
use futures::FutureExt;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// A run of acquired offsets with one delivery count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Range {
    /// Its first offset.
    pub first: i64,
    /// Its last offset.
    pub last: i64,
    /// The delivery count of each of its records.
    pub delivery_count: u32,
}

/// What one share-partition gave a fetch.
#[derive(Debug, Clone, Default)]
pub(crate) struct Taken {
    /// The log batches holding the acquired records, back to back.
    pub records: Bytes,
    /// The acquired ranges, in offset order.
    pub ranges: Vec<Range>,
}

/// A fetch's bounds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The most records to acquire in all.
    pub max_records: usize,
    /// The most bytes of batches to send (the first partition's first batch whatever its size).
    pub max_bytes: usize,
    /// How long to wait for records when there are none.
    pub wait: Duration,
}

/// The fetch of `member` of `group` from `partitions`: each one's result, in order.
#[allow(clippy::too_many_arguments)] // the fetch's separate inputs
pub(crate) async fn acquire(
    groups: &ShareGroups,
    reads: &Reads,
    spills: &Spills,
    group: &str,
    member: &str,
    partitions: &[SharePartition],
    config: &ShareConfig,
    limits: Limits,
    shutdown: &CancellationToken,
) -> Vec<Result<Taken, ShareError>> {
    let deadline = Instant::now() + limits.wait;
    let mut watched: Option<futures::future::BoxFuture<'static, ()>> = None;
    loop {
        let mut out = Vec::with_capacity(partitions.len());
        let (mut records, mut bytes) = (0usize, 0usize);
        for sp in partitions {
            let room = limits.max_records.saturating_sub(records);
            if room == 0 || bytes >= limits.max_bytes {
                out.push(Ok(Taken::default()));
                continue;
            }
            let taken = take(
                groups,
                reads,
                spills,
                (group, member),
                sp,
                room,
                (limits.max_bytes - bytes, bytes == 0),
                config,
            )
            .await;
            if let Ok(t) = &taken {
                records += t
                    .ranges
                    .iter()
                    .map(|r| (r.last - r.first + 1) as usize)
                    .sum::<usize>();
                bytes += t.records.len();
            }
            out.push(taken);
        }
        let now = Instant::now();
        if records > 0 || out.iter().any(Result::is_err) || now >= deadline {
            return out;
        }
        // Watched, then looked at once more before waiting: a record returned between
        // the look above and the watch would otherwise wait for the deadline.
        let Some(wake) = watched.take() else {
            match groups.watch(partitions).await {
                Some(wake) => watched = Some(wake),
                None => return out,
            }
            continue;
        };
        tokio::select! {
            () = wake => {}
            () = tokio::time::sleep(deadline - now) => return out,
            () = shutdown.cancelled() => return out,
        }
    }
}

/// Acquires up to `k` records of `sp` and reads the batches holding them within `room`
/// bytes (`room.1`: the first batch whatever its size).
#[allow(clippy::too_many_arguments)] // the fetch's separate inputs
async fn take(
    groups: &ShareGroups,
    reads: &Reads,
    spills: &Spills,
    (group, member): (&str, &str),
    sp: &SharePartition,
    k: usize,
    room: (usize, bool),
    config: &ShareConfig,
) -> Result<Taken, ShareError> {
    let acquired = groups.acquire(group, member, sp, k, config).await?;
    let (Some(first), Some(last)) = (acquired.first(), acquired.last()) else {
        return Ok(Taken::default());
    };
    let snapshot = reads.snapshot()?;
    let (read, aborted) = snapshot
        .read(
            &sp.log,
            first.offset,
            last.offset + 1,
            room.0,
            room.1,
            config.read_committed,
        )
        .await?;
    let read = read.fill(spills).await?;
    let (end, unreadable) = batches(&read.bytes, aborted.as_deref().unwrap_or_default());
    let end = end.unwrap_or(first.offset);
    let (sent, beyond): (Vec<Acquired>, Vec<Acquired>) =
        acquired.into_iter().partition(|a| a.offset < end);
    // Offsets holding no record to deliver (transaction markers, and under read_committed
    // the records of aborted transactions) are settled at once, as Kafka archives them.
    let (skipped, sent): (Vec<Acquired>, Vec<Acquired>) = sent
        .into_iter()
        .partition(|a| unreadable.iter().any(|r| r.contains(&a.offset)));
    let back: Vec<(i64, Settle)> = beyond
        .iter()
        .map(|a| (a.offset, Settle::Release))
        .chain(skipped.iter().map(|a| (a.offset, Settle::Accept)))
        .collect();
    if !back.is_empty() {
        // Best effort: a record not settled now comes back when its lock ends.
        let _ = groups
            .acknowledge(group, member, sp, &back, config.lock)
            .await;
    }
    Ok(Taken {
        records: if sent.is_empty() {
            Bytes::new()
        } else {
            read.bytes
        },
        ranges: ranges(&sent),
    })
}

/// The offset after the last record of `batches` (Kafka record batches back to back), and
/// the offset ranges of those with no record to deliver: control batches, and the batches
/// of `aborted` transactions.
fn batches(
    batches: &[u8],
    aborted: &[Aborted],
) -> (Option<i64>, Vec<std::ops::RangeInclusive<i64>>) {
    let mut end = None;
    let mut unreadable = Vec::new();
    let mut rest = batches;
    while let Ok(header) = BatchHeader::parse(rest) {
        let last = header.base_offset + i64::from(header.last_offset_delta);
        if header.is_control() || is_aborted(aborted, &header) {
            unreadable.push(header.base_offset..=last);
        }
        end = Some(last + 1);
        let Some(tail) = rest.get(header.size..) else {
            break;
        };
        rest = tail;
    }
    (end, unreadable)
}

/// Consecutive offsets with one delivery count, as ranges.
fn ranges(acquired: &[Acquired]) -> Vec<Range> {
    let mut out: Vec<Range> = Vec::new();
    for a in acquired {
        match out.last_mut() {
            Some(r) if r.last + 1 == a.offset && r.delivery_count == a.delivery_count => {
                r.last = a.offset;
            }
            _ => out.push(Range {
                first: a.offset,
                last: a.offset,
                delivery_count: a.delivery_count,
            }),
        }
    }
    out
}

impl ShareGroups {
    /// A future that completes when one of `partitions` may have records to acquire;
    /// `None` when the watches cannot be set.
    async fn watch(
        &self,
        partitions: &[SharePartition],
    ) -> Option<futures::future::BoxFuture<'static, ()>> {
        let tx = self.inner.db.begin().ok()?;
        let mut waits = Vec::new();
        for sp in partitions {
            let (ready, high_watermark) = sp.watch(&tx);
            waits.push(ready.wait().map(|_| ()).boxed());
            waits.push(high_watermark.map(|_| ()).boxed());
        }
        if waits.is_empty() || tx.commit().await.is_err() {
            return None;
        }
        Some(futures::future::select_all(waits).map(|_| ()).boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_stage::MessageId;

    fn acquired(offset: i64, delivery_count: u32) -> Acquired {
        Acquired {
            offset,
            delivery_count,
            id: MessageId {
                lane: 0,
                stamp: [0; 12],
            },
        }
    }

    #[test]
    fn runs_split_at_gaps_and_delivery_counts() {
        let got = ranges(&[
            acquired(3, 1),
            acquired(4, 1),
            acquired(5, 2),
            acquired(7, 2),
        ]);
        let want = [(3, 4, 1), (5, 5, 2), (7, 7, 2)].map(|(first, last, delivery_count)| Range {
            first,
            last,
            delivery_count,
        });
        assert_eq!(got, want);
    }

    #[test]
    fn the_end_of_batches_and_those_without_records_to_deliver() {
        let plain = crate::wire::record::encode_batch(
            vec![crate::port::KafkaRecord {
                key: None,
                value: Some(bytes::Bytes::from_static(b"v")),
                headers: Vec::new(),
                timestamp_ms: None,
            }],
            0,
        );
        let mut one = plain.to_vec();
        crate::wire::batch::set_base_offset(&mut one, 10);
        let mut marker = crate::wire::batch::marker(7, 0, false, 0);
        crate::wire::batch::set_base_offset(&mut marker, 11);
        let both = [one.clone(), marker].concat();
        assert_eq!(batches(&one, &[]), (Some(11), vec![]));
        assert_eq!(batches(&both, &[]), (Some(12), vec![11..=11]));
        assert_eq!(batches(&[], &[]), (None, vec![]));
    }
}
