//! One AMQP connection: the handshake ([`handshake`]), then a loop that reads frames,
//! hands each channel's frames to its task ([`crate::channel`]) in order, watches
//! the peer's heartbeats, tells capable clients when publishing is blocked, and closes
//! the connection on a connection exception, a client close, a dead peer or shutdown.
//!
//! Users and permissions changed in the store reach the open connections through
//! [`user_changes`].
//!
//! The socket's write half belongs to a writer task ([`writer`]); channels queue encoded
//! frames to it. A channel that fails tells this loop *before* it writes channel.close,
//! so the client's channel.close-ok can never overtake the news; the same holds for a
//! channel's close-ok after a client's channel.close.

pub(crate) mod handshake;
pub(crate) mod sasl;
pub(crate) mod user_changes;

use super::channel::{self, ChannelHandle};
use crate::state::broker::Broker;
use crate::state::consumed::ConsumedQueues;
use crate::state::context::{ConnectionContext, Control};
use crate::state::registry::{ConnectionInfo, LiveConnection};
use crate::wire::codec::{self, Frame};
use crate::wire::errors::{AmqpError, ReplyCode};
use crate::wire::writer;
use amq_protocol::protocol::{AMQPClass, channel as ch, connection};
use bytes::BytesMut;
use ferry_auth::peer::Peer;
use ferry_telemetry::amqp as metric;
use ferry_telemetry::compat::rabbitmq::state as rabbitmq;
use ferry_tls::stream::{ReadHalf, Stream};
use handshake::HandshakeError;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info};

/// How long a closing side waits for the peer's close-ok.
const CLOSE_OK_WAIT: Duration = Duration::from_secs(3);
/// How long a client that sent connection.close may take to close its socket after the
/// close-ok.
const CLOSED_WAIT: Duration = Duration::from_secs(30);
/// Bytes read from the socket at a time (more when a frame needs it).
const READ_BUFFER: usize = 64 * 1024;

/// A channel number's state.
enum Slot {
    /// Open: frames go to its task.
    Open(ChannelHandle),
    /// The client sent channel.close; the task is finishing.
    ClientClosing,
    /// We sent channel.close; waiting for the client's close-ok.
    ServerClosing,
}

/// How the connection loop ended.
enum End {
    /// The client sent connection.close.
    ClientClosed,
    /// A connection exception.
    Failed(AmqpError),
    /// The daemon is shutting down.
    Shutdown,
    /// The socket closed, failed, or the peer went silent.
    Vanished,
}

/// Keeps `ferry_amqp_connections` (and RabbitMQ's connection counts) right however the
/// connection ends.
struct Counted;

impl Counted {
    fn new() -> Self {
        metrics::gauge!(metric::CONNECTIONS).increment(1.0);
        rabbitmq::connection_opened();
        Self
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        metrics::gauge!(metric::CONNECTIONS).decrement(1.0);
        rabbitmq::connection_closed();
    }
}

