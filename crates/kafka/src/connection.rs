//! One client connection: frames are read and answered in order, with up to
//! [`IN_FLIGHT`] answers outstanding so a client's pipelined requests (librdkafka sends
//! several produce requests before the first answer) are worked on concurrently.
//!
//! Fetch answers are the exception: a connection has at most one computed or waiting to
//! be written, since each may hold up to the request's `max_bytes`. A Fetch takes the
//! connection's fetch turn before it is handled and gives it back once the writer has
//! written its answer; until then the connection is not read further, as Kafka mutes a
//! connection while an answer is pending. librdkafka sends one Fetch per connection at a
//! time, so its consumers wait for nothing; a client that pipelines Fetch requests and
//! reads no answer makes Ferry hold one answer, not [`IN_FLIGHT`].
//!
//! The reader decodes each request and runs its handler's ordered part; the writer task
//! writes each answer — immediate, or the result of its spawned `Later` future — in
//! request order. Produce requests already buffered behind one another are handled as one
//! burst, so their batches share staging transactions. While the memory high-water mark is
//! exceeded, a produce burst is answered with [`PRODUCE_THROTTLE`] as `throttle_time_ms`
//! and the connection is muted (not read) that long, as Kafka's quotas do (KIP-219). A
//! connection that sends nothing, or whose client reads nothing, for
//! `kafka.connections_max_idle_ms` is closed (Kafka's `connections.max.idle.ms`). Anything the codec refuses (an oversized or negative size, a truncated
//! or undecodable request, an unknown API) closes this connection only, after the answers
//! already owed; nothing staged or acknowledged is affected.

use super::Context;
use super::api::{self, Reply, Session};
use crate::clients::ClientGuard;
use crate::wire::codec::{CodecError, FrameDecoder, Request, decode_request, encode_response};
use bytes::BytesMut;
use ferry_auth::peer::Peer;
use ferry_config::listeners::SecurityProtocol;
use ferry_telemetry::kafka as m;
use ferry_telemetry::names::LABEL_CODE;
use ferry_tls::looks_like_tls;
use ferry_tls::stream::{Resettable, Stream, WriteHalf};
use kafka_protocol::messages::{ApiKey, RequestKind, ResponseKind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, trace, warn};

/// Answers a connection may owe at once; the reader waits when it owes this many.
const IN_FLIGHT: usize = 32;
/// Most pipelined produce requests staged together.
const MAX_BURST: usize = 16;
/// How long a producer is throttled while the memory high-water mark is exceeded; the
/// mark is checked again at its next request.
pub const PRODUCE_THROTTLE: Duration = Duration::from_secs(1);

/// An answer owed, in request order.
struct Owed {
    /// The API answered.
    api: ApiKey,
    /// The version to encode at.
    version: i16,
    /// The request's correlation id.
    correlation_id: i32,
    /// When the request was read.
    started: Instant,
    /// The answer, or the task computing it.
    response: Pending,
    /// The connection's fetch turn, held by a Fetch answer until it is written.
    turn: Option<OwnedSemaphorePermit>,
}

/// An answer now or later.
enum Pending {
    /// A bare SASL token, written size-prefixed with no response header
    /// ([`api::Session::sasl_tokens`]).
    Token(bytes::Bytes),
    /// Ready.
    Ready(Box<ResponseKind>),
    /// Being computed.
    Spawned(JoinHandle<ResponseKind>),
}

/// Why Ferry closed a connection.
#[derive(Debug)]
enum Refusal {
    /// The codec could not read the client's bytes.
    Codec(CodecError),
    /// The client closed its side in the middle of a request.
    Truncated(usize),
    /// The request is not allowed (before authentication, not implemented).
    Refused(String),
    /// Authentication failed (the answer said so first).
    AuthFailed,
    /// A TLS client on a plaintext listener: its ClientHello is no Kafka request.
    ClientHello,
    /// Nothing was read for `kafka.connections_max_idle_ms`.
    Idle(Duration),
    /// The client read none of its answers for `kafka.connections_max_idle_ms`.
    Unread(Duration),
    /// Closed through the management API.
    ClosedByApi,
}

/// Exports `ferry_kafka_connections_refused_total` at 0 for every reason, and
/// `ferry_kafka_requests_total` for every API the front serves answered without error, so
/// an alert on their increase or a dashboard's rate sees the first event after a start.
pub(crate) fn export_counters() {
    for reason in Refusal::LABELS {
        metrics::counter!(m::CONNECTIONS_REFUSED_TOTAL, m::LABEL_REASON => reason).increment(0);
    }
    for &(api, _, _) in crate::api::SUPPORTED {
        metrics::counter!(m::REQUESTS_TOTAL, m::LABEL_API => format!("{api:?}"), LABEL_CODE => "0")
            .increment(0);
    }
}

