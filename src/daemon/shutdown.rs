//! Shutdown: SIGTERM and SIGINT cancel one token; the drain then gets a bounded time.
//!
//! The drain runs in order — background loops, the store, the operations server — and all
//! of it shares one deadline (`daemon.shutdown_timeout_ms`). What has not finished by then
//! is aborted and named in the log, so a stuck shutdown is never silent and never endless.

use super::DaemonError;
use super::tasks::Tasks;
use ferry_config::DaemonConfig;
use std::future::Future;
use std::io;
use tokio::signal::unix::{SignalKind, signal};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Cancels `shutdown` on the first SIGTERM or SIGINT. The handlers are installed before this
/// returns, so a signal that arrives during startup is not lost.
///
/// # Errors
/// The operating system's error when a handler cannot be installed.
pub fn cancel_on_signal(shutdown: CancellationToken) -> io::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
            () = shutdown.cancelled() => return,
        };
        info!(signal = name, "shutdown requested");
        shutdown.cancel();
    });
    Ok(())
}

/// A shutdown in progress: steps run one after another against one deadline.
pub struct Drain {
    /// The whole drain's budget in milliseconds, for the log.
    timeout_ms: u64,
    /// When whatever is still running gets aborted.
    deadline: Instant,
    /// What was aborted at the deadline, in order.
    aborted: Vec<&'static str>,
    /// Failures of tasks that ended on their own, reported once the drain is over.
    errors: Vec<DaemonError>,
}

impl Drain {
    /// Starts a drain that must end within `daemon.shutdown_timeout_ms`.
    pub fn start(config: &DaemonConfig) -> Self {
        let timeout_ms = config.shutdown_timeout_ms;
        info!(timeout_ms, "shutting down");
        Self {
            timeout_ms,
            deadline: Instant::now() + config.shutdown_timeout(),
            aborted: Vec::new(),
            errors: Vec::new(),
        }
    }

    /// Waits for every task in `tasks` (each must already have been told to stop), aborting
    /// those still running at the deadline.
    pub async fn tasks(&mut self, tasks: Tasks) {
        let joined = tasks.join_until(self.deadline).await;
        self.aborted.extend(joined.aborted);
        self.errors.extend(joined.errors);
    }

    /// Runs `step` (closing the store, say) until the deadline; drops it there and records
    /// it as aborted under `name`.
    pub async fn step(&mut self, name: &'static str, step: impl Future<Output = ()>) {
        if tokio::time::timeout_at(self.deadline, step).await.is_err() {
            self.aborted.push(name);
        }
    }

    /// Logs how the drain ended.
    ///
    /// # Errors
    /// The first failure of a task that ended on its own (the operations server dying, say),
    /// so the process exits non-zero for it.
    pub fn finish(self) -> Result<(), DaemonError> {
        if self.aborted.is_empty() {
            info!("ferry stopped");
        } else {
            warn!(
                timeout_ms = self.timeout_ms,
                aborted = self.aborted.join(", "),
                "ferry stopped after the shutdown timeout; aborted what was still running"
            );
        }
        self.errors.into_iter().next().map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A drain of `ms` milliseconds.
    fn drain(ms: u64) -> Drain {
        Drain::start(&DaemonConfig {
            shutdown_timeout_ms: ms,
            ..DaemonConfig::default()
        })
    }

    #[tokio::test(start_paused = true)]
    async fn steps_past_the_deadline_are_aborted_and_named() {
        let mut drain = drain(100);
        drain.step("quick", async {}).await;
        drain.step("stuck", std::future::pending()).await;
        assert_eq!(drain.aborted, ["stuck"]);
        drain.finish().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn tasks_past_the_deadline_are_aborted_and_named() {
        let stop = CancellationToken::new();
        let mut tasks = Tasks::default();
        let token = stop.clone();
        tasks.spawn("obedient", async move {
            token.cancelled().await;
            Ok(())
        });
        tasks.spawn("deaf", std::future::pending());
        stop.cancel();
        let mut drain = drain(100);
        drain.tasks(tasks).await;
        assert_eq!(drain.aborted, ["deaf"]);
    }

    #[tokio::test]
    async fn a_failed_task_makes_the_drain_fail() {
        let mut tasks = Tasks::default();
        tasks.spawn("server", async {
            Err(DaemonError::Http(io::Error::other("accept failed")))
        });
        let mut drain = drain(5_000);
        drain.tasks(tasks).await;
        assert_eq!(
            drain.finish().unwrap_err().to_string(),
            "the metrics server failed: accept failed"
        );
    }
}
