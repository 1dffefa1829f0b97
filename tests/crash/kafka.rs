//! The Kafka readers of the crash run: members of a consumer group (rdkafka) that report
//! every record they read (its message id, attempt and place in the log) and commit their
//! positions every [`COMMIT_EVERY`]. librdkafka reconnects by itself when Ferry is killed
//! and restarted; a member that rejoins reads again from its group's committed offsets.
//!
//! The members of one run share the offsets Ferry acknowledged as committed, so each read
//! can say whether an offset past it had been committed already.

use crate::common::crash::ATTEMPT;
use crate::common::kafka::consumer;
use crate::tally::{How, Seen};
use parking_lot::Mutex;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::message::{BorrowedMessage, Headers};
use rdkafka::{Message, Offset, TopicPartitionList};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;
use tokio_util::sync::CancellationToken;

/// How often a member commits its positions.
const COMMIT_EVERY: Duration = Duration::from_millis(500);
/// How long a member waits after a failed read (Ferry down) before reading again.
const BACKOFF: Duration = Duration::from_millis(100);

/// rdkafka settings for clients that must come back quickly after a restart: at most 1 s
/// between reconnection attempts (librdkafka's default backs off to 10 s).
pub const RECONNECT: [(&str, &str); 1] = [("reconnect.backoff.max.ms", "1000")];

/// Per partition, the highest offset Ferry acknowledged as committed for a group.
pub type Committed = Arc<Mutex<HashMap<i32, i64>>>;

/// What the member saw of `m`, given the group's `committed` offsets.
fn seen(m: &BorrowedMessage<'_>, committed: &Committed) -> Seen {
    let id = std::str::from_utf8(m.payload().unwrap())
        .unwrap()
        .parse()
        .unwrap();
    let attempt = m
        .headers()
        .and_then(|h| h.iter().find(|h| h.key == ATTEMPT))
        .and_then(|h| std::str::from_utf8(h.value?).ok()?.parse().ok())
        .expect("every record carries its attempt");
    let committed_past = committed
        .lock()
        .get(&m.partition())
        .is_some_and(|c| *c > m.offset());
    Seen {
        id,
        attempt,
        at: Instant::now(),
        how: How::Record {
            partition: m.partition(),
            offset: m.offset(),
            committed_past,
        },
    }
}

/// Commits the member's positions synchronously; on success records them in `committed`.
/// A failure (Ferry down, a rebalance) is left for the next commit.
fn commit_positions(c: &StreamConsumer, committed: &Committed) {
    let Ok(positions) = c.position() else { return };
    let mut valid = TopicPartitionList::new();
    for p in positions.elements() {
        if let Offset::Offset(o) = p.offset() {
            valid
                .add_partition_offset(p.topic(), p.partition(), Offset::Offset(o))
                .unwrap();
        }
    }
    if valid.count() == 0 {
        return;
    }
    let done = tokio::task::block_in_place(|| c.commit(&valid, CommitMode::Sync));
    if done.is_ok() {
        let mut committed = committed.lock();
        for p in valid.elements() {
            if let Offset::Offset(o) = p.offset() {
                let c = committed.entry(p.partition()).or_insert(o);
                *c = (*c).max(o);
            }
        }
    }
}

/// Reads `topic` as a member of `group` at `bootstrap` from the group's committed offsets
/// (the earliest when there are none) until `stop`, sending what it reads to `seen_tx`.
pub async fn read_as_member(
    bootstrap: String,
    group: &'static str,
    topic: &'static str,
    committed: Committed,
    stop: CancellationToken,
    seen_tx: UnboundedSender<Seen>,
) {
    let c = consumer(&bootstrap, group, &RECONNECT);
    c.subscribe(&[topic]).unwrap();
    let mut last_commit = Instant::now();
    loop {
        let read = tokio::select! {
            () = stop.cancelled() => return,
            read = c.recv() => read,
        };
        let Ok(m) = read else {
            // Ferry is down or the group rebalances: librdkafka recovers by itself.
            tokio::time::sleep(BACKOFF).await;
            continue;
        };
        if seen_tx.send(seen(&m, &committed)).is_err() {
            return;
        }
        if last_commit.elapsed() >= COMMIT_EVERY {
            commit_positions(&c, &committed);
            last_commit = Instant::now();
        }
    }
}
