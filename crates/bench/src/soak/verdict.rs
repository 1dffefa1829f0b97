//! The soak's verdict, computed from what the run recorded: the broker's resident memory
//! growth (mean over the last verdict window against the mean over the first), each
//! workload's p99 latency drift (p99 of the last window against p99 of the first) and its
//! p99 trend over every row after the warmup, then what makes the run fail. Pure: the
//! figures in, the lines out.
//!
//! Why a trend beside the drift: on two shared cores a row's p99 swings by half between
//! neighbouring minutes, so two windows alone can show a drift that is noise. The trend
//! is the Theil–Sen slope of the rows' p99 (the median of the slopes between every two
//! rows: a few bad minutes do not move it) and Kendall's tau with its z score under "no
//! trend" (|z| > 1.96: a trend at 95% confidence).
//!
//! The tool reports; the only bounds it enforces are the ones that mean something went
//! wrong rather than slow: a message lost, a workload that stalled, a client that failed.

use super::ledger::Totals;
use super::schedule::Plan;
use crate::Percentiles;
use crate::broker::watch::{Reading, mib};
use std::time::{Duration, Instant};

/// The bound on resident memory growth, quoted beside the figure.
const RSS_BOUND_PERCENT: f64 = 5.0;

/// The mean resident memory, in KiB, of the readings from `from` (inclusive) to `to`.
pub(super) fn mean_rss_kib(readings: &[Reading], from: Instant, to: Instant) -> Option<f64> {
    let inside: Vec<u64> = readings
        .iter()
        .filter(|r| from <= r.at && r.at < to)
        .filter_map(|r| r.rss_kib)
        .collect();
    (!inside.is_empty()).then(|| inside.iter().sum::<u64>() as f64 / inside.len() as f64)
}

/// How much `last` is above `first`, in percent of `first`; `None` when `first` is 0.
pub(super) fn percent_change(first: f64, last: f64) -> Option<f64> {
    (first != 0.0).then(|| (last - first) / first * 100.0)
}

/// Where the verdict windows lie, for the lines: `first +60..+360 s, last +1500..+1800 s`.
fn windows(plan: &Plan) -> String {
    let (a, b) = plan.seconds(&plan.first_window());
    let (c, d) = plan.seconds(&plan.last_window());
    format!("first window +{a}..+{b} s, last window +{c}..+{d} s")
}

/// The resident memory line, from the windows' means (KiB).
pub(super) fn rss_line(plan: &Plan, first: Option<f64>, last: Option<f64>) -> String {
    let show = |kib: Option<f64>| kib.map_or_else(|| "—".to_owned(), |k| mib(k.round() as u64));
    let growth = first
        .zip(last)
        .and_then(|(f, l)| percent_change(f, l))
        .map_or_else(|| "—".to_owned(), |p| format!("{p:+.1}%"));
    format!(
        "broker RSS growth: {growth} (issue 17: < {RSS_BOUND_PERCENT}%); mean {} MiB → {} MiB ({})",
        show(first),
        show(last),
        windows(plan)
    )
}

/// Workload `name`'s p99 drift line, from its windows' latencies.
pub(super) fn drift_line(
    plan: &Plan,
    name: &str,
    first: Option<Percentiles>,
    last: Option<Percentiles>,
) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let show =
        |p: Option<Percentiles>| p.map_or_else(|| "—".to_owned(), |p| format!("{:.2}", ms(p.p99)));
    let drift = match (first, last) {
        (Some(f), Some(l)) => {
            let (f, l) = (ms(f.p99), ms(l.p99));
            let percent =
                percent_change(f, l).map_or_else(|| "—".to_owned(), |p| format!("{p:+.1}%"));
            format!("{:+.2} ms ({percent})", l - f)
        }
        _ => "— (a window received nothing)".to_owned(),
    };
    format!(
        "{name} p99 drift: {drift}; p99 {} ms → {} ms ({})",
        show(first),
        show(last),
        windows(plan)
    )
}

/// A monotone trend in a series: Theil–Sen slope and Kendall's tau.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Trend {
    /// Median slope between every two points, in y units per x unit.
    pub slope: f64,
    /// Kendall's tau: concordant minus discordant pairs over all pairs.
    pub tau: f64,
    /// tau's z score under no trend (ties ignored).
    pub z: f64,
    /// The median of the y values.
    pub median: f64,
}

