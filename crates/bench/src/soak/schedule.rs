//! The soak's clock: when each message leaves ([`Pace`]) and how the run is cut into rows
//! and verdict windows ([`Plan`]). Pure: no I/O, no sleeping.
//!
//! Message `n` of a workload is due at `start + n / rate`, computed from the start every
//! time, never from the previous send: a send held up (a full confirm window, a slow
//! broker) makes the next ones late, not the whole schedule, so a run sends exactly
//! `rate × duration` messages over its duration whatever happened along the way.

use std::ops::Range;
use std::time::{Duration, Instant};

/// Longest verdict window: the issue compares the first and last 5 minutes.
pub(super) const VERDICT_WINDOW: Duration = Duration::from_secs(300);
/// Longest run, in seconds.
pub(super) const MAX_DURATION_S: u64 = 24 * 3600;

/// When each message of one workload is due.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pace {
    /// When message 0 is due.
    start: Instant,
    /// Messages per second.
    rate: u32,
    /// Messages in the run: `rate × length`.
    count: u64,
}

impl Pace {
    /// `rate` messages per second from `start` for `length` (whole seconds count).
    pub(super) fn new(start: Instant, rate: u32, length: Duration) -> Self {
        Self {
            start,
            rate,
            count: u64::from(rate) * length.as_secs(),
        }
    }

    /// When message `seq` is due; `None` past the end of the run.
    pub(super) fn due(&self, seq: u64) -> Option<Instant> {
        // Integer nanoseconds from the start: no rounding error accumulates over a run.
        let nanos = u128::from(seq) * 1_000_000_000 / u128::from(self.rate.max(1));
        (seq < self.count).then(|| self.start + Duration::from_nanos(nanos as u64))
    }
}

/// The run cut into rows of `every` (one printed line each, the warmup's included) and the
/// two verdict windows: the first and the last [`VERDICT_WINDOW`] after the warmup (or
/// half of what follows the warmup each, when that is shorter). Row `rows` is the drain:
/// whatever arrives after the run's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Plan {
    /// Length of a row.
    pub every: Duration,
    /// Rows of the run, the warmup's included.
    pub rows: usize,
    /// Rows of the warmup, the first ones.
    pub warmup_rows: usize,
    /// Rows in each verdict window.
    pub window_rows: usize,
}

impl Plan {
    /// The plan of a run of `duration_s` seconds with a warmup of `warmup_s` and a row every
    /// `every_s`.
    ///
    /// # Errors
    /// A flag out of bounds, named: each length must be a whole number of rows, and at
    /// least two rows must follow the warmup (one per verdict window).
    pub(super) fn new(duration_s: u64, warmup_s: u64, every_s: u64) -> anyhow::Result<Self> {
        anyhow::ensure!(
            (1..=3600).contains(&every_s),
            "--every {every_s}: from 1 to 3600 seconds"
        );
        anyhow::ensure!(
            duration_s <= MAX_DURATION_S && duration_s.is_multiple_of(every_s),
            "--duration {duration_s}: a multiple of --every ({every_s} s), at most {MAX_DURATION_S}"
        );
        anyhow::ensure!(
            warmup_s.is_multiple_of(every_s),
            "--warmup {warmup_s}: a multiple of --every ({every_s} s)"
        );
        let rows = (duration_s / every_s) as usize;
        let warmup_rows = (warmup_s / every_s) as usize;
        let measured = rows.saturating_sub(warmup_rows);
        anyhow::ensure!(
            measured >= 2,
            "--duration {duration_s} leaves {measured} row(s) of --every {every_s} s after --warmup {warmup_s}: at least 2 are needed, one per verdict window"
        );
        let window_rows = (VERDICT_WINDOW.as_secs().div_ceil(every_s) as usize).min(measured / 2);
        Ok(Self {
            every: Duration::from_secs(every_s),
            rows,
            warmup_rows,
            window_rows,
        })
    }

    /// The run's length.
    pub(super) fn duration(&self) -> Duration {
        self.every * self.rows as u32
    }

    /// The row `offset` after the start falls in; [`Plan::rows`] (the drain) after the end.
    pub(super) fn row_of(&self, offset: Duration) -> usize {
        ((offset.as_nanos() / self.every.as_nanos()) as usize).min(self.rows)
    }

    /// Where row `row` starts and ends, for a run started at `start`.
    pub(super) fn span(&self, start: Instant, row: usize) -> (Instant, Instant) {
        let from = start + self.every * row as u32;
        (from, from + self.every)
    }

