//! RabbitMQ's Prometheus plugin's names (rabbitmq_prometheus, as RabbitMQ 3.10 exports
//! them), for what Ferry can fill: the series the plugin's RabbitMQ-Overview Grafana
//! dashboard queries, the global counters, and the per-queue depths.
//!
//! RabbitMQ serves two views, and so does Ferry on `metrics.listen`: `/metrics` aggregates
//! per-object series into one unlabelled sample (queue depths summed over queues, channel
//! counters over channels), `/metrics/per-object` labels queue series by `vhost` and
//! `queue` instead. The plugin's per-object channel series are labelled by an Erlang
//! process id; Ferry leaves them out of `/metrics/per-object` rather than invent one, and
//! serves them aggregated only ([`Scope::Aggregated`]).
//!
//! [`state`] holds what the AMQP front reports (counters, the last queue measurement);
//! [`render`] turns it into either view at scrape time. Both are process-wide, like the
//! `metrics` crate's recorder they sit beside.

pub mod render;
pub mod state;

use crate::names::{Kind, Metric};

/// Label of [`IDENTITY_INFO`]: the node's name.
pub const LABEL_NODE: &str = "rabbitmq_node";
/// Label of [`IDENTITY_INFO`]: the cluster's name.
pub const LABEL_CLUSTER: &str = "rabbitmq_cluster";
/// Label of [`IDENTITY_INFO`]: the cluster's permanent id.
pub const LABEL_CLUSTER_PERMANENT_ID: &str = "rabbitmq_cluster_permanent_id";
/// Label of [`BUILD_INFO`]: the broker's version.
pub const LABEL_RABBITMQ_VERSION: &str = "rabbitmq_version";
/// Label of [`BUILD_INFO`]: the exporter's version.
pub const LABEL_PLUGIN_VERSION: &str = "prometheus_plugin_version";
/// Label of [`BUILD_INFO`]: the Prometheus client library's version.
pub const LABEL_CLIENT_VERSION: &str = "prometheus_client_version";
/// Label of [`BUILD_INFO`]: the Erlang/OTP version.
pub const LABEL_ERLANG_VERSION: &str = "erlang_version";
/// Label of the global counters: the protocol (`amqp091`).
pub const LABEL_PROTOCOL: &str = "protocol";
/// Label of the global delivery counters: the queue type (`rabbit_classic_queue`).
pub const LABEL_QUEUE_TYPE: &str = "queue_type";
/// Label of per-object queue series: the virtual host.
pub const LABEL_VHOST: &str = "vhost";
/// Label of per-object queue series: the queue.
pub const LABEL_QUEUE: &str = "queue";

/// The value of [`LABEL_PROTOCOL`] for everything the AMQP front counts.
pub const PROTOCOL_AMQP091: &str = "amqp091";
/// The value of [`LABEL_QUEUE_TYPE`] for Ferry's queues: to a client they behave as
/// RabbitMQ's classic queues (FIFO per priority, requeue to the original position).
pub const QUEUE_TYPE_CLASSIC: &str = "rabbit_classic_queue";

