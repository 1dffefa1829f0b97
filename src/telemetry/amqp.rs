//! The metrics of the AMQP 0-9-1 front.

use super::names::Metric;

/// Every metric of the AMQP 0-9-1 front.
pub const ALL: &[Metric] = &[];