/// The trend of `points` (x, y); `None` for fewer than three points.
pub(super) fn trend(points: &[(f64, f64)]) -> Option<Trend> {
    let n = points.len();
    if n < 3 {
        return None;
    }
    let mut slopes = Vec::with_capacity(n * (n - 1) / 2);
    let mut sign_sum = 0.0;
    for (i, &(xi, yi)) in points.iter().enumerate() {
        for &(xj, yj) in &points[i + 1..] {
            if xj != xi {
                slopes.push((yj - yi) / (xj - xi));
            }
            // Ties count for neither side (f64::signum would count +0 as concordant).
            let product = (xj - xi) * (yj - yi);
            if product > 0.0 {
                sign_sum += 1.0;
            } else if product < 0.0 {
                sign_sum -= 1.0;
            }
        }
    }
    let pairs = (n * (n - 1) / 2) as f64;
    let tau = sign_sum / pairs;
    let nf = n as f64;
    let variance = 2.0 * (2.0 * nf + 5.0) / (9.0 * nf * (nf - 1.0));
    let mut ys: Vec<f64> = points.iter().map(|p| p.1).collect();
    Some(Trend {
        slope: median(&mut slopes)?,
        tau,
        z: tau / variance.sqrt(),
        median: median(&mut ys)?,
    })
}

/// The median of `values` (reordered); `None` when empty.
fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some(f64::midpoint(values[n / 2 - 1], values[n / 2])),
    }
}

/// Workload `name`'s p99 trend line from its rows' p99 after the warmup (`p99s[i]` is row
/// `plan.measured().start + i`).
pub(super) fn trend_line(plan: &Plan, name: &str, p99s: &[Option<Duration>]) -> String {
    let every_s = plan.every.as_secs_f64();
    let points: Vec<(f64, f64)> = p99s
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.map(|p| (i as f64 * every_s, p.as_secs_f64() * 1e3)))
        .collect();
    let Some(t) = trend(&points) else {
        return format!("{name} p99 trend: — (fewer than three rows after the warmup)");
    };
    let per_10_min = t.slope * 600.0;
    let verdict = if t.z.abs() > 1.96 {
        "a trend at 95% confidence"
    } else {
        "no trend at 95% confidence"
    };
    format!(
        "{name} p99 trend over {} rows after the warmup: {per_10_min:+.2} ms per 10 min ({:+.1}% of the rows' median p99, {:.2} ms); Kendall tau {:+.2} (z {:+.2}: {verdict})",
        points.len(),
        percent_change(t.median, t.median + per_10_min).unwrap_or(0.0),
        t.median,
        t.tau,
        t.z,
    )
}

/// The totals table, one row per workload.
pub(super) fn totals_table(totals: &[(&str, Totals)]) -> Vec<String> {
    let mut lines = vec![
        "| workload | sent | confirmed | unconfirmed | received | lost | duplicates | other runs' | stalls | longest silence s | client errors |".to_owned(),
        "|---|---|---|---|---|---|---|---|---|---|---|".to_owned(),
    ];
    for (name, t) in totals {
        lines.push(format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} |",
            t.sent,
            t.confirmed,
            t.unconfirmed,
            t.received,
            t.lost,
            t.duplicates,
            t.foreign,
            t.stalls,
            t.longest_silence.as_secs_f64(),
            t.errors
        ));
    }
    for (name, t) in totals {
        if let Some(first) = &t.first_error {
            lines.push(format!("{name}: first client error: {first}"));
        }
    }
    lines
}

