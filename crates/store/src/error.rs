//! Store errors: FoundationDB's error classes, shared by every engine.
//!
//! Both engines report the same failures with FoundationDB's numeric codes, so the retry
//! loop and every layer above it handle one set of errors: [`StoreError::is_retryable`]
//! says whether running the transaction again can succeed, and
//! [`StoreError::is_maybe_committed`] says whether the failed attempt may nevertheless
//! have been applied (so the retry must be idempotent).

use std::path::PathBuf;

/// FoundationDB error codes used by both engines.
pub mod code {
    /// The transaction's read version is too old (older than the age limit, FoundationDB's
    /// five seconds).
    pub const TRANSACTION_TOO_OLD: i32 = 1007;
    /// The transaction read a key a concurrent commit wrote.
    pub const NOT_COMMITTED: i32 = 1020;
    /// The commit may or may not have been applied.
    pub const COMMIT_UNKNOWN_RESULT: i32 = 1021;
    /// The transaction was cancelled (dropped, or the store closed) before it finished.
    pub const TRANSACTION_CANCELLED: i32 = 1025;
    /// The transaction's mutations and conflict ranges exceed 10,000,000 bytes.
    pub const TRANSACTION_TOO_LARGE: i32 = 2101;
    /// A key exceeds 10,000 bytes.
    pub const KEY_TOO_LARGE: i32 = 2102;
    /// A value exceeds 100,000 bytes.
    pub const VALUE_TOO_LARGE: i32 = 2103;
    /// A versionstamped key or value whose offset does not leave room for 10 bytes.
    pub const INVALID_MUTATION_TYPE: i32 = 2004;
}

/// The largest key FoundationDB accepts, in bytes.
pub const MAX_KEY_SIZE: usize = 10_000;
/// The largest value FoundationDB accepts, in bytes.
pub const MAX_VALUE_SIZE: usize = 100_000;
/// The largest transaction (mutations plus conflict ranges) FoundationDB accepts, in bytes.
pub const MAX_TRANSACTION_SIZE: usize = 10_000_000;
/// How long a FoundationDB transaction may live after taking its read version; the
/// embedded engine's default (`embedded::Options::max_transaction_age`).
pub const MAX_TRANSACTION_AGE: std::time::Duration = std::time::Duration::from_secs(5);

/// Why a store could not be opened; each says what to do about it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OpenError {
    /// The data directory path exists and is not a directory.
    #[error("store.path: '{}' is not a directory; point store.path at a directory", .path.display())]
    NotADirectory {
        /// The configured path.
        path: PathBuf,
    },
    /// The data directory cannot be created or written.
    #[error("store.path: directory '{}' is not writable ({reason}); fix its permissions or set store.path", .path.display())]
    NotWritable {
        /// The configured path.
        path: PathBuf,
        /// What the operating system said.
        reason: String,
    },
    /// The directory holds files but no Ferry store marker.
    #[error("store.path: directory '{}' is not empty and is not a Ferry store (no FERRY_STORE marker); point store.path at an empty directory or an existing Ferry store", .path.display())]
    Foreign {
        /// The configured path.
        path: PathBuf,
    },
    /// The marker is there but the data file is gone.
    #[error("store at '{}' is missing its data file '{}'; restore it from a backup, or move the directory away to start empty", .path.display(), .file.display())]
    MissingData {
        /// The configured path.
        path: PathBuf,
        /// The missing file.
        file: PathBuf,
    },
    /// The marker names a format this build does not read.
    #[error("store at '{}' has format '{found}', this ferry reads '{expected}'; use a matching ferry version", .path.display())]
    WrongFormat {
        /// The configured path.
        path: PathBuf,
        /// The marker's content.
        found: String,
        /// What this build writes.
        expected: String,
    },
    /// Another process (or another handle in this process) has the store open.
    #[error("store at '{}' is already open in another process; stop that ferry, or set store.path to another directory", .path.display())]
    Locked {
        /// The configured path.
        path: PathBuf,
    },
    /// The data file is damaged.
    #[error("store data file '{}' is corrupt ({reason}); restore it from a backup", .file.display())]
    Corrupt {
        /// The damaged file.
        file: PathBuf,
        /// What the storage engine reported.
        reason: String,
    },
    /// The configured engine cannot be used by this build or on this machine.
    #[error("store.engine: {0}")]
    Engine(String),
}

