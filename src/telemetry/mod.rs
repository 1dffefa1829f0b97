//! Telemetry: every metric name Ferry exports, described once.
//!
//! Metric names and label keys live in [`names`] and nowhere else; code records metrics
//! through these constants, and the Grafana dashboard and alert rules in `deploy/` may use
//! only names listed in [`names::ALL`] (a test checks this).

pub mod names;

/// Registers a help text and unit for every metric in [`names::ALL`], so `/metrics`
/// explains each series even before its first sample.
pub fn describe_all() {
    for m in names::ALL {
        match m.kind {
            names::Kind::Counter => metrics::describe_counter!(m.name, m.help),
            names::Kind::Gauge => metrics::describe_gauge!(m.name, m.help),
            names::Kind::Histogram => metrics::describe_histogram!(m.name, m.help),
        }
    }
}
