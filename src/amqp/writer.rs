//! The connection's writer: one task owns the socket's write half, takes encoded frames
//! from every channel in order, coalesces what is queued into one write, and sends a
//! heartbeat whenever the connection has been quiet for half the heartbeat interval.

use crate::amqp::codec::HEARTBEAT;
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
}

/// Starts a writer over `socket`; it ends when every [`Writer`] is dropped (after writing
/// what was queued) or the socket fails.
pub fn spawn<W>(socket: W, heartbeat: Option<Duration>) -> (Writer, tokio::task::JoinHandle<()>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(QUEUE);
    let task = tokio::spawn(run(socket, rx, heartbeat));
    (Writer { tx }, task)
}

async fn run<W: AsyncWrite + Unpin>(
    socket: W,
    mut rx: mpsc::Receiver<Vec<u8>>,
    heartbeat: Option<Duration>,
) {
    let mut out = BufWriter::with_capacity(BUFFER, socket);
    // Heartbeats go out at half the negotiated interval, as RabbitMQ sends them.
    let quiet = heartbeat.map(|h| (h / 2).max(Duration::from_millis(100)));
    loop {
        let next = match quiet {
            Some(q) => match tokio::time::timeout(q, rx.recv()).await {
                Ok(next) => next,
                Err(_quiet) => Some(HEARTBEAT.to_vec()),
            },
            None => rx.recv().await,
        };
        let Some(frames) = next else { break };
        if out.write_all(&frames).await.is_err() {
            return;
        }
        // Coalesce whatever else is already queued into the same write.
        while let Ok(more) = rx.try_recv() {
            if out.write_all(&more).await.is_err() {
                return;
            }
        }
        if out.flush().await.is_err() {
            return;
        }
    }
    let _ = out.flush().await;
    let _ = out.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn frames_are_written_in_order_then_the_socket_closes() {
        let (client, server) = tokio::io::duplex(1024);
        let (writer, task) = spawn(server, None);
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
        let (_writer, _task) = spawn(server, Some(Duration::from_secs(2)));
        let mut frame = [0u8; 8];
        client.read_exact(&mut frame).await.unwrap();
        assert_eq!(frame, HEARTBEAT);
    }
}
