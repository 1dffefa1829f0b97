//! Bounded waits on a condition: a test waits for what it needs to see, never for a fixed
//! time, and fails with a sentence naming what did not happen when it does not come.

use std::time::{Duration, Instant};

/// How often a condition is checked again.
pub const POLL: Duration = Duration::from_millis(50);

/// Checks `check` every [`POLL`] until it returns `Some`, and returns that; panics naming
/// `what` when `timeout` passes first.
pub async fn until<T>(what: &str, timeout: Duration, check: impl AsyncFnMut() -> Option<T>) -> T {
    match try_until(timeout, check).await {
        Some(found) => found,
        None => panic!("{what} did not happen within {timeout:?}"),
    }
}

/// Checks `check` every [`POLL`] until it returns `Some`, and returns that; `None` when
/// `timeout` passes first.
pub async fn try_until<T>(
    timeout: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = check().await {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Tries `attempt` every [`POLL`] until it succeeds, and returns what it gave; panics
/// naming `what` when `timeout` passes first. Unlike [`until`], whose async closure's
/// future is not always `Send`, this one can run in a spawned task (a client reconnecting
/// to a daemon that is being restarted).
pub async fn until_ok<T, E, F>(what: &str, timeout: Duration, mut attempt: impl FnMut() -> F) -> T
where
    F: Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(done) = attempt().await {
            return done;
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not happen within {timeout:?}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// [`until`] for code outside an async runtime (or in a blocking task).
pub fn until_blocking<T>(what: &str, timeout: Duration, check: impl FnMut() -> Option<T>) -> T {
    match try_until_blocking(timeout, check) {
        Some(found) => found,
        None => panic!("{what} did not happen within {timeout:?}"),
    }
}

/// [`try_until`] for code outside an async runtime (or in a blocking task).
pub fn try_until_blocking<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(found) = check() {
            return Some(found);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(POLL);
    }
}
