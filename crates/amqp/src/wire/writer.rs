//! The connection's writer: one task owns the socket's write half, takes encoded frames
//! from every channel in order, coalesces what is queued into one write, and sends a
//! heartbeat whenever the connection has been quiet for half the heartbeat interval. A
//! write that makes no progress for `amqp.send_timeout_ms` (the client reads nothing) ends
//! the writer, which ends the connection ([`Writer::closed`]). What is queued or being
//! written is bounded in bytes ([`QUEUE_BYTES`]): frames keep their share of it until they
//! are in the socket's buffer, so a client that reads slowly holds at most that much of
//! Ferry's memory (beside the socket's buffers), however large the deliveries waiting for
//! it, and the channels that deliver to it wait in [`Writer::send`]. A writer that ends
//! because a write failed or stalled resets the connection
//! ([`Resettable::reset_on_close`]), so a client that reads nothing learns of it at once.

use crate::wire::codec::HEARTBEAT;
use ferry_tls::stream::Resettable;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

/// Writes queued for the socket before senders wait (back-pressure from a slow client
/// reaches the channels that deliver to it).
const QUEUE: usize = 256;
/// Bytes queued for the socket or being written before senders wait; a larger write waits
/// for the queue to empty and then goes alone.
pub(crate) const QUEUE_BYTES: usize = 4 * 1024 * 1024;

/// Encoded frames and their share of [`QUEUE_BYTES`], returned once written.
type Queued = (Vec<u8>, OwnedSemaphorePermit);
/// Bytes buffered before a write reaches the socket.
const BUFFER: usize = 128 * 1024;

/// The sending side: clone it into every channel.
#[derive(Debug, Clone)]
pub(crate) struct Writer {
    tx: mpsc::Sender<Queued>,
    /// Bytes that may still be queued.
    room: Arc<Semaphore>,
}

/// The writer task is gone (the socket failed or the connection ended).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("the connection's socket is closed")]
pub(crate) struct WriterClosed;

impl Writer {
    /// Queues encoded frames, waiting while the queue is full (in writes or in bytes).
    ///
    /// # Errors
    /// [`WriterClosed`] when the writer task has ended.
    pub(crate) async fn send(&self, frames: Vec<u8>) -> Result<(), WriterClosed> {
        if frames.is_empty() {
            return Ok(());
        }
        let bytes = u32::try_from(frames.len().min(QUEUE_BYTES)).unwrap_or(u32::MAX);
        let share = tokio::select! {
            share = self.room.clone().acquire_many_owned(bytes) => {
                share.map_err(|_| WriterClosed)?
            }
            () = self.tx.closed() => return Err(WriterClosed),
        };
        self.tx
            .send((frames, share))
            .await
            .map_err(|_| WriterClosed)
    }

    /// Resolves once the writer task has ended: the socket failed, or a write made no
    /// progress within the send timeout.
    pub(crate) async fn closed(&self) {
        self.tx.closed().await;
    }
}

/// How the writer treats its socket.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// The negotiated heartbeat interval, if any.
    pub heartbeat: Option<Duration>,
    /// The longest a write may make no progress (`amqp.send_timeout_ms`), if bounded.
    pub send_timeout: Option<Duration>,
}

/// Starts a writer over `socket`; it ends when every [`Writer`] is dropped (after writing
/// what was queued) or the socket fails.
pub(crate) fn spawn<W>(socket: W, timing: Timing) -> (Writer, tokio::task::JoinHandle<()>)
where
    W: AsyncWrite + Resettable + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(QUEUE);
    let task = tokio::spawn(run(socket, rx, timing));
    let room = Arc::new(Semaphore::new(QUEUE_BYTES));
    (Writer { tx, room }, task)
}

async fn run<W: AsyncWrite + Resettable + Unpin>(
    socket: W,
    rx: mpsc::Receiver<Queued>,
    timing: Timing,
) {
    let mut out = BufWriter::with_capacity(BUFFER, socket);
    if !write_all_queued(&mut out, rx, timing).await {
        let _ = out.get_ref().reset_on_close();
    }
}

/// Writes what is queued until every [`Writer`] is dropped, then closes the socket's
/// write side; returns `false` as soon as a write fails or makes no progress within the
/// send timeout.
async fn write_all_queued<W: AsyncWrite + Unpin>(
    out: &mut BufWriter<W>,
    mut rx: mpsc::Receiver<Queued>,
    timing: Timing,
) -> bool {
    // Heartbeats go out at half the negotiated interval, as RabbitMQ sends them.
    let quiet = timing
        .heartbeat
        .map(|h| (h / 2).max(Duration::from_millis(100)));
    let limit = timing.send_timeout;
    loop {
        let next = match quiet {
            Some(q) => match tokio::time::timeout(q, rx.recv()).await {
                Ok(next) => next,
                Err(_quiet) => {
                    if progresses(limit, out.write_all(&HEARTBEAT)).await
                        && progresses(limit, out.flush()).await
                    {
                        continue;
                    }
                    return false;
                }
            },
            None => rx.recv().await,
        };
        let Some(first) = next else { break };
        if !write_queued(limit, out, first).await {
            return false;
        }
        // Coalesce whatever else is already queued into the same write.
        while let Ok(more) = rx.try_recv() {
            if !write_queued(limit, out, more).await {
                return false;
            }
        }
        if !progresses(limit, out.flush()).await {
            return false;
        }
    }
    progresses(limit, out.flush()).await && progresses(limit, out.shutdown()).await
}

/// Hands queued frames to the socket's buffer; their share of [`QUEUE_BYTES`] returns only
/// then, so frames a client does not read still count while their write waits. Returns
/// whether the write succeeded within `limit`.
async fn write_queued<W: AsyncWrite + Unpin>(
    limit: Option<Duration>,
    out: &mut BufWriter<W>,
    (frames, share): Queued,
) -> bool {
    let written = progresses(limit, out.write_all(&frames)).await;
    drop(share);
    written
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

    #[tokio::test(start_paused = true)]
    async fn frames_being_written_to_a_client_that_reads_nothing_keep_their_share_of_the_queue() {
        let (client, server) = tokio::io::duplex(1024);
        let (writer, _task) = spawn(server, timing(None, None));
        // Every byte the queue allows, more than the pipe and the writer's buffer hold: the
        // writer takes it off the queue and waits for the client to read.
        writer.send(vec![0; QUEUE_BYTES]).await.unwrap();
        // Nothing more is taken while those bytes are unwritten (paused time passes only
        // once every task waits, so this does not depend on the machine's speed).
        let more = tokio::time::timeout(Duration::from_secs(60), writer.send(vec![0; 1])).await;
        assert!(
            more.is_err(),
            "a send was taken while the queue's bytes were being written"
        );
        drop(client);
    }

    #[tokio::test(start_paused = true)]
    async fn what_waits_for_a_client_that_reads_nothing_is_bounded_in_bytes() {
        let (client, server) = tokio::io::duplex(1024);
        let (writer, _task) = spawn(server, timing(None, None));
        let queued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = queued.clone();
        let sender = tokio::spawn(async move {
            for _ in 0..1000 {
                writer.send(vec![0; 64 * 1024]).await.unwrap();
                counted.fetch_add(64 * 1024, std::sync::atomic::Ordering::SeqCst);
            }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        // The queue's bytes, plus one write in the socket's buffer and one being taken.
        let held = queued.load(std::sync::atomic::Ordering::SeqCst);
        assert!(held <= QUEUE_BYTES + BUFFER + 2 * 64 * 1024, "{held}");
        assert!(!sender.is_finished());
        drop(client);
    }
}
