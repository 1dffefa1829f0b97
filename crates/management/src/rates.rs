//! Message rates from counters: each time a counter is read (a queue's publish count, the
//! node's total), the reading is kept, and its rate is the change per second since the
//! oldest reading of the last [`WINDOW`]. The [`super::sampler`] reads every queue and the
//! totals (each vhost's, and over every vhost) every 5 s, as RabbitMQ samples, so a page's
//! first answer has rates; a counter only a request reads starts at 0.0. Readings of
//! counters nobody reads for a window are dropped.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How far back a rate looks.
pub(crate) const WINDOW: Duration = Duration::from_secs(30);

/// The readings of every counter, by key.
#[derive(Debug, Default)]
pub struct Rates {
    readings: Mutex<HashMap<String, VecDeque<(Instant, i64)>>>,
}

impl Rates {
    /// Records `value` as counter `key`'s reading at `now`; returns its rate per second
    /// over the readings of the last [`WINDOW`] (0.0 with one reading).
    pub fn rate(&self, key: &str, value: i64, now: Instant) -> f64 {
        let mut readings = self.readings.lock();
        readings.retain(|_, r| {
            r.back()
                .is_some_and(|(at, _)| now.saturating_duration_since(*at) < WINDOW)
        });
        let series = readings.entry(key.to_owned()).or_default();
        series.push_back((now, value));
        while series.len() > 2
            && series
                .get(1)
                .is_some_and(|(at, _)| now.saturating_duration_since(*at) >= WINDOW)
        {
            series.pop_front();
        }
        let (first_at, first) = series[0];
        let seconds = now.saturating_duration_since(first_at).as_secs_f64();
        if seconds <= 0.0 {
            return 0.0;
        }
        let rate = (value - first) as f64 / seconds;
        // One decimal, as RabbitMQ shows rates.
        (rate * 10.0).round() / 10.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_the_change_per_second_over_the_window() {
        let rates = Rates::default();
        let t0 = Instant::now();
        assert_eq!(rates.rate("q", 100, t0), 0.0);
        assert_eq!(rates.rate("q", 110, t0 + Duration::from_secs(5)), 2.0);
        assert_eq!(rates.rate("q", 130, t0 + Duration::from_secs(10)), 3.0);
        assert_eq!(rates.rate("other", 5, t0 + Duration::from_secs(10)), 0.0);
        // The readings older than the window go; the rate covers the window only.
        let later = t0 + WINDOW + Duration::from_secs(10);
        assert_eq!(rates.rate("q", 130, later), 0.0);
    }

    #[test]
    fn a_counter_nobody_reads_is_forgotten() {
        let rates = Rates::default();
        let t0 = Instant::now();
        rates.rate("gone", 1, t0);
        rates.rate("kept", 1, t0 + WINDOW + Duration::from_secs(1));
        assert_eq!(rates.readings.lock().len(), 1);
    }
}
