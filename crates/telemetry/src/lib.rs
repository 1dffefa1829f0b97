//! Telemetry: every metric name Ferry exports, described once, and the facts about the
//! process and its file system that some of them report.
//!
//! Metric names, kinds (with histogram buckets) and label keys live in these modules and
//! nowhere else: [`names`] for the store, stages and process, [`amqp`] for the AMQP front,
//! [`kafka`] for the Kafka front, [`bridge`] for the bridge's routes, [`auth`] for logins,
//! [`tls`] for the TLS listeners. Code records metrics through their constants; the Grafana
//! dashboard, the alert rules and `docs/operations.md` may use only names [`all`] lists
//! (tests check this). [`compat`] holds the same data under the names of RabbitMQ's
//! Prometheus plugin and of kafka_exporter, so dashboards built for those work too.
//! [`process`] reads the process's own resources and [`file_system`] the free space where
//! a path lives; [`memory_watermark`] raises RabbitMQ's memory alarm from the process's
//! resident memory, holding publishers back while it is up.
//!
//! The bottom of the crate graph: every layer records its metrics here, and this crate
//! uses none of Ferry's others.

pub mod amqp;
pub mod auth;
pub mod bridge;
pub mod compat;
pub mod file_system;
pub mod kafka;
pub mod memory_watermark;
pub mod names;
pub mod process;
pub mod tls;

use names::{Kind, Metric};

/// Every metric Ferry exports under its own names.
pub fn all() -> impl Iterator<Item = &'static Metric> {
    [
        names::ALL,
        amqp::ALL,
        kafka::ALL,
        bridge::ALL,
        auth::ALL,
        tls::ALL,
    ]
    .into_iter()
    .flatten()
}

/// Registers a help text for every metric in [`all`], so `/metrics` explains each series
/// even before its first sample.
pub fn describe_all() {
    let kafka_exporter = compat::kafka_exporter::ALL.iter().map(|(m, _)| m);
    for m in all().chain(kafka_exporter) {
        match m.kind {
            Kind::Counter => metrics::describe_counter!(m.name, m.help),
            Kind::Gauge => metrics::describe_gauge!(m.name, m.help),
            Kind::Histogram(_) => metrics::describe_histogram!(m.name, m.help),
        }
    }
}