/// An error from a store operation.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// A concurrent commit wrote data this transaction read (FDB 1020).
    #[error(
        "the transaction conflicted with a concurrent commit (not_committed, 1020); it is retried"
    )]
    NotCommitted,
    /// The commit may or may not have been applied (FDB 1021).
    #[error(
        "the commit's outcome is unknown (commit_unknown_result, 1021); it may have been applied"
    )]
    CommitUnknownResult,
    /// The transaction lived longer than the age limit, FoundationDB's five seconds
    /// (FDB 1007).
    #[error(
        "the transaction is older than the store's age limit, five seconds as FoundationDB's (transaction_too_old, 1007); keep transactions short"
    )]
    TransactionTooOld,
    /// The transaction was cancelled before it finished (FDB 1025).
    #[error("the transaction was cancelled (transaction_cancelled, 1025)")]
    Cancelled,
    /// The transaction is too large (FDB 2101).
    #[error(
        "the transaction holds {size} bytes of mutations and conflict ranges, more than the 10,000,000-byte limit (transaction_too_large, 2101); split it"
    )]
    TransactionTooLarge {
        /// Bytes of mutations and conflict ranges.
        size: usize,
    },
    /// A key is too large (FDB 2102).
    #[error("a key of {size} bytes exceeds the 10,000-byte limit (key_too_large, 2102)")]
    KeyTooLarge {
        /// The key's length.
        size: usize,
    },
    /// A value is too large (FDB 2103).
    #[error(
        "a value of {size} bytes exceeds the 100,000-byte limit (value_too_large, 2103); split it across keys"
    )]
    ValueTooLarge {
        /// The value's length.
        size: usize,
    },
    /// A versionstamped mutation whose offset is outside its key or value (FDB 2004).
    #[error(
        "a versionstamped key or value has no room for a 10-byte versionstamp at offset {offset} (invalid_mutation_type, 2004)"
    )]
    BadVersionstampOffset {
        /// The offset given.
        offset: usize,
    },
    /// Any other FoundationDB error (FoundationDB engine only).
    #[error("FoundationDB error {code}: {message}")]
    Fdb {
        /// FoundationDB's error code.
        code: i32,
        /// FoundationDB's description.
        message: String,
        /// Whether FoundationDB says a retry may succeed.
        retryable: bool,
        /// Whether FoundationDB says the failed commit may have been applied.
        maybe_committed: bool,
    },
    /// The store could not be opened.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// The storage underneath failed (disk full, I/O error); nothing of the failed commit
    /// was applied.
    #[error("storage failed: {0}")]
    Storage(String),
    /// The store is closed or closing.
    #[error("the store is closed")]
    Closed,
    /// The storage underneath failed in a way the engine cannot continue from (the
    /// embedded engine after a failed write, e.g. a full disk); every later transaction
    /// gets this error until the process restarts, which recovers the store.
    #[error("the store failed and accepts no more transactions ({0}); restart ferry to recover it")]
    Failed(String),
}

impl StoreError {
    /// FoundationDB's error code for this error, if it has one.
    pub fn code(&self) -> Option<i32> {
        Some(match self {
            Self::NotCommitted => code::NOT_COMMITTED,
            Self::CommitUnknownResult => code::COMMIT_UNKNOWN_RESULT,
            Self::TransactionTooOld => code::TRANSACTION_TOO_OLD,
            Self::Cancelled => code::TRANSACTION_CANCELLED,
            Self::TransactionTooLarge { .. } => code::TRANSACTION_TOO_LARGE,
            Self::KeyTooLarge { .. } => code::KEY_TOO_LARGE,
            Self::ValueTooLarge { .. } => code::VALUE_TOO_LARGE,
            Self::BadVersionstampOffset { .. } => code::INVALID_MUTATION_TYPE,
            Self::Fdb { code, .. } => *code,
            Self::Open(_) | Self::Storage(_) | Self::Closed | Self::Failed(_) => return None,
        })
    }

    /// Whether running the transaction again may succeed (FoundationDB's `on_error` rule).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::NotCommitted | Self::CommitUnknownResult | Self::TransactionTooOld => true,
            Self::Fdb { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// Whether the failed commit may nevertheless have been applied.
    pub fn is_maybe_committed(&self) -> bool {
        match self {
            Self::CommitUnknownResult => true,
            Self::Fdb {
                maybe_committed, ..
            } => *maybe_committed,
            _ => false,
        }
    }
}

/// An error type a transaction closure may return: it can carry a [`StoreError`], and the
/// retry loop asks it for one to decide whether to run the closure again.
pub trait TransactionError: From<StoreError> {
    /// The store error inside, if this error is one.
    fn store_error(&self) -> Option<&StoreError>;
}

impl TransactionError for StoreError {
    fn store_error(&self) -> Option<&StoreError> {
        Some(self)
    }
}
