//! Serving an axum router over HTTP, or over HTTPS through the shared accept loop
//! ([`crate::server::serve`], which takes each connection through its TLS handshake):
//! the daemon's operations server and the management API (`ferry-management`) both run on
//! a [`Server`]. Handlers may read the client's
//! address as `ConnectInfo<ClientAddr>`.

use crate::server::Listener;
use crate::{Acceptor, Stream};
use axum::Router;
use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use std::io;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// HTTPS connections being set up, or set up and not yet taken by the server, at once.
const HTTPS_BACKLOG: usize = 64;

/// An HTTP server: the operations server, the management API.
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