/// Always 1; its labels name the node and its cluster.
pub const IDENTITY_INFO: &str = "rabbitmq_identity_info";
/// Always 1; its labels name versions.
pub const BUILD_INFO: &str = "rabbitmq_build_info";
/// Open AMQP connections.
pub const CONNECTIONS: &str = "rabbitmq_connections";
/// Open AMQP channels.
pub const CHANNELS: &str = "rabbitmq_channels";
/// Consumers.
pub const CONSUMERS: &str = "rabbitmq_consumers";
/// Queues.
pub const QUEUES: &str = "rabbitmq_queues";
/// AMQP connections opened.
pub const CONNECTIONS_OPENED_TOTAL: &str = "rabbitmq_connections_opened_total";
/// AMQP connections closed.
pub const CONNECTIONS_CLOSED_TOTAL: &str = "rabbitmq_connections_closed_total";
/// AMQP channels opened.
pub const CHANNELS_OPENED_TOTAL: &str = "rabbitmq_channels_opened_total";
/// AMQP channels closed.
pub const CHANNELS_CLOSED_TOTAL: &str = "rabbitmq_channels_closed_total";
/// Successful queue.declare calls (new and existing queues, passive or not).
pub const QUEUES_DECLARED_TOTAL: &str = "rabbitmq_queues_declared_total";
/// Queues created.
pub const QUEUES_CREATED_TOTAL: &str = "rabbitmq_queues_created_total";
/// Queues deleted (by queue.delete, auto-delete, exclusivity or expiry).
pub const QUEUES_DELETED_TOTAL: &str = "rabbitmq_queues_deleted_total";
/// The process's resident memory.
pub const PROCESS_RESIDENT_MEMORY_BYTES: &str = "rabbitmq_process_resident_memory_bytes";
/// The resident memory above which publishers are held back (`daemon.max_memory_mb`).
pub const RESIDENT_MEMORY_LIMIT_BYTES: &str = "rabbitmq_resident_memory_limit_bytes";
/// File descriptors the process has open.
pub const PROCESS_OPEN_FDS: &str = "rabbitmq_process_open_fds";
/// The process's file descriptor limit.
pub const PROCESS_MAX_FDS: &str = "rabbitmq_process_max_fds";
/// Free bytes on the file system of the embedded store's directory.
pub const DISK_SPACE_AVAILABLE_BYTES: &str = "rabbitmq_disk_space_available_bytes";
/// The free space below which publishers are blocked (`store.min_free_disk_mb`).
pub const DISK_SPACE_AVAILABLE_LIMIT_BYTES: &str = "rabbitmq_disk_space_available_limit_bytes";
/// Messages received from publishers (basic.publish), routed or not.
pub const GLOBAL_MESSAGES_RECEIVED_TOTAL: &str = "rabbitmq_global_messages_received_total";
/// Messages received on channels in confirm mode.
pub const GLOBAL_MESSAGES_RECEIVED_CONFIRM_TOTAL: &str =
    "rabbitmq_global_messages_received_confirm_total";
/// Messages routed to at least one queue.
pub const GLOBAL_MESSAGES_ROUTED_TOTAL: &str = "rabbitmq_global_messages_routed_total";
/// Unroutable messages dropped (not mandatory).
pub const GLOBAL_MESSAGES_UNROUTABLE_DROPPED_TOTAL: &str =
    "rabbitmq_global_messages_unroutable_dropped_total";
/// Unroutable mandatory messages returned to their publisher.
pub const GLOBAL_MESSAGES_UNROUTABLE_RETURNED_TOTAL: &str =
    "rabbitmq_global_messages_unroutable_returned_total";
/// Messages confirmed to publishers (basic.ack).
pub const GLOBAL_MESSAGES_CONFIRMED_TOTAL: &str = "rabbitmq_global_messages_confirmed_total";
/// Messages delivered to consumers and basic.get, in every ack mode.
pub const GLOBAL_MESSAGES_DELIVERED_TOTAL: &str = "rabbitmq_global_messages_delivered_total";
/// Messages delivered to consumers that acknowledge.
pub const GLOBAL_MESSAGES_DELIVERED_CONSUME_MANUAL_ACK_TOTAL: &str =
    "rabbitmq_global_messages_delivered_consume_manual_ack_total";
/// Messages delivered to consumers with no-ack.
pub const GLOBAL_MESSAGES_DELIVERED_CONSUME_AUTO_ACK_TOTAL: &str =
    "rabbitmq_global_messages_delivered_consume_auto_ack_total";
/// Messages fetched with basic.get that must be acknowledged.
pub const GLOBAL_MESSAGES_DELIVERED_GET_MANUAL_ACK_TOTAL: &str =
    "rabbitmq_global_messages_delivered_get_manual_ack_total";
/// Messages fetched with basic.get and no-ack.
pub const GLOBAL_MESSAGES_DELIVERED_GET_AUTO_ACK_TOTAL: &str =
    "rabbitmq_global_messages_delivered_get_auto_ack_total";
