//! The metrics of the bridge: per route, source and destination. Stage depth (the
//! bridge's lag) is the stage gauges of `bridge.ROUTE.INDEX`.

use super::names::{Kind, Metric, SECONDS_BUCKETS};

/// Label: a route's name.
pub const LABEL_ROUTE: &str = "route";
/// Label: an endpoint as `kind:name` (`source:rabbit-in`, `sink:kafka-out`,
/// `amqp_exchange:/orders`, `kafka_topic:orders`).
pub const LABEL_ENDPOINT: &str = "endpoint";

/// Messages staged by a route, by route and source endpoint.
pub const MESSAGES_IN_TOTAL: &str = "ferry_bridge_messages_in_total";
/// Body bytes staged by a route.
pub const BYTES_IN_TOTAL: &str = "ferry_bridge_bytes_in_total";
/// Messages handed to a destination (confirmed by it), by route and destination.
pub const MESSAGES_OUT_TOTAL: &str = "ferry_bridge_messages_out_total";
/// Body bytes handed to a destination.
pub const BYTES_OUT_TOTAL: &str = "ferry_bridge_bytes_out_total";
/// Seconds from staging a message to its destination's confirm.
pub const DELIVERY_SECONDS: &str = "ferry_bridge_delivery_seconds";
/// Failed delivery attempts that will be retried, by route and destination.
pub const RETRIES_TOTAL: &str = "ferry_bridge_retries_total";
/// Messages moved to a route's dead-letter stage, by route and destination.
pub const DEAD_LETTERS_TOTAL: &str = "ferry_bridge_dead_letters_total";
/// Messages handed to a destination again after an attempt whose outcome was unknown
/// (a crash or lost confirm): possible duplicates, each with the same message-id.
pub const REDELIVERIES_TOTAL: &str = "ferry_bridge_redeliveries_total";
/// Upstream redeliveries recognised (by message-id or stored offset) and not staged again.
pub const SOURCE_DUPLICATES_TOTAL: &str = "ferry_bridge_source_duplicates_total";
/// Header values mapped by the fallback rule of `docs/mapping.md`.
pub const MAPPING_FALLBACKS_TOTAL: &str = "ferry_bridge_mapping_fallbacks_total";
/// Records of a Kafka-front topic a route skipped because their batch does not decode
/// (a valid CRC around malformed records); they stay in the topic.
pub const UNDECODABLE_RECORDS_TOTAL: &str = "ferry_bridge_undecodable_records_total";
/// 1 while an external source's or sink's connection is up, else 0.
pub const CONNECTION_UP: &str = "ferry_bridge_connection_up";

/// Every bridge metric.
pub const ALL: &[Metric] = &[
    Metric {
        name: MESSAGES_IN_TOTAL,
        kind: Kind::Counter,
        help: "Messages staged by a bridge route, by route and source.",
    },
    Metric {
        name: BYTES_IN_TOTAL,
        kind: Kind::Counter,
        help: "Body bytes staged by a bridge route, by route and source.",
    },
    Metric {
        name: MESSAGES_OUT_TOTAL,
        kind: Kind::Counter,
        help: "Messages confirmed by a bridge destination, by route and destination.",
    },
    Metric {
        name: BYTES_OUT_TOTAL,
        kind: Kind::Counter,
        help: "Body bytes confirmed by a bridge destination, by route and destination.",
    },
    Metric {
        name: DELIVERY_SECONDS,
        kind: Kind::Histogram(SECONDS_BUCKETS),
        help: "Seconds from staging a bridged message to its destination's confirm.",
    },
    Metric {
        name: RETRIES_TOTAL,
        kind: Kind::Counter,
        help: "Failed bridge deliveries that will be retried, by route and destination.",
    },
    Metric {
        name: DEAD_LETTERS_TOTAL,
        kind: Kind::Counter,
        help: "Bridged messages moved to the route's dead-letter stage.",
    },
    Metric {
        name: REDELIVERIES_TOTAL,
        kind: Kind::Counter,
        help: "Bridged messages handed to a destination again after an unknown outcome (same message-id).",
    },
    Metric {
        name: SOURCE_DUPLICATES_TOTAL,
        kind: Kind::Counter,
        help: "Upstream redeliveries recognised by a bridge source and not staged again.",
    },
    Metric {
        name: MAPPING_FALLBACKS_TOTAL,
        kind: Kind::Counter,
        help: "Header values a bridge route mapped by the documented fallback rule.",
    },
    Metric {
        name: UNDECODABLE_RECORDS_TOTAL,
        kind: Kind::Counter,
        help: "Records of a Kafka-front topic a bridge route skipped because their batch does not decode; they stay in the topic.",
    },
    Metric {
        name: CONNECTION_UP,
        kind: Kind::Gauge,
        help: "1 while a bridge source's or sink's connection is up, else 0.",
    },
];
