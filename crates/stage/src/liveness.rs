//! Liveness: the one rule for everything Ferry keeps alive in the store by renewing it —
//! lease holders (connections, channels, consumers, the bridge), partition sequencer and
//! group coordinator leases, broker registrations.
//!
//! Each lives a term (`ttl`) without renewal and is renewed every third of it, so two
//! renewals in a row can fail before it lapses and another instance takes it over.
//! [`Liveness::renew_until`] is the task that renews something until shutdown and then
//! gives up (the owner then releases what it held, or lets it lapse);
//! [`Liveness::ticker`] paces a loop that renews among other work; [`Liveness::is_due`]
//! tells a transaction that checks a lease whether to extend it.

use std::future::Future;
use std::time::Duration;
use tokio::time::{Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

/// How long something lives unrenewed, and so how often it is renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Liveness {
    /// The term: how long it lives without renewal.
    ttl: Duration,
}

impl Liveness {
    /// Something that lives `ttl` unrenewed.
    pub const fn new(ttl: Duration) -> Self {
        Self { ttl }
    }

    /// The term.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// How often it is renewed: a third of its term (at least a millisecond).
    pub fn renew_every(&self) -> Duration {
        (self.ttl / 3).max(Duration::from_millis(1))
    }

    /// Ticks every [`Liveness::renew_every`], the first tick one period from now; a tick
    /// missed while the loop was busy is not made up in a burst.
    pub fn ticker(&self) -> Interval {
        let period = self.renew_every();
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        ticker
    }

    /// Calls `renew` every [`Liveness::renew_every`] until `shutdown` fires, then returns
    /// (giving up: what was renewed lapses at the end of its term unless its owner releases
    /// it). `renew` reports its own failures; the next period tries again.
    pub async fn renew_until<F, Fut>(&self, shutdown: &CancellationToken, mut renew: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = ()>,
    {
        let mut ticker = self.ticker();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticker.tick() => renew().await,
            }
        }
    }

    /// Whether a lease whose deadline is `deadline_ms` should be extended at `now_ms`: once
    /// a third of its term has passed since it was last renewed.
    pub fn is_due(&self, deadline_ms: u64, now_ms: u64) -> bool {
        let term = self.ttl.as_millis() as u64;
        deadline_ms < now_ms + term * 2 / 3
    }

    /// The deadline of a lease renewed at `now_ms`.
    pub fn deadline(&self, now_ms: u64) -> u64 {
        now_ms + self.ttl.as_millis() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn a_lease_is_renewed_once_a_third_of_its_term_has_passed() {
        let l = Liveness::new(Duration::from_millis(900));
        assert_eq!(l.renew_every(), Duration::from_millis(300));
        assert_eq!(l.deadline(1_000), 1_900);
        assert!(!l.is_due(1_900, 1_000), "just renewed");
        assert!(!l.is_due(1_900, 1_300), "a third passed: not before");
        assert!(l.is_due(1_900, 1_301), "past a third");
        assert_eq!(
            Liveness::new(Duration::ZERO).renew_every(),
            Duration::from_millis(1)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_come_every_third_of_the_term_until_shutdown() {
        let l = Liveness::new(Duration::from_millis(300));
        let shutdown = CancellationToken::new();
        let renewals = Arc::new(AtomicUsize::new(0));
        let task = {
            let (shutdown, renewals) = (shutdown.clone(), renewals.clone());
            tokio::spawn(async move {
                l.renew_until(&shutdown, || {
                    renewals.fetch_add(1, Ordering::SeqCst);
                    async {}
                })
                .await;
            })
        };
        tokio::time::sleep(Duration::from_millis(350)).await;
        assert_eq!(renewals.load(Ordering::SeqCst), 3, "at 100, 200 and 300 ms");
        shutdown.cancel();
        task.await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(renewals.load(Ordering::SeqCst), 3, "none after shutdown");
    }
}