/// Deliveries with the redelivered flag set.
pub const GLOBAL_MESSAGES_REDELIVERED_TOTAL: &str = "rabbitmq_global_messages_redelivered_total";
/// Deliveries acknowledged.
pub const GLOBAL_MESSAGES_ACKNOWLEDGED_TOTAL: &str = "rabbitmq_global_messages_acknowledged_total";
/// basic.get calls answered basic.get-empty.
pub const GLOBAL_MESSAGES_GET_EMPTY_TOTAL: &str = "rabbitmq_global_messages_get_empty_total";
/// Consumers.
pub const GLOBAL_CONSUMERS: &str = "rabbitmq_global_consumers";
/// Messages ready in queues (per-object: in a queue).
pub const QUEUE_MESSAGES_READY: &str = "rabbitmq_queue_messages_ready";
/// Messages delivered and not yet acknowledged.
pub const QUEUE_MESSAGES_UNACKED: &str = "rabbitmq_queue_messages_unacked";
/// Ready and unacknowledged messages.
pub const QUEUE_MESSAGES: &str = "rabbitmq_queue_messages";
/// Consumers of queues.
pub const QUEUE_CONSUMERS: &str = "rabbitmq_queue_consumers";
/// Messages stored into queues (one per queue a message was routed to).
pub const QUEUE_MESSAGES_PUBLISHED_TOTAL: &str = "rabbitmq_queue_messages_published_total";
/// Consumers on channels.
pub const CHANNEL_CONSUMERS: &str = "rabbitmq_channel_consumers";
/// Messages published on channels.
pub const CHANNEL_MESSAGES_PUBLISHED_TOTAL: &str = "rabbitmq_channel_messages_published_total";
/// Messages confirmed to publishers on channels.
pub const CHANNEL_MESSAGES_CONFIRMED_TOTAL: &str = "rabbitmq_channel_messages_confirmed_total";
/// Unroutable mandatory messages returned on channels.
pub const CHANNEL_MESSAGES_UNROUTABLE_RETURNED_TOTAL: &str =
    "rabbitmq_channel_messages_unroutable_returned_total";
/// Unroutable messages dropped on channels.
pub const CHANNEL_MESSAGES_UNROUTABLE_DROPPED_TOTAL: &str =
    "rabbitmq_channel_messages_unroutable_dropped_total";
/// Deliveries to consumers that acknowledge.
pub const CHANNEL_MESSAGES_DELIVERED_ACK_TOTAL: &str =
    "rabbitmq_channel_messages_delivered_ack_total";
/// Deliveries to consumers with no-ack.
pub const CHANNEL_MESSAGES_DELIVERED_TOTAL: &str = "rabbitmq_channel_messages_delivered_total";
/// Deliveries with the redelivered flag set.
pub const CHANNEL_MESSAGES_REDELIVERED_TOTAL: &str = "rabbitmq_channel_messages_redelivered_total";
/// Deliveries acknowledged.
pub const CHANNEL_MESSAGES_ACKED_TOTAL: &str = "rabbitmq_channel_messages_acked_total";
/// basic.get deliveries that must be acknowledged.
pub const CHANNEL_GET_ACK_TOTAL: &str = "rabbitmq_channel_get_ack_total";
/// basic.get deliveries with no-ack.
pub const CHANNEL_GET_TOTAL: &str = "rabbitmq_channel_get_total";
/// basic.get calls answered basic.get-empty.
pub const CHANNEL_GET_EMPTY_TOTAL: &str = "rabbitmq_channel_get_empty_total";

/// Which of RabbitMQ's two views a family appears in, and with which labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// In both views with the same labels.
    Node(&'static [&'static str]),
    /// Unlabelled (summed over queues) in `/metrics`; labelled `vhost`, `queue` in
    /// `/metrics/per-object`.
    PerQueue,
    /// Unlabelled (summed over channels) in `/metrics` only.
    Aggregated,
}

