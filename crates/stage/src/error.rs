//! Stage errors.

use ferry_store::{StoreError, TransactionError};

/// An error from a stage operation.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StageError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No stage has this name.
    #[error("stage '{0}' does not exist")]
    NotFound(String),
    /// A stage of this name exists with other settings.
    #[error(
        "stage '{name}' exists with other settings ({existing}); delete it first or use its settings"
    )]
    Inequivalent {
        /// The stage's name.
        name: String,
        /// Its settings, described.
        existing: String,
    },
    /// The dead-letter stage named in the options does not exist.
    #[error("dead-letter stage '{0}' does not exist; create it first")]
    NoDeadLetterStage(String),
    /// A message body is larger than a stage holds.
    #[error("a message body of {size} bytes exceeds the stage limit of {max} bytes")]
    BodyTooLarge {
        /// The body's size.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A large message's payload was freed before the commit that would store the message:
    /// the lease holder that kept it expired or was released.
    #[error(
        "the payload of a large message (spill {0}) was freed before its commit, because its lease holder expired; publish it again"
    )]
    SpillGone(u64),
    /// The keyspace was laid out by a newer Ferry than this one.
    #[error(
        "the store's keyspace is schema version {found}, written by Ferry {written_by}; this \
         Ferry ({this}) reads schema version {reads}: run Ferry {written_by} or newer on it, or \
         restore a backup taken before the upgrade (docs/operations.md, \"Upgrades\")"
    )]
    NewerSchema {
        /// The keyspace's schema version.
        found: u64,
        /// The version of the Ferry that last opened it ("an unknown version" when not recorded).
        written_by: String,
        /// This Ferry's schema version.
        reads: u64,
        /// This Ferry's version.
        this: &'static str,
    },
    /// A stored value could not be decoded.
    #[error(
        "the store holds a stage value this ferry cannot decode ({0}); the keyspace was written by another version or damaged"
    )]
    Corrupt(String),
}

impl TransactionError for StageError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) => Some(e),
            _ => None,
        }
    }
}