impl Refusal {
    /// Every `reason` label [`Refusal::label`] gives.
    const LABELS: [&'static str; 13] = [
        "too_large",
        "negative_size",
        "truncated",
        "unknown_api",
        "unsupported_version",
        "malformed",
        "encode",
        "refused",
        "auth_failed",
        "tls_client_hello",
        "idle",
        "unread",
        "closed_by_api",
    ];

    /// The `reason` label of the refused-connections metric.
    fn label(&self) -> &'static str {
        match self {
            Self::Codec(CodecError::TooLarge { .. }) => "too_large",
            Self::Codec(CodecError::NegativeSize(_)) => "negative_size",
            Self::Codec(CodecError::Truncated(_)) | Self::Truncated(_) => "truncated",
            Self::Codec(CodecError::UnknownApi(_)) => "unknown_api",
            Self::Codec(CodecError::Unsupported { .. }) => "unsupported_version",
            Self::Codec(CodecError::Malformed { .. }) => "malformed",
            Self::Codec(CodecError::Encode { .. }) => "encode",
            Self::Refused(_) => "refused",
            Self::AuthFailed => "auth_failed",
            Self::ClientHello => "tls_client_hello",
            Self::Idle(_) => "idle",
            Self::Unread(_) => "unread",
            Self::ClosedByApi => "closed_by_api",
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Codec(e) => write!(f, "{e}"),
            Self::Truncated(n) => write!(
                f,
                "the client closed the connection {n} bytes into a request"
            ),
            Self::Refused(reason) => f.write_str(reason),
            Self::AuthFailed => f.write_str("SASL authentication failed"),
            Self::ClientHello => f.write_str(
                "a TLS ClientHello arrived on a plaintext listener; TLS clients connect to an \
                 SSL or SASL_SSL listener of kafka.listeners",
            ),
            Self::Idle(idle) => write!(
                f,
                "no request for {} ms (kafka.connections_max_idle_ms)",
                idle.as_millis()
            ),
            Self::Unread(idle) => write!(
                f,
                "the client read no answer for {} ms (kafka.connections_max_idle_ms)",
                idle.as_millis()
            ),
            Self::ClosedByApi => f.write_str("closed through the management API"),
        }
    }
}

/// The listener a connection came in on.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arrival {
    /// The listener's security protocol, which names it.
    pub listener: SecurityProtocol,
    /// The listener's address, when the socket says.
    pub local: Option<std::net::SocketAddr>,
    /// Whether its clients must authenticate with SASL first.
    pub require_sasl: bool,
}