/// Which view a scrape asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// `/metrics`: per-object series summed.
    Aggregated,
    /// `/metrics/per-object`: queue series per queue.
    PerObject,
}

impl Scope {
    /// The family's label names in `detail`'s view, or `None` when it is not in it.
    pub fn labels(self, detail: Detail) -> Option<&'static [&'static str]> {
        match (self, detail) {
            (Scope::Node(labels), _) => Some(labels),
            (Scope::PerQueue, Detail::PerObject) => Some(&[LABEL_VHOST, LABEL_QUEUE]),
            (Scope::PerQueue | Scope::Aggregated, Detail::Aggregated) => Some(&[]),
            (Scope::Aggregated, Detail::PerObject) => None,
        }
    }
}

/// One RabbitMQ family Ferry exports.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    /// Name, kind (RabbitMQ's `untyped` info series are gauges here: the exporter has no
    /// untyped kind, and Prometheus stores both alike) and help.
    pub metric: Metric,
    /// Where it appears, with which labels.
    pub scope: Scope,
}

const NONE: &[&str] = &[];
const PROTOCOL: &[&str] = &[LABEL_PROTOCOL];
const PROTOCOL_QUEUE_TYPE: &[&str] = &[LABEL_PROTOCOL, LABEL_QUEUE_TYPE];

const fn family(name: &'static str, kind: Kind, help: &'static str, scope: Scope) -> Family {
    Family {
        metric: Metric { name, kind, help },
        scope,
    }
}

use Kind::{Counter, Gauge};
use Scope::{Aggregated, Node, PerQueue};

