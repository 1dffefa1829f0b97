//! The metrics of the Kafka front.

use super::names::{BATCH_SIZE_BUCKETS, Kind, Metric, SECONDS_BUCKETS};

/// Label: a Kafka API name (`Produce`, `Fetch`, …).
pub const LABEL_API: &str = "api";
/// Label: a Kafka topic.
pub const LABEL_TOPIC: &str = "topic";
/// Label: a partition number.
pub const LABEL_PARTITION: &str = "partition";
/// Label: a consumer or share group id.
pub const LABEL_GROUP: &str = "group";
/// Label: why a connection was closed by Ferry.
pub const LABEL_REASON: &str = "reason";
/// Label: how a transaction ended (`commit`, `abort`, `fenced`, `timeout`).
pub const LABEL_OUTCOME: &str = "outcome";

/// Requests answered, by API and by the first error code of the answer (0: none).
pub const REQUESTS_TOTAL: &str = "ferry_kafka_requests_total";
/// Seconds from reading a request to writing its answer, by API.
pub const REQUEST_SECONDS: &str = "ferry_kafka_request_seconds";
/// Client connections open now.
pub const CONNECTIONS: &str = "ferry_kafka_connections";
/// Connections Ferry closed because of what the client sent, by reason.
pub const CONNECTIONS_REFUSED_TOTAL: &str = "ferry_kafka_connections_refused_total";
/// Produce bursts answered with a throttle while the memory high-water mark was exceeded.
pub const PRODUCE_THROTTLED_TOTAL: &str = "ferry_kafka_produce_throttled_total";
/// Record batch bytes accepted by Produce, by topic.
pub const PRODUCED_BYTES_TOTAL: &str = "ferry_kafka_produced_bytes_total";
/// Records accepted by Produce, by topic.
pub const PRODUCED_RECORDS_TOTAL: &str = "ferry_kafka_produced_records_total";
/// Bytes of large record batches written to spills.
pub const SPILLED_BYTES_TOTAL: &str = "ferry_kafka_spilled_bytes_total";
/// Record batch bytes returned by Fetch, by topic.
pub const FETCHED_BYTES_TOTAL: &str = "ferry_kafka_fetched_bytes_total";
/// Records returned by Fetch, by topic.
pub const FETCHED_RECORDS_TOTAL: &str = "ferry_kafka_fetched_records_total";
/// Fetch sessions (KIP-227) this instance keeps.
pub const FETCH_SESSIONS: &str = "ferry_kafka_fetch_sessions";
/// Batches an idempotent producer sent again that the sequencer recognised and did not
/// store twice, by topic.
pub const DUPLICATE_BATCHES_TOTAL: &str = "ferry_kafka_duplicate_batches_total";
/// Staged batches a sequencer moved into a partition log per transaction.
pub const SEQUENCER_BATCH_SIZE: &str = "ferry_kafka_sequencer_batch_size";
/// Partitions whose sequencer lease this instance holds.
pub const SEQUENCERS: &str = "ferry_kafka_sequencers";
/// The next offset a partition will assign (its high watermark and log end offset).
pub const PARTITION_HIGH_WATERMARK: &str = "ferry_kafka_partition_high_watermark";
/// The first offset still stored in a partition.
pub const PARTITION_LOG_START_OFFSET: &str = "ferry_kafka_partition_log_start_offset";
/// Record batch bytes stored in a partition log.
pub const PARTITION_BYTES: &str = "ferry_kafka_partition_bytes";
/// Compaction passes completed over a compacted topic's partitions, by topic.
pub const COMPACTION_PASSES_TOTAL: &str = "ferry_kafka_compaction_passes_total";
/// Records compaction removed (superseded, tombstones past `delete.retention.ms`, records
/// of aborted transactions), by topic.
pub const COMPACTED_RECORDS_TOTAL: &str = "ferry_kafka_compacted_records_total";
/// Record batch bytes compaction freed, by topic.
pub const COMPACTED_BYTES_TOTAL: &str = "ferry_kafka_compacted_bytes_total";
/// Members of a consumer group.
pub const GROUP_MEMBERS: &str = "ferry_kafka_group_members";
/// Rebalances a consumer group completed.
pub const GROUP_REBALANCES_TOTAL: &str = "ferry_kafka_group_rebalances_total";
/// Records between a group's committed offset and the partition's high watermark.
pub const GROUP_LAG: &str = "ferry_kafka_group_lag";
/// Records of a share-partition acquired by a share group's member and not yet
/// acknowledged.
pub const SHARE_IN_FLIGHT: &str = "ferry_kafka_share_in_flight";
/// Records a share group archived on a partition (rejected, or past the delivery count
/// limit) since it started the partition.
pub const SHARE_ARCHIVED: &str = "ferry_kafka_share_archived";
/// Records between a share-partition's start offset and the partition's high watermark.
pub const SHARE_LAG: &str = "ferry_kafka_share_lag";

