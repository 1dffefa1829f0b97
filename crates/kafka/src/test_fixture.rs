//! The fixture of the in-process API tests (and of the bridge's tests of its Kafka front
//! sink): a Kafka front's [`Context`] over a fresh
//! embedded store in a temporary directory, with the background loops
//! [`KafkaFront::run`] starts (sequencers, broker registration, topic cache, group leases,
//! transaction expiry) — and no socket. A [`Client`] plays one connection: it sends a
//! typed request at an API version through the request codec and the API dispatch
//! ([`api::handle`]), and reads the reply back as the typed response a client at that
//! version decodes.
//!
//! The listeners `KafkaFront::start` needs to learn their advertised addresses (a
//! PLAINTEXT one, and an SSL one for clients of a TLS peer) are bound on 127.0.0.1:0 and
//! dropped unserved.

/// The topic settings, for tests that set a topic's.
pub mod topic_settings {
    pub use crate::metadata::settings::{CompressionType, TimestampType, TopicConfig};
}

use crate::api::{self, Reply, Session};
use crate::wire::codec::{decode_request, encode_response};
use crate::wire::legacy::PRODUCE_WITH_MESSAGE_SETS_BELOW;
use crate::{Background, Context, KafkaFront};
use bytes::{Bytes, BytesMut};
use ferry_auth::UserConfig;
use ferry_auth::default_users;
use ferry_config::KafkaConfig;
use ferry_stage::Stages;
use ferry_stage::{Incarnation, Scope};
use ferry_store::StoreConfig;
use ferry_telemetry::memory_watermark::MemoryWatermark;
use kafka_protocol::messages::{
    ApiKey, ProduceRequest, RequestHeader, RequestKind, ResponseHeader, ResponseKind, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use std::marker::PhantomData;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Longest a test waits for any one answer before it fails.
pub const PATIENCE: Duration = Duration::from_secs(10);

/// The timestamp of the first record of every batch [`batch`] builds; each further
/// record is 10 ms newer.
pub const FIRST_TIMESTAMP: i64 = 1_700_000_000_000;

/// Test settings: no initial rebalance delay, short session timeouts allowed.
pub fn test_config() -> KafkaConfig {
    KafkaConfig {
        listen: "127.0.0.1:0".into(),
        group_initial_rebalance_delay_ms: 0,
        group_min_session_timeout_ms: 100,
        ..KafkaConfig::default()
    }
}

/// A Kafka front's request handlers over their own store.
pub struct Front {
    /// What the handlers share.
    pub ctx: Arc<Context>,
    /// The loops `KafkaFront::run` would run.
    background: Background,
    /// Keeps the store's directory for the test's life; `None` for a [`Front::peer`].
    dir: Option<tempfile::TempDir>,
}

impl Front {
    /// A front with [`test_config`] and the default users (`guest`/`guest`).
    pub async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    /// A front with [`test_config`] changed by `edit`.
    pub async fn start_with(edit: impl FnOnce(&mut KafkaConfig)) -> Self {
        let mut config = test_config();
        edit(&mut config);
        Self::start_as(config, &default_users()).await
    }

    /// A front with `config` and `users`.
    pub async fn start_as(config: KafkaConfig, users: &[UserConfig]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = StoreConfig {
            path: dir.path().join("store"),
            cache_mb: 16,
            ..StoreConfig::default()
        };
        let db = ferry_store::Database::open(&store).await.unwrap();
        let stages = Stages::new(db, &store.prefix);
        stages.ensure_schema().await.unwrap();
        Self::over(config, users, stages, Some(dir)).await
    }

    /// Another front over this one's store, as a second Ferry instance (node `node_id`)
    /// over one store: stop it before this one, which closes the store.
    pub async fn peer(&self, node_id: i32) -> Self {
        let config = KafkaConfig {
            node_id,
            ..self.ctx.config.clone()
        };
        let stages = Stages::new(self.ctx.db.clone(), &StoreConfig::default().prefix);
        Self::over(config, &default_users(), stages, None).await
    }

    /// A front with `config` and `users` over `stages`' store; `dir` holds the store
    /// when this front owns it.
    async fn over(
        config: KafkaConfig,
        users: &[UserConfig],
        stages: Stages,
        dir: Option<tempfile::TempDir>,
    ) -> Self {
        let prefix = StoreConfig::default().prefix;
        let listener = TcpListener::bind(&config.listen).await.unwrap();
        // An SSL listener too, so Metadata has an address for clients of a TLS peer
        // (`client_as`); never served, so it needs no certificate.
        let ssl = crate::KafkaListener {
            protocol: ferry_config::listeners::SecurityProtocol::Ssl,
            socket: ferry_tls::server::Listener {
                tcp: TcpListener::bind("127.0.0.1:0").await.unwrap(),
                key: "kafka.listeners[0]".to_owned(),
                tls: None,
            },
        };
        let users = ferry_auth::Authenticator::start(stages.db().clone(), &prefix, users)
            .await
            .unwrap();
        let incarnation =
            Incarnation::begin(stages.db(), &prefix, config.node_id, Scope::of(stages.db()))
                .await
                .unwrap();
        let front = KafkaFront::start(
            &config,
            users,
            MemoryWatermark::unlimited(),
            stages,
            &prefix,
            vec![crate::KafkaListener::plaintext(listener), ssl],
            &incarnation,
            CancellationToken::new(),
        )
        .await
        .unwrap();
        let KafkaFront { ctx, internal, .. } = front;
        let background = Background::spawn(&ctx, internal);
        Self {
            ctx,
            background,
            dir,
        }
    }

    /// A client connected from 127.0.0.1.
    pub fn client(&self) -> Client {
        self.client_from(SocketAddr::from(([127, 0, 0, 1], 50_000)))
    }

    /// A client connected from `addr` on a plaintext listener.
    pub fn client_from(&self, addr: SocketAddr) -> Client {
        self.client_as(ferry_auth::peer::Peer::plaintext(addr))
    }

    /// A client at the other end of `peer` (a TLS session, a client certificate), on the
    /// PLAINTEXT listener, or the SSL one when `peer` is TLS.
    pub fn client_as(&self, peer: ferry_auth::peer::Peer) -> Client {
        use ferry_config::listeners::SecurityProtocol;
        let (listener, require_sasl) = if peer.is_tls() {
            (SecurityProtocol::Ssl, false)
        } else {
            (SecurityProtocol::Plaintext, self.ctx.config.require_sasl)
        };
        let mut session = Session::new(peer, listener, require_sasl, &self.ctx.principal_rules);
        session.client_id = "api-test".into();
        Client {
            ctx: self.ctx.clone(),
            session,
            correlation_id: 0,
        }
    }

    /// Stops the front as the daemon's shutdown does, then closes the store if it owns it.
    pub async fn stop(self) {
        self.ctx.shutdown.cancel();
        self.background.stop(&self.ctx).await;
        if self.dir.is_some() {
            self.ctx.db.close().await;
        }
    }
}

/// One connection's worth of a client: its session, and requests in order.
pub struct Client {
    /// What the handlers share.
    ctx: Arc<Context>,
    /// What the connection knows about its client.
    pub(crate) session: Session,
    /// The last request's correlation id.
    correlation_id: i32,
}

/// How the front answered one request.
pub enum Answer<R> {
    /// With a response, now or from a spawned future.
    Response(Pending<R>),
    /// With a response, then the connection closes.
    Last(R),
    /// Not at all (a produce with `acks=0`).
    Nothing,
    /// The connection closes, for this reason.
    Close(String),
}

/// A response being computed, as the connection's writer would wait for it.
pub struct Pending<R> {
    /// The API version the response is read at.
    version: i16,
    /// The response, or the task computing it.
    task: JoinHandle<ResponseKind>,
    _response: PhantomData<R>,
}

impl<R: Decodable> Pending<R> {
    /// The response, as a client at the request's version decodes it.
    pub async fn response(self) -> R {
        let kind = tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("answered in time")
            .expect("the handler does not panic");
        decoded(&kind, self.version)
    }

    /// Whether the response is ready.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl<R: Decodable> Answer<R> {
    /// The response of an answer that keeps the connection open.
    pub async fn response(self) -> R {
        match self {
            Self::Response(pending) => pending.response().await,
            Self::Last(_) => panic!("answered, then closing the connection"),
            Self::Nothing => panic!("not answered"),
            Self::Close(reason) => panic!("closing the connection: {reason}"),
        }
    }
}

impl Client {
    /// Sends `request` at `version`: its ordered part runs before this returns; a `Later`
    /// answer is spawned, as the connection spawns it.
    pub async fn send<Q>(&mut self, version: i16, request: Q) -> Answer<Q::Response>
    where
        Q: Request + Into<RequestKind>,
    {
        let request = self.decoded_request(version, request);
        let reply = api::handle(&self.ctx, &mut self.session, request).await;
        answer(reply, version)
    }

    /// Sends `request` at `version` and waits for its response.
    pub async fn call<Q>(&mut self, version: i16, request: Q) -> Q::Response
    where
        Q: Request + Into<RequestKind>,
    {
        self.send(version, request).await.response().await
    }

    /// Sends produce requests at `version` as one burst (requests a client pipelined);
    /// one answer per request, in order.
    pub async fn produce_burst(
        &mut self,
        version: i16,
        requests: Vec<ProduceRequest>,
    ) -> Vec<Answer<<ProduceRequest as Request>::Response>> {
        let requests = requests
            .into_iter()
            .map(|r| match self.decoded_request(version, r).body {
                RequestKind::Produce(r) => (version, r),
                other => unreachable!("a produce request decodes as {other:?}"),
            })
            .collect();
        api::produce_burst(&self.ctx, &self.session, requests, Duration::ZERO)
            .await
            .into_iter()
            .map(|reply| answer(reply, version))
            .collect()
    }

    /// Sends `request` of `api` at `version` and waits for the answer the connection
    /// writes: the handler's response, which must encode at `version` through the front's
    /// codec (as the connection encodes it) and decode whole; `None` when not answered (a
    /// produce with `acks=0`).
    pub async fn exchange(
        &mut self,
        api: ApiKey,
        version: i16,
        request: RequestKind,
    ) -> Option<ResponseKind> {
        let request = self.decoded_kind(api, version, request);
        let kind = match api::handle(&self.ctx, &mut self.session, request).await {
            Reply::Now(kind) | Reply::Last(kind) => kind,
            Reply::Later(future) => tokio::time::timeout(PATIENCE, future)
                .await
                .unwrap_or_else(|_| panic!("{api:?} v{version} answered in time")),
            Reply::Nothing => return None,
            Reply::Close(reason) => panic!("{api:?} v{version} closes the connection: {reason}"),
        };
        let frame = encode_response(api, version, self.correlation_id, &kind)
            .unwrap_or_else(|e| panic!("{e}"));
        // Produce v0–v2 answers are written by the codec itself; `kafka-protocol` cannot
        // read them.
        if api != ApiKey::Produce || version >= PRODUCE_WITH_MESSAGE_SETS_BELOW {
            let mut body = frame.slice(4..);
            ResponseHeader::decode(&mut body, kind.header_version(version))
                .expect("the response header decodes");
            ResponseKind::decode(api, &mut body, version)
                .unwrap_or_else(|e| panic!("{api:?} v{version} response does not decode: {e:#}"));
            assert!(body.is_empty(), "{api:?} v{version} response decodes whole");
        }
        Some(kind)
    }

    /// `request` as the front receives it from a client at `version`: encoded with its
    /// header and decoded by the front's codec (which refuses a version Ferry does not
    /// answer).
    fn decoded_request<Q>(&mut self, version: i16, request: Q) -> crate::wire::codec::Request
    where
        Q: Request + Into<RequestKind>,
    {
        let api = ApiKey::try_from(Q::KEY).expect("a Kafka API");
        self.decoded_kind(api, version, request.into())
    }

    /// [`Self::decoded_request`] of a request of `api`.
    fn decoded_kind(
        &mut self,
        api: ApiKey,
        version: i16,
        request: RequestKind,
    ) -> crate::wire::codec::Request {
        self.correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_string(self.session.client_id.clone())));
        let mut frame = BytesMut::new();
        header
            .encode(&mut frame, api.request_header_version(version))
            .expect("the header encodes");
        let does_not_encode =
            |e: anyhow::Error| panic!("{api:?} v{version} does not encode: {e:#}");
        if api == ApiKey::Produce && version < PRODUCE_WITH_MESSAGE_SETS_BELOW {
            // Produce v0–v2 is v3 without the transactional id (`kafka-protocol` knows v3
            // and later only); its records are a message set.
            let mut v3 = BytesMut::new();
            request
                .encode(&mut v3, PRODUCE_WITH_MESSAGE_SETS_BELOW)
                .unwrap_or_else(does_not_encode);
            frame.extend_from_slice(&v3[2..]);
        } else {
            request
                .encode(&mut frame, version)
                .unwrap_or_else(does_not_encode);
        }
        decode_request(frame.freeze(), api::supported)
            .unwrap_or_else(|e| panic!("the front refuses {api:?} v{version}: {e}"))
    }
}

