//! Compaction over a real (embedded) store: what a pass keeps, the offsets it keeps, and
//! what Fetch's reads make of the gaps.

use super::records::tests::{MAX_DECOMPRESSED, keyed};
use super::*;
use crate::metadata::settings::CleanupPolicy;
use crate::metadata::topics::Topic;
use crate::metadata::topics::tests::fresh_topics;
use crate::partition::log::Stored;
use crate::wire::batch::{BatchHeader, marker};
use ferry_store::RangeOption;
use kafka_protocol::records::{Compression, RecordBatchDecoder};
use std::sync::Arc;

/// A store with one single-partition compacted topic whose lease node 0 holds.
struct Fixture {
    db: Database,
    topic: Arc<Topic>,
    epoch: i64,
    _dir: tempfile::TempDir,
}

impl Fixture {
    /// With `config`, made compacted, compacting whatever is dirty
    /// (`min.cleanable.dirty.ratio` 0).
    async fn new(config: TopicConfig) -> Self {
        let (dir, db, topics) = fresh_topics().await;
        let config = TopicConfig {
            cleanup_policy: Some(CleanupPolicy::Compact),
            min_cleanable_dirty_ratio: Some(0),
            ..config
        };
        let topic = topics.create("t", 1, config, false).await.unwrap();
        let keys = &topic.partitions[0].keys;
        let liveness = ferry_stage::Liveness::new(Duration::from_secs(60));
        let epoch = db
            .run(|tx| async move {
                let lease = Lease::claim(&tx, &keys.lease(), 0, liveness, now_ms()).await?;
                Ok::<_, StoreError>(lease.expect("unheld").epoch)
            })
            .await
            .unwrap();
        Self {
            db,
            topic,
            epoch,
            _dir: dir,
        }
    }

    /// One pass of the partition's compactor at `now` (ms).
    async fn pass(&self, now: i64) -> Option<Pass> {
        let config = self.topic.meta.config;
        self.compactor().pass(&config, now).await.unwrap()
    }

    fn partition(&self) -> &Partition {
        &self.topic.partitions[0]
    }

    /// Appends `batches` (their base offsets already the log's, back to back).
    async fn append(&self, batches: &[Vec<u8>]) {
        let p = self.partition();
        self.db
            .run(|tx| async move {
                let log = Log::new(&p.keys);
                let mut hw = log.bounds(&tx, false).await?.high_watermark;
                let mut newest = log.newest_timestamp(&tx).await?;
                for b in batches {
                    let header = BatchHeader::parse(b).unwrap();
                    assert_eq!(header.base_offset, hw, "batches are back to back");
                    let stored = Stored::Inline(Bytes::copy_from_slice(b));
                    newest = log.append(&tx, &p.stage.spills(), hw, stored, &header, newest);
                    hw += header.offset_span();
                }
                log.seal(&tx, hw, newest);
                Ok::<_, LogError>(())
            })
            .await
            .unwrap();
    }

    /// The partition's time index: (timestamp, base) of each entry.
    async fn time_entries(&self) -> Vec<(i64, i64)> {
        let keys = &self.partition().keys;
        let tx = self.db.begin().unwrap();
        let (b, e) = keys.time_from(i64::MIN);
        let entries = tx.get_range(&RangeOption::new(b, e), true).await.unwrap();
        entries
            .iter()
            .map(|kv| keys.time_entry(&kv.key).unwrap())
            .collect()
    }

    fn compactor(&self) -> Compactor {
        Compactor::new(
            self.db.clone(),
            self.partition().clone(),
            (0, self.epoch),
            MAX_DECOMPRESSED,
        )
    }

    /// Every record Fetch returns from offset `from` on, as a client reads them (skipping
    /// records below the offset it asked for): (offset, key, value).
    async fn read_from(&self, mut from: i64) -> Vec<(i64, String, Option<String>)> {
        let log = Log::new(&self.partition().keys);
        let text = |b: Option<Bytes>| b.map(|b| String::from_utf8(b.to_vec()).unwrap());
        let mut out = Vec::new();
        loop {
            let tx = self.db.begin().unwrap();
            let read = log.read(&tx, from, i64::MAX, 1 << 20, true).await.unwrap();
            if read.bytes.is_empty() {
                return out;
            }
            let mut rest = read.bytes.clone();
            while !rest.is_empty() {
                let header = BatchHeader::parse(&rest).unwrap();
                let mut batch = rest.split_to(header.size);
                let set = RecordBatchDecoder::decode(&mut batch).unwrap();
                for r in set
                    .records
                    .into_iter()
                    .filter(|r| r.offset >= from && !r.control)
                {
                    out.push((r.offset, text(r.key).unwrap(), text(r.value)));
                }
                from = from.max(header.base_offset + header.offset_span());
            }
        }
    }
}

