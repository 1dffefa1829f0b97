//! The operations HTTP server: `/metrics`, `/metrics/per-object`, `/healthz` and
//! `/readyz` on `metrics.listen`, over HTTPS with `metrics.tls` (served by
//! [`crate::http_server`]). The two metrics paths are
//! RabbitMQ's Prometheus plugin's: both serve every series, with RabbitMQ's per-object
//! series summed in `/metrics` and labelled per queue in `/metrics/per-object`.
//!
//! It stays up through the shutdown drain, so `/readyz` can answer 503 ("shutting down")
//! while in-flight work finishes and load balancers stop sending traffic; it is the last
//! thing the daemon stops. `/readyz` also lists the state of each of the bridge's
//! external brokers, one per line after `ready`.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use ferry_config::metrics::LISTEN_KEY;
use ferry_store::Database;
use ferry_telemetry::compat::rabbitmq::{self, Detail};
use ferry_tls::Acceptor;
use metrics_exporter_prometheus::PrometheusHandle;
use std::io;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// How long `/readyz` waits for the store to answer before calling it unavailable; below
/// the usual probe timeout so the probe sees a reason, not a timeout.
pub const READY_PING_TIMEOUT: Duration = Duration::from_secs(2);

/// Content type of the Prometheus text exposition format.
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// What the handlers need.
#[derive(Clone)]
pub struct Endpoints {
    /// Renders the global recorder for `/metrics`.
    pub metrics: PrometheusHandle,
    /// Pinged by `/readyz`.
    pub db: Database,
    /// Cancelled when the daemon starts shutting down; `/readyz` then answers 503.
    pub shutdown: CancellationToken,
    /// The bridge's external brokers, listed by `/readyz` (a broker that is down does
    /// not make Ferry unready).
    pub bridge: ferry_bridge::status::Status,
}

/// The routes of the operations server.
pub fn router(endpoints: Endpoints) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/metrics/per-object", get(metrics_per_object))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(endpoints)
}

/// Serves [`router`] on `listener` — HTTPS when `tls` is given — until `stop` is
/// cancelled, then finishes the requests in progress.
///
/// # Errors
/// The I/O error that ended the server early.
pub async fn serve(
    listener: TcpListener,
    tls: Option<Acceptor>,
    endpoints: Endpoints,
    stop: CancellationToken,
) -> io::Result<()> {
    let server = ferry_tls::http::Server {
        name: "metrics",
        key: LISTEN_KEY,
        tls,
    };
    server.serve(listener, router(endpoints), stop).await
}

/// `GET /metrics`: every series in the Prometheus text format, RabbitMQ's per-object
/// series summed.
async fn metrics(State(endpoints): State<Endpoints>) -> impl IntoResponse {
    exposition(&endpoints, Detail::Aggregated)
}

/// `GET /metrics/per-object`: every series, RabbitMQ's queue series per queue.
async fn metrics_per_object(State(endpoints): State<Endpoints>) -> impl IntoResponse {
    exposition(&endpoints, Detail::PerObject)
}

/// Ferry's own series followed by RabbitMQ's families in `detail`'s view.
fn exposition(endpoints: &Endpoints, detail: Detail) -> impl IntoResponse + use<> {
    let mut text = endpoints.metrics.render();
    text.push_str(&rabbitmq::render::render(detail));
    ([(header::CONTENT_TYPE, PROMETHEUS_TEXT)], text)
}

/// `GET /healthz`: 200 for as long as the process serves HTTP at all.
async fn healthz() -> &'static str {
    "ok"
}

/// `GET /readyz`: 200 when the store answers and the daemon is not shutting down, otherwise
/// 503 with the reason on one line.
async fn readyz(State(endpoints): State<Endpoints>) -> (StatusCode, String) {
    if endpoints.shutdown.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down".to_owned());
    }
    match tokio::time::timeout(READY_PING_TIMEOUT, endpoints.db.ping()).await {
        Ok(Ok(())) => {
            // The free-disk alarm blocks publishers only: consumers are what frees space,
            // so the instance stays ready and says why its publishers wait.
            let alarm = endpoints
                .db
                .disk_alarm()
                .map(|a| format!("free disk alarm: {a}"));
            let lines = alarm.into_iter().chain(endpoints.bridge.lines());
            let detail = lines.fold(String::new(), |out, l| out + "\n" + &l);
            (StatusCode::OK, format!("ready{detail}"))
        }
        Ok(Err(e)) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("store unavailable: {e}"),
        ),
        Err(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "store did not answer within {} ms",
                READY_PING_TIMEOUT.as_millis()
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_store::StoreConfig;
    use metrics_exporter_prometheus::PrometheusBuilder;

    async fn endpoints(dir: &tempfile::TempDir) -> Endpoints {
        let store = StoreConfig {
            path: dir.path().join("data"),
            ..StoreConfig::default()
        };
        Endpoints {
            metrics: PrometheusBuilder::new().build_recorder().handle(),
            db: Database::open(&store).await.unwrap(),
            shutdown: CancellationToken::new(),
            bridge: ferry_bridge::status::Status::default(),
        }
    }

    #[tokio::test]
    async fn readyz_is_ready_while_the_store_answers() {
        let dir = tempfile::tempdir().unwrap();
        let (status, body) = readyz(State(endpoints(&dir).await)).await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ready"));
    }

    #[tokio::test]
    async fn readyz_is_unavailable_once_shutdown_starts() {
        let dir = tempfile::tempdir().unwrap();
        let endpoints = endpoints(&dir).await;
        endpoints.shutdown.cancel();
        let (status, body) = readyz(State(endpoints)).await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "shutting down")
        );
    }

    #[tokio::test]
    async fn healthz_says_ok() {
        assert_eq!(healthz().await, "ok");
    }
}
