//! Slowing down failed logins, per client address, so passwords cannot be guessed at wire
//! speed: after the n-th failure in a row from an address, its next login waits
//! `FIRST_DELAY · 2^(n-1)` (100 ms doubling up to 5 s) before it is checked. An address
//! that has not failed for [`FORGET_AFTER`] starts afresh; other addresses never wait.
//!
//! Concurrent attempts from one address queue behind each other (each failure pushes the
//! address's `not_before` further), so opening many connections does not help either.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The delay after the first failure.
pub(crate) const FIRST_DELAY: Duration = Duration::from_millis(100);

/// The longest delay.
pub(crate) const MAX_DELAY: Duration = Duration::from_secs(5);

/// How long an address must not fail before its failures are forgotten.
pub(crate) const FORGET_AFTER: Duration = Duration::from_secs(60);

/// The most addresses remembered; past it, forgotten ones are pruned first, then the
/// table is cleared (an attacker with that many addresses is not slowed by it anyway).
const MAX_ADDRESSES: usize = 65_536;

/// Failures of one address.
#[derive(Debug, Clone, Copy)]
struct Record {
    /// Failures in a row.
    failures: u32,
    /// When the latest failure happened.
    last_failure: Instant,
    /// The earliest time the address's next login is checked.
    not_before: Instant,
}

/// The failed-login table of one Ferry instance.
#[derive(Debug, Default)]
pub(crate) struct Throttle {
    addresses: Mutex<HashMap<IpAddr, Record>>,
}

impl Throttle {
    /// How long a login from `ip` starting at `now` must wait before it is checked.
    pub(crate) fn wait(&self, ip: IpAddr, now: Instant) -> Duration {
        let addresses = self.addresses.lock();
        addresses
            .get(&ip)
            .filter(|r| !forgotten(r, now))
            .map_or(Duration::ZERO, |r| {
                r.not_before.saturating_duration_since(now)
            })
    }

    /// Records a failed login from `ip` at `now`; returns the delay its next login gets.
    pub(crate) fn failed(&self, ip: IpAddr, now: Instant) -> Duration {
        let mut addresses = self.addresses.lock();
        if addresses.len() >= MAX_ADDRESSES && !addresses.contains_key(&ip) {
            addresses.retain(|_, r| !forgotten(r, now));
            if addresses.len() >= MAX_ADDRESSES {
                addresses.clear();
            }
        }
        let record = addresses.entry(ip).or_insert(Record {
            failures: 0,
            last_failure: now,
            not_before: now,
        });
        if forgotten(record, now) {
            record.failures = 0;
        }
        record.failures = record.failures.saturating_add(1);
        record.last_failure = now;
        let delay = delay_after(record.failures);
        record.not_before = record.not_before.max(now) + delay;
        delay
    }
}

/// The delay after `failures` failures in a row.
pub(crate) fn delay_after(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    FIRST_DELAY.saturating_mul(1 << doublings).min(MAX_DELAY)
}

fn forgotten(record: &Record, now: Instant) -> bool {
    now.saturating_duration_since(record.last_failure) >= FORGET_AFTER && now >= record.not_before
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([192, 0, 2, last])
    }

    #[test]
    fn the_delay_doubles_from_100_ms_to_5_s() {
        let delays: Vec<u128> = (1..=8).map(|n| delay_after(n).as_millis()).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        assert_eq!(delay_after(u32::MAX), MAX_DELAY);
    }

    #[test]
    fn only_the_failing_address_waits() {
        let throttle = Throttle::default();
        let now = Instant::now();
        assert_eq!(throttle.wait(ip(1), now), Duration::ZERO);
        throttle.failed(ip(1), now);
        assert_eq!(throttle.wait(ip(1), now), Duration::from_millis(100));
        assert_eq!(throttle.wait(ip(2), now), Duration::ZERO);
        throttle.failed(ip(1), now);
        assert_eq!(
            throttle.wait(ip(1), now),
            Duration::from_millis(300),
            "concurrent failures queue behind each other"
        );
        let later = now + Duration::from_millis(300);
        assert_eq!(throttle.wait(ip(1), later), Duration::ZERO);
        assert_eq!(throttle.failed(ip(1), later), Duration::from_millis(400));
    }

    #[test]
    fn an_address_quiet_for_a_minute_starts_afresh() {
        let throttle = Throttle::default();
        let now = Instant::now();
        for _ in 0..5 {
            throttle.failed(ip(1), now);
        }
        let quiet = now + FORGET_AFTER + Duration::from_secs(10);
        assert_eq!(throttle.wait(ip(1), quiet), Duration::ZERO);
        assert_eq!(throttle.failed(ip(1), quiet), FIRST_DELAY);
    }
}