    /// The rows of the first verdict window, right after the warmup.
    pub(super) fn first_window(&self) -> Range<usize> {
        self.warmup_rows..self.warmup_rows + self.window_rows
    }

    /// The rows of the last verdict window, the run's last.
    pub(super) fn last_window(&self) -> Range<usize> {
        self.rows - self.window_rows..self.rows
    }

    /// The rows after the warmup, over which the p99 trend is taken.
    pub(super) fn measured(&self) -> Range<usize> {
        self.warmup_rows..self.rows
    }

    /// Whether row `row` is in a verdict window (so its latency samples are kept).
    pub(super) fn in_window(&self, row: usize) -> bool {
        self.first_window().contains(&row) || self.last_window().contains(&row)
    }

    /// The span of `rows` in seconds from the start, for the verdict's lines.
    pub(super) fn seconds(&self, rows: &Range<usize>) -> (u64, u64) {
        let at = |row: usize| self.every.as_secs() * row as u64;
        (at(rows.start), at(rows.end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_n_is_due_n_over_rate_after_the_start_without_drift() {
        let start = Instant::now();
        let pace = Pace::new(start, 300, Duration::from_secs(1800));
        assert_eq!(pace.due(0), Some(start));
        assert_eq!(pace.due(1), Some(start + Duration::from_nanos(3_333_333)));
        // After half an hour, exactly on the second: nothing accumulated.
        assert_eq!(
            pace.due(300 * 1799),
            Some(start + Duration::from_secs(1799))
        );
        assert_eq!(
            pace.due(539_999),
            Some(start + Duration::from_secs(1800) - Duration::from_nanos(3_333_334))
        );
        assert_eq!(pace.due(540_000), None);
    }

    #[test]
    fn the_default_run_has_thirty_rows_one_of_warmup_and_five_minute_windows() {
        let plan = Plan::new(1800, 60, 60).unwrap();
        assert_eq!(plan.rows, 30);
        assert_eq!(plan.warmup_rows, 1);
        assert_eq!(plan.window_rows, 5);
        assert_eq!(plan.first_window(), 1..6);
        assert_eq!(plan.last_window(), 25..30);
        assert_eq!(plan.seconds(&plan.first_window()), (60, 360));
        assert_eq!(plan.seconds(&plan.last_window()), (1500, 1800));
        assert!(plan.in_window(5) && plan.in_window(25) && !plan.in_window(0));
        assert!(!plan.in_window(6) && !plan.in_window(24));
    }

    #[test]
    fn a_short_run_splits_what_follows_the_warmup_into_two_windows() {
        let plan = Plan::new(120, 20, 10).unwrap();
        assert_eq!((plan.rows, plan.warmup_rows, plan.window_rows), (12, 2, 5));
        assert_eq!(plan.first_window(), 2..7);
        assert_eq!(plan.last_window(), 7..12);
        let odd = Plan::new(70, 20, 10).unwrap();
        assert_eq!(odd.first_window(), 2..4);
        assert_eq!(odd.last_window(), 5..7);
    }

    #[test]
    fn rows_are_found_by_offset_and_everything_after_the_end_is_the_drain() {
        let plan = Plan::new(120, 20, 10).unwrap();
        assert_eq!(plan.row_of(Duration::ZERO), 0);
        assert_eq!(plan.row_of(Duration::from_millis(9_999)), 0);
        assert_eq!(plan.row_of(Duration::from_secs(10)), 1);
        assert_eq!(plan.row_of(Duration::from_secs(119)), 11);
        assert_eq!(plan.row_of(Duration::from_secs(500)), 12);
        let start = Instant::now();
        assert_eq!(
            plan.span(start, 3),
            (
                start + Duration::from_secs(30),
                start + Duration::from_secs(40)
            )
        );
        assert_eq!(plan.duration(), Duration::from_secs(120));
    }

    #[test]
    fn lengths_that_are_not_whole_rows_or_leave_no_windows_are_refused_by_flag() {
        for ((duration, warmup, every), flag) in [
            ((1800, 60, 0), "--every"),
            ((1790, 60, 60), "--duration"),
            ((1800, 30, 60), "--warmup"),
            ((120, 60, 60), "at least 2"),
            ((MAX_DURATION_S + 60, 60, 60), "--duration"),
        ] {
            let err = Plan::new(duration, warmup, every).unwrap_err().to_string();
            assert!(err.contains(flag), "{err}");
        }
    }
}
