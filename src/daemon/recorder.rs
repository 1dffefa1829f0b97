//! The process-wide Prometheus recorder behind `/metrics`.
//!
//! Installed once at startup: every `metrics::counter!`/`gauge!`/`histogram!` in Ferry lands
//! here, and the HTTP server renders it. Histograms get explicit buckets so Prometheus sees
//! real `_bucket` series (the exporter would otherwise render summaries, which cannot be
//! aggregated across instances).

use crate::telemetry::{self, names};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often histogram samples are folded into their buckets; without this upkeep they
/// accumulate between scrapes.
pub const UPKEEP_PERIOD: Duration = Duration::from_secs(5);

/// Bucket upper bounds of `ferry_store_commit_seconds`: 100 µs (a batched commit on fast
/// storage) to 5 s (FoundationDB's transaction time limit).
const COMMIT_SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// Bucket upper bounds of `ferry_store_commit_batch_size`: powers of two up to the largest
/// `store.max_batch`.
const COMMIT_BATCH_SIZE_BUCKETS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0,
    16384.0, 32768.0, 65535.0,
];

/// The buckets of every histogram in [`names::ALL`].
const BUCKETS: &[(&str, &[f64])] = &[
    (names::STORE_COMMIT_SECONDS, COMMIT_SECONDS_BUCKETS),
    (names::STORE_COMMIT_BATCH_SIZE, COMMIT_BATCH_SIZE_BUCKETS),
];

/// Why the recorder could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum RecorderError {
    /// A bucket list was rejected by the exporter.
    #[error("the buckets of metric {metric} are invalid: {reason}")]
    Buckets {
        /// The histogram's name.
        metric: &'static str,
        /// The exporter's explanation.
        reason: String,
    },
    /// Another recorder was installed first in this process.
    #[error("a metrics recorder is already installed in this process")]
    AlreadyInstalled,
}

/// Builds the recorder with Ferry's histogram buckets, without installing it.
fn build() -> Result<metrics_exporter_prometheus::PrometheusRecorder, RecorderError> {
    let mut builder = PrometheusBuilder::new();
    for &(metric, buckets) in BUCKETS {
        builder = builder
            .set_buckets_for_metric(Matcher::Full(metric.to_owned()), buckets)
            .map_err(|e: BuildError| RecorderError::Buckets {
                metric,
                reason: e.to_string(),
            })?;
    }
    Ok(builder.build_recorder())
}

/// Installs the global recorder, describes every metric and sets `ferry_build_info`.
/// Returns the handle that renders `/metrics`.
///
/// # Errors
/// [`RecorderError::AlreadyInstalled`] when called twice in one process.
pub fn install() -> Result<PrometheusHandle, RecorderError> {
    let recorder = build()?;
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|_| RecorderError::AlreadyInstalled)?;
    telemetry::describe_all();
    metrics::gauge!(names::BUILD_INFO, names::LABEL_VERSION => env!("CARGO_PKG_VERSION")).set(1.0);
    Ok(handle)
}

/// Runs the recorder's upkeep every [`UPKEEP_PERIOD`] until `shutdown` is cancelled.
pub async fn upkeep(handle: PrometheusHandle, shutdown: CancellationToken) {
    let mut ticks = tokio::time::interval(UPKEEP_PERIOD);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = ticks.tick() => handle.run_upkeep(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics::with_local_recorder;

    #[test]
    fn every_histogram_has_buckets() {
        for metric in names::ALL
            .iter()
            .filter(|m| m.kind == names::Kind::Histogram)
        {
            assert!(
                BUCKETS.iter().any(|(name, _)| *name == metric.name),
                "{} has no buckets, so it would render as a summary",
                metric.name
            );
        }
    }

    #[test]
    fn histograms_render_as_buckets() {
        let recorder = build().unwrap();
        let handle = recorder.handle();
        with_local_recorder(&recorder, || {
            metrics::histogram!(names::STORE_COMMIT_SECONDS).record(0.003);
            metrics::histogram!(names::STORE_COMMIT_BATCH_SIZE).record(10.0);
        });
        let text = handle.render();
        assert!(
            text.contains("ferry_store_commit_seconds_bucket{le=\"0.005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("ferry_store_commit_batch_size_bucket{le=\"16\"} 1"),
            "{text}"
        );
    }
}
