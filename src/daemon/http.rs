//! The operations HTTP server: `/metrics`, `/metrics/per-object`, `/healthz` and
//! `/readyz` on `metrics.listen`, over HTTPS with `metrics.tls`; and the [`Server`] it
//! runs on, which the management API ([`crate::management`]) shares. The two metrics
//! paths are RabbitMQ's Prometheus plugin's: both serve every series, with RabbitMQ's
//! per-object series summed in `/metrics` and labelled per queue in `/metrics/per-object`.
//!
//! It stays up through the shutdown drain, so `/readyz` can answer 503 ("shutting down")
//! while in-flight work finishes and load balancers stop sending traffic; it is the last
//! thing the daemon stops. `/readyz` also lists the state of each of the bridge's
//! external brokers, one per line after `ready`.

use crate::config::metrics::LISTEN_KEY;
use crate::server::Listener;
use crate::store::Database;
use crate::telemetry::compat::rabbitmq::{self, Detail};
use crate::tls::{Acceptor, Stream};
use axum::Router;
use axum::extract::State;
use axum::extract::connect_info::Connected;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::serve::IncomingStream;
use metrics_exporter_prometheus::PrometheusHandle;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long `/readyz` waits for the store to answer before calling it unavailable; below
/// the usual probe timeout so the probe sees a reason, not a timeout.
pub const READY_PING_TIMEOUT: Duration = Duration::from_secs(2);

/// HTTPS connections being set up, or set up and not yet taken by the server, at once.
const HTTPS_BACKLOG: usize = 64;

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
    pub bridge: crate::bridge::status::Status,
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
    let server = Server {
        name: "metrics",
        key: LISTEN_KEY,
        tls,
    };
    server.serve(listener, router(endpoints), stop).await
}

/// An HTTP server of the daemon: the operations server, the management API.
pub struct Server {
    /// Its name in the accept loop's logs and metrics.
    pub name: &'static str,
    /// The config key of its listen address.
    pub key: &'static str,
    /// Its TLS handshake, for HTTPS.
    pub tls: Option<Acceptor>,
}

impl Server {
    /// Serves `router` on `listener` — HTTPS when the server has a TLS handshake — until
    /// `stop` is cancelled, then finishes the requests in progress. Handlers may read the
    /// client's address (`ConnectInfo<ClientAddr>`).
    ///
    /// # Errors
    /// The I/O error that ended the server early.
    pub async fn serve(
        self,
        listener: TcpListener,
        router: Router,
        stop: CancellationToken,
    ) -> io::Result<()> {
        let service = router.into_make_service_with_connect_info::<ClientAddr>();
        match self.tls {
            None => {
                axum::serve(listener, service)
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await
            }
            Some(tls) => {
                let https = Https::start(listener, tls, self.name, self.key, stop.clone())?;
                axum::serve(https, service)
                    .with_graceful_shutdown(stop.cancelled_owned())
                    .await
            }
        }
    }
}

/// The address of an HTTP client, over HTTP or HTTPS (`ConnectInfo<ClientAddr>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub SocketAddr);

impl Connected<IncomingStream<'_, TcpListener>> for ClientAddr {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        Self(*stream.remote_addr())
    }
}

impl Connected<IncomingStream<'_, Https>> for ClientAddr {
    fn connect_info(stream: IncomingStream<'_, Https>) -> Self {
        Self(*stream.remote_addr())
    }
}

/// HTTPS connections for axum: the shared accept loop ([`crate::server::serve`]) takes
/// each connection through its TLS handshake in a task of its own and hands the finished
/// ones over.
pub struct Https {
    /// Connections past their handshake.
    ready: mpsc::Receiver<(Stream, SocketAddr)>,
    /// The bound address.
    local: SocketAddr,
}

impl Https {
    /// Starts accepting on `tcp` (the server `name`, listening on config key `key`) until
    /// `stop`.
    fn start(
        tcp: TcpListener,
        tls: Acceptor,
        name: &'static str,
        key: &str,
        stop: CancellationToken,
    ) -> io::Result<Self> {
        let local = tcp.local_addr()?;
        let (tx, ready) = mpsc::channel(HTTPS_BACKLOG);
        let listener = Listener {
            tcp,
            key: key.to_owned(),
            tls: Some(tls),
        };
        tokio::spawn(crate::server::serve(
            name,
            listener,
            crate::server::limit(HTTPS_BACKLOG),
            stop,
            move |stream, peer, _| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send((stream, peer.addr)).await;
                }
            },
        ));
        Ok(Self { ready, local })
    }
}

impl axum::serve::Listener for Https {
    type Io = Stream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Stream, SocketAddr) {
        match self.ready.recv().await {
            Some(ready) => ready,
            // The accept loop stopped (shutdown): nothing more comes.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.local)
    }
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
            let lines = endpoints.bridge.lines();
            let detail = lines.iter().fold(String::new(), |out, l| out + "\n" + l);
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
    use crate::config::StoreConfig;
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
            bridge: crate::bridge::status::Status::default(),
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
