//! The FoundationDB-shaped transactional store (skeleton: the full interface lands with
//! the embedded engine).

use crate::config::StoreConfig;

/// An error from the store.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct StoreError(String);

/// A handle on the store; cheap to clone.
#[derive(Clone)]
pub struct Database {}

impl Database {
    /// Opens the engine named by `config.engine`.
    ///
    /// # Errors
    /// Fails when the store cannot be opened; the message names the path and what to do.
    pub async fn open(config: &StoreConfig) -> Result<Self, StoreError> {
        let _ = config;
        Ok(Self {})
    }

    /// Answers when the store serves a read transaction (used by `/readyz`).
    ///
    /// # Errors
    /// The store's error when it does not answer.
    pub async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    /// Stops accepting transactions, finishes the commits in progress and releases the
    /// store (its file lock, for the embedded engine).
    pub async fn close(&self) {}
}
