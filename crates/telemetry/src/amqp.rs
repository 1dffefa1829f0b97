//! The metrics of the AMQP 0-9-1 front.
//!
//! Per-queue series carry `vhost` and `queue` labels; counters are bumped once per batch
//! (a publish commit, a delivery batch, an ack commit), never inside a transaction that may
//! be retried.

use super::names::{Kind, Metric, SECONDS_BUCKETS};

/// Label: a virtual host.
pub const LABEL_VHOST: &str = "vhost";
/// Label: a queue name.
pub const LABEL_QUEUE: &str = "queue";
/// Label: an exchange name.
pub const LABEL_EXCHANGE: &str = "exchange";
/// Label: an AMQP reply code (`404`).
pub const LABEL_CODE: &str = "code";
/// Label: a dead-letter reason (`rejected`, `expired`, `maxlen`, `delivery_limit`).
pub const LABEL_REASON: &str = "reason";
/// Label: a publisher confirm's outcome (`ack` or `nack`).
pub const LABEL_OUTCOME: &str = "outcome";

/// Open AMQP connections (past the handshake).
pub const CONNECTIONS: &str = "ferry_amqp_connections";
/// Open AMQP channels.
pub const CHANNELS: &str = "ferry_amqp_channels";
/// Consumers registered with basic.consume, per queue.
pub const CONSUMERS: &str = "ferry_amqp_consumers";
/// Messages stored into a queue by basic.publish, per queue.
pub const PUBLISHED_TOTAL: &str = "ferry_amqp_published_total";
/// Publisher confirms sent (basic.ack and basic.nack), per vhost and outcome.
pub const CONFIRMS_TOTAL: &str = "ferry_amqp_confirms_total";
/// Seconds from a publish's last frame to its confirm being sent.
pub const CONFIRM_SECONDS: &str = "ferry_amqp_confirm_seconds";
/// Messages delivered to consumers and basic.get, per queue.
pub const DELIVERED_TOTAL: &str = "ferry_amqp_delivered_total";
/// Deliveries with the redelivered flag set, per queue.
pub const REDELIVERED_TOTAL: &str = "ferry_amqp_redelivered_total";
/// Deliveries acknowledged, per queue.
pub const ACKS_TOTAL: &str = "ferry_amqp_acks_total";
/// Deliveries negatively acknowledged (basic.nack, basic.reject), per queue.
pub const NACKS_TOTAL: &str = "ferry_amqp_nacks_total";
/// Mandatory messages returned unroutable (basic.return), per vhost.
pub const RETURNS_TOTAL: &str = "ferry_amqp_returns_total";
/// Messages dead-lettered out of a queue through its dead-letter exchange, per queue and
/// reason.
pub const DEAD_LETTERED_TOTAL: &str = "ferry_amqp_dead_lettered_total";
/// Messages ready in a queue.
pub const QUEUE_READY: &str = "ferry_amqp_queue_ready";
/// Messages delivered from a queue and not yet acknowledged.
pub const QUEUE_UNACKED: &str = "ferry_amqp_queue_unacked";
/// AMQP exceptions sent (channel.close and connection.close), per reply code.
pub const ERRORS_TOTAL: &str = "ferry_amqp_errors_total";
/// Messages a delayed-message exchange holds until they are due, per exchange.
pub const DELAYED: &str = "ferry_amqp_delayed_messages";
/// 1 while publishers are blocked by a resource limit, 0 otherwise.
pub const BLOCKED: &str = "ferry_amqp_blocked";

/// Every metric of the AMQP 0-9-1 front.
pub const ALL: &[Metric] = &[
    Metric {
        name: CONNECTIONS,
        kind: Kind::Gauge,
        help: "Open AMQP connections.",
    },
    Metric {
        name: CHANNELS,
        kind: Kind::Gauge,
        help: "Open AMQP channels.",
    },
    Metric {
        name: CONSUMERS,
        kind: Kind::Gauge,
        help: "AMQP consumers per queue.",
    },
    Metric {
        name: PUBLISHED_TOTAL,
        kind: Kind::Counter,
        help: "Messages published into a queue.",
    },
    Metric {
        name: CONFIRMS_TOTAL,
        kind: Kind::Counter,
        help: "Publisher confirms sent, by outcome.",
    },
    Metric {
        name: CONFIRM_SECONDS,
        kind: Kind::Histogram(SECONDS_BUCKETS),
        help: "Seconds from a publish to its confirm.",
    },
    Metric {
        name: DELIVERED_TOTAL,
        kind: Kind::Counter,
        help: "Messages delivered from a queue.",
    },
    Metric {
        name: REDELIVERED_TOTAL,
        kind: Kind::Counter,
        help: "Messages delivered again (redelivered flag set).",
    },
    Metric {
        name: ACKS_TOTAL,
        kind: Kind::Counter,
        help: "Deliveries acknowledged.",
    },
    Metric {
        name: NACKS_TOTAL,
        kind: Kind::Counter,
        help: "Deliveries rejected or negatively acknowledged.",
    },
    Metric {
        name: RETURNS_TOTAL,
        kind: Kind::Counter,
        help: "Unroutable mandatory messages returned to their publisher.",
    },
    Metric {
        name: DEAD_LETTERED_TOTAL,
        kind: Kind::Counter,
        help: "Messages dead-lettered through a queue's dead-letter exchange, by reason.",
    },
    Metric {
        name: QUEUE_READY,
        kind: Kind::Gauge,
        help: "Messages ready for delivery in a queue.",
    },
    Metric {
        name: QUEUE_UNACKED,
        kind: Kind::Gauge,
        help: "Messages delivered from a queue and not yet acknowledged.",
    },
    Metric {
        name: ERRORS_TOTAL,
        kind: Kind::Counter,
        help: "AMQP exceptions sent, by reply code.",
    },
    Metric {
        name: DELAYED,
        kind: Kind::Gauge,
        help: "Messages a delayed-message exchange holds until they are due.",
    },
    Metric {
        name: BLOCKED,
        kind: Kind::Gauge,
        help: "1 while publishers are blocked by a resource limit.",
    },
];
