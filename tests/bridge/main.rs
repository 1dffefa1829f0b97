//! The bridge: the AMQP ↔ Kafka mapping, routes between Ferry's own fronts, and sources and
//! sinks on an external Kafka (librdkafka's mock cluster) and an external RabbitMQ (the
//! run's private node), under `kill -9` too, and large messages through routes. One test binary; one module per subject.

use ferry_test_support as common;

mod fronts;
mod kafka;
mod kafka_sasl;
mod large;
mod mapping;
mod rabbitmq;
mod rabbitmq_tls;
