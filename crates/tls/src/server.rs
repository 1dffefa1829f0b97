//! The accept loop shared by every front (AMQP, Kafka): a connection limit, backoff on
//! accept errors, the TLS handshake on TLS listeners, one task per connection, and a drain
//! on shutdown.
//!
//! Modelled on mini-redis's server: a semaphore bounds live connections (at the limit the
//! loop stops accepting until one closes, so the kernel's backlog absorbs the burst), and
//! each connection gets a child of the shutdown token so it can finish the frame it is on,
//! say goodbye in its protocol, and close. A front with several listeners (plaintext and
//! TLS) runs one loop per listener over one shared limit. The TLS handshake runs in the
//! connection's own task, so a slow client never holds up the accept loop.

use crate::{Acceptor, Stream};
use ferry_auth::peer::Peer;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// A bound listen socket and how its connections begin.
pub struct Listener {
    /// The socket.
    pub tcp: TcpListener,
    /// The config key that set its address (`amqp.tls_listen`), for log lines.
    pub key: String,
    /// The TLS handshake every connection goes through first; `None` for plaintext.
    pub tls: Option<Acceptor>,
}

/// First pause after a failed accept (for example, out of file descriptors).
const ACCEPT_BACKOFF_INITIAL: Duration = Duration::from_millis(10);
/// Longest pause after repeated failed accepts.
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The connection limit one front's listeners share: at most `max_connections` at once.
pub fn limit(max_connections: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(max_connections.max(1)))
}

/// Accepts connections on `listener` until `shutdown` is cancelled, running
/// `handle(stream, peer, connection_shutdown)` for each (after its TLS handshake on a TLS
/// listener), while `limit` has a permit; then waits for every connection task to end (the
/// daemon's drain bounds the wait).
pub async fn serve<H, F>(
    name: &'static str,
    listener: Listener,
    limit: Arc<Semaphore>,
    shutdown: CancellationToken,
    handle: H,
) where
    H: Fn(Stream, Peer, CancellationToken) -> F + Send + Sync + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let Listener { tcp, key, tls } = listener;
    crate::accept::export_counters(name, tls.is_some());
    let handle = Arc::new(handle);
    let key: Arc<str> = key.into();
    let mut connections = JoinSet::new();
    let mut backoff = ACCEPT_BACKOFF_INITIAL;
    loop {
        let permit = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = limit.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let accepted = tokio::select! {
            () = shutdown.cancelled() => break,
            accepted = tcp.accept() => accepted,
        };
        match accepted {
            Ok((stream, addr)) => {
                backoff = ACCEPT_BACKOFF_INITIAL;
                let _ = stream.set_nodelay(true);
                debug!(server = name, peer = %addr, "connection accepted");
                let token = shutdown.child_token();
                let (handle, tls, key) = (handle.clone(), tls.clone(), key.clone());
                connections.spawn(async move {
                    let started = match tls {
                        None => Some((Stream::Plain(stream), Peer::plaintext(addr))),
                        Some(tls) => tokio::select! {
                            () = token.cancelled() => None,
                            done = tls.accept(name, &key, stream, addr) => done,
                        },
                    };
                    if let Some((stream, peer)) = started {
                        handle(stream, peer, token).await;
                    }
                    drop(permit);
                });
            }
            Err(e) => {
                warn!(server = name, error = %e, "accept failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
            }
        }
        // Forget connections that ended, so the set holds only live ones.
        while connections.try_join_next().is_some() {}
    }
    drop(tcp);
    while connections.join_next().await.is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    #[tokio::test]
    async fn serves_connections_then_drains_on_shutdown() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let listener = Listener {
            tcp: listener,
            key: "test.listen".to_owned(),
            tls: None,
        };
        let server = tokio::spawn(serve(
            "echo",
            listener,
            limit(2),
            shutdown.clone(),
            |mut s, _, stop| async move {
                let mut buf = [0u8; 4];
                tokio::select! {
                    () = stop.cancelled() => { let _ = s.write_all(b"bye!").await; }
                    r = s.read_exact(&mut buf) => { if r.is_ok() { let _ = s.write_all(&buf).await; } }
                }
            },
        ));
        let mut c = TcpStream::connect(addr).await.unwrap();
        c.write_all(b"ping").await.unwrap();
        let mut out = [0u8; 4];
        c.read_exact(&mut out).await.unwrap();
        assert_eq!(&out, b"ping");

        let mut idle = TcpStream::connect(addr).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        shutdown.cancel();
        idle.read_exact(&mut out).await.unwrap();
        assert_eq!(&out, b"bye!", "a live connection hears the shutdown");
        tokio::time::timeout(Duration::from_secs(5), server)
            .await
            .unwrap()
            .unwrap();
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "the listener is closed"
        );
    }
}