/// Serves one connection until the client closes it, Ferry refuses it, or `shutdown`.
pub(crate) async fn serve(
    ctx: Arc<Context>,
    stream: Stream,
    peer: Peer,
    arrival: Arrival,
    shutdown: CancellationToken,
) {
    metrics::gauge!(m::CONNECTIONS).increment(1.0);
    let (mut socket, writer) = stream.into_split();
    let (owed, queue) = mpsc::channel(IN_FLIGHT);
    let idle = ctx.config.connections_max_idle();
    let busy = Arc::new(AtomicBool::new(false));
    let writer = tokio::spawn(write(writer, queue, busy.clone(), idle));
    let addr = peer.addr;
    let plaintext = !peer.is_tls();
    let registered = ctx.clients.register(
        addr,
        arrival
            .local
            .unwrap_or_else(|| (std::net::Ipv4Addr::UNSPECIFIED, 0).into()),
        arrival.listener.name().to_owned(),
        !plaintext,
    );
    let session = Session::new(
        peer,
        arrival.listener,
        arrival.require_sasl,
        &ctx.principal_rules,
    );
    if let Some(principal) = &session.certificate_principal {
        info!(peer = %addr, listener = %arrival.listener, principal = %principal, "Kafka client identified by its certificate");
    }
    let mut reader = Reader {
        registered,
        reported_user: None,
        decoder: FrameDecoder::new(ctx.config.max_request_size),
        ctx,
        session,
        buf: BytesMut::new(),
        owed,
        fetch_turn: Arc::new(Semaphore::new(1)),
        muted_until: None,
    };
    let mut opening = true;
    let refusal = loop {
        if let Err(stop) = reader.answer_buffered().await {
            break stop;
        }
        if let Some(until) = reader.muted_until.take() {
            tokio::select! {
                () = shutdown.cancelled() => break None,
                () = reader.registered.closed() => break Some(Refusal::ClosedByApi),
                () = tokio::time::sleep_until(until.into()) => continue,
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => break None,
            () = reader.registered.closed() => break Some(Refusal::ClosedByApi),
            // The writer ended: the socket failed, or the client read nothing for too long.
            () = reader.owed.closed() => break None,
            // Idle only while no answer is owed: a stuck write ends the writer instead.
            () = tokio::time::sleep(idle) => if !busy.load(Ordering::Relaxed) {
                break Some(Refusal::Idle(idle));
            },
            read = socket.read_buf(&mut reader.buf) => match read {
                Ok(0) if reader.buf.is_empty() => break None,
                Ok(0) => break Some(Refusal::Truncated(reader.buf.len())),
                Ok(_) => {
                    // A TLS ClientHello reads as a request of hundreds of megabytes; say
                    // what it is instead.
                    if std::mem::take(&mut opening) && plaintext && looks_like_tls(&reader.buf) {
                        ferry_tls::accept::count_failure("kafka", ferry_tls::accept::Reason::ClientHelloOnPlaintext);
                        break Some(Refusal::ClientHello);
                    }
                }
                Err(e) => {
                    debug!(peer = %addr, error = %e, "Kafka connection read failed");
                    break None;
                }
            },
        }
    };
    drop(reader);
    let stalled = matches!(writer.await, Ok(Some(WriteEnd::Stalled)));
    let refusal = refusal.or_else(|| stalled.then_some(Refusal::Unread(idle)));
    if let Some(refusal) = refusal {
        info!(peer = %addr, reason = %refusal, "closing a Kafka connection");
        metrics::counter!(m::CONNECTIONS_REFUSED_TOTAL, m::LABEL_REASON => refusal.label())
            .increment(1);
    }
    metrics::gauge!(m::CONNECTIONS).decrement(1.0);
}

/// Why reading stops: `Some` refusal, or `None` when the connection simply ends (the writer
/// went away).
type Stop = Option<Refusal>;

/// The reading side of a connection.
struct Reader {
    /// What handlers share.
    ctx: Arc<Context>,
    /// The connection in the front's list of live clients.
    registered: ClientGuard,
    /// The user last noted in that list.
    reported_user: Option<String>,
    /// What this connection knows about its client.
    session: Session,
    /// Splits frames off `buf`.
    decoder: FrameDecoder,
    /// Bytes read and not yet decoded.
    buf: BytesMut,
    /// The answers owed, in order, to the writer.
    owed: mpsc::Sender<Owed>,
    /// One permit: the Fetch whose answer is being computed or written holds it.
    fetch_turn: Arc<Semaphore>,
    /// Until when the connection is not read (a producer throttled), if it is muted.
    muted_until: Option<Instant>,
}

impl Reader {
    /// Decodes and handles every whole frame in the buffer, in order.
    async fn answer_buffered(&mut self) -> Result<(), Stop> {
        while self.muted_until.is_none() {
            let Some(frame) = self
                .decoder
                .decode(&mut self.buf)
                .map_err(|e| Some(Refusal::Codec(e)))?
            else {
                return Ok(());
            };
            let started = Instant::now();
            if self.session.sasl_tokens {
                self.sasl_token(frame, started).await?;
                continue;
            }
            let request = match decode_request(frame, api::supported) {
                Ok(r) => r,
                Err(CodecError::Unsupported {
                    api: ApiKey::ApiVersions,
                    correlation_id,
                    ..
                }) => {
                    let answer = Pending::Ready(Box::new(api::unsupported_version()));
                    self.owe(
                        ApiKey::ApiVersions,
                        0,
                        correlation_id,
                        started,
                        answer,
                        None,
                    )
                    .await?;
                    continue;
                }
                Err(e) => return Err(Some(Refusal::Codec(e))),
            };
            self.note(&request);
            if request.api == ApiKey::Produce
                && api::refusal(&self.session, ApiKey::Produce).is_none()
            {
                self.produce_burst(request, started).await?;
            } else {
                let (api, version, id) = (
                    request.api,
                    request.version(),
                    request.header.correlation_id,
                );
                let turn = match api {
                    ApiKey::Fetch => Some(self.fetch_turn().await?),
                    _ => None,
                };
                let reply = api::handle(&self.ctx, &mut self.session, request).await;
                self.reply(api, version, id, started, reply, turn).await?;
            }
        }
        Ok(())
    }

    /// Answers a bare SASL token with the server's (after a SaslHandshake v0); a failed
    /// login closes the connection without an answer, as Kafka does in that framing.
    async fn sasl_token(&mut self, token: bytes::Bytes, started: Instant) -> Result<(), Stop> {
        match api::sasl_token(&self.ctx, &mut self.session, token).await {
            Reply::Now(ResponseKind::SaslAuthenticate(r)) => {
                let answer = Pending::Token(r.auth_bytes);
                self.owe(ApiKey::SaslAuthenticate, 0, 0, started, answer, None)
                    .await
            }
            _ => Err(Some(Refusal::AuthFailed)),
        }
    }

    /// Handles `first` with every produce request already buffered behind it (up to
    /// [`MAX_BURST`]) in one burst, so their batches are staged together.
    async fn produce_burst(&mut self, first: Request, started: Instant) -> Result<(), Stop> {
        let mut burst = vec![(first, started)];
        let mut undecodable = None;
        while burst.len() < MAX_BURST
            && self.decoder.next_api(&self.buf) == Some(ApiKey::Produce as i16)
        {
            let Ok(Some(frame)) = self.decoder.decode(&mut self.buf) else {
                break;
            };
            match decode_request(frame, api::supported) {
                Ok(r) => {
                    self.note(&r);
                    burst.push((r, Instant::now()));
                }
                Err(e) => {
                    // Answer what came before it, then close.
                    undecodable = Some(e);
                    break;
                }
            }
        }
        let mut heads = Vec::with_capacity(burst.len());
        let mut bodies = Vec::with_capacity(burst.len());
        for (r, started) in burst {
            let head = (r.api, r.version(), r.header.correlation_id, started);
            if let RequestKind::Produce(body) = r.body {
                heads.push(head);
                bodies.push((head.1, body));
            }
        }
        let throttle = self.ctx.memory.raised().map(|_| PRODUCE_THROTTLE);
        let replies = api::produce_burst(
            &self.ctx,
            &self.session,
            bodies,
            throttle.unwrap_or_default(),
        )
        .await;
        for ((api, version, id, started), reply) in heads.into_iter().zip(replies) {
            self.reply(api, version, id, started, reply, None).await?;
        }
        if let Some(throttle) = throttle {
            metrics::counter!(m::PRODUCE_THROTTLED_TOTAL).increment(1);
            self.muted_until = Some(Instant::now() + throttle);
        }
        match undecodable {
            Some(e) => Err(Some(Refusal::Codec(e))),
            None => Ok(()),
        }
    }

    /// Records what a request says about its client.
    fn note(&mut self, request: &Request) {
        let client_id = request
            .header
            .client_id
            .as_ref()
            .map(|c| c.to_string())
            .unwrap_or_default();
        // The user a SASL login gave shows from the request after it. The list is locked
        // only when something changed, not on every request.
        let user = (self.session.user.as_deref()).or(self.session.certificate_principal.as_deref());
        if client_id != self.session.client_id || user != self.reported_user.as_deref() {
            self.registered.note(&client_id, user);
            self.reported_user = user.map(str::to_owned);
        }
        self.session.client_id = client_id;
        debug!(
            peer = %self.session.peer.addr,
            api = ?request.api,
            version = request.version(),
            correlation_id = request.header.correlation_id,
            "Kafka request"
        );
    }

    /// Waits for the connection's fetch turn: the answer of the Fetch before is written.
    /// The writer gives it back also when it ends, so this never outwaits the connection.
    async fn fetch_turn(&self) -> Result<OwnedSemaphorePermit, Stop> {
        self.fetch_turn
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| None)
    }

    /// Queues the answer a handler's reply calls for, with the fetch turn it holds.
    async fn reply(
        &self,
        api: ApiKey,
        version: i16,
        id: i32,
        started: Instant,
        reply: Reply,
        turn: Option<OwnedSemaphorePermit>,
    ) -> Result<(), Stop> {
        match reply {
            Reply::Now(r) => {
                self.owe(api, version, id, started, Pending::Ready(Box::new(r)), turn)
                    .await
            }
            Reply::Later(f) => {
                let task = Pending::Spawned(tokio::spawn(f));
                self.owe(api, version, id, started, task, turn).await
            }
            Reply::Last(r) => {
                self.owe(api, version, id, started, Pending::Ready(Box::new(r)), turn)
                    .await?;
                Err(Some(Refusal::AuthFailed))
            }
            Reply::Nothing => {
                count(api, 0, started);
                Ok(())
            }
            Reply::Close(reason) => Err(Some(Refusal::Refused(reason))),
        }
    }

    /// Hands an answer to the writer (waiting while [`IN_FLIGHT`] are owed).
    async fn owe(
        &self,
        api: ApiKey,
        version: i16,
        correlation_id: i32,
        started: Instant,
        response: Pending,
        turn: Option<OwnedSemaphorePermit>,
    ) -> Result<(), Stop> {
        let owed = Owed {
            api,
            version,
            correlation_id,
            started,
            response,
            turn,
        };
        self.owed.send(owed).await.map_err(|_| None)
    }
}

