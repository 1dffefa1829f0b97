//! The bridge: routes that carry messages between Ferry's fronts and external brokers
//! through durable stages, and the one mapping between AMQP and Kafka messages.

pub mod mapping;
