//! The process-wide Prometheus recorder behind `/metrics`.
//!
//! Installed once at startup: every `metrics::counter!`/`gauge!`/`histogram!` in Ferry lands
//! here, and the HTTP server renders it. Histograms get explicit buckets so Prometheus sees
//! real `_bucket` series (the exporter would otherwise render summaries, which cannot be
//! aggregated across instances).

use ferry_config::Config;
use ferry_store::EngineKind;
use ferry_telemetry::compat::rabbitmq::state::Node;
use ferry_telemetry::{self as telemetry, names, names::Kind};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often histogram samples are folded into their buckets; without this upkeep they
/// accumulate between scrapes.
pub const UPKEEP_PERIOD: Duration = Duration::from_secs(5);

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
    for metric in telemetry::all() {
        if let Kind::Histogram(buckets) = metric.kind {
            builder = builder
                .set_buckets_for_metric(Matcher::Full(metric.name.to_owned()), buckets)
                .map_err(|e: BuildError| RecorderError::Buckets {
                    metric: metric.name,
                    reason: e.to_string(),
                })?;
        }
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

/// This instance as RabbitMQ's identity labels name it: node `ferry-NODE_ID@HOSTNAME`
/// (`kafka.node_id`), and the cluster of the instances sharing the store, named by
/// `store.prefix`; with the memory high-water mark (`daemon.max_memory_mb`) and, for the embedded
/// engine, the store's directory, whose file system's free space is reported.
pub fn rabbitmq_node(config: &Config) -> Node {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    let prefix = &config.store.prefix;
    Node {
        node: format!("ferry-{}@{host}", config.kafka.node_id),
        cluster: format!("ferry-{prefix}"),
        cluster_permanent_id: format!("ferry-cluster-{prefix}"),
        memory_limit_bytes: ferry_telemetry::memory_watermark::limit_bytes(
            config.daemon.max_memory_mb,
        ),
        data_dir: (config.store.engine == EngineKind::Embedded).then(|| config.store.path.clone()),
        disk_limit_bytes: (config.store.engine == EngineKind::Embedded
            && config.store.min_free_disk_mb > 0)
            .then(|| config.store.min_free_disk_mb.saturating_mul(1024 * 1024)),
    }
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