/// Why the writer stopped before its queue ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteEnd {
    /// The socket failed, or an answer could not be made.
    Failed,
    /// A write made no progress for the allowed time: the client reads nothing.
    Stalled,
}

/// Writes the owed answers in order, flushing whenever no further answer is ready; `busy`
/// while it holds an answer not yet flushed. A write that makes no progress for `stall`
/// (the client reads nothing) ends it, and the connection ends in a reset
/// ([`Resettable::reset_on_close`]) so that client learns of it at once.
async fn write(
    writer: WriteHalf,
    queue: mpsc::Receiver<Owed>,
    busy: Arc<AtomicBool>,
    stall: Duration,
) -> Option<WriteEnd> {
    let mut writer = BufWriter::new(writer);
    let end = write_answers(&mut writer, queue, &busy, stall).await;
    if end == Some(WriteEnd::Stalled) {
        let _ = writer.get_ref().reset_on_close();
    }
    end
}

/// What an owed answer writes.
enum Written {
    /// A response, encoded with its header.
    Response(Box<ResponseKind>),
    /// A bare SASL token.
    Token(bytes::Bytes),
}

/// [`write`]'s loop over the owed answers.
async fn write_answers(
    writer: &mut BufWriter<WriteHalf>,
    mut queue: mpsc::Receiver<Owed>,
    busy: &AtomicBool,
    stall: Duration,
) -> Option<WriteEnd> {
    while let Some(owed) = queue.recv().await {
        busy.store(true, Ordering::Relaxed);
        let response = match owed.response {
            Pending::Token(token) => Written::Token(token),
            Pending::Ready(r) => Written::Response(r),
            Pending::Spawned(task) => match task.await {
                Ok(r) => Written::Response(Box::new(r)),
                Err(e) => {
                    warn!(api = ?owed.api, error = %e, "a Kafka request handler failed");
                    return Some(WriteEnd::Failed);
                }
            },
        };
        let bytes = match response {
            Written::Response(response) => {
                count(owed.api, api::first_error(&response), owed.started);
                match encode_response(owed.api, owed.version, owed.correlation_id, &response) {
                    Ok(b) => b,
                    Err(e) => {
                        warn!(error = %e, "cannot encode a Kafka response; closing the connection");
                        return Some(WriteEnd::Failed);
                    }
                }
            }
            // A bare SASL token: its size, then the token.
            Written::Token(token) => {
                count(owed.api, 0, owed.started);
                let mut framed = bytes::BytesMut::with_capacity(4 + token.len());
                framed.extend_from_slice(&(token.len() as u32).to_be_bytes());
                framed.extend_from_slice(&token);
                framed.freeze()
            }
        };
        if let Err(end) = within(stall, writer.write_all(&bytes)).await {
            return Some(end);
        }
        // Written: the next Fetch may be handled.
        drop(owed.turn);
        trace!(api = ?owed.api, correlation_id = owed.correlation_id, bytes = bytes.len(), "Kafka answer");
        if queue.is_empty() {
            if let Err(end) = within(stall, writer.flush()).await {
                return Some(end);
            }
            busy.store(false, Ordering::Relaxed);
        }
    }
    match within(stall, writer.flush()).await {
        Ok(()) => within(stall, writer.shutdown()).await.err(),
        Err(end) => Some(end),
    }
}

/// `write`, unless it fails or makes no progress within `stall`.
async fn within(
    stall: Duration,
    write: impl Future<Output = std::io::Result<()>>,
) -> Result<(), WriteEnd> {
    match tokio::time::timeout(stall, write).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(WriteEnd::Failed),
        Err(_) => Err(WriteEnd::Stalled),
    }
}

/// Counts an answered request.
fn count(api: ApiKey, code: i16, started: Instant) {
    let name = format!("{api:?}");
    metrics::counter!(m::REQUESTS_TOTAL, m::LABEL_API => name.clone(), LABEL_CODE => code.to_string())
        .increment(1);
    metrics::histogram!(m::REQUEST_SECONDS, m::LABEL_API => name)
        .record(started.elapsed().as_secs_f64());
}
