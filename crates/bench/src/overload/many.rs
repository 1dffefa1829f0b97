//! Opening many connections at once, bounded in number under way, in time for each and in
//! time for all, with a tally of what went wrong.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Longest one connection (connect and handshake) may take.
pub(super) const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Distinct errors a tally prints.
const SHOWN_ERRORS: usize = 3;

/// Errors counted by their message.
#[derive(Debug, Default)]
pub(super) struct Tally {
    counts: HashMap<String, usize>,
}

impl Tally {
    /// Counts one `error`.
    pub(super) fn add(&mut self, error: String) {
        *self.counts.entry(error).or_default() += 1;
    }

    /// Errors counted.
    pub(super) fn total(&self) -> usize {
        self.counts.values().sum()
    }
}

impl std::fmt::Display for Tally {
    /// The most frequent errors first, `N× 'message'`, then how many other kinds.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut kinds: Vec<(&String, &usize)> = self.counts.iter().collect();
        kinds.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let shown: Vec<String> = kinds
            .iter()
            .take(SHOWN_ERRORS)
            .map(|(error, n)| format!("{n}× '{error}'"))
            .collect();
        f.write_str(&shown.join(", "))?;
        if kinds.len() > SHOWN_ERRORS {
            write!(f, " and {} other kinds", kinds.len() - SHOWN_ERRORS)?;
        }
        Ok(())
    }
}

/// What [`open_many`] opened.
pub(super) struct Opened<T> {
    /// The connections open.
    pub connections: Vec<T>,
    /// How long the opening took.
    pub took: Duration,
    /// The attempts that failed.
    pub failures: Tally,
    /// Attempts not started, or not finished, when the time for all ran out.
    pub cut_off: usize,
}

impl<T> Opened<T> {
    /// One line: asked, opened, the rate, failures, and attempts cut off.
    pub(super) fn describe(&self, asked: usize) -> String {
        let mut line = format!(
            "{asked} asked, {} opened in {:.1} s ({:.0}/s)",
            self.connections.len(),
            self.took.as_secs_f64(),
            self.connections.len() as f64 / self.took.as_secs_f64().max(1e-3)
        );
        if self.failures.total() > 0 {
            line += &format!(", {} failed: {}", self.failures.total(), self.failures);
        }
        if self.cut_off > 0 {
            line += &format!(
                ", {} cut off (not open when the time for opening ran out)",
                self.cut_off
            );
        }
        line
    }
}

/// Opens `count` connections with `open`, at most `concurrency` under way, each within
/// [`CONNECT_TIMEOUT`], all within `limit`.
pub(super) async fn open_many<T, F, Fut>(
    count: usize,
    concurrency: usize,
    limit: Duration,
    open: F,
) -> Opened<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = anyhow::Result<T>>,
{
    use futures::StreamExt;
    let started = Instant::now();
    let mut attempts = futures::stream::iter(0..count)
        .map(|_| tokio::time::timeout(CONNECT_TIMEOUT, open()))
        .buffer_unordered(concurrency.max(1));
    let deadline = tokio::time::sleep(limit);
    tokio::pin!(deadline);
    let mut connections = Vec::with_capacity(count);
    let mut failures = Tally::default();
    loop {
        let next = tokio::select! {
            () = &mut deadline => break,
            next = attempts.next() => next,
        };
        match next {
            None => break,
            Some(Ok(Ok(connection))) => connections.push(connection),
            Some(Ok(Err(e))) => failures.add(format!("{e:#}")),
            Some(Err(_)) => failures.add(format!("not open within {CONNECT_TIMEOUT:?}")),
        }
    }
    let cut_off = count - connections.len() - failures.total();
    Opened {
        connections,
        took: started.elapsed(),
        failures,
        cut_off,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_shows_the_most_frequent_errors_first_and_counts_the_rest() {
        let mut tally = Tally::default();
        for (error, n) in [("reset", 5), ("refused", 9), ("timed out", 2), ("eof", 1)] {
            for _ in 0..n {
                tally.add(error.to_owned());
            }
        }
        assert_eq!(tally.total(), 17);
        assert_eq!(
            tally.to_string(),
            "9× 'refused', 5× 'reset', 2× 'timed out' and 1 other kinds"
        );
    }

    #[tokio::test]
    async fn open_many_counts_opened_failed_and_untried_attempts() {
        let n = std::sync::atomic::AtomicUsize::new(0);
        let opened = open_many(10, 2, Duration::from_secs(5), || {
            let i = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async move {
                anyhow::ensure!(!i.is_multiple_of(3), "refused");
                Ok(i)
            }
        })
        .await;
        assert_eq!(opened.connections.len(), 6);
        assert_eq!(opened.failures.total(), 4);
        assert_eq!(opened.cut_off, 0);
        assert!(
            opened.describe(10).starts_with("10 asked, 6 opened in"),
            "{}",
            opened.describe(10)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn open_many_stops_at_its_time_limit() {
        let opened: Opened<()> = open_many(4, 1, Duration::from_secs(1), || async {
            tokio::time::sleep(Duration::from_millis(400)).await;
            Ok(())
        })
        .await;
        assert_eq!(opened.connections.len(), 2);
        assert_eq!(opened.cut_off, 2);
    }
}
