//! What the fuzz targets (`fuzz/`, see `docs/fuzzing.md`) drive that is not public API:
//! pure decoders and state machines of private modules, each re-exported or wrapped
//! as it is, with no logic of its own. Not for Ferry's own code; hidden from the docs.

use crate::kafka::api::{Session, sasl_handshake};
use crate::kafka::log::{Aborted, LogError};
use crate::kafka::port::CommittedRead;
use amq_protocol::types::FieldTable;
use kafka_protocol::messages::{ResponseKind, SaslHandshakeRequest};

pub use crate::amqp::channel::content::Content as AmqpContent;
pub use crate::amqp::connection::sasl::{
    Credentials as AmqpCredentials, Response as AmqpSaslResponse, SaslError as AmqpSaslError,
    response as amqp_sasl_response,
};
pub use ferry_auth::fuzzing::{user_permissions, user_topic_permission};
pub use ferry_stage::fuzzing::{DequeueRequest, decode_counter, decode_u64};

/// The frame_max a client's connection.tune-ok asks for, checked against the server's.
///
/// # Errors
/// The connection exception the handshake raises.
pub fn amqp_negotiate_frame_max(
    asked: u32,
    ours: u32,
) -> Result<u32, crate::amqp::errors::AmqpError> {
    crate::amqp::connection::handshake::negotiate_frame_max(asked, ours)
}

/// What a client's connection.start-ok client properties say it supports.
pub fn amqp_capabilities(client_properties: &FieldTable) -> crate::amqp::context::Capabilities {
    crate::amqp::connection::handshake::capabilities_of(client_properties)
}

/// A Kafka SASL PLAIN message split into (user, password).
pub fn kafka_sasl_plain(bytes: &[u8]) -> Option<(&str, &str)> {
    crate::kafka::api::sasl_authenticate::parse_plain(bytes)
}

/// SaslHandshake on a fresh plaintext session: the answer, and the mechanism chosen.
pub fn kafka_sasl_handshake(request: SaslHandshakeRequest) -> (ResponseKind, Option<&'static str>) {
    let peer =
        ferry_auth::peer::Peer::plaintext(std::net::SocketAddr::from(([127, 0, 0, 1], 9092)));
    let rules = ferry_auth::principal::PrincipalRules::parse("DEFAULT").expect("the default rule");
    let mut session = Session::new(
        peer,
        crate::config::listeners::SecurityProtocol::SaslPlaintext,
        true,
        &rules,
    );
    let response = sasl_handshake::handle(&mut session, 1, request);
    let chosen = match session.sasl {
        crate::kafka::api::SaslState::Chosen(m) => Some(m.name()),
        _ => None,
    };
    (response, chosen)
}

/// Decodes a read of a partition log from offset `from`, as the bridge reads the Kafka
/// front, with batches decompressing to at most `max_decompressed` bytes.
///
/// # Errors
/// [`LogError::Corrupt`] when a batch header is broken.
pub fn kafka_decode_committed(
    bytes: &[u8],
    from: i64,
    aborted: &[Aborted],
    max_decompressed: usize,
) -> Result<CommittedRead, LogError> {
    crate::kafka::port::decode_committed(bytes, from, aborted, max_decompressed)
}

/// Decodes a topic's stored metadata.
///
/// # Errors
/// The topic error a load reports.
pub fn kafka_topic_meta(
    id: u64,
    bytes: &[u8],
) -> Result<crate::kafka::topics::TopicMeta, crate::kafka::topics::TopicError> {
    crate::kafka::topics::TopicMeta::decode(id, bytes)
}

/// Decodes a transactional producer's stored state.
///
/// # Errors
/// The transaction error a load reports.
pub fn kafka_txn_state(
    producer_id: i64,
    bytes: &[u8],
) -> Result<crate::kafka::transactions::TxnState, crate::kafka::transactions::TxnError> {
    crate::kafka::transactions::TxnState::decode(producer_id, bytes)
}

/// Decodes a partition log's stored batch index entry.
///
/// # Errors
/// [`LogError::Corrupt`].
pub fn kafka_batch_index(
    base: i64,
    bytes: &[u8],
) -> Result<crate::kafka::log::BatchIndex, LogError> {
    crate::kafka::log::BatchIndex::decode(base, bytes)
}

/// Decodes a broker's stored registration and its deadline.
pub fn kafka_broker_registration(
    node: i32,
    bytes: &[u8],
) -> Option<(crate::kafka::brokers::Registration, u64)> {
    crate::kafka::brokers::Registration::decode(node, bytes)
}

/// Decodes a virtual host's stored metadata.
pub fn amqp_vhost_meta(bytes: &[u8]) -> Option<crate::amqp::vhosts::VhostMeta> {
    crate::amqp::vhosts::VhostMeta::decode(bytes)
}

/// Loads a configuration from TOML `text` with no environment overrides, as `ferry
/// validate` loads a file.
///
/// # Errors
/// The [`crate::config::ConfigError`] loading reports.
pub fn config_from_toml(text: &str) -> Result<crate::config::Config, crate::config::ConfigError> {
    crate::config::Config::from_toml(
        text,
        std::path::Path::new("ferry.toml"),
        &Default::default(),
    )
}
