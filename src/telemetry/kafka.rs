//! The metrics of the Kafka front.

use super::names::Metric;

/// Every metric of the Kafka front.
pub const ALL: &[Metric] = &[];
