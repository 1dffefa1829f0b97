//! The names, kinds and help texts of every metric Ferry exports.

/// What kind of Prometheus series a metric is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// Monotonic count (`_total`).
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// A distribution (`_bucket`, `_sum`, `_count`) with these bucket upper bounds.
    Histogram(&'static [f64]),
}

/// Bucket upper bounds for latencies in seconds: 100 µs (a batched commit on fast storage)
/// to 5 s (FoundationDB's transaction time limit).
pub const SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Bucket upper bounds for counts per batch: powers of two up to the largest
/// `store.max_batch`.
pub const BATCH_SIZE_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0,
    16384.0, 32768.0, 65535.0,
];

/// One exported metric.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// The Prometheus name.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: Kind,
    /// The `# HELP` text.
    pub help: &'static str,
}

/// Label: the store engine (`embedded` or `fdb`).
pub const LABEL_ENGINE: &str = "engine";
/// Label: a FoundationDB error code.
pub const LABEL_CODE: &str = "code";
/// Label: the crate version (on [`BUILD_INFO`]).
pub const LABEL_VERSION: &str = "version";
/// Label: a stage name.
pub const LABEL_STAGE: &str = "stage";

/// Seconds from a transaction's commit request to its durable outcome.
pub const STORE_COMMIT_SECONDS: &str = "ferry_store_commit_seconds";
/// Transactions per group commit (embedded engine: transactions per fsync).
pub const STORE_COMMIT_BATCH_SIZE: &str = "ferry_store_commit_batch_size";
/// Transactions committed.
pub const STORE_COMMITS_TOTAL: &str = "ferry_store_commits_total";
/// Commits rejected because they read data a concurrent commit wrote.
pub const STORE_CONFLICTS_TOTAL: &str = "ferry_store_conflicts_total";
/// Transaction errors by FoundationDB error code.
pub const STORE_ERRORS_TOTAL: &str = "ferry_store_errors_total";
/// Transaction attempts retried by the retry loop.
pub const STORE_RETRIES_TOTAL: &str = "ferry_store_retries_total";
/// Whether the store answers (1) or not (0).
pub const STORE_UP: &str = "ferry_store_up";
/// Free bytes on the embedded store's file system.
pub const STORE_DISK_FREE_BYTES: &str = "ferry_store_disk_free_bytes";
/// Whether the free-disk alarm blocks publishers (1) or not (0).
pub const STORE_DISK_ALARM: &str = "ferry_store_disk_alarm";
/// Whether the memory high-water mark holds publishers back (1) or not (0).
pub const MEMORY_ALARM: &str = "ferry_memory_alarm";
/// The memory high-water mark in bytes.
pub const MEMORY_LIMIT_BYTES: &str = "ferry_memory_limit_bytes";
/// Bytes the daemon's live allocations hold (jemalloc's `stats.allocated`).
pub const MEMORY_ALLOCATED_BYTES: &str = "ferry_memory_allocated_bytes";
/// Bytes in the allocator's pages that hold live allocations (`stats.active`); above
/// [`MEMORY_ALLOCATED_BYTES`] by the fragmentation.
pub const MEMORY_ACTIVE_BYTES: &str = "ferry_memory_active_bytes";
/// Bytes the allocator's own bookkeeping holds (`stats.metadata`).
pub const MEMORY_METADATA_BYTES: &str = "ferry_memory_metadata_bytes";
/// Bytes of the allocator's pages resident in memory (`stats.resident`).
pub const MEMORY_ALLOCATOR_RESIDENT_BYTES: &str = "ferry_memory_allocator_resident_bytes";

/// Messages ready for delivery in a stage.
pub const STAGE_READY: &str = "ferry_stage_ready";
/// Messages leased to a consumer and not yet acknowledged.
pub const STAGE_IN_FLIGHT: &str = "ferry_stage_in_flight";
/// Messages ever appended to a stage (the stage's `npush` counter).
pub const STAGE_PUSHED_TOTAL: &str = "ferry_stage_pushed_total";
/// Messages ever removed from a stage by ack, pop or dead-lettering (`npop`).
pub const STAGE_POPPED_TOTAL: &str = "ferry_stage_popped_total";
/// Messages moved to a dead-letter stage.
pub const STAGE_DEAD_LETTERED_TOTAL: &str = "ferry_stage_dead_lettered_total";
/// Appends recognised as duplicates of an earlier append by (producer, sequence).
pub const STAGE_DUPLICATES_TOTAL: &str = "ferry_stage_duplicates_total";

/// Bytes of large messages' payloads kept in spills outside their stages (freed by the
/// collector once no message references them).
pub const STAGE_SPILL_BYTES: &str = "ferry_stage_spill_bytes";