/// What makes the run fail: per workload, messages lost or stalls; empty when none.
pub(super) fn failures(totals: &[(&str, Totals)]) -> Vec<String> {
    let mut failed = Vec::new();
    for (name, t) in totals {
        if t.lost > 0 {
            failed.push(format!("{name}: {} message(s) lost", t.lost));
        }
        if t.stalls > 0 {
            failed.push(format!("{name}: stalled {} time(s)", t.stalls));
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rss_at(start: Instant, s: u64, kib: Option<u64>) -> Reading {
        Reading {
            at: start + Duration::from_secs(s),
            rss_kib: kib,
            fds: None,
            broker_cpu: None,
            bench_cpu: None,
        }
    }

    fn p99(ms: u64) -> Option<Percentiles> {
        let d = Duration::from_millis(ms);
        Some(Percentiles {
            p50: d / 2,
            p99: d,
            max: d * 2,
        })
    }

    #[test]
    fn the_mean_rss_is_over_the_readings_of_the_window_only() {
        let t = Instant::now();
        let readings = [
            rss_at(t, 59, Some(1)),
            rss_at(t, 60, Some(100)),
            rss_at(t, 61, None),
            rss_at(t, 200, Some(200)),
            rss_at(t, 360, Some(9_999)),
        ];
        let from = t + Duration::from_secs(60);
        let to = t + Duration::from_secs(360);
        assert_eq!(mean_rss_kib(&readings, from, to), Some(150.0));
        assert_eq!(
            mean_rss_kib(&readings, to + Duration::from_secs(1), to),
            None
        );
    }

    #[test]
    fn growth_and_drift_are_the_last_window_against_the_first() {
        let plan = Plan::new(1800, 60, 60).unwrap();
        assert_eq!(percent_change(200.0, 210.0), Some(5.0));
        assert_eq!(percent_change(0.0, 1.0), None);
        assert_eq!(
            rss_line(&plan, Some(102_400.0), Some(104_448.0)),
            "broker RSS growth: +2.0% (issue 17: < 5%); mean 100.0 MiB → 102.0 MiB (first window +60..+360 s, last window +1500..+1800 s)"
        );
        assert_eq!(
            drift_line(&plan, "AMQP", p99(4), p99(5)),
            "AMQP p99 drift: +1.00 ms (+25.0%); p99 4.00 ms → 5.00 ms (first window +60..+360 s, last window +1500..+1800 s)"
        );
        assert!(drift_line(&plan, "route", p99(4), None).contains("— (a window received nothing)"));
        assert!(rss_line(&plan, None, Some(1.0)).starts_with("broker RSS growth: — "));
    }

    #[test]
    fn a_steady_rise_is_a_trend_and_a_few_bad_minutes_are_not() {
        // 20 rows of 40 ms with ±5 ms of alternating noise and two 100 ms spikes at the end.
        let noisy: Vec<(f64, f64)> = (0..20)
            .map(|i| {
                let y = if i >= 18 {
                    100.0
                } else if i % 2 == 0 {
                    45.0
                } else {
                    35.0
                };
                (f64::from(i), y)
            })
            .collect();
        let t = trend(&noisy).unwrap();
        assert_eq!(t.slope, 0.0);
        assert!(t.z.abs() < 1.96, "{t:?}");
        // 1 ms a row, with the same noise.
        let rising: Vec<(f64, f64)> = (0..20)
            .map(|i| {
                (
                    f64::from(i),
                    40.0 + f64::from(i) + if i % 2 == 0 { 5.0 } else { -5.0 },
                )
            })
            .collect();
        let t = trend(&rising).unwrap();
        assert!((t.slope - 1.0).abs() < 1e-9, "{t:?}");
        assert!(t.z > 1.96, "{t:?}");
        assert!(trend(&rising[..2]).is_none());
    }

    #[test]
    fn the_trend_line_gives_the_slope_per_ten_minutes_of_minute_rows() {
        let plan = Plan::new(1800, 600, 60).unwrap();
        let ms = |v: u64| Some(Duration::from_millis(v));
        let p99s: Vec<Option<Duration>> = (0..20).map(|i| ms(40 + i)).chain([None]).collect();
        assert_eq!(
            trend_line(&plan, "Kafka", &p99s),
            "Kafka p99 trend over 20 rows after the warmup: +10.00 ms per 10 min (+20.2% of the rows' median p99, 49.50 ms); Kendall tau +1.00 (z +6.16: a trend at 95% confidence)"
        );
        assert!(trend_line(&plan, "route", &[ms(1), None]).contains("fewer than three rows"));
    }

    #[test]
    fn loss_and_stalls_fail_the_run_and_other_findings_do_not() {
        let clean = Totals {
            sent: 10,
            confirmed: 9,
            unconfirmed: 1,
            received: 9,
            duplicates: 2,
            foreign: 3,
            errors: 1,
            first_error: Some("message 9 not confirmed: nacked".into()),
            ..Totals::default()
        };
        let bad = Totals {
            lost: 2,
            stalls: 1,
            ..clean.clone()
        };
        assert!(failures(&[("AMQP", clean.clone())]).is_empty());
        assert_eq!(
            failures(&[("AMQP", clean.clone()), ("route", bad)]),
            ["route: 2 message(s) lost", "route: stalled 1 time(s)"]
        );
        let table = totals_table(&[("AMQP", clean)]);
        assert_eq!(
            table[2],
            "| AMQP | 10 | 9 | 1 | 9 | 0 | 2 | 3 | 0 | 0.0 | 1 |"
        );
        assert_eq!(
            table[3],
            "AMQP: first client error: message 9 not confirmed: nacked"
        );
    }
}
