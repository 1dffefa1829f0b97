//! What became of every message of one workload: the [`Stamp`] each body starts with, and
//! the [`Ledger`] its publisher and consumer write to — sends, confirms, deliveries with
//! their latency, per row of the [`Plan`] — from which the rows, the verdict windows and the
//! totals are read. Pure: the clients hand it times and bodies.
//!
//! A message is *lost* when it was confirmed (basic.ack, or acknowledged by the Kafka
//! broker) and never received; a *duplicate* is a second delivery of the same message.
//! Latency samples are kept only for the rows of the two verdict windows, so a long run's
//! memory does not grow with its length.

use super::schedule::Plan;
use crate::Percentiles;
use std::ops::Range;
use std::time::{Duration, Instant};

/// Bytes of a [`Stamp`] at the start of a body: the smallest `--size`.
pub(super) const STAMP_LEN: usize = 24;

/// The start of every body the soak sends: which run sent it, its sequence number in its
/// workload, and when it was sent (from the run's start, so the consumer in this process
/// computes its latency on the same monotonic clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stamp {
    /// The run's random id; a body of another run (left in a queue, or routed late) is
    /// counted apart, not as this run's.
    pub run: u64,
    /// The message's number in its workload, from 0.
    pub seq: u64,
    /// When it was sent, from the run's start.
    pub sent: Duration,
}

impl Stamp {
    /// A body of `size` bytes (at least [`STAMP_LEN`]) starting with the stamp.
    pub(super) fn body(&self, size: usize) -> Vec<u8> {
        let mut body = vec![b'x'; size.max(STAMP_LEN)];
        body[..8].copy_from_slice(&self.run.to_be_bytes());
        body[8..16].copy_from_slice(&self.seq.to_be_bytes());
        let nanos = u64::try_from(self.sent.as_nanos()).unwrap_or(u64::MAX);
        body[16..24].copy_from_slice(&nanos.to_be_bytes());
        body
    }

    /// The stamp `body` starts with; `None` for a body shorter than one.
    pub(super) fn read(body: &[u8]) -> Option<Self> {
        let word = |at: usize| Some(u64::from_be_bytes(body.get(at..at + 8)?.try_into().ok()?));
        Some(Self {
            run: word(0)?,
            seq: word(8)?,
            sent: Duration::from_nanos(word(16)?),
        })
    }
}

/// One row's counts and the latencies of what arrived in it.
#[derive(Debug, Default)]
struct Row {
    sent: u64,
    received: u64,
    samples: Vec<Duration>,
    /// The row's p99, once the row is over.
    p99: Option<Duration>,
}

/// One row's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct RowFigures {
    /// Messages sent in the row.
    pub sent: u64,
    /// Messages received in the row (duplicates included).
    pub received: u64,
    /// Their end-to-end latency; `None` when nothing arrived.
    pub latency: Option<Percentiles>,
}

/// What became of one message.
#[derive(Debug, Default, Clone, Copy)]
struct Fate {
    confirmed: bool,
    /// Deliveries, saturating.
    received: u8,
}

/// What became of a workload's messages over the whole run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Totals {
    /// Messages sent.
    pub sent: u64,
    /// Of those, confirmed by the broker.
    pub confirmed: u64,
    /// Sent and refused (nacked, or the broker's error), or still unconfirmed at the end;
    /// a publisher may send those again, so they are not lost.
    pub unconfirmed: u64,
    /// Distinct messages received.
    pub received: u64,
    /// Confirmed and never received.
    pub lost: u64,
    /// Deliveries beyond a message's first.
    pub duplicates: u64,
    /// Bodies of another run, or not the soak's, ignored.
    pub foreign: u64,
    /// Times the workload received nothing for the stall limit.
    pub stalls: u32,
    /// The longest time without a delivery while the run went on.
    pub longest_silence: Duration,
    /// Client errors (a refused publish, a consumer's error), and the first.
    pub errors: u64,
    /// The first of them.
    pub first_error: Option<String>,
}

/// A workload's record, shared by its publisher, its consumer and the printing loop.
#[derive(Debug)]
pub(super) struct Ledger {
    plan: Plan,
    /// The run's start.
    start: Instant,
    /// The run's id, in every [`Stamp`].
    run: u64,
    /// Row `plan.rows` is the drain.
    rows: Vec<Row>,
    /// Indexed by sequence number.
    fates: Vec<Fate>,
    totals: Totals,
    /// Confirmed and not received yet.
    awaiting: u64,
    /// The last delivery, or the start.
    last_heard: Instant,
    /// Whether the current silence was already counted as a stall.
    stalled: bool,
}

impl Ledger {
    /// An empty ledger of run `run`, started at `start`.
    pub(super) fn new(plan: Plan, start: Instant, run: u64) -> Self {
        Self {
            plan,
            start,
            run,
            rows: (0..=plan.rows).map(|_| Row::default()).collect(),
            fates: Vec::new(),
            totals: Totals::default(),
            awaiting: 0,
            last_heard: start,
            stalled: false,
        }
    }

