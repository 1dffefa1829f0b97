//! Named background tasks that can be joined against a deadline.
//!
//! The daemon's long-running loops are spawned here by name, so when a shutdown has to
//! abort some of them the log can say which.

use super::DaemonError;
use std::collections::HashMap;
use std::future::Future;
use tokio::task::{Id, JoinSet};
use tokio::time::Instant;
use tracing::error;

/// A set of named tasks.
#[derive(Default)]
pub struct Tasks {
    /// The running tasks.
    set: JoinSet<Result<(), DaemonError>>,
    /// Each running task's name, to report what had to be aborted or panicked.
    names: HashMap<Id, &'static str>,
}

/// How joining a [`Tasks`] ended.
#[derive(Default)]
pub struct Joined {
    /// Names of the tasks aborted at the deadline, sorted.
    pub aborted: Vec<&'static str>,
    /// Errors returned by tasks that ended, and panics.
    pub errors: Vec<DaemonError>,
}

impl Tasks {
    /// Spawns `task` under `name`.
    pub fn spawn<F>(&mut self, name: &'static str, task: F)
    where
        F: Future<Output = Result<(), DaemonError>> + Send + 'static,
    {
        let handle = self.set.spawn(task);
        self.names.insert(handle.id(), name);
    }

    /// Waits for every task until `deadline`, then aborts the rest.
    pub async fn join_until(mut self, deadline: Instant) -> Joined {
        let mut joined = Joined::default();
        loop {
            match tokio::time::timeout_at(deadline, self.set.join_next_with_id()).await {
                Ok(None) => return joined,
                Ok(Some(Ok((id, result)))) => {
                    self.names.remove(&id);
                    joined.errors.extend(result.err());
                }
                Ok(Some(Err(join_error))) => {
                    let task = self.names.remove(&join_error.id()).unwrap_or("unnamed");
                    error!(task, error = %join_error, "background task panicked");
                    joined.errors.push(DaemonError::Panicked { task });
                }
                Err(_deadline) => {
                    self.set.abort_all();
                    joined.aborted = self.names.into_values().collect();
                    joined.aborted.sort_unstable();
                    return joined;
                }
            }
        }
    }
}
