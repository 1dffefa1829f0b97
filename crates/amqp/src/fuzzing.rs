//! What the fuzz targets (`fuzz/`, see `docs/fuzzing.md`, through `ferry::fuzzing`) drive
//! of this crate that is not public API: pure decoders and state machines of private
//! modules, each re-exported or wrapped as it is, with no logic of its own. Not for Ferry's
//! own code; hidden from the docs.

use amq_protocol::types::FieldTable;

pub use crate::channel::content::Content as AmqpContent;
pub use crate::connection::sasl::{
    Credentials as AmqpCredentials, Response as AmqpSaslResponse, SaslError as AmqpSaslError,
    response as amqp_sasl_response,
};

/// The frame_max a client's connection.tune-ok asks for, checked against the server's.
///
/// # Errors
/// The connection exception the handshake raises.
pub fn amqp_negotiate_frame_max(
    asked: u32,
    ours: u32,
) -> Result<u32, crate::wire::errors::AmqpError> {
    crate::connection::handshake::negotiate_frame_max(asked, ours)
}

/// What a client's connection.start-ok client properties say it supports.
pub fn amqp_capabilities(client_properties: &FieldTable) -> crate::state::context::Capabilities {
    crate::connection::handshake::capabilities_of(client_properties)
}

/// Decodes a virtual host's stored metadata.
pub fn amqp_vhost_meta(bytes: &[u8]) -> Option<crate::state::vhosts::VhostMeta> {
    crate::state::vhosts::VhostMeta::decode(bytes)
}
