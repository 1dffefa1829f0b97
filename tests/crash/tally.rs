//! The accounting of a crash run: what the clients sent, what the readers saw, and what
//! that makes of each message — received, lost, duplicated by Ferry, or repeated in a way
//! the protocol allows and marks.
//!
//! Every send carries its attempt number, so a message and attempt (a *copy*) is one
//! publish or produce of the client. A copy seen again is legitimate only when the protocol
//! says so: an AMQP delivery marked `redelivered`, or a Kafka record read again at the same
//! place in its log (a group member re-reading after the last committed offset). Another
//! copy of the same message with another attempt is the client's own re-send. Everything
//! else seen twice is a duplicate Ferry made.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// One message as a reader saw it.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    /// The message's id.
    pub id: usize,
    /// The attempt of the send it came from (1 for the first).
    pub attempt: u32,
    /// When the reader got it.
    pub at: Instant,
    /// How it came.
    pub how: How,
}

/// How a message came to its reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// An AMQP delivery, with its `redelivered` flag.
    Delivery {
        /// Ferry's mark that it may have delivered this message before.
        redelivered: bool,
    },
    /// A Kafka record at its place in a partition's log.
    Record {
        /// The partition.
        partition: i32,
        /// The record's offset.
        offset: i64,
        /// Whether the group had already committed an offset past this record when it
        /// was read (a re-read then means the committed offset was not honoured).
        committed_past: bool,
    },
    /// Not a read: an AMQP delivery its consumer still held unacknowledged when its
    /// connection broke, which Ferry must therefore deliver again.
    Held,
}

/// What became of one protocol's messages.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// Messages sent (every one was confirmed or acknowledged in the end).
    pub messages: usize,
    /// Confirmed messages no reader ever saw.
    pub lost: usize,
    /// Copies seen again without a mark: Ferry's duplicates.
    pub unmarked_duplicates: usize,
    /// Sends beyond each message's first: the client's re-sends of unconfirmed messages.
    pub resends: usize,
    /// Copies of a message from another attempt than the first one seen.
    pub resent_copies: usize,
    /// AMQP deliveries marked `redelivered`.
    pub redelivered: usize,
    /// AMQP deliveries held unacknowledged when the connection broke and never delivered
    /// again.
    pub held_not_redelivered: usize,
    /// Kafka records read again at their place, past the last committed offset.
    pub reread_uncommitted: usize,
    /// Kafka records read again at their place though an offset past them was committed.
    pub reread_committed: usize,
}

impl Tally {
    /// Counts what became of the messages `first_id..` sent `sends[i]` times each, from
    /// what the readers `seen` (in the order they saw it).
    pub fn count(first_id: usize, sends: &[u32], seen: &[Seen]) -> Self {
        let mut tally = Self {
            messages: sends.len(),
            resends: sends.iter().map(|s| s.saturating_sub(1) as usize).sum(),
            ..Self::default()
        };
        let mut places = HashSet::new();
        let mut attempts: HashMap<usize, HashSet<u32>> = HashMap::new();
        let mut held: HashMap<(usize, u32), usize> = HashMap::new();
        let mut deliveries: HashMap<(usize, u32), usize> = HashMap::new();
        for s in seen {
            if s.how == How::Held {
                *held.entry((s.id, s.attempt)).or_default() += 1;
                continue;
            }
            *deliveries.entry((s.id, s.attempt)).or_default() += 1;
            if let How::Record {
                partition,
                offset,
                committed_past,
            } = s.how
                && !places.insert((partition, offset))
            {
                match committed_past {
                    true => tally.reread_committed += 1,
                    false => tally.reread_uncommitted += 1,
                }
                continue;
            }
            let redelivered = s.how == How::Delivery { redelivered: true };
            tally.redelivered += usize::from(redelivered);
            let copies = attempts.entry(s.id).or_default();
            if copies.insert(s.attempt) {
                tally.resent_copies += usize::from(copies.len() > 1);
            } else if !redelivered {
                tally.unmarked_duplicates += 1;
            }
        }
        // Each time a copy was held at a break, one more delivery of it must follow.
        tally.held_not_redelivered = held
            .iter()
            .map(|(copy, held)| {
                (held + 1).saturating_sub(deliveries.get(copy).copied().unwrap_or(0))
            })
            .sum();
        tally.lost = (first_id..first_id + sends.len())
            .filter(|id| !attempts.contains_key(id))
            .count();
        tally
    }

    /// Whether nothing was lost, nothing duplicated without a mark, nothing held at a break
    /// left undelivered, and no committed offset read below.
    pub fn is_exact(&self) -> bool {
        self.lost == 0
            && self.unmarked_duplicates == 0
            && self.held_not_redelivered == 0
            && self.reread_committed == 0
    }
}

