//! kafka_exporter's names (danielqsj/kafka_exporter, `kafka_exporter.go` at commit
//! 00498a4a2e23ab2432bea910cd52263427abf46e: the `prometheus.NewDesc` calls in `setup`),
//! for the series Ferry has the data for: partition offsets and consumer-group offsets,
//! lag and members. All are gauges, as there. Ferry sets them where it measures its own
//! equivalents (the lag publisher and the group coordinator), so they sit in `/metrics`
//! beside `ferry_kafka_*`.
//!
//! Left out: `kafka_brokers` and `kafka_broker_info` (not measured by Ferry), and the
//! replication series (`kafka_topic_partition_leader`, `_replicas`, `_in_sync_replica`,
//! `_leader_is_preferred`, `_under_replicated_partition`): a Ferry partition is stored in
//! the store, not replicated across brokers, so they would carry no information.

use crate::names::{Kind, Metric};

/// Label: a topic.
pub const LABEL_TOPIC: &str = "topic";
/// Label: a partition number.
pub const LABEL_PARTITION: &str = "partition";
/// Label: a consumer group id.
pub const LABEL_CONSUMERGROUP: &str = "consumergroup";

/// Partitions of a topic, by topic.
pub const TOPIC_PARTITIONS: &str = "kafka_topic_partitions";
/// The high watermark (next offset) of a partition, by topic and partition.
pub const TOPIC_PARTITION_CURRENT_OFFSET: &str = "kafka_topic_partition_current_offset";
/// The log start offset of a partition, by topic and partition.
pub const TOPIC_PARTITION_OLDEST_OFFSET: &str = "kafka_topic_partition_oldest_offset";
/// A group's committed offset, by group, topic and partition.
pub const CONSUMERGROUP_CURRENT_OFFSET: &str = "kafka_consumergroup_current_offset";
/// The sum of a group's committed offsets over a topic's partitions.
pub const CONSUMERGROUP_CURRENT_OFFSET_SUM: &str = "kafka_consumergroup_current_offset_sum";
/// Records between a group's committed offset and the high watermark, by group, topic and
/// partition.
pub const CONSUMERGROUP_LAG: &str = "kafka_consumergroup_lag";
/// The sum of a group's lag over a topic's partitions.
pub const CONSUMERGROUP_LAG_SUM: &str = "kafka_consumergroup_lag_sum";
/// Members of a consumer group.
pub const CONSUMERGROUP_MEMBERS: &str = "kafka_consumergroup_members";

/// Every kafka_exporter series Ferry exports, with its label names in kafka_exporter's
/// order.
pub const ALL: &[(Metric, &[&str])] = &[
    (
        Metric {
            name: TOPIC_PARTITIONS,
            kind: Kind::Gauge,
            help: "Number of partitions for this Topic",
        },
        &[LABEL_TOPIC],
    ),
    (
        Metric {
            name: TOPIC_PARTITION_CURRENT_OFFSET,
            kind: Kind::Gauge,
            help: "Current Offset of a Broker at Topic/Partition",
        },
        &[LABEL_TOPIC, LABEL_PARTITION],
    ),
    (
        Metric {
            name: TOPIC_PARTITION_OLDEST_OFFSET,
            kind: Kind::Gauge,
            help: "Oldest Offset of a Broker at Topic/Partition",
        },
        &[LABEL_TOPIC, LABEL_PARTITION],
    ),
    (
        Metric {
            name: CONSUMERGROUP_CURRENT_OFFSET,
            kind: Kind::Gauge,
            help: "Current Offset of a ConsumerGroup at Topic/Partition",
        },
        &[LABEL_CONSUMERGROUP, LABEL_TOPIC, LABEL_PARTITION],
    ),
    (
        Metric {
            name: CONSUMERGROUP_CURRENT_OFFSET_SUM,
            kind: Kind::Gauge,
            help: "Current Offset of a ConsumerGroup at Topic for all partitions",
        },
        &[LABEL_CONSUMERGROUP, LABEL_TOPIC],
    ),
    (
        Metric {
            name: CONSUMERGROUP_LAG,
            kind: Kind::Gauge,
            help: "Current Approximate Lag of a ConsumerGroup at Topic/Partition",
        },
        &[LABEL_CONSUMERGROUP, LABEL_TOPIC, LABEL_PARTITION],
    ),
    (
        Metric {
            name: CONSUMERGROUP_LAG_SUM,
            kind: Kind::Gauge,
            help: "Current Approximate Lag of a ConsumerGroup at Topic for all partitions",
        },
        &[LABEL_CONSUMERGROUP, LABEL_TOPIC],
    ),
    (
        Metric {
            name: CONSUMERGROUP_MEMBERS,
            kind: Kind::Gauge,
            help: "Amount of members in a consumer group",
        },
        &[LABEL_CONSUMERGROUP],
    ),
];