/// The answer a connection makes of `reply` (a `Later` future spawned).
fn answer<R>(reply: Reply, version: i16) -> Answer<R>
where
    R: Decodable,
{
    let pending = |task| {
        Answer::Response(Pending {
            version,
            task,
            _response: PhantomData,
        })
    };
    match reply {
        Reply::Now(kind) => pending(tokio::spawn(async move { kind })),
        Reply::Later(future) => pending(tokio::spawn(future)),
        Reply::Last(kind) => Answer::Last(decoded(&kind, version)),
        Reply::Nothing => Answer::Nothing,
        Reply::Close(reason) => Answer::Close(reason),
    }
}

/// `kind` as a client at `version` reads it: encoded at that version (which fails for a
/// field the version lacks) and decoded as the typed response.
fn decoded<R: Decodable>(kind: &ResponseKind, version: i16) -> R {
    let mut buf = BytesMut::new();
    kind.encode(&mut buf, version)
        .unwrap_or_else(|e| panic!("the response does not encode at v{version}: {e:#}"));
    let mut bytes = buf.freeze();
    let response = R::decode(&mut bytes, version).expect("the response decodes");
    assert!(bytes.is_empty(), "the response decodes whole");
    response
}

/// A topic name.
pub fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_owned()))
}

/// A protocol string.
pub fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// A plain batch of `values` (no producer id), as a client without idempotence sends it;
/// record `i` has timestamp [`FIRST_TIMESTAMP`]` + 10·i`.
pub fn batch(values: &[&str]) -> Bytes {
    encode(values, None, false)
}

