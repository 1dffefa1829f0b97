//! Load tools behind `ferry bench`, a crate of their own that the `ferry` binary links
//! (the daemon's library does not): each drives a real workload and prints its figures
//! (the ones `docs/benchmarks.md` quotes). They use Ferry's crates only through their
//! public API.
//!
//! One module per tool ([`stage`], [`amqp`], [`kafka`], [`bridge`], [`overload`], [`soak`]);
//! what several share: [`broker`] (the broker under test: its process, resources and the
//! queue and topic of a run), [`cpu`] (CPU time per message) and [`Percentiles`].

pub mod amqp;
pub mod bridge;
mod broker;
pub mod cpu;
pub mod kafka;
pub mod overload;
pub mod soak;
pub mod stage;

use std::time::Duration;

/// Latency percentiles of a set of samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Percentiles {
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest sample.
    pub max: Duration,
}

impl Percentiles {
    /// Percentiles of `samples` (sorted in place); zero when there are none.
    pub fn of(samples: &mut [Duration]) -> Self {
        samples.sort_unstable();
        let at = |q: f64| {
            samples
                .get(((samples.len() as f64 - 1.0) * q).round() as usize)
                .copied()
                .unwrap_or_default()
        };
        Self {
            p50: at(0.50),
            p99: at(0.99),
            max: samples.last().copied().unwrap_or_default(),
        }
    }

    /// `p50/p99/max` in milliseconds with one decimal, for a table cell.
    pub fn cell(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        format!(
            "{:.1}/{:.1}/{:.1}",
            ms(self.p50),
            ms(self.p99),
            ms(self.max)
        )
    }
}

impl std::fmt::Display for Percentiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            self.p50.as_secs_f64() * 1e3,
            self.p99.as_secs_f64() * 1e3,
            self.max.as_secs_f64() * 1e3
        )
    }
}