/// Serves one client until it leaves or `shutdown` is cancelled.
pub(crate) async fn serve(
    broker: Arc<Broker>,
    stream: Stream,
    client: Peer,
    shutdown: CancellationToken,
) {
    let peer = client.addr;
    let local = stream.local_addr().ok();
    let (mut reader, mut write_half) = stream.into_split();
    let mut buf = BytesMut::with_capacity(READ_BUFFER);
    let handshake = tokio::select! {
        () = shutdown.cancelled() => return,
        r = tokio::time::timeout(
            broker.config.handshake_timeout(),
            handshake::run(&broker, &client, &mut reader, &mut write_half, &mut buf),
        ) => r,
    };
    let negotiated = match handshake {
        Ok(Ok(n)) => n,
        Ok(Err(HandshakeError::Refused(e))) => {
            info!(%peer, error = %e, "AMQP connection refused");
            e.count();
            let mut out = Vec::new();
            codec::encode_method(&mut out, 0, close_method(&e));
            if write_half.write_all(&out).await.is_ok() {
                let _ = write_half.flush().await;
                await_close_ok(&mut reader, &mut buf, broker.config.frame_max).await;
            }
            return;
        }
        Ok(Err(HandshakeError::ClientHello)) => {
            ferry_tls::accept::count_failure(
                "amqp",
                ferry_tls::accept::Reason::ClientHelloOnPlaintext,
            );
            info!(%peer, "closing a connection: a TLS ClientHello arrived on the plaintext AMQP port; amqps clients connect to amqp.tls_listen");
            return;
        }
        Ok(Err(HandshakeError::ProtocolHeader | HandshakeError::Io)) | Err(_) => {
            debug!(%peer, "AMQP handshake did not complete");
            return;
        }
    };
    let id = match broker.holders.register(broker.liveness.ttl()).await {
        Ok(id) => id,
        Err(e) => {
            let e = AmqpError::from(e);
            e.count();
            let mut out = Vec::new();
            codec::encode_method(&mut out, 0, close_method(&e));
            let _ = write_half.write_all(&out).await;
            return;
        }
    };
    let _counted = Counted::new();
    let heartbeat =
        (negotiated.heartbeat > 0).then(|| Duration::from_secs(negotiated.heartbeat.into()));
    let timing = writer::Timing {
        heartbeat,
        send_timeout: broker.config.send_timeout(),
    };
    let (writer, writer_task) = writer::spawn(write_half, timing);
    let (control, control_rx) = mpsc::unbounded_channel();
    let info = ConnectionInfo {
        user: negotiated.user.clone(),
        vhost: negotiated.vhost.name.clone(),
        peer,
        local: local.unwrap_or(peer),
        tls: client.is_tls(),
        mechanism: negotiated.mechanism.clone(),
        client_properties: negotiated.client_properties.clone(),
        connected_at_ms: ferry_stage::now_ms(),
        frame_max: negotiated.frame_max,
        channel_max: negotiated.channel_max,
        heartbeat: negotiated.heartbeat,
    };
    let news = control.clone();
    let fail = Box::new(move |e| {
        let _ = news.send(Control::ConnectionFailed(e));
    });
    let live = Arc::new(LiveConnection::new(
        id,
        info,
        negotiated.access.clone(),
        fail,
    ));
    broker.connections.add(live.clone());
    user_changes::catch_up(&broker, &live, negotiated.users_version).await;
    let ctx = Arc::new(ConnectionContext {
        broker: broker.clone(),
        vhost: negotiated.vhost.clone(),
        id,
        user: negotiated.user.clone(),
        access: negotiated.access.clone(),
        frame_max: negotiated.frame_max,
        capabilities: negotiated.capabilities,
        writer,
        control,
        live,
        consumed: ConsumedQueues::default(),
    });
    info!(%peer, tls = client.is_tls(), user = %ctx.user, vhost = %ctx.vhost.name, "AMQP connection opened");
    let mut connection = Connection {
        ctx: ctx.clone(),
        reader,
        buf,
        channels: HashMap::new(),
        tasks: JoinSet::new(),
        control_rx,
        channel_max: negotiated.channel_max,
        heartbeat,
        channels_stop: CancellationToken::new(),
        shutdown,
        blocked: broker.blocked.clone(),
    };
    let end = connection.run().await;
    let client_closed = matches!(end, End::ClientClosed);
    connection.finish(end).await;
    for queue in ctx.vhost.exclusive_queues_of(id) {
        if let Err(e) = ctx.vhost.remove_queues(&[queue]).await {
            info!(error = %e, "cannot delete an exclusive queue of a closed connection; the janitor will");
        }
    }
    broker.connections.remove(id);
    let _ = broker.holders.release(id).await;
    if client_closed {
        connection.await_client_close().await;
    }
    drop(connection);
    drop(ctx);
    let _ = writer_task.await;
    info!(%peer, "AMQP connection closed");
}

/// connection.close for an exception.
fn close_method(e: &AmqpError) -> AMQPClass {
    AMQPClass::Connection(connection::AMQPMethod::Close(connection::Close {
        reply_code: e.code.code(),
        reply_text: e.reply_text().into(),
        class_id: e.class_id,
        method_id: e.method_id,
    }))
}