    /// The stamp of message `seq` sent now.
    pub(super) fn stamp(&self, seq: u64, now: Instant) -> Stamp {
        Stamp {
            run: self.run,
            seq,
            sent: now.saturating_duration_since(self.start),
        }
    }

    fn row_at(&mut self, at: Instant) -> &mut Row {
        let row = self.plan.row_of(at.saturating_duration_since(self.start));
        &mut self.rows[row]
    }

    /// Message `seq` was sent at `at` (numbers come in order, from 0).
    pub(super) fn sent(&mut self, seq: u64, at: Instant) {
        let index = seq as usize;
        if index >= self.fates.len() {
            self.fates.resize(index + 1, Fate::default());
        }
        self.totals.sent += 1;
        self.totals.unconfirmed += 1;
        self.row_at(at).sent += 1;
    }

    /// The broker's answer to message `seq`: confirmed, or refused with its reason.
    pub(super) fn confirmed(&mut self, seq: u64, outcome: Result<(), String>) {
        let Some(fate) = self.fates.get_mut(seq as usize) else {
            return;
        };
        match outcome {
            Ok(()) if !fate.confirmed => {
                fate.confirmed = true;
                self.totals.confirmed += 1;
                self.totals.unconfirmed -= 1;
                if fate.received == 0 {
                    self.awaiting += 1;
                }
            }
            Ok(()) => {}
            Err(why) => self.fault(format!("message {seq} not confirmed: {why}")),
        }
    }

    /// `body` arrived at `at`.
    pub(super) fn received(&mut self, body: &[u8], at: Instant) {
        let stamp = Stamp::read(body).filter(|s| s.run == self.run);
        let Some((stamp, fate)) =
            stamp.and_then(|s| Some((s, self.fates.get_mut(s.seq as usize)?)))
        else {
            self.totals.foreign += 1;
            return;
        };
        fate.received = fate.received.saturating_add(1);
        if fate.received > 1 {
            self.totals.duplicates += 1;
        } else {
            self.totals.received += 1;
            if fate.confirmed {
                self.awaiting -= 1;
            }
        }
        let latency = at.saturating_duration_since(self.start + stamp.sent);
        let row = self.row_at(at);
        row.received += 1;
        row.samples.push(latency);
        self.last_heard = self.last_heard.max(at);
        self.stalled = false;
    }

    /// A client error: counted, the first kept.
    pub(super) fn fault(&mut self, error: String) {
        self.totals.errors += 1;
        self.totals.first_error.get_or_insert(error);
    }

    /// Messages confirmed and not received yet.
    pub(super) fn awaiting(&self) -> u64 {
        self.awaiting
    }

    /// At `now`, whether a stall begins: nothing received for `limit` (counted once per
    /// silence); how long the silence has lasted when it does.
    pub(super) fn stall(&mut self, now: Instant, limit: Duration) -> Option<Duration> {
        let silence = now.saturating_duration_since(self.last_heard);
        self.totals.longest_silence = self.totals.longest_silence.max(silence);
        if silence < limit || self.stalled {
            return None;
        }
        self.stalled = true;
        self.totals.stalls += 1;
        Some(silence)
    }

    /// Row `row`'s figures; its latency samples are then dropped unless a verdict window
    /// needs them.
    pub(super) fn row(&mut self, row: usize) -> RowFigures {
        let keep = self.plan.in_window(row);
        let r = &mut self.rows[row];
        let latency = (!r.samples.is_empty()).then(|| Percentiles::of(&mut r.samples));
        r.p99 = latency.map(|l| l.p99);
        if !keep {
            r.samples = Vec::new();
        }
        RowFigures {
            sent: r.sent,
            received: r.received,
            latency,
        }
    }

    /// Each of `rows`' p99 (`None` for a row that received nothing or is not over).
    pub(super) fn p99s(&self, rows: Range<usize>) -> Vec<Option<Duration>> {
        self.rows[rows].iter().map(|r| r.p99).collect()
    }

    /// The latency over `rows` (a verdict window); `None` when nothing arrived in them.
    pub(super) fn window(&self, rows: Range<usize>) -> Option<Percentiles> {
        let mut samples: Vec<Duration> = self.rows[rows]
            .iter()
            .flat_map(|r| r.samples.iter().copied())
            .collect();
        (!samples.is_empty()).then(|| Percentiles::of(&mut samples))
    }

