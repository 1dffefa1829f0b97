//! A one-connection TCP proxy that can cut both sides at once, as a network failure does:
//! the client and the broker each see their socket end, and bytes the proxy had not passed
//! on yet are lost.

use std::net::SocketAddr;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// A proxy for one client connection to a broker.
pub struct Proxy {
    /// Where the client connects.
    pub addr: SocketAddr,
    /// Cuts the connection.
    cut: CancellationToken,
    /// Accepts the client, connects the broker and copies both ways until cut.
    task: JoinHandle<()>,
}

impl Proxy {
    /// A proxy on a free loopback port that passes its first connection on to `upstream`.
    pub async fn open(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = CancellationToken::new();
        let cancelled = cut.clone();
        let task = tokio::spawn(async move {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                () = cancelled.cancelled() => return,
            };
            let Ok((mut client, _)) = accepted else {
                return;
            };
            let Ok(mut broker) = TcpStream::connect(upstream).await else {
                return;
            };
            tokio::select! {
                _ = tokio::io::copy_bidirectional(&mut client, &mut broker) => {}
                () = cancelled.cancelled() => {}
            }
            // Dropping both streams here closes both sides.
        });
        Proxy { addr, cut, task }
    }

    /// Cuts both sides and waits until both sockets are closed (once: a second cut
    /// panics).
    pub async fn cut(&mut self) {
        self.cut.cancel();
        tokio::time::timeout(crate::common::amqp::WAIT, &mut self.task)
            .await
            .expect("the proxy closed its sockets in time")
            .unwrap();
    }
}