/// A batch of `values` from `producer` (id, epoch) starting at `sequence`; in its
/// producer's transaction when `transactional`.
pub fn producer_batch(
    values: &[&str],
    producer: (i64, i16),
    sequence: i32,
    transactional: bool,
) -> Bytes {
    encode(values, Some((producer, sequence)), transactional)
}

fn encode(values: &[&str], producer: Option<((i64, i16), i32)>, transactional: bool) -> Bytes {
    let ((producer_id, producer_epoch), first_sequence) = producer.unwrap_or(((-1, -1), -1));
    let records: Vec<Record> = values
        .iter()
        .zip(0..)
        .map(|(v, i)| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            // The encoder batches records whose offset - sequence is constant; without a
            // producer the first record's -1 is the batch's base sequence.
            sequence: first_sequence + i,
            timestamp: FIRST_TIMESTAMP + 10 * i64::from(i),
            key: None,
            value: Some(Bytes::from(v.to_string())),
            headers: Vec::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

/// The (offset, value) of every data record in `batches`, control records left out.
pub fn values(batches: &Bytes) -> Vec<(i64, String)> {
    let mut bytes = batches.clone();
    kafka_protocol::records::RecordBatchDecoder::decode_all(&mut bytes)
        .unwrap()
        .into_iter()
        .flat_map(|set| set.records)
        .filter(|r| !r.control)
        .map(|r| {
            let value = r.value.map(|v| String::from_utf8(v.to_vec()).unwrap());
            (r.offset, value.unwrap_or_default())
        })
        .collect()
}