    /// The totals so far; what is confirmed and not received counts as lost.
    pub(super) fn totals(&self) -> Totals {
        Totals {
            lost: self.awaiting,
            ..self.totals.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: u64 = 0xfe77;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn ledger(start: Instant) -> Ledger {
        Ledger::new(Plan::new(120, 20, 10).unwrap(), start, RUN)
    }

    /// Sends message `seq` at `sent` ms and confirms it.
    fn send(l: &mut Ledger, start: Instant, seq: u64, sent: u64) -> Vec<u8> {
        let at = start + ms(sent);
        l.sent(seq, at);
        l.confirmed(seq, Ok(()));
        l.stamp(seq, at).body(64)
    }

    #[test]
    fn a_stamp_survives_its_body_and_a_short_body_has_none() {
        let stamp = Stamp {
            run: RUN,
            seq: 42,
            sent: Duration::from_nanos(1_234_567_890),
        };
        let body = stamp.body(1024);
        assert_eq!(body.len(), 1024);
        assert_eq!(Stamp::read(&body), Some(stamp));
        assert_eq!(stamp.body(3).len(), STAMP_LEN);
        assert_eq!(Stamp::read(&body[..STAMP_LEN - 1]), None);
    }

    #[test]
    fn latency_is_from_the_stamped_send_to_the_delivery_in_the_row_of_the_delivery() {
        let start = Instant::now();
        let mut l = ledger(start);
        let first = send(&mut l, start, 0, 9_990);
        let second = send(&mut l, start, 1, 9_995);
        l.received(&first, start + ms(9_993));
        l.received(&second, start + ms(10_020));
        assert_eq!(
            l.row(0),
            RowFigures {
                sent: 2,
                received: 1,
                latency: Some(Percentiles {
                    p50: ms(3),
                    p99: ms(3),
                    max: ms(3)
                })
            }
        );
        assert_eq!(l.row(1).latency.map(|p| p.max), Some(ms(25)));
    }

    #[test]
    fn confirmed_and_never_received_is_lost_and_a_second_delivery_a_duplicate() {
        let start = Instant::now();
        let mut l = ledger(start);
        let bodies: Vec<_> = (0..4).map(|i| send(&mut l, start, i, i * 10)).collect();
        l.sent(4, start + ms(50));
        l.confirmed(4, Err("nacked".into()));
        l.received(&bodies[0], start + ms(60));
        l.received(&bodies[1], start + ms(61));
        l.received(&bodies[1], start + ms(62));
        assert_eq!(l.awaiting(), 2);
        let t = l.totals();
        assert_eq!(
            (t.sent, t.confirmed, t.unconfirmed, t.received),
            (5, 4, 1, 2)
        );
        assert_eq!((t.lost, t.duplicates, t.errors), (2, 1, 1));
        assert_eq!(
            t.first_error.as_deref(),
            Some("message 4 not confirmed: nacked")
        );
    }

    #[test]
    fn a_message_received_before_its_confirm_is_not_awaited() {
        let start = Instant::now();
        let mut l = ledger(start);
        l.sent(0, start);
        l.received(&l.stamp(0, start).body(32), start + ms(1));
        l.confirmed(0, Ok(()));
        assert_eq!(l.awaiting(), 0);
        assert_eq!(l.totals().lost, 0);
    }

    #[test]
    fn bodies_of_another_run_or_unsent_numbers_are_foreign() {
        let start = Instant::now();
        let mut l = ledger(start);
        send(&mut l, start, 0, 0);
        let other = Stamp {
            run: RUN + 1,
            seq: 0,
            sent: ms(0),
        };
        l.received(&other.body(32), start);
        l.received(&l.stamp(7, start).body(32), start);
        l.received(b"short", start);
        let t = l.totals();
        assert_eq!((t.foreign, t.received, t.lost), (3, 0, 1));
    }

    #[test]
    fn samples_outside_the_verdict_windows_are_dropped_once_their_row_is_read() {
        let start = Instant::now();
        let mut l = ledger(start);
        // Rows of 10 s; windows 2..7 and 7..12: row 1 (warmup) is outside.
        for (seq, at) in [(0, 15_000), (1, 25_000), (2, 26_000)] {
            let body = send(&mut l, start, seq, at);
            l.received(&body, start + ms(at + 4 + seq));
        }
        assert_eq!(l.row(1).received, 1);
        assert_eq!(l.row(2).received, 2);
        assert_eq!(l.window(1..3).map(|p| p.max), Some(ms(6)));
        assert_eq!(l.window(1..2), None);
    }

    #[test]
    fn a_silence_counts_as_one_stall_until_something_arrives() {
        let start = Instant::now();
        let mut l = ledger(start);
        let limit = Duration::from_secs(30);
        assert_eq!(l.stall(start + ms(29_000), limit), None);
        assert_eq!(l.stall(start + ms(30_000), limit), Some(ms(30_000)));
        assert_eq!(l.stall(start + ms(40_000), limit), None);
        let body = send(&mut l, start, 0, 40_000);
        l.received(&body, start + ms(41_000));
        assert_eq!(l.stall(start + ms(50_000), limit), None);
        assert_eq!(l.stall(start + ms(71_000), limit), Some(ms(30_000)));
        let t = l.totals();
        assert_eq!((t.stalls, t.longest_silence), (2, ms(40_000)));
    }
}
