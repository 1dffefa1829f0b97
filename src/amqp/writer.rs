//! The connection's writer: one task owns the socket's write half, takes encoded frames
//! from every channel in order, coalesces what is queued into one write, and sends a
//! heartbeat whenever the connection has been quiet for half the heartbeat interval. A
//! write that makes no progress for `amqp.send_timeout_ms` (the client reads nothing) ends
//! the writer, which ends the connection ([`Writer::closed`]).

use crate::amqp::codec::HEARTBEAT;
use std::future::Future;
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;

/// Encoded frames queued for the socket before senders wait (back-pressure from a slow
/// client reaches the channels that deliver to it).
const QUEUE: usize = 256;
/// Bytes buffered before a write reaches the socket.
const BUFFER: usize = 128 * 1024;

/// The sending side: clone it into every channel.
#[derive(Debug, Clone)]
pub struct Writer {
    tx: mpsc::Sender<Vec<u8>>,
}

/// The writer task is gone (the socket failed or the connection ended).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the connection's socket is closed")]
pub struct WriterClosed;

impl Writer {
    /// Queues encoded frames, waiting while the queue is full.
    ///
    /// # Errors
    /// [`WriterClosed`] when the writer task has ended.
    pub async fn send(&self, frames: Vec<u8>) -> Result<(), WriterClosed> {
        if frames.is_empty() {
            return Ok(());
        }
        self.tx.send(frames).await.map_err(|_| WriterClosed)
    }

    /// Resolves once the writer task has ended: the socket failed, or a write made no
    /// progress within the send timeout.
    pub async fn closed(&self) {
        self.tx.closed().await;
    }
}

/// How the writer treats its socket.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// The negotiated heartbeat interval, if any.
    pub heartbeat: Option<Duration>,
    /// The longest a write may make no progress (`amqp.send_timeout_ms`), if bounded.
    pub send_timeout: Option<Duration>,
}

/// Starts a writer over `socket`; it ends when every [`Writer`] is dropped (after writing
/// what was queued) or the socket fails.
pub fn spawn<W>(socket: W, timing: Timing) -> (Writer, tokio::task::JoinHandle<()>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(QUEUE);
    let task = tokio::spawn(run(socket, rx, timing));
    (Writer { tx }, task)
}

async fn run<W: AsyncWrite + Unpin>(socket: W, mut rx: mpsc::Receiver<Vec<u8>>, timing: Timing) {
    let mut out = BufWriter::with_capacity(BUFFER, socket);
    // Heartbeats go out at half the negotiated interval, as RabbitMQ sends them.
    let quiet = timing
        .heartbeat
        .map(|h| (h / 2).max(Duration::from_millis(100)));
    let limit = timing.send_timeout;
    loop {
        let next = match quiet {
            Some(q) => match tokio::time::timeout(q, rx.recv()).await {
                Ok(next) => next,
                Err(_quiet) => Some(HEARTBEAT.to_vec()),
            },
            None => rx.recv().await,
        };
        let Some(frames) = next else { break };
        if !progresses(limit, out.write_all(&frames)).await {
            return;
        }
        // Coalesce whatever else is already queued into the same write.
        while let Ok(more) = rx.try_recv() {
            if !progresses(limit, out.write_all(&more)).await {
                return;
            }
        }
        if !progresses(limit, out.flush()).await {
            return;
        }
    }
    if progresses(limit, out.flush()).await {
        let _ = progresses(limit, out.shutdown()).await;
    }
}

/// Whether `write` succeeds within `limit`.
async fn progresses(
    limit: Option<Duration>,
    write: impl Future<Output = std::io::Result<()>>,
) -> bool {
    match limit {
        Some(limit) => matches!(tokio::time::timeout(limit, write).await, Ok(Ok(()))),
        None => write.await.is_ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn timing(heartbeat: Option<Duration>, send_timeout: Option<Duration>) -> Timing {
        Timing {
            heartbeat,
            send_timeout,
        }
    }

    #[tokio::test]
    async fn frames_are_written_in_order_then_the_socket_closes() {
        let (client, server) = tokio::io::duplex(1024);
        let (writer, task) = spawn(server, timing(None, None));
        writer.send(b"one ".to_vec()).await.unwrap();
        writer.send(b"two".to_vec()).await.unwrap();
        drop(writer);
        task.await.unwrap();
        let mut got = String::new();
        let mut client = client;
        client.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "one two");
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_connection_gets_heartbeats() {
        let (mut client, server) = tokio::io::duplex(1024);
        let (_writer, _task) = spawn(server, timing(Some(Duration::from_secs(2)), None));
        let mut frame = [0u8; 8];
        client.read_exact(&mut frame).await.unwrap();
        assert_eq!(frame, HEARTBEAT);
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_that_reads_nothing_ends_the_writer_after_the_send_timeout() {
        let (client, server) = tokio::io::duplex(1024);
        let limit = Duration::from_secs(30);
        let (writer, task) = spawn(server, timing(None, Some(limit)));
        let started = tokio::time::Instant::now();
        // More than the pipe and the writer's buffer hold; the client never reads.
        while writer.send(vec![0; 64 * 1024]).await.is_ok() {}
        writer.closed().await;
        task.await.unwrap();
        assert!(started.elapsed() >= limit);
        drop(client);
    }
}
