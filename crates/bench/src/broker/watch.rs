//! The broker's resident memory, open file descriptors and CPU time, read from `/proc`
//! every [`EVERY`] while a scenario runs (with this process's own CPU time), and their
//! summary over each phase of the scenario.
//!
//! A reading the broker's `/proc` entry cannot give (the broker exited, or was killed for
//! its memory) is kept as a gap and counted, not dropped: it is a finding.

use crate::cpu::process_cpu;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the broker is read.
pub(crate) const EVERY: Duration = Duration::from_millis(200);

/// One reading of the broker and of this process.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reading {
    /// When it was taken.
    pub at: Instant,
    /// The broker's resident set (`VmRSS`) in KiB.
    pub rss_kib: Option<u64>,
    /// The broker's open file descriptors.
    pub fds: Option<u64>,
    /// The broker's CPU time so far.
    pub broker_cpu: Option<Duration>,
    /// This process's CPU time so far (the load's clients share the machine's cores).
    pub bench_cpu: Option<Duration>,
}

/// Reads broker `pid` and this process now.
pub(crate) fn read(pid: u32) -> Reading {
    Reading {
        at: Instant::now(),
        rss_kib: std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .as_deref()
            .and_then(rss_kib),
        fds: std::fs::read_dir(format!("/proc/{pid}/fd"))
            .ok()
            .map(|entries| entries.count() as u64),
        broker_cpu: process_cpu(pid),
        bench_cpu: process_cpu(std::process::id()),
    }
}

/// The `VmRSS` of a `/proc/PID/status` text, in KiB (the kernel writes it in `kB`).
pub(crate) fn rss_kib(status: &str) -> Option<u64> {
    let value = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?;
    let mut parts = value.split_whitespace();
    let kib = parts.next()?.parse().ok()?;
    (parts.next() == Some("kB")).then_some(kib)
}

/// The soft `Max open files` limit in a `/proc/PID/limits` text (`None` for unlimited).
pub(crate) fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Readings taken on a blocking thread until stopped.
pub(crate) struct Watch {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<Reading>>,
}

impl Watch {
    /// Starts reading broker `pid` every [`EVERY`].
    pub(crate) fn start(pid: u32) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::task::spawn_blocking({
            let stop = stop.clone();
            move || {
                let mut readings = Vec::new();
                // Bounded by the scenario, which stops it; `/proc` reads block, hence a
                // thread of the blocking pool rather than a task.
                while !stop.load(Ordering::Relaxed) {
                    readings.push(read(pid));
                    std::thread::sleep(EVERY);
                }
                readings
            }
        });
        Self { stop, task }
    }

    /// Stops reading; every reading taken.
    pub(crate) async fn stop(self) -> Vec<Reading> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or_default()
    }
}

/// How often the broker's resident memory is compared while it settles.
const SETTLE_EVERY: Duration = Duration::from_secs(2);
/// Comparisons in a row within [`SETTLE_BAND_KIB`] that make it settled.
const SETTLE_STEADY: usize = 2;
/// The change of resident memory, in KiB, that still counts as steady.
const SETTLE_BAND_KIB: u64 = 1024;
/// Longest to wait for the broker's memory to settle.
pub(crate) const SETTLE_LIMIT: Duration = Duration::from_secs(30);

/// Waits until broker `pid`'s resident memory changes by less than [`SETTLE_BAND_KIB`]
/// over [`SETTLE_STEADY`] × [`SETTLE_EVERY`] in a row, at most [`SETTLE_LIMIT`]: memory
/// that an earlier load is still giving back would otherwise fall during the next
/// baseline. jemalloc returns freed pages over about 10 s, and only while the program
/// allocates, so this runs with the probes under way. The resident memory in KiB at the
/// end, and whether it settled.
pub(crate) async fn settle(pid: u32) -> (Option<u64>, bool) {
    let started = Instant::now();
    let mut before = read(pid).rss_kib;
    let mut steady = 0;
    loop {
        tokio::time::sleep(SETTLE_EVERY).await;
        let now = read(pid).rss_kib;
        steady = match (before, now) {
            (Some(a), Some(b)) if a.abs_diff(b) >= SETTLE_BAND_KIB => 0,
            _ => steady + 1,
        };
        if steady >= SETTLE_STEADY || started.elapsed() >= SETTLE_LIMIT {
            return (now, steady >= SETTLE_STEADY);
        }
        before = now;
    }
}

/// A named stretch of a scenario.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Phase {
    /// What ran during it: `baseline`, `load`, `drain`, …
    pub name: &'static str,
    /// Its start.
    pub from: Instant,
    /// Its end.
    pub to: Instant,
}

impl Phase {
    /// Whether `at` falls in it.
    pub(crate) fn holds(&self, at: Instant) -> bool {
        self.from <= at && at < self.to
    }

    /// Its length.
    pub(crate) fn length(&self) -> Duration {
        self.to.saturating_duration_since(self.from)
    }
}

/// A gauge over a phase: its first, largest and last value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    /// At the phase's first reading.
    pub first: u64,
    /// The largest reading.
    pub peak: u64,
    /// At its last reading.
    pub last: u64,
}

impl Span {
    /// The span of `values` in order; `None` when there are none.
    fn of(values: impl Iterator<Item = u64>) -> Option<Self> {
        values.fold(None, |span, v| {
            Some(match span {
                None => Self {
                    first: v,
                    peak: v,
                    last: v,
                },
                Some(s) => Self {
                    peak: s.peak.max(v),
                    last: v,
                    ..s
                },
            })
        })
    }
}