/// Single-record batches from offset `first`, one per (key, value).
fn singles(first: i64, records: &[(&str, Option<&str>)], compression: Compression) -> Vec<Vec<u8>> {
    records
        .iter()
        .enumerate()
        .map(|(i, r)| keyed(first + i as i64, std::slice::from_ref(r), compression))
        .collect()
}

#[tokio::test]
async fn a_pass_keeps_the_newest_record_of_each_key_at_its_offset() {
    let f = Fixture::new(TopicConfig::default()).await;
    f.append(&[
        keyed(
            0,
            &[("a", Some("a1")), ("b", Some("b1")), ("c", Some("c1"))],
            Compression::Zstd,
        ),
        keyed(
            3,
            &[("a", Some("a2")), ("b", Some("b2"))],
            Compression::None,
        ),
        keyed(5, &[("a", Some("a3"))], Compression::Gzip),
        // The newest batch is never compacted.
        keyed(6, &[("b", Some("b3"))], Compression::None),
    ])
    .await;
    let pass = f.pass(now_ms() as i64).await.expect("dirty");
    assert_eq!(
        (pass.records, pass.batches),
        (4, 1),
        "a1, b1, a2 and b2 are superseded (b2 by the newest batch, mapped though not compacted)"
    );
    let kept = f.read_from(0).await;
    let expect = |o: i64, k: &str, v: &str| (o, k.to_owned(), Some(v.to_owned()));
    assert_eq!(
        kept,
        [
            expect(2, "c", "c1"),
            expect(5, "a", "a3"),
            expect(6, "b", "b3")
        ]
    );
    // A read from inside the gaps returns the next records.
    assert_eq!(f.read_from(3).await[0], expect(5, "a", "a3"));
    // The next pass finds nothing dirty.
    assert_eq!(f.pass(now_ms() as i64).await, None);
}

#[tokio::test]
async fn emptied_batches_go_and_fetch_passes_over_the_gap() {
    let f = Fixture::new(TopicConfig::default()).await;
    let values: Vec<String> = (0..10).map(|i| format!("v{i}")).collect();
    let records: Vec<(&str, Option<&str>)> =
        values.iter().map(|v| ("k", Some(v.as_str()))).collect();
    f.append(&singles(0, &records, Compression::Snappy)).await;
    f.append(&[keyed(10, &[("other", Some("x"))], Compression::None)])
        .await;
    let pass = f.pass(now_ms() as i64).await.unwrap();
    assert_eq!((pass.records, pass.batches), (9, 9));
    let kept = f.read_from(0).await;
    assert_eq!(
        kept.iter().map(|r| r.0).collect::<Vec<_>>(),
        [9, 10],
        "offsets 0..9 are a gap"
    );
    let log = Log::new(&f.partition().keys);
    let tx = f.db.begin().unwrap();
    assert_eq!(
        log.bounds(&tx, true).await.unwrap().start,
        0,
        "the start offset stays"
    );
    // Every batch is stamped 1000: the entry of the first, deleted, now names the first
    // batch left, where a search for that time begins; no entry names a deleted batch.
    assert_eq!(
        log.offset_for_timestamp(&tx, 1000, 0).await.unwrap(),
        Some((9, 1000))
    );
    assert_eq!(f.time_entries().await, [(1000, 9)]);
}

#[tokio::test]
async fn time_entries_of_deleted_batches_pass_to_the_next_batch_once() {
    let f = Fixture::new(TopicConfig::default()).await;
    // Batches at 0, 1, 2, 4, 5 and 8 with newest timestamps 1000, 1000, 1010, 1000, 1020
    // and 1000 (a record's timestamp is 1000 plus 10 per record before it in its batch):
    // entries (1000, 0), (1010, 2) and (1020, 5).
    f.append(&[
        keyed(0, &[("a", Some("a1"))], Compression::None),
        keyed(1, &[("b", Some("b1"))], Compression::None),
        keyed(2, &[("x", Some("x")), ("c", Some("c1"))], Compression::None),
        keyed(4, &[("c", Some("c2"))], Compression::None),
        keyed(
            5,
            &[("d", Some("d")), ("e", Some("e")), ("a", Some("a2"))],
            Compression::None,
        ),
        keyed(8, &[("b", Some("b2"))], Compression::None),
    ])
    .await;
    assert_eq!(f.time_entries().await, [(1000, 0), (1010, 2), (1020, 5)]);
    f.pass(now_ms() as i64).await.expect("dirty");
    // a1 (0) and b1 (1) went: their batches are gone, and the entry of 0 passed to 2, which
    // has a newer one of its own, so it went. c1 went from batch 2 (kept with x).
    assert_eq!(f.time_entries().await, [(1010, 2), (1020, 5)]);
    let log = Log::new(&f.partition().keys);
    let tx = f.db.begin().unwrap();
    // The search starts at the entry's batch and answers the record found there, x, with
    // its own timestamp (as Kafka does), not the batch's newest.
    assert_eq!(
        log.offset_for_timestamp(&tx, 900, 0).await.unwrap(),
        Some((2, 1000))
    );
}

