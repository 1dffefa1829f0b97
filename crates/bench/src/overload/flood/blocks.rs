//! The `connection.blocked` and `connection.unblocked` notices of the flood's publisher
//! connections, as lapin reports them (connection events), and their sum over connections.

use futures::StreamExt;
use lapin::{Connection, Event};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The `connection.blocked` notices one connection received: each block's start and end.
#[derive(Debug, Default)]
pub(super) struct Blocks {
    /// Each block's start and, once lifted, end.
    pub(super) spans: Vec<(Instant, Option<Instant>)>,
    /// The reason the broker gave first.
    pub(super) reason: Option<String>,
}

/// Records `connection`'s blocks until `stop`.
pub(super) fn watch_blocks(connection: &Connection, stop: CancellationToken) -> Arc<Mutex<Blocks>> {
    let blocks = Arc::new(Mutex::new(Blocks::default()));
    let mut events = connection.events_listener();
    tokio::spawn({
        let blocks = blocks.clone();
        async move {
            loop {
                let event = tokio::select! {
                    () = stop.cancelled() => break,
                    event = events.next() => event,
                };
                let mut blocks = blocks.lock();
                match event {
                    Some(Event::ConnectionBlocked(reason)) => {
                        blocks.spans.push((Instant::now(), None));
                        blocks.reason.get_or_insert(reason);
                    }
                    Some(Event::ConnectionUnblocked) => {
                        if let Some((_, end @ None)) = blocks.spans.last_mut() {
                            *end = Some(Instant::now());
                        }
                    }
                    Some(_) => {}
                    None => break,
                }
            }
        }
    });
    blocks
}

/// The blocks of all connections, up to `end`.
#[derive(Debug, PartialEq)]
pub(super) struct BlockSummary {
    /// Notices received.
    pub(super) notices: usize,
    /// Connections that were blocked at least once.
    pub(super) connections: usize,
    /// The first notice.
    pub(super) first: Option<Instant>,
    /// Blocked time summed over connections (a block still on counts until `end`).
    pub(super) total: Duration,
    /// The longest block.
    pub(super) longest: Duration,
    /// When the last block ended, if every block did.
    pub(super) all_lifted: Option<Instant>,
}

/// Sums the blocks of every connection (one list of spans each) up to `end`.
pub(super) fn summarize_blocks(
    per_connection: &[Vec<(Instant, Option<Instant>)>],
    end: Instant,
) -> BlockSummary {
    let spans = || per_connection.iter().flatten();
    let length = |(from, to): &(Instant, Option<Instant>)| {
        to.unwrap_or(end).saturating_duration_since(*from)
    };
    let still_on = spans().any(|(_, to)| to.is_none());
    BlockSummary {
        notices: spans().count(),
        connections: per_connection.iter().filter(|s| !s.is_empty()).count(),
        first: spans().map(|(from, _)| *from).min(),
        total: spans().map(length).sum(),
        longest: spans().map(length).max().unwrap_or_default(),
        all_lifted: if still_on {
            None
        } else {
            spans().filter_map(|(_, to)| *to).max()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_sum_over_connections_and_one_still_on_counts_until_the_end() {
        let t = Instant::now();
        let s = Duration::from_secs;
        let per_connection = vec![
            vec![(t + s(1), Some(t + s(4))), (t + s(10), Some(t + s(12)))],
            vec![],
            vec![(t + s(2), None)],
        ];
        let summary = summarize_blocks(&per_connection, t + s(20));
        assert_eq!(
            summary,
            BlockSummary {
                notices: 3,
                connections: 2,
                first: Some(t + s(1)),
                total: s(3 + 2 + 18),
                longest: s(18),
                all_lifted: None,
            }
        );
        let lifted = summarize_blocks(&per_connection[..2], t + s(20));
        assert_eq!(lifted.all_lifted, Some(t + s(12)));
    }
}