/// Dequeue requests consumers registered because their lease conflicted (the
/// high-contention dequeue path).
pub const STAGE_DEQUEUE_REQUESTS_TOTAL: &str = "ferry_stage_dequeue_requests_total";

/// Build information; the value is always 1.
pub const BUILD_INFO: &str = "ferry_build_info";

/// The store's, stages' and process's metrics (the fronts declare theirs in their own
/// modules; [`super::all`] lists every group).
pub const ALL: &[Metric] = &[
    Metric {
        name: STORE_COMMIT_SECONDS,
        kind: Kind::Histogram(SECONDS_BUCKETS),
        help: "Seconds from commit request to durable outcome.",
    },
    Metric {
        name: STORE_COMMIT_BATCH_SIZE,
        kind: Kind::Histogram(BATCH_SIZE_BUCKETS),
        help: "Transactions per group commit (one fsync).",
    },
    Metric {
        name: STORE_COMMITS_TOTAL,
        kind: Kind::Counter,
        help: "Transactions committed.",
    },
    Metric {
        name: STORE_CONFLICTS_TOTAL,
        kind: Kind::Counter,
        help: "Commits rejected by a read-write conflict.",
    },
    Metric {
        name: STORE_ERRORS_TOTAL,
        kind: Kind::Counter,
        help: "Transaction errors by FoundationDB error code.",
    },
    Metric {
        name: STORE_RETRIES_TOTAL,
        kind: Kind::Counter,
        help: "Transaction attempts retried.",
    },
    Metric {
        name: STORE_UP,
        kind: Kind::Gauge,
        help: "1 when the store answers, 0 when it does not.",
    },
    Metric {
        name: STORE_DISK_FREE_BYTES,
        kind: Kind::Gauge,
        help: "Free bytes on the embedded store's file system.",
    },
    Metric {
        name: STORE_DISK_ALARM,
        kind: Kind::Gauge,
        help: "1 while the free-disk alarm (store.min_free_disk_mb) blocks publishers.",
    },
    Metric {
        name: MEMORY_ALARM,
        kind: Kind::Gauge,
        help: "1 while resident memory above daemon.max_memory_mb holds publishers back.",
    },
    Metric {
        name: MEMORY_LIMIT_BYTES,
        kind: Kind::Gauge,
        help: "The memory high-water mark (daemon.max_memory_mb) in bytes.",
    },
    Metric {
        name: MEMORY_ALLOCATED_BYTES,
        kind: Kind::Gauge,
        help: "Bytes held by the daemon's live allocations (jemalloc stats.allocated).",
    },
    Metric {
        name: MEMORY_ACTIVE_BYTES,
        kind: Kind::Gauge,
        help: "Bytes in allocator pages holding live allocations (jemalloc stats.active).",
    },
    Metric {
        name: MEMORY_METADATA_BYTES,
        kind: Kind::Gauge,
        help: "Bytes of the allocator's own bookkeeping (jemalloc stats.metadata).",
    },
    Metric {
        name: MEMORY_ALLOCATOR_RESIDENT_BYTES,
        kind: Kind::Gauge,
        help: "Bytes of allocator pages resident in memory (jemalloc stats.resident).",
    },
    Metric {
        name: STAGE_READY,
        kind: Kind::Gauge,
        help: "Messages ready for delivery.",
    },
    Metric {
        name: STAGE_IN_FLIGHT,
        kind: Kind::Gauge,
        help: "Messages leased and not yet acknowledged.",
    },
    Metric {
        name: STAGE_PUSHED_TOTAL,
        kind: Kind::Counter,
        help: "Messages appended to the stage (npush).",
    },
    Metric {
        name: STAGE_POPPED_TOTAL,
        kind: Kind::Counter,
        help: "Messages removed from the stage (npop).",
    },
    Metric {
        name: STAGE_DEAD_LETTERED_TOTAL,
        kind: Kind::Counter,
        help: "Messages moved to a dead-letter stage.",
    },
    Metric {
        name: STAGE_DUPLICATES_TOTAL,
        kind: Kind::Counter,
        help: "Appends dropped as duplicates of an earlier append.",
    },
    Metric {
        name: STAGE_DEQUEUE_REQUESTS_TOTAL,
        kind: Kind::Counter,
        help: "Dequeue requests registered because a consumer's lease conflicted.",
    },
    Metric {
        name: STAGE_SPILL_BYTES,
        kind: Kind::Gauge,
        help: "Bytes of large messages' payloads kept in spills.",
    },
    Metric {
        name: BUILD_INFO,
        kind: Kind::Gauge,
        help: "Build information; always 1.",
    },
];