/// For each restart (when its new process started), how long until the first message
/// seen after it that `counts`, before the next restart; `None` when none came.
pub fn recoveries(
    restarts: &[Instant],
    seen: &[Seen],
    counts: impl Fn(&Seen) -> bool,
) -> Vec<Option<Duration>> {
    restarts
        .iter()
        .enumerate()
        .map(|(k, &start)| {
            let end = restarts.get(k + 1).copied();
            seen.iter()
                .filter(|s| s.at > start && end.is_none_or(|end| s.at < end) && counts(s))
                .map(|s| s.at - start)
                .min()
        })
        .collect()
}

/// `min / median / max` of the durations that came (in milliseconds), and how many did
/// not, as one line.
pub fn spread(durations: &[Option<Duration>]) -> String {
    let mut came: Vec<Duration> = durations.iter().flatten().copied().collect();
    came.sort();
    let missing = durations.len() - came.len();
    let Some((first, last)) = came.first().zip(came.last()) else {
        return format!("none of {}", durations.len());
    };
    let median = came[came.len() / 2];
    let ms = |d: Duration| d.as_millis();
    let line = format!("{} / {} / {} ms", ms(*first), ms(median), ms(*last));
    match missing {
        0 => line,
        n => format!("{line}; none after {n} of the restarts"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(id: usize, attempt: u32, redelivered: bool) -> Seen {
        Seen {
            id,
            attempt,
            at: Instant::now(),
            how: How::Delivery { redelivered },
        }
    }

    fn record(id: usize, attempt: u32, offset: i64, committed_past: bool) -> Seen {
        Seen {
            id,
            attempt,
            at: Instant::now(),
            how: How::Record {
                partition: 0,
                offset,
                committed_past,
            },
        }
    }

    #[test]
    fn a_copy_delivered_again_is_a_duplicate_unless_marked_redelivered() {
        let seen = [
            delivery(0, 1, false),
            delivery(0, 1, true),
            delivery(1, 1, false),
            delivery(1, 1, false),
        ];
        let tally = Tally::count(0, &[1, 1], &seen);
        assert_eq!((tally.unmarked_duplicates, tally.redelivered), (1, 1));
    }

    #[test]
    fn another_attempt_of_a_message_is_a_resent_copy_not_a_duplicate() {
        let seen = [delivery(0, 1, false), delivery(0, 2, false)];
        let tally = Tally::count(0, &[2, 1], &seen);
        assert_eq!(
            (tally.resends, tally.resent_copies, tally.lost),
            (1, 1, 1),
            "message 1 was never seen"
        );
        assert_eq!(tally.unmarked_duplicates, 0);
    }

    #[test]
    fn a_delivery_held_at_each_break_must_come_again_after_each() {
        let held = |id| Seen {
            how: How::Held,
            ..delivery(id, 1, false)
        };
        let seen = [
            delivery(0, 1, false),
            held(0),
            delivery(0, 1, true),
            held(0),
            delivery(1, 1, false),
            held(1),
        ];
        let tally = Tally::count(0, &[1, 1], &seen);
        assert_eq!(tally.held_not_redelivered, 2);
        assert_eq!(tally.redelivered, 1);
    }

    #[test]
    fn a_record_read_again_at_its_place_is_a_reread_and_elsewhere_a_duplicate() {
        let seen = [
            record(7, 1, 0, false),
            record(7, 1, 0, false),
            record(7, 1, 0, true),
            record(7, 1, 1, false),
        ];
        let tally = Tally::count(7, &[1], &seen);
        assert_eq!(tally.reread_uncommitted, 1);
        assert_eq!(tally.reread_committed, 1);
        assert_eq!(tally.unmarked_duplicates, 1);
        assert!(!tally.is_exact());
    }

    #[test]
    fn a_recovery_is_the_first_match_after_its_restart_and_before_the_next() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let seen_at = |ms, redelivered| Seen {
            at: at(ms),
            ..delivery(0, 1, redelivered)
        };
        let seen = [seen_at(5, true), seen_at(12, false), seen_at(15, true)];
        let restarts = [at(0), at(10), at(20)];
        let redeliveries = recoveries(&restarts, &seen, |s| {
            s.how == How::Delivery { redelivered: true }
        });
        let ms = Duration::from_millis;
        assert_eq!(redeliveries, [Some(ms(5)), Some(ms(5)), None]);
        assert_eq!(
            spread(&redeliveries),
            "5 / 5 / 5 ms; none after 1 of the restarts"
        );
    }
}