/// Transactions ended, by outcome: committed or aborted by their producer, aborted because
/// a new epoch of their transactional id was initialised, or aborted past their timeout.
pub const TRANSACTIONS_TOTAL: &str = "ferry_kafka_transactions_total";

/// Every metric of the Kafka front.
pub const ALL: &[Metric] = &[
    Metric {
        name: REQUESTS_TOTAL,
        kind: Kind::Counter,
        help: "Kafka requests answered, by API and first error code (0: none).",
    },
    Metric {
        name: REQUEST_SECONDS,
        kind: Kind::Histogram(SECONDS_BUCKETS),
        help: "Seconds from reading a Kafka request to writing its answer.",
    },
    Metric {
        name: CONNECTIONS,
        kind: Kind::Gauge,
        help: "Kafka client connections open.",
    },
    Metric {
        name: CONNECTIONS_REFUSED_TOTAL,
        kind: Kind::Counter,
        help: "Kafka connections closed because of what the client sent, by reason.",
    },
    Metric {
        name: PRODUCE_THROTTLED_TOTAL,
        kind: Kind::Counter,
        help: "Produce requests answered with a throttle (memory above daemon.max_memory_mb).",
    },
    Metric {
        name: PRODUCED_BYTES_TOTAL,
        kind: Kind::Counter,
        help: "Record batch bytes accepted by Produce.",
    },
    Metric {
        name: SPILLED_BYTES_TOTAL,
        kind: Kind::Counter,
        help: "Bytes of large record batches Produce wrote to spills, counted as each segment commits.",
    },
    Metric {
        name: PRODUCED_RECORDS_TOTAL,
        kind: Kind::Counter,
        help: "Records accepted by Produce.",
    },
    Metric {
        name: FETCHED_BYTES_TOTAL,
        kind: Kind::Counter,
        help: "Record batch bytes returned by Fetch.",
    },
    Metric {
        name: FETCHED_RECORDS_TOTAL,
        kind: Kind::Counter,
        help: "Records returned by Fetch.",
    },
    Metric {
        name: FETCH_SESSIONS,
        kind: Kind::Gauge,
        help: "Incremental fetch sessions (KIP-227) this instance keeps.",
    },
    Metric {
        name: DUPLICATE_BATCHES_TOTAL,
        kind: Kind::Counter,
        help: "Resent idempotent batches recognised and not stored twice.",
    },
    Metric {
        name: COMPACTION_PASSES_TOTAL,
        kind: Kind::Counter,
        help: "Compaction passes completed over compacted partitions.",
    },
    Metric {
        name: COMPACTED_RECORDS_TOTAL,
        kind: Kind::Counter,
        help: "Records compaction removed from partition logs.",
    },
    Metric {
        name: COMPACTED_BYTES_TOTAL,
        kind: Kind::Counter,
        help: "Record batch bytes compaction freed.",
    },
    Metric {
        name: SEQUENCER_BATCH_SIZE,
        kind: Kind::Histogram(BATCH_SIZE_BUCKETS),
        help: "Staged batches moved into a partition log per transaction.",
    },
    Metric {
        name: SEQUENCERS,
        kind: Kind::Gauge,
        help: "Partitions whose sequencer lease this instance holds.",
    },
    Metric {
        name: PARTITION_HIGH_WATERMARK,
        kind: Kind::Gauge,
        help: "Next offset of a partition (high watermark, log end offset).",
    },
    Metric {
        name: PARTITION_LOG_START_OFFSET,
        kind: Kind::Gauge,
        help: "First offset still stored in a partition.",
    },
    Metric {
        name: PARTITION_BYTES,
        kind: Kind::Gauge,
        help: "Record batch bytes stored in a partition log.",
    },
    Metric {
        name: GROUP_MEMBERS,
        kind: Kind::Gauge,
        help: "Members of a consumer group.",
    },
    Metric {
        name: GROUP_REBALANCES_TOTAL,
        kind: Kind::Counter,
        help: "Rebalances a consumer group completed.",
    },
    Metric {
        name: TRANSACTIONS_TOTAL,
        kind: Kind::Counter,
        help: "Kafka transactions ended, by outcome (commit, abort, fenced, timeout).",
    },
    Metric {
        name: GROUP_LAG,
        kind: Kind::Gauge,
        help: "Records between a group's committed offset and the high watermark.",
    },
    Metric {
        name: SHARE_IN_FLIGHT,
        kind: Kind::Gauge,
        help: "Records of a share-partition acquired by a member and not yet acknowledged.",
    },
    Metric {
        name: SHARE_ARCHIVED,
        kind: Kind::Gauge,
        help: "Records a share group archived on a partition (rejected or past the delivery count limit).",
    },
    Metric {
        name: SHARE_LAG,
        kind: Kind::Gauge,
        help: "Records between a share-partition's start offset and the high watermark.",
    },
];