/// The broker's gauges over one phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct PhaseGauges {
    /// Resident memory, KiB.
    pub rss_kib: Option<Span>,
    /// Open file descriptors.
    pub fds: Option<Span>,
    /// Broker CPU time spent in the phase.
    pub broker_cpu: Option<Duration>,
    /// This process's CPU time spent in the phase.
    pub bench_cpu: Option<Duration>,
    /// Readings in the phase that could not read the broker.
    pub gaps: usize,
}

/// The gauges of `phase` from `readings` (in time order). CPU time is counted from the
/// last reading before the phase (or its first reading) to its last one.
pub(crate) fn summarize(readings: &[Reading], phase: &Phase) -> PhaseGauges {
    let inside: Vec<&Reading> = readings.iter().filter(|r| phase.holds(r.at)).collect();
    let before = readings.iter().rev().find(|r| r.at < phase.from);
    let spent = |cpu: fn(&Reading) -> Option<Duration>| {
        let start = before.or(inside.first().copied()).and_then(cpu)?;
        let end = inside.iter().rev().find_map(|r| cpu(r))?;
        end.checked_sub(start)
    };
    PhaseGauges {
        rss_kib: Span::of(inside.iter().filter_map(|r| r.rss_kib)),
        fds: Span::of(inside.iter().filter_map(|r| r.fds)),
        broker_cpu: spent(|r| r.broker_cpu),
        bench_cpu: spent(|r| r.bench_cpu),
        gaps: inside.iter().filter(|r| r.rss_kib.is_none()).count(),
    }
}

/// The largest resident set in each `every`-long stretch from `from`, in KiB (0 for a
/// stretch without a reading), for `count` stretches.
pub(crate) fn rss_peaks(
    readings: &[Reading],
    from: Instant,
    every: Duration,
    count: usize,
) -> Vec<u64> {
    let mut peaks = vec![0; count];
    for r in readings {
        let Some(offset) = r.at.checked_duration_since(from) else {
            continue;
        };
        let index = (offset.as_secs_f64() / every.as_secs_f64()) as usize;
        if let (Some(peak), Some(rss)) = (peaks.get_mut(index), r.rss_kib) {
            *peak = (*peak).max(rss);
        }
    }
    peaks
}

/// KiB as MiB with one decimal.
pub(crate) fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS: &str = "Name:\tferry\nUmask:\t0022\nVmPeak:\t 2033452 kB\nVmRSS:\t   48212 kB\nRssAnon:\t   30000 kB\nThreads:\t9\n";

    #[test]
    fn rss_is_the_vmrss_line_in_kib() {
        assert_eq!(rss_kib(STATUS), Some(48_212));
    }

    #[test]
    fn a_status_without_vmrss_has_no_rss() {
        // A zombie's status has no memory lines.
        assert_eq!(rss_kib("Name:\tferry\nState:\tZ (zombie)\n"), None);
    }

    #[test]
    fn the_soft_open_files_limit_is_read_from_the_limits_table() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \nMax cpu time              unlimited            unlimited            seconds   \nMax open files            1024                 524288               files     \n";
        assert_eq!(max_open_files(limits), Some(1024));
        let unlimited =
            "Max open files            unlimited            unlimited            files     \n";
        assert_eq!(max_open_files(unlimited), None);
    }

    #[test]
    fn this_process_can_be_read() {
        let r = read(std::process::id());
        assert!(r.rss_kib.unwrap() > 0);
        assert!(r.fds.unwrap() > 0);
    }

    fn reading(start: Instant, ms: u64, rss: Option<u64>, cpu_ms: u64) -> Reading {
        Reading {
            at: start + Duration::from_millis(ms),
            rss_kib: rss,
            fds: rss.map(|r| r / 100),
            broker_cpu: Some(Duration::from_millis(cpu_ms)),
            bench_cpu: None,
        }
    }

    #[test]
    fn a_phase_has_first_peak_and_last_values_and_the_cpu_spent_since_the_reading_before_it() {
        let t = Instant::now();
        let readings = [
            reading(t, 0, Some(1000), 100),
            reading(t, 200, Some(1500), 150),
            reading(t, 400, Some(9000), 400),
            reading(t, 600, None, 400),
            reading(t, 800, Some(2000), 900),
            reading(t, 1000, Some(2100), 950),
        ];
        let phase = Phase {
            name: "load",
            from: t + Duration::from_millis(300),
            to: t + Duration::from_millis(1000),
        };
        let g = summarize(&readings, &phase);
        assert_eq!(
            g.rss_kib,
            Some(Span {
                first: 9000,
                peak: 9000,
                last: 2000
            })
        );
        assert_eq!(
            g.fds,
            Some(Span {
                first: 90,
                peak: 90,
                last: 20
            })
        );
        assert_eq!(g.broker_cpu, Some(Duration::from_millis(750)));
        assert_eq!(g.bench_cpu, None);
        assert_eq!(g.gaps, 1);
    }

    #[test]
    fn an_empty_phase_has_no_gauges() {
        let t = Instant::now();
        let readings = [reading(t, 0, Some(1000), 100)];
        let phase = Phase {
            name: "late",
            from: t + Duration::from_secs(5),
            to: t + Duration::from_secs(6),
        };
        assert_eq!(summarize(&readings, &phase), PhaseGauges::default());
    }

    #[test]
    fn rss_peaks_fall_in_their_stretch_and_later_readings_are_left_out() {
        let t = Instant::now();
        let readings = [
            reading(t, 100, Some(10), 0),
            reading(t, 900, Some(30), 0),
            reading(t, 1100, Some(20), 0),
            reading(t, 2500, Some(99), 0),
        ];
        assert_eq!(
            rss_peaks(&readings, t, Duration::from_secs(1), 2),
            vec![30, 20]
        );
    }
}