/// Reads frames until connection.close-ok (or close) arrives, the socket ends, or
/// [`CLOSE_OK_WAIT`] passes; everything else is dropped, as the specification asks of a
/// closing peer.
async fn await_close_ok(reader: &mut ReadHalf, buf: &mut BytesMut, frame_max: u32) {
    let wait = async {
        loop {
            loop {
                match codec::decode(buf, frame_max) {
                    Ok(Some(Frame::Method(0, m)))
                        if matches!(
                            *m,
                            AMQPClass::Connection(
                                connection::AMQPMethod::CloseOk(_)
                                    | connection::AMQPMethod::Close(_)
                            )
                        ) =>
                    {
                        return;
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    // Bytes that do not parse (what closed the connection, maybe) are
                    // skipped; the close-ok, if any, comes in a later read.
                    Err(_) => {
                        buf.clear();
                        break;
                    }
                }
            }
            match reader.read_buf(buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    let _ = tokio::time::timeout(CLOSE_OK_WAIT, wait).await;
}

/// After connection.close-ok to a client's close: reads and drops whatever the client
/// still sends until it closes the socket, as RabbitMQ does, so the close-ok reaches it.
/// Closing at once would make the client's kernel answer its later writes (publishes
/// still in its buffer) with a reset that throws the unread close-ok away, and a client
/// such as amqplib would wait for it for good. Gives up once the client sends nothing
/// for [`CLOSE_OK_WAIT`], or after [`CLOSED_WAIT`] in all.
async fn discard_until_closed(reader: &mut ReadHalf, buf: &mut BytesMut) {
    let drain = async {
        loop {
            buf.clear();
            match tokio::time::timeout(CLOSE_OK_WAIT, reader.read_buf(buf)).await {
                Ok(Ok(n)) if n > 0 => {}
                _ => return,
            }
        }
    };
    let _ = tokio::time::timeout(CLOSED_WAIT, drain).await;
}

/// The connection loop's state.
struct Connection {
    ctx: Arc<ConnectionContext>,
    reader: ReadHalf,
    buf: BytesMut,
    channels: HashMap<u16, Slot>,
    /// Channel tasks, joined when the connection ends.
    tasks: JoinSet<()>,
    control_rx: mpsc::UnboundedReceiver<Control>,
    channel_max: u16,
    heartbeat: Option<Duration>,
    /// Stops every channel when the connection ends.
    channels_stop: CancellationToken,
    shutdown: CancellationToken,
    blocked: watch::Receiver<Option<String>>,
}

impl Connection {
    async fn run(&mut self) -> End {
        let mut last_read = Instant::now();
        let mut renew = self.ctx.broker.liveness.ticker();
        // Consecutive frames for one open channel go to its task together: one queue
        // operation and one wake-up per read instead of one per frame.
        let mut batch: Vec<Frame> = Vec::new();
        let mut batch_to: Option<(u16, ChannelHandle)> = None;
        loop {
            loop {
                let frame = match codec::decode(&mut self.buf, self.ctx.frame_max) {
                    Ok(Some(frame)) => frame,
                    Ok(None) => break,
                    Err(e) => return End::Failed(e.into()),
                };
                if is_publish(&frame) && self.blocked.borrow().is_some() {
                    flush(&mut batch, &mut batch_to).await;
                    if let Some(end) = self.wait_unblocked().await {
                        return end;
                    }
                    last_read = Instant::now();
                }
                if let Some(end) = self.drain_control() {
                    return end;
                }
                if let Some(handle) = self.plain_target(&frame) {
                    if batch_to
                        .as_ref()
                        .is_some_and(|(id, _)| *id != frame.channel())
                    {
                        flush(&mut batch, &mut batch_to).await;
                    }
                    batch_to.get_or_insert((frame.channel(), handle));
                    batch.push(frame);
                    continue;
                }
                flush(&mut batch, &mut batch_to).await;
                match self.dispatch(frame).await {
                    Ok(None) => {}
                    Ok(Some(end)) => return end,
                    Err(e) => return End::Failed(e),
                }
            }
            flush(&mut batch, &mut batch_to).await;
            let silent_until = self.heartbeat.map(|h| last_read + h * 2);
            tokio::select! {
                biased;
                () = self.shutdown.cancelled() => return End::Shutdown,
                Some(news) = self.control_rx.recv() => {
                    if let Some(end) = self.on_control(news) {
                        return end;
                    }
                }
                _ = renew.tick() => {
                    let ttl = self.ctx.broker.liveness.ttl();
                    let _ = self.ctx.broker.holders.renew(self.ctx.id, ttl).await;
                }
                read = self.reader.read_buf(&mut self.buf) => match read {
                    Ok(0) | Err(_) => return End::Vanished,
                    Ok(_) => last_read = Instant::now(),
                },
                () = sleep_until(silent_until) => {
                    info!(user = %self.ctx.user, "AMQP peer missed two heartbeats; closing its connection");
                    return End::Vanished;
                }
                () = self.ctx.writer.closed() => {
                    info!(user = %self.ctx.user, "AMQP peer reads nothing (amqp.send_timeout_ms) or its socket failed; closing its connection");
                    return End::Vanished;
                }
            }
        }
    }

    /// Holds a publish while a resource limit blocks publishers (the socket is not read
    /// meanwhile, so the client feels TCP back-pressure). As with RabbitMQ, only a
    /// connection that publishes during the alarm is blocked, and a capable client is told
    /// with connection.blocked, then connection.unblocked.
    async fn wait_unblocked(&mut self) -> Option<End> {
        let reason = self.blocked.borrow_and_update().clone()?;
        self.notify(connection::AMQPMethod::Blocked(connection::Blocked {
            reason: reason.as_str().into(),
        }))
        .await;
        while self.blocked.borrow_and_update().is_some() {
            tokio::select! {
                () = self.shutdown.cancelled() => return Some(End::Shutdown),
                changed = self.blocked.changed() => {
                    if changed.is_err() {
                        break;
                    }
                }
            }
        }
        self.notify(connection::AMQPMethod::Unblocked(connection::Unblocked {}))
            .await;
        None
    }

    /// Sends connection.blocked or connection.unblocked to a client that handles them.
    async fn notify(&self, method: connection::AMQPMethod) {
        if self.ctx.capabilities.connection_blocked {
            let mut out = Vec::new();
            codec::encode_method(&mut out, 0, AMQPClass::Connection(method));
            let _ = self.ctx.writer.send(out).await;
        }
    }

    fn drain_control(&mut self) -> Option<End> {
        while let Ok(news) = self.control_rx.try_recv() {
            if let Some(end) = self.on_control(news) {
                return Some(end);
            }
        }
        None
    }

    fn on_control(&mut self, news: Control) -> Option<End> {
        match news {
            Control::ChannelFailed(id) => {
                if let Some(slot) = self.channels.get_mut(&id) {
                    *slot = Slot::ServerClosing;
                }
                None
            }
            Control::ChannelClosed(id) => {
                if matches!(self.channels.get(&id), Some(Slot::ClientClosing)) {
                    self.channels.remove(&id);
                    self.ctx.live.channel_closed(id);
                }
                None
            }
            Control::ConnectionFailed(e) => Some(End::Failed(e)),
        }
    }

    /// The channel a frame can go to without the loop looking at it: an open channel's
    /// frame that does not open or close it.
    fn plain_target(&self, frame: &Frame) -> Option<ChannelHandle> {
        let id = frame.channel();
        if id == 0 || matches!(frame, Frame::Heartbeat(_)) {
            return None;
        }
        if let Frame::Method(_, m) = frame
            && matches!(
                **m,
                AMQPClass::Channel(ch::AMQPMethod::Open(_) | ch::AMQPMethod::Close(_))
            )
        {
            return None;
        }
        match self.channels.get(&id) {
            Some(Slot::Open(handle)) => Some(handle.clone()),
            _ => None,
        }
    }

    async fn dispatch(&mut self, frame: Frame) -> Result<Option<End>, AmqpError> {
        let id = frame.channel();
        if id == 0 {
            return self.dispatch_connection(frame).await;
        }
        if let Frame::Heartbeat(_) = frame {
            return Err(AmqpError::new(
                ReplyCode::FrameError,
                format!("heartbeat frame on channel {id}; heartbeats belong to channel 0"),
            ));
        }
        let method = match &frame {
            Frame::Method(_, m) => Some(&**m),
            _ => None,
        };
        match self.channels.get(&id) {
            None => {
                let Some(open @ AMQPClass::Channel(ch::AMQPMethod::Open(_))) = method else {
                    return Err(AmqpError::new(
                        ReplyCode::ChannelError,
                        format!("expected 'channel.open' on channel {id}"),
                    ));
                };
                // As RabbitMQ: channel_max bounds how many channels are open, not their
                // numbers (any of 1..=65535 may be opened).
                if self.channels.len() >= usize::from(self.channel_max) {
                    return Err(AmqpError::not_allowed(format!(
                        "number of channels opened ({}) has reached the negotiated channel_max ({})",
                        self.channels.len(),
                        self.channel_max
                    ))
                    .on(open));
                }
                let handle = channel::spawn(
                    self.ctx.clone(),
                    id,
                    self.channels_stop.child_token(),
                    &mut self.tasks,
                );
                self.channels.insert(id, Slot::Open(handle));
                self.ctx.live.channel_opened(id);
            }
            Some(Slot::Open(handle)) => match method {
                Some(open @ AMQPClass::Channel(ch::AMQPMethod::Open(_))) => {
                    return Err(AmqpError::new(
                        ReplyCode::ChannelError,
                        format!("second 'channel.open' seen on channel {id}"),
                    )
                    .on(open));
                }
                Some(AMQPClass::Channel(ch::AMQPMethod::Close(_))) => {
                    let handle = handle.clone();
                    self.channels.insert(id, Slot::ClientClosing);
                    handle.send(frame).await;
                }
                _ => {
                    let handle = handle.clone();
                    handle.send(frame).await;
                }
            },
            Some(Slot::ClientClosing) => {}
            Some(Slot::ServerClosing) => match method {
                Some(AMQPClass::Channel(ch::AMQPMethod::CloseOk(_))) => {
                    self.channels.remove(&id);
                    self.ctx.live.channel_closed(id);
                }
                Some(AMQPClass::Channel(ch::AMQPMethod::Close(_))) => {
                    // Both sides closed at once: answer, and the channel is done.
                    let mut out = Vec::new();
                    codec::encode_method(
                        &mut out,
                        id,
                        AMQPClass::Channel(ch::AMQPMethod::CloseOk(ch::CloseOk {})),
                    );
                    let _ = self.ctx.writer.send(out).await;
                    self.channels.remove(&id);
                    self.ctx.live.channel_closed(id);
                }
                _ => {}
            },
        }
        Ok(None)
    }

    async fn dispatch_connection(&mut self, frame: Frame) -> Result<Option<End>, AmqpError> {
        match frame {
            Frame::Heartbeat(_) => Ok(None),
            Frame::Method(_, method) => match *method {
                AMQPClass::Connection(connection::AMQPMethod::Close(_)) => {
                    Ok(Some(End::ClientClosed))
                }
                AMQPClass::Connection(connection::AMQPMethod::CloseOk(_)) => {
                    Ok(Some(End::Vanished))
                }
                AMQPClass::Connection(connection::AMQPMethod::UpdateSecret(_)) => {
                    let mut out = Vec::new();
                    codec::encode_method(
                        &mut out,
                        0,
                        AMQPClass::Connection(connection::AMQPMethod::UpdateSecretOk(
                            connection::UpdateSecretOk {},
                        )),
                    );
                    let _ = self.ctx.writer.send(out).await;
                    Ok(None)
                }
                AMQPClass::Connection(
                    connection::AMQPMethod::Blocked(_) | connection::AMQPMethod::Unblocked(_),
                ) => Ok(None),
                other => Err(AmqpError::command_invalid(format!(
                    "method {}.{} is not allowed on channel 0",
                    other.get_amqp_class_id(),
                    other.get_amqp_method_id()
                ))
                .on(&other)),
            },
            Frame::Header(..) | Frame::Body(..) => {
                Err(AmqpError::unexpected_frame("content frame on channel 0"))
            }
        }
    }

    /// Ends the connection: stops every channel (they commit what they received and
    /// return unacknowledged deliveries), then says goodbye as `end` requires.
    async fn finish(&mut self, end: End) {
        self.channels_stop.cancel();
        while self.tasks.join_next().await.is_some() {}
        let goodbye = match &end {
            End::ClientClosed => Some(AMQPClass::Connection(connection::AMQPMethod::CloseOk(
                connection::CloseOk {},
            ))),
            End::Failed(e) => {
                info!(user = %self.ctx.user, error = %e, "AMQP connection exception");
                e.count();
                Some(close_method(e))
            }
            End::Shutdown => Some(close_method(&AmqpError::new(
                ReplyCode::ConnectionForced,
                "broker forced connection closure with reason 'shutdown'",
            ))),
            End::Vanished => None,
        };
        if let Some(method) = goodbye {
            let mut out = Vec::new();
            codec::encode_method(&mut out, 0, method);
            let _ = self.ctx.writer.send(out).await;
        }
        if matches!(end, End::Failed(_) | End::Shutdown) {
            await_close_ok(&mut self.reader, &mut self.buf, self.ctx.frame_max).await;
        }
    }

    /// After the close-ok to a client's connection.close (and the connection's cleanup):
    /// [`discard_until_closed`], unless the daemon stops first.
    async fn await_client_close(&mut self) {
        tokio::select! {
            () = self.shutdown.cancelled() => {}
            () = discard_until_closed(&mut self.reader, &mut self.buf) => {}
        }
    }
}

/// Hands a batch of frames to its channel.
async fn flush(batch: &mut Vec<Frame>, to: &mut Option<(u16, ChannelHandle)>) {
    if let Some((_, handle)) = to.take()
        && !batch.is_empty()
    {
        handle.send_all(std::mem::take(batch)).await;
    }
}

fn is_publish(frame: &Frame) -> bool {
    matches!(frame, Frame::Method(_, m) if matches!(**m, AMQPClass::Basic(amq_protocol::protocol::basic::AMQPMethod::Publish(_))))
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