#[tokio::test]
async fn tombstones_stay_for_delete_retention_then_go() {
    let f = Fixture::new(TopicConfig {
        delete_retention_ms: Some(10_000),
        ..TopicConfig::default()
    })
    .await;
    f.append(&[
        keyed(
            0,
            &[("a", Some("a1")), ("b", Some("b1"))],
            Compression::None,
        ),
        keyed(2, &[("a", None)], Compression::None),
        keyed(3, &[("z", Some("last"))], Compression::None),
    ])
    .await;
    // The batches' timestamps are 1000 and on: at 5000 the tombstone is within 10 s.
    f.pass(5_000).await.expect("dirty");
    let offsets = |r: Vec<(i64, String, Option<String>)>| {
        r.into_iter().map(|r| (r.0, r.2)).collect::<Vec<_>>()
    };
    assert_eq!(
        offsets(f.read_from(0).await),
        [(1, Some("b1".into())), (2, None), (3, Some("last".into()))],
        "the tombstone supersedes a1 and stays"
    );
    // Nothing is dirty (the ratio 0 still needs dirty bytes): a new batch makes some.
    f.append(&[keyed(4, &[("y", Some("y"))], Compression::None)])
        .await;
    f.pass(20_000).await.expect("dirty");
    assert_eq!(
        offsets(f.read_from(0).await),
        [
            (1, Some("b1".into())),
            (3, Some("last".into())),
            (4, Some("y".into()))
        ],
        "past delete.retention.ms the tombstone goes"
    );
}

#[tokio::test]
async fn aborted_records_go_and_markers_stay() {
    let f = Fixture::new(TopicConfig::default()).await;
    let mut aborted = keyed(1, &[("a", Some("aborted"))], Compression::None);
    aborted[21..23].copy_from_slice(&(1i16 << 4).to_be_bytes()); // transactional
    let crc = crc32c::crc32c(&aborted[21..]);
    aborted[17..21].copy_from_slice(&crc.to_be_bytes());
    let mut abort = marker(7, 0, false, 1000);
    crate::wire::batch::set_base_offset(&mut abort, 2);
    f.append(&[
        keyed(0, &[("a", Some("committed"))], Compression::None),
        aborted,
        abort,
        keyed(3, &[("z", Some("last"))], Compression::None),
    ])
    .await;
    let p = f.partition();
    f.db.run(|tx| async move {
        tx.set(&p.keys.aborted(2, 7), &crate::keys::encode_i64(1));
        Ok::<_, StoreError>(())
    })
    .await
    .unwrap();
    let pass = f.pass(now_ms() as i64).await.unwrap();
    assert_eq!(
        (pass.records, pass.batches),
        (1, 1),
        "only the aborted record"
    );
    let kept: Vec<i64> = f.read_from(0).await.into_iter().map(|r| r.0).collect();
    assert_eq!(
        kept,
        [0, 3],
        "the committed value is not superseded by the aborted one"
    );
    let tx = f.db.begin().unwrap();
    let marker_kept = Log::new(&p.keys).index(&tx, (2, 3), 1, true).await.unwrap();
    assert_eq!(marker_kept.len(), 1, "the abort marker stays");
}

#[tokio::test]
async fn a_pass_for_a_lease_that_changed_hands_writes_nothing() {
    let f = Fixture::new(TopicConfig::default()).await;
    f.append(&singles(
        0,
        &[("k", Some("1")), ("k", Some("2")), ("k", Some("3"))],
        Compression::None,
    ))
    .await;
    let stale = Compactor::new(
        f.db.clone(),
        f.partition().clone(),
        (0, f.epoch - 1),
        MAX_DECOMPRESSED,
    );
    assert!(matches!(
        stale.pass(&f.topic.meta.config, now_ms() as i64).await,
        Err(CompactionError::NotHolder)
    ));
    assert_eq!(f.read_from(0).await.len(), 3);
}
