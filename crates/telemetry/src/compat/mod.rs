//! Metrics under other projects' names, so dashboards and alerts users already have work
//! pointed at Ferry: RabbitMQ's Prometheus plugin ([`rabbitmq`]) and kafka_exporter
//! ([`kafka_exporter`]).
//!
//! Each name here has the type and label names its project gives it (tests compare them
//! with a live RabbitMQ node and with kafka_exporter's source). A series is exported only
//! where Ferry has the data to fill it honestly; what the projects export and Ferry
//! cannot (Erlang VM internals, replication) is listed, with the reason, in
//! [`rabbitmq::NOT_APPLICABLE`] and in `docs/operations.md`.

pub mod kafka_exporter;
pub mod rabbitmq;
