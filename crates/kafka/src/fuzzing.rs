//! What the fuzz targets (`fuzz/`, see `docs/fuzzing.md`, through `ferry::fuzzing`) drive
//! of this crate that is not public API: pure decoders and state machines of private
//! modules, each re-exported or wrapped as it is, with no logic of its own. Not for Ferry's
//! own code; hidden from the docs. The `pub use`s are the private types and modules the
//! targets build their inputs from.

pub use crate::acls::model::{Acl, AclCodes, AclFilter, FilterCodes};
pub use crate::api::{SUPPORTED, supported};
pub use crate::coordinator::groups::consumer::ConsumerSettings;
pub use crate::coordinator::groups::state::{Group, GroupSettings, JoinRequest, MemberRef};
pub use crate::coordinator::groups::store::{
    CommittedOffset, decode_member, decode_meta, decode_offset, encode_offset,
};
pub use crate::keys::{KafkaKeys, decode_i64};
pub use crate::metadata::settings::{CompressionType, InvalidSetting, TimestampType, TopicConfig};
pub use crate::partition::lease::Lease;
pub use crate::partition::producers::{ProducerState, WrittenBatch};
pub use crate::partition::{append_format, staged};
pub use crate::wire::codec::{FrameDecoder, decode_request};
pub use crate::wire::{batch, legacy};

use crate::api::{Session, sasl_handshake};
pub use crate::partition::log::Aborted;
use crate::partition::log::LogError;
use crate::port::CommittedRead;
use kafka_protocol::messages::{ResponseKind, SaslHandshakeRequest};

/// A Kafka SASL PLAIN message split into (user, password).
pub fn kafka_sasl_plain(bytes: &[u8]) -> Option<(&str, &str)> {
    crate::api::sasl_authenticate::parse_plain(bytes)
}

/// SaslHandshake on a fresh plaintext session: the answer, and the mechanism chosen.
pub fn kafka_sasl_handshake(request: SaslHandshakeRequest) -> (ResponseKind, Option<&'static str>) {
    let peer =
        ferry_auth::peer::Peer::plaintext(std::net::SocketAddr::from(([127, 0, 0, 1], 9092)));
    let rules = ferry_auth::principal::PrincipalRules::parse("DEFAULT").expect("the default rule");
    let mut session = Session::new(
        peer,
        ferry_config::listeners::SecurityProtocol::SaslPlaintext,
        true,
        &rules,
    );
    let response = sasl_handshake::handle(&mut session, 1, request);
    let chosen = match session.sasl {
        crate::api::SaslState::Chosen(m) => Some(m.name()),
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
    crate::port::decode_committed(bytes, from, aborted, max_decompressed)
}

/// Decodes a topic's stored metadata.
///
/// # Errors
/// The topic error a load reports.
pub fn kafka_topic_meta(
    id: u64,
    bytes: &[u8],
) -> Result<crate::metadata::topics::TopicMeta, crate::metadata::topics::TopicError> {
    crate::metadata::topics::TopicMeta::decode(id, bytes)
}

/// Decodes a transactional producer's stored state.
///
/// # Errors
/// The transaction error a load reports.
pub fn kafka_txn_state(
    producer_id: i64,
    bytes: &[u8],
) -> Result<crate::coordinator::transactions::TxnState, crate::coordinator::transactions::TxnError>
{
    crate::coordinator::transactions::TxnState::decode(producer_id, bytes)
}

/// Decodes a partition log's stored batch index entry.
///
/// # Errors
/// [`LogError::Corrupt`].
pub fn kafka_batch_index(
    base: i64,
    bytes: &[u8],
) -> Result<crate::partition::log::BatchIndex, LogError> {
    crate::partition::log::BatchIndex::decode(base, bytes)
}

/// Decodes a broker's stored registration and its deadline.
pub fn kafka_broker_registration(
    node: i32,
    bytes: &[u8],
) -> Option<(crate::metadata::brokers::Registration, u64)> {
    crate::metadata::brokers::Registration::decode(node, bytes)
}