/// Every RabbitMQ family Ferry exports.
pub const ALL: &[Family] = &[
    family(
        IDENTITY_INFO,
        Gauge,
        "RabbitMQ node & cluster identity info",
        Node(&[LABEL_NODE, LABEL_CLUSTER, LABEL_CLUSTER_PERMANENT_ID]),
    ),
    family(
        BUILD_INFO,
        Gauge,
        "RabbitMQ & Erlang/OTP version info",
        Node(&[
            LABEL_RABBITMQ_VERSION,
            LABEL_PLUGIN_VERSION,
            LABEL_CLIENT_VERSION,
            LABEL_ERLANG_VERSION,
        ]),
    ),
    family(CONNECTIONS, Gauge, "Connections currently open", Node(NONE)),
    family(CHANNELS, Gauge, "Channels currently open", Node(NONE)),
    family(
        CONSUMERS,
        Gauge,
        "Consumers currently connected",
        Node(NONE),
    ),
    family(QUEUES, Gauge, "Queues available", Node(NONE)),
    family(
        CONNECTIONS_OPENED_TOTAL,
        Counter,
        "Total number of connections opened",
        Node(NONE),
    ),
    family(
        CONNECTIONS_CLOSED_TOTAL,
        Counter,
        "Total number of connections closed or terminated",
        Node(NONE),
    ),
    family(
        CHANNELS_OPENED_TOTAL,
        Counter,
        "Total number of channels opened",
        Node(NONE),
    ),
    family(
        CHANNELS_CLOSED_TOTAL,
        Counter,
        "Total number of channels closed",
        Node(NONE),
    ),
    family(
        QUEUES_DECLARED_TOTAL,
        Counter,
        "Total number of queues declared",
        Node(NONE),
    ),
    family(
        QUEUES_CREATED_TOTAL,
        Counter,
        "Total number of queues created",
        Node(NONE),
    ),
    family(
        QUEUES_DELETED_TOTAL,
        Counter,
        "Total number of queues deleted",
        Node(NONE),
    ),
    family(
        PROCESS_RESIDENT_MEMORY_BYTES,
        Gauge,
        "Memory used in bytes",
        Node(NONE),
    ),
    family(
        RESIDENT_MEMORY_LIMIT_BYTES,
        Gauge,
        "Memory high watermark in bytes (daemon.max_memory_mb)",
        Node(NONE),
    ),
    family(PROCESS_OPEN_FDS, Gauge, "Open file descriptors", Node(NONE)),
    family(
        PROCESS_MAX_FDS,
        Gauge,
        "Open file descriptors limit",
        Node(NONE),
    ),
    family(
        DISK_SPACE_AVAILABLE_BYTES,
        Gauge,
        "Disk space available in bytes (the store's file system)",
        Node(NONE),
    ),
    family(
        DISK_SPACE_AVAILABLE_LIMIT_BYTES,
        Gauge,
        "Free disk space low watermark in bytes (store.min_free_disk_mb)",
        Node(NONE),
    ),
    family(
        GLOBAL_MESSAGES_RECEIVED_TOTAL,
        Counter,
        "Total number of messages received from publishers",
        Node(PROTOCOL),
    ),
    family(
        GLOBAL_MESSAGES_RECEIVED_CONFIRM_TOTAL,
        Counter,
        "Total number of messages received from publishers expecting confirmations",
        Node(PROTOCOL),
    ),
    family(
        GLOBAL_MESSAGES_ROUTED_TOTAL,
        Counter,
        "Total number of messages routed to queues or streams",
        Node(PROTOCOL),
    ),
    family(
        GLOBAL_MESSAGES_UNROUTABLE_DROPPED_TOTAL,
        Counter,
        "Total number of messages published as non-mandatory into an exchange and dropped as unroutable",
        Node(PROTOCOL),
    ),
    family(
        GLOBAL_MESSAGES_UNROUTABLE_RETURNED_TOTAL,
        Counter,
        "Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable",
        Node(PROTOCOL),
    ),
    family(
        GLOBAL_MESSAGES_CONFIRMED_TOTAL,
        Counter,
        "Total number of messages confirmed to publishers",
        Node(PROTOCOL),
    ),
    family(
        GLOBAL_MESSAGES_DELIVERED_TOTAL,
        Counter,
        "Total number of messages delivered to consumers",
        Node(PROTOCOL_QUEUE_TYPE),
    ),
    family(
        GLOBAL_MESSAGES_DELIVERED_CONSUME_MANUAL_ACK_TOTAL,
        Counter,
        "Total number of messages delivered to consumers using manual acknowledgement mode",
        Node(PROTOCOL_QUEUE_TYPE),
    ),
    family(
        GLOBAL_MESSAGES_DELIVERED_CONSUME_AUTO_ACK_TOTAL,
        Counter,
        "Total number of messages delivered to consumers using automatic acknowledgement mode",
        Node(PROTOCOL_QUEUE_TYPE),
    ),
    family(
        GLOBAL_MESSAGES_DELIVERED_GET_MANUAL_ACK_TOTAL,
        Counter,
        "Total number of messages delivered to polling consumers using manual acknowledgement mode",
        Node(PROTOCOL_QUEUE_TYPE),
    ),
    family(
        GLOBAL_MESSAGES_DELIVERED_GET_AUTO_ACK_TOTAL,
        Counter,
        "Total number of messages delivered to polling consumers using automatic acknowledgement mode",
        Node(PROTOCOL_QUEUE_TYPE),
    ),
    family(
        GLOBAL_MESSAGES_REDELIVERED_TOTAL,
        Counter,
        "Total number of messages redelivered to consumers",
        Node(PROTOCOL_QUEUE_TYPE),
    ),
    family(
        GLOBAL_MESSAGES_ACKNOWLEDGED_TOTAL,
        Counter,
        "Total number of message acknowledgements received from consumers",
        Node(PROTOCOL_QUEUE_TYPE),
    ),
    family(
        GLOBAL_MESSAGES_GET_EMPTY_TOTAL,
        Counter,
        "Total number of times basic.get operations fetched no message",
        Node(PROTOCOL_QUEUE_TYPE),
    ),
    family(
        GLOBAL_CONSUMERS,
        Gauge,
        "Current number of consumers",
        Node(PROTOCOL),
    ),
    family(
        QUEUE_MESSAGES_READY,
        Gauge,
        "Messages ready to be delivered to consumers",
        PerQueue,
    ),
    family(
        QUEUE_MESSAGES_UNACKED,
        Gauge,
        "Messages delivered to consumers but not yet acknowledged",
        PerQueue,
    ),
    family(
        QUEUE_MESSAGES,
        Gauge,
        "Sum of ready and unacknowledged messages - total queue depth",
        PerQueue,
    ),
    family(QUEUE_CONSUMERS, Gauge, "Consumers on a queue", PerQueue),
    family(
        QUEUE_MESSAGES_PUBLISHED_TOTAL,
        Counter,
        "Total number of messages published to queues",
        Aggregated,
    ),
    family(
        CHANNEL_CONSUMERS,
        Gauge,
        "Consumers on a channel",
        Aggregated,
    ),
    family(
        CHANNEL_MESSAGES_PUBLISHED_TOTAL,
        Counter,
        "Total number of messages published into an exchange on a channel",
        Aggregated,
    ),
    family(
        CHANNEL_MESSAGES_CONFIRMED_TOTAL,
        Counter,
        "Total number of messages published into an exchange and confirmed on the channel",
        Aggregated,
    ),
    family(
        CHANNEL_MESSAGES_UNROUTABLE_RETURNED_TOTAL,
        Counter,
        "Total number of messages published as mandatory into an exchange and returned to the publisher as unroutable",
        Aggregated,
    ),
    family(
        CHANNEL_MESSAGES_UNROUTABLE_DROPPED_TOTAL,
        Counter,
        "Total number of messages published as non-mandatory into an exchange and dropped as unroutable",
        Aggregated,
    ),
    family(
        CHANNEL_MESSAGES_DELIVERED_ACK_TOTAL,
        Counter,
        "Total number of messages delivered to consumers in manual acknowledgement mode",
        Aggregated,
    ),
    family(
        CHANNEL_MESSAGES_DELIVERED_TOTAL,
        Counter,
        "Total number of messages delivered to consumers in automatic acknowledgement mode",
        Aggregated,
    ),
    family(
        CHANNEL_MESSAGES_REDELIVERED_TOTAL,
        Counter,
        "Total number of messages redelivered to consumers",
        Aggregated,
    ),
    family(
        CHANNEL_MESSAGES_ACKED_TOTAL,
        Counter,
        "Total number of messages acknowledged by consumers",
        Aggregated,
    ),
    family(
        CHANNEL_GET_ACK_TOTAL,
        Counter,
        "Total number of messages fetched with basic.get in manual acknowledgement mode",
        Aggregated,
    ),
    family(
        CHANNEL_GET_TOTAL,
        Counter,
        "Total number of messages fetched with basic.get in automatic acknowledgement mode",
        Aggregated,
    ),
    family(
        CHANNEL_GET_EMPTY_TOTAL,
        Counter,
        "Total number of times basic.get operations fetched no message",
        Aggregated,
    ),
];

/// Families RabbitMQ-Overview (or the plugin) has that Ferry does not export, with why.
pub const NOT_APPLICABLE: &[(&str, &str)] = &[
    (
        "rabbitmq_process_open_tcp_sockets",
        "an Erlang port count; Ferry's sockets are ordinary file descriptors, counted in rabbitmq_process_open_fds",
    ),
    (
        "rabbitmq_process_max_tcp_sockets",
        "an Erlang VM port limit; Ferry has none apart from the file descriptor limit (rabbitmq_process_max_fds)",
    ),
    (
        "rabbitmq_channel_messages_unconfirmed",
        "Ferry confirms a publish when its commit is durable and does not track the window of unconfirmed publishes per channel",
    ),
    ("rabbitmq_erlang_*, erlang_vm_*", "Erlang VM internals"),
    (
        "rabbitmq_raft_*",
        "quorum-queue Raft state; Ferry's durability is the store's",
    ),
    (
        "rabbitmq_io_*, rabbitmq_msg_store_*, rabbitmq_queue_index_*, rabbitmq_schema_db_*",
        "RabbitMQ's storage internals",
    ),
];
