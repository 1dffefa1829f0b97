//! ApiVersions: the versions of every API Ferry answers ([`super::SUPPORTED`]). A client
//! asking with a version Ferry does not know gets `UNSUPPORTED_VERSION` with the list, in
//! the v0 format every client can read (KIP-511), and retries with a version it supports.

use super::SUPPORTED;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiVersionsResponse, ResponseKind};

/// The answer to an ApiVersions request of `version`.
pub(super) fn handle(_version: i16) -> ResponseKind {
    ResponseKind::ApiVersions(table())
}

/// The answer to an ApiVersions request of a version Ferry does not answer; encode it at
/// version 0.
pub(crate) fn unsupported_version() -> ResponseKind {
    ResponseKind::ApiVersions(table().with_error_code(ResponseError::UnsupportedVersion.code()))
}

fn table() -> ApiVersionsResponse {
    ApiVersionsResponse::default().with_api_keys(
        SUPPORTED
            .iter()
            .map(|&(api, min, max)| {
                ApiVersion::default()
                    .with_api_key(api as i16)
                    .with_min_version(min)
                    .with_max_version(max)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::codec::encode_response;
    use kafka_protocol::messages::ApiKey;

    #[test]
    fn every_advertised_version_is_one_kafka_protocol_knows() {
        for &(api, min, max) in SUPPORTED {
            let known = api.valid_versions();
            // Produce v0–v2 are Ferry's own (crate::wire::codec).
            let min = if api == ApiKey::Produce {
                min.max(3)
            } else {
                min
            };
            assert!(
                known.min <= min && max <= known.max,
                "{api:?} {min}..={max}"
            );
        }
    }

    #[test]
    fn the_answer_encodes_at_every_version() {
        for version in 0..=4 {
            encode_response(ApiKey::ApiVersions, version, 1, &handle(version)).unwrap();
        }
        encode_response(ApiKey::ApiVersions, 0, 1, &unsupported_version()).unwrap();
    }
}
