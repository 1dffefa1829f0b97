//! One client connection: frames are read and answered in order, with up to
//! [`IN_FLIGHT`] answers outstanding so a client's pipelined requests (librdkafka sends
//! several produce requests before the first answer) are worked on concurrently.
//!
//! The reader decodes each request and runs its handler's ordered part; the writer task
//! writes each answer — immediate, or the result of its spawned `Later` future — in
//! request order. Anything the codec refuses (an oversized or negative size, a truncated
//! or undecodable request, an unknown API) closes this connection only, after the answers
//! already owed; nothing staged or acknowledged is affected.

use super::Context;
use super::api::{self, Reply, Session};
use super::codec::{CodecError, FrameDecoder, decode_request, encode_response};
use crate::telemetry::kafka as m;
use crate::telemetry::names::LABEL_CODE;
use kafka_protocol::messages::{ApiKey, ResponseKind};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufWriter};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, trace, warn};

/// Answers a connection may owe at once; the reader waits when it owes this many.
const IN_FLIGHT: usize = 32;

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
}

/// An answer now or later.
enum Pending {
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
}

impl Refusal {
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
        }
    }
}

/// Serves one connection until the client closes it, Ferry refuses it, or `shutdown`.
pub async fn serve(
    ctx: Arc<Context>,
    stream: TcpStream,
    peer: SocketAddr,
    shutdown: CancellationToken,
) {
    metrics::gauge!(m::CONNECTIONS).increment(1.0);
    let (mut reader, writer) = stream.into_split();
    let (owed, queue) = mpsc::channel(IN_FLIGHT);
    let writer = tokio::spawn(write(writer, queue));
    let decoder = FrameDecoder::new(ctx.config.max_request_size);
    let mut buf = bytes::BytesMut::new();
    let mut session = Session::new(peer);
    let refusal = loop {
        let frame = match decoder.decode(&mut buf) {
            Ok(frame) => frame,
            Err(e) => break Some(Refusal::Codec(e)),
        };
        if let Some(frame) = frame {
            let started = Instant::now();
            let request = match decode_request(frame, api::supported) {
                Ok(r) => r,
                Err(CodecError::Unsupported {
                    api: ApiKey::ApiVersions,
                    correlation_id,
                    ..
                }) => {
                    let answer = Owed {
                        api: ApiKey::ApiVersions,
                        version: 0,
                        correlation_id,
                        started,
                        response: Pending::Ready(Box::new(api::unsupported_version())),
                    };
                    if owed.send(answer).await.is_err() {
                        break None;
                    }
                    continue;
                }
                Err(e) => break Some(Refusal::Codec(e)),
            };
            session.client_id = request
                .header
                .client_id
                .as_ref()
                .map(|c| c.to_string())
                .unwrap_or_default();
            let (api, version, correlation_id) = (
                request.api,
                request.version(),
                request.header.correlation_id,
            );
            debug!(%peer, ?api, version, correlation_id, "Kafka request");
            let owe = |response| Owed {
                api,
                version,
                correlation_id,
                started,
                response,
            };
            let (answer, last) = match api::handle(&ctx, &mut session, request).await {
                Reply::Now(r) => (Some(owe(Pending::Ready(Box::new(r)))), false),
                Reply::Later(f) => (Some(owe(Pending::Spawned(tokio::spawn(f)))), false),
                Reply::Last(r) => (Some(owe(Pending::Ready(Box::new(r)))), true),
                Reply::Nothing => {
                    count(api, 0, started);
                    (None, false)
                }
                Reply::Close(reason) => break Some(Refusal::Refused(reason)),
            };
            if let Some(answer) = answer
                && owed.send(answer).await.is_err()
            {
                break None;
            }
            if last {
                break Some(Refusal::AuthFailed);
            }
            continue;
        }
        tokio::select! {
            () = shutdown.cancelled() => break None,
            read = reader.read_buf(&mut buf) => match read {
                Ok(0) if buf.is_empty() => break None,
                Ok(0) => break Some(Refusal::Truncated(buf.len())),
                Ok(_) => {}
                Err(e) => {
                    debug!(%peer, error = %e, "Kafka connection read failed");
                    break None;
                }
            },
        }
    };
    drop(owed);
    let _ = writer.await;
    if let Some(refusal) = refusal {
        info!(%peer, reason = %refusal, "closing a Kafka connection");
        metrics::counter!(m::CONNECTIONS_REFUSED_TOTAL, m::LABEL_REASON => refusal.label())
            .increment(1);
    }
    metrics::gauge!(m::CONNECTIONS).decrement(1.0);
}

/// Writes the owed answers in order, flushing whenever no further answer is ready.
async fn write(writer: OwnedWriteHalf, mut queue: mpsc::Receiver<Owed>) {
    let mut writer = BufWriter::new(writer);
    while let Some(owed) = queue.recv().await {
        let response = match owed.response {
            Pending::Ready(r) => *r,
            Pending::Spawned(task) => match task.await {
                Ok(r) => r,
                Err(e) => {
                    warn!(api = ?owed.api, error = %e, "a Kafka request handler failed");
                    break;
                }
            },
        };
        count(owed.api, api::first_error(&response), owed.started);
        let bytes = match encode_response(owed.api, owed.version, owed.correlation_id, &response) {
            Ok(b) => b,
            Err(e) => {
                warn!(error = %e, "cannot encode a Kafka response; closing the connection");
                break;
            }
        };
        if writer.write_all(&bytes).await.is_err() {
            break;
        }
        trace!(api = ?owed.api, correlation_id = owed.correlation_id, bytes = bytes.len(), "Kafka answer");
        if queue.is_empty() && writer.flush().await.is_err() {
            break;
        }
    }
    let _ = writer.flush().await;
    let _ = writer.shutdown().await;
}

/// Counts an answered request.
fn count(api: ApiKey, code: i16, started: Instant) {
    let name = format!("{api:?}");
    metrics::counter!(m::REQUESTS_TOTAL, m::LABEL_API => name.clone(), LABEL_CODE => code.to_string())
        .increment(1);
    metrics::histogram!(m::REQUEST_SECONDS, m::LABEL_API => name)
        .record(started.elapsed().as_secs_f64());
}
