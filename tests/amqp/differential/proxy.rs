//! A one-connection TCP proxy that can cut both sides at once, as a network failure does:
//! abruptly (bytes the proxy had not passed on are lost, and which the broker read before
//! it saw the end is a race), or flushed (everything the client wrote before the cut
//! reaches the broker, then the end of the stream: the client's socket shut down under
//! it, as `tests/python/amqp_acks_then_drop.py` does with pika).

use crate::common::amqp::WAIT;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A proxy for one client connection to a broker.
pub struct Proxy {
    /// Where the client connects.
    pub addr: SocketAddr,
    /// Cuts the connection: `true` flushed, `false` abrupt.
    cut: Option<oneshot::Sender<bool>>,
    /// Accepts the client, connects the broker and copies both ways until cut.
    task: JoinHandle<()>,
}

impl Proxy {
    /// A proxy on a free loopback port that passes its first connection on to `upstream`.
    pub async fn open(upstream: SocketAddr) -> Proxy {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, cut_rx) = oneshot::channel();
        let task = tokio::spawn(async move {
            let Ok((client, _)) = listener.accept().await else {
                return;
            };
            let Ok(broker) = TcpStream::connect(upstream).await else {
                return;
            };
            pump(client, broker, cut_rx).await;
        });
        Proxy {
            addr,
            cut: Some(cut),
            task,
        }
    }

    /// Cuts both sides (`flushed` as the module says) and waits until both sockets are
    /// closed.
    ///
    /// # Panics
    /// On a second cut.
    pub async fn cut(&mut self, flushed: bool) {
        let cut = self.cut.take().expect("a proxy is cut once");
        // The connection may have ended already.
        let _ = cut.send(flushed);
        tokio::time::timeout(WAIT, &mut self.task)
            .await
            .expect("the proxy closed its sockets in time")
            .unwrap();
    }
}

/// Copies both ways until either side ends or the cut comes. Each chunk read is written
/// whole before the next read, so nothing read is dropped by the cut.
async fn pump(mut client: TcpStream, mut broker: TcpStream, mut cut: oneshot::Receiver<bool>) {
    let mut up = vec![0u8; 64 * 1024];
    let mut down = vec![0u8; 64 * 1024];
    let flushed = loop {
        tokio::select! {
            biased;
            how = &mut cut => break how.unwrap_or(false),
            read = client.read(&mut up) => match read {
                Ok(n) if n > 0 => {
                    if broker.write_all(&up[..n]).await.is_err() {
                        return;
                    }
                }
                _ => return,
            },
            read = broker.read(&mut down) => match read {
                Ok(n) if n > 0 => {
                    if client.write_all(&down[..n]).await.is_err() {
                        return;
                    }
                }
                _ => return,
            },
        }
    };
    if !flushed {
        // Dropping both streams closes both sides, losing what they hold.
        return;
    }
    // On loopback, what the client wrote is already in the proxy's socket. Read it with
    // the system's read (tokio's `try_read` trusts readiness it may not have seen yet).
    let mut client = client.into_std().unwrap();
    while let Ok(n) = std::io::Read::read(&mut client, &mut up) {
        if n == 0 || broker.write_all(&up[..n]).await.is_err() {
            break;
        }
    }
    drop(client);
    let _ = broker.shutdown().await;
    // Read what the broker still sends until it closes, so that closing the socket with
    // unread bytes does not reset the connection under what the broker reads.
    let _ = tokio::time::timeout(WAIT, async {
        while let Ok(n) = broker.read(&mut down).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}
