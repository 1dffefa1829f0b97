//! The Kafka wire codec, free of I/O: size-prefixed frames, request headers and bodies
//! decoded by API key and version with `kafka-protocol`, responses encoded with the header
//! version their API and version call for (flexible versions carry tagged fields; an
//! ApiVersions answer always has the v0 header).
//!
//! Produce v0–v2, which `kafka-protocol` (generated from Kafka 4's schemas, which dropped
//! them) no longer knows, are handled here: a v0–v2 request body is v3's without its
//! leading transactional id, so it is decoded as v3 behind a null one (the request keeps
//! its own version), and the answer is encoded by hand (v0: offsets; v1 adds
//! `throttle_time_ms`; v2 each partition's `log_append_time`).
//!
//! A frame's declared size is checked against the configured maximum before any buffer is
//! grown for it, and the buffer then grows only as bytes arrive, so a client that declares
//! a large frame and sends nothing costs no memory.

use crate::wire::legacy::PRODUCE_WITH_MESSAGE_SETS_BELOW;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable};

/// Bytes of the size prefix of every frame.
const SIZE_PREFIX: usize = 4;
/// Most bytes the read buffer grows by at once while a frame arrives.
const READ_CHUNK: usize = 64 * 1024;

/// Why a frame or request could not be decoded; each closes the connection (except an
/// unsupported ApiVersions version, which Kafka answers).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CodecError {
    /// The declared frame size is larger than `kafka.max_request_size`.
    #[error("the client declared a {size}-byte request; kafka.max_request_size is {max}")]
    TooLarge {
        /// The declared size.
        size: usize,
        /// The configured maximum.
        max: usize,
    },
    /// The declared frame size is negative.
    #[error("the client declared a request of negative size {0}")]
    NegativeSize(i32),
    /// The frame is too short to hold a request header.
    #[error("the request is truncated: {0} bytes cannot hold a request header")]
    Truncated(usize),
    /// The API key is not one Kafka defines.
    #[error("API key {0} is not a Kafka API")]
    UnknownApi(i16),
    /// Ferry does not implement this API at this version.
    #[error("{api:?} version {version} is not supported")]
    Unsupported {
        /// The API.
        api: ApiKey,
        /// The version asked for.
        version: i16,
        /// The request's correlation id, to answer an ApiVersions request in kind.
        correlation_id: i32,
    },
    /// The header or body does not decode at its version.
    #[error("cannot decode {api:?} version {version}: {reason}")]
    Malformed {
        /// The API.
        api: ApiKey,
        /// The version.
        version: i16,
        /// What the decoder said.
        reason: String,
    },
    /// A response could not be encoded (a bug: a field set that the version lacks).
    #[error("cannot encode the {api:?} version {version} response: {reason}")]
    Encode {
        /// The API.
        api: ApiKey,
        /// The version.
        version: i16,
        /// What the encoder said.
        reason: String,
    },
}

/// Splits size-prefixed frames off a read buffer.
#[derive(Debug, Clone, Copy)]
pub struct FrameDecoder {
    /// The largest frame accepted (`kafka.max_request_size`).
    max: usize,
}

impl FrameDecoder {
    /// A decoder refusing frames over `max` bytes.
    pub fn new(max: usize) -> Self {
        Self { max }
    }

    /// Takes the next whole frame (without its size prefix) off `buf`; `Ok(None)` when more
    /// bytes are needed, after reserving room for at most the next [`READ_CHUNK`] of them.
    ///
    /// # Errors
    /// [`CodecError::TooLarge`] or [`CodecError::NegativeSize`] as soon as the size prefix
    /// has arrived, before anything is reserved for the frame.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Bytes>, CodecError> {
        if buf.len() < SIZE_PREFIX {
            buf.reserve(SIZE_PREFIX);
            return Ok(None);
        }
        let declared = i32::from_be_bytes(buf[..SIZE_PREFIX].try_into().expect("4 bytes"));
        let size = usize::try_from(declared).map_err(|_| CodecError::NegativeSize(declared))?;
        if size > self.max {
            return Err(CodecError::TooLarge {
                size,
                max: self.max,
            });
        }
        let have = buf.len() - SIZE_PREFIX;
        if have < size {
            buf.reserve((size - have).min(READ_CHUNK));
            return Ok(None);
        }
        buf.advance(SIZE_PREFIX);
        Ok(Some(buf.split_to(size).freeze()))
    }
}

impl FrameDecoder {
    /// The API key of the frame at the head of `buf` when the whole frame is there (and
    /// within the size limit): lets a connection see what its client pipelined.
    pub fn next_api(&self, buf: &[u8]) -> Option<i16> {
        let declared = i32::from_be_bytes(buf.get(..SIZE_PREFIX)?.try_into().ok()?);
        let size = usize::try_from(declared).ok().filter(|s| *s <= self.max)?;
        let frame = buf.get(SIZE_PREFIX..SIZE_PREFIX + size)?;
        Some(i16::from_be_bytes(frame.get(..2)?.try_into().ok()?))
    }
}

/// A decoded request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Its header (API key and version, correlation id, client id).
    pub header: RequestHeader,
    /// The API.
    pub api: ApiKey,
    /// The body.
    pub body: RequestKind,
}

impl Request {
    /// The API version.
    pub fn version(&self) -> i16 {
        self.header.request_api_version
    }
}

/// Decodes one frame into a request, if `supported(api, version)` says Ferry implements it.
///
/// # Errors
/// [`CodecError::Truncated`], [`CodecError::UnknownApi`], [`CodecError::Unsupported`] or
/// [`CodecError::Malformed`].
pub fn decode_request(
    mut frame: Bytes,
    supported: impl Fn(ApiKey, i16) -> bool,
) -> Result<Request, CodecError> {
    if frame.len() < 8 {
        return Err(CodecError::Truncated(frame.len()));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let api = ApiKey::try_from(key).map_err(|()| CodecError::UnknownApi(key))?;
    let malformed = |e: anyhow::Error| CodecError::Malformed {
        api,
        version,
        reason: format!("{e:#}"),
    };
    let header_version = api.request_header_version(version);
    let header = RequestHeader::decode(&mut frame, header_version).map_err(malformed)?;
    if !supported(api, version) {
        return Err(CodecError::Unsupported {
            api,
            version,
            correlation_id: header.correlation_id,
        });
    }
    let body = if api == ApiKey::Produce && version < PRODUCE_WITH_MESSAGE_SETS_BELOW {
        let mut v3 = BytesMut::with_capacity(2 + frame.len());
        v3.put_i16(-1); // a null transactional id
        v3.extend_from_slice(&frame);
        RequestKind::decode(api, &mut v3.freeze(), PRODUCE_WITH_MESSAGE_SETS_BELOW)
    } else {
        RequestKind::decode(api, &mut frame, version)
    }
    .map_err(malformed)?;
    Ok(Request { header, api, body })
}

/// Encodes `response` to request `correlation_id` of `api` at `version`, size prefix
/// included.
///
/// # Errors
/// [`CodecError::Encode`] when the response holds a field its version lacks.
pub(crate) fn encode_response(
    api: ApiKey,
    version: i16,
    correlation_id: i32,
    response: &ResponseKind,
) -> Result<Bytes, CodecError> {
    let error = |e: anyhow::Error| CodecError::Encode {
        api,
        version,
        reason: format!("{e:#}"),
    };
    let mut buf = BytesMut::with_capacity(64);
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, response.header_version(version))
        .map_err(error)?;
    match response {
        ResponseKind::Produce(r) if version < PRODUCE_WITH_MESSAGE_SETS_BELOW => {
            encode_old_produce_response(&mut buf, r, version).map_err(error)?;
        }
        _ => response.encode(&mut buf, version).map_err(error)?,
    }
    let size = i32::try_from(buf.len() - SIZE_PREFIX).map_err(|_| CodecError::Encode {
        api,
        version,
        reason: format!("{} bytes do not fit a frame", buf.len()),
    })?;
    buf[..SIZE_PREFIX].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

/// Writes a Produce v0–v2 answer's body: per topic its name and per partition its index,
/// error code and base offset (v2: and log append time), then (v1+) the throttle time.
fn encode_old_produce_response(
    buf: &mut BytesMut,
    response: &kafka_protocol::messages::ProduceResponse,
    version: i16,
) -> anyhow::Result<()> {
    let count = |n: usize| i32::try_from(n).map_err(|_| anyhow::anyhow!("{n} entries"));
    buf.put_i32(count(response.responses.len())?);
    for topic in &response.responses {
        let name = topic.name.0.as_bytes();
        buf.put_i16(i16::try_from(name.len())?);
        buf.put_slice(name);
        buf.put_i32(count(topic.partition_responses.len())?);
        for p in &topic.partition_responses {
            buf.put_i32(p.index);
            buf.put_i16(p.error_code);
            buf.put_i64(p.base_offset);
            if version >= 2 {
                buf.put_i64(p.log_append_time_ms);
            }
        }
    }
    if version >= 1 {
        buf.put_i32(response.throttle_time_ms);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest, MetadataResponse};
    use kafka_protocol::protocol::StrBytes;

    fn frame_of(api: ApiKey, version: i16, body: &impl Encodable) -> Bytes {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(api as i16)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .with_client_id(Some(StrBytes::from_static_str("test")))
            .encode(&mut buf, api.request_header_version(version))
            .unwrap();
        body.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    #[test]
    fn frames_are_split_off_whole() {
        let d = FrameDecoder::new(100);
        let mut buf = BytesMut::new();
        assert_eq!(d.decode(&mut buf), Ok(None));
        buf.extend_from_slice(&[0, 0, 0, 3, b'a', b'b']);
        assert_eq!(d.decode(&mut buf), Ok(None));
        buf.extend_from_slice(b"cd");
        assert_eq!(d.decode(&mut buf), Ok(Some(Bytes::from_static(b"abc"))));
        assert_eq!(&buf[..], b"d");
    }

    #[test]
    fn the_next_whole_frames_api_is_visible() {
        let d = FrameDecoder::new(100);
        assert_eq!(d.next_api(&[0, 0, 0, 4, 0, 3, 0]), None, "not whole yet");
        assert_eq!(d.next_api(&[0, 0, 0, 4, 0, 3, 0, 9]), Some(3));
        assert_eq!(
            FrameDecoder::new(2).next_api(&[0, 0, 0, 4, 0, 3, 0, 9]),
            None
        );
    }

    #[test]
    fn an_oversized_declaration_is_refused_before_reserving() {
        let d = FrameDecoder::new(1000);
        let mut buf = BytesMut::from(&i32::MAX.to_be_bytes()[..]);
        let capacity = buf.capacity();
        assert_eq!(
            d.decode(&mut buf),
            Err(CodecError::TooLarge {
                size: i32::MAX as usize,
                max: 1000
            })
        );
        assert_eq!(buf.capacity(), capacity);
        let mut negative = BytesMut::from(&(-5i32).to_be_bytes()[..]);
        assert_eq!(d.decode(&mut negative), Err(CodecError::NegativeSize(-5)));
    }

    #[test]
    fn a_large_frame_reserves_only_a_chunk_at_a_time() {
        let d = FrameDecoder::new(10 << 20);
        let mut buf = BytesMut::from(&(8i32 << 20).to_be_bytes()[..]);
        assert_eq!(d.decode(&mut buf), Ok(None));
        assert!(buf.capacity() <= READ_CHUNK + 64, "{}", buf.capacity());
    }

    #[test]
    fn requests_decode_by_key_and_version() {
        let body = MetadataRequest::default().with_topics(None);
        for version in [0, 9, 12] {
            let r =
                decode_request(frame_of(ApiKey::Metadata, version, &body), |_, _| true).unwrap();
            assert_eq!(r.api, ApiKey::Metadata);
            assert_eq!(r.version(), version);
            assert_eq!(r.header.correlation_id, 7);
        }
    }

    #[test]
    fn unknown_unsupported_truncated_and_malformed_requests_are_told_apart() {
        let mut unknown = BytesMut::new();
        unknown.extend_from_slice(&[0x7f, 0x00, 0, 0, 0, 0, 0, 1, 0xff, 0xff]);
        assert_eq!(
            decode_request(unknown.freeze(), |_, _| true),
            Err(CodecError::UnknownApi(0x7f00))
        );
        let req = ApiVersionsRequest::default();
        assert!(matches!(
            decode_request(frame_of(ApiKey::ApiVersions, 3, &req), |_, _| false),
            Err(CodecError::Unsupported {
                api: ApiKey::ApiVersions,
                version: 3,
                correlation_id: 7
            })
        ));
        assert_eq!(
            decode_request(Bytes::from_static(&[0, 3, 0]), |_, _| true),
            Err(CodecError::Truncated(3))
        );
        let whole = frame_of(
            ApiKey::Metadata,
            1,
            &MetadataRequest::default().with_topics(Some(vec![Default::default()])),
        );
        let cut = whole.slice(..whole.len() - 2);
        assert!(matches!(
            decode_request(cut, |_, _| true),
            Err(CodecError::Malformed {
                api: ApiKey::Metadata,
                version: 1,
                ..
            })
        ));
    }

    #[test]
    fn responses_carry_size_and_correlation_id() {
        let r = ResponseKind::Metadata(MetadataResponse::default());
        let bytes = encode_response(ApiKey::Metadata, 9, 42, &r).unwrap();
        let size = i32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
        assert_eq!(size, bytes.len() - 4);
        assert_eq!(i32::from_be_bytes(bytes[4..8].try_into().unwrap()), 42);
        // Metadata v9 is flexible: the header's empty tagged-field section follows.
        assert_eq!(bytes[8], 0);
    }

    /// A Produce request of `version` (0–2) as an old client encodes it: acks -1, timeout
    /// 1000, topic `t`, partition 3 with records `abc`.
    fn old_produce_frame(version: i16) -> Bytes {
        let mut buf = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(ApiKey::Produce as i16)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .encode(&mut buf, 1)
            .unwrap();
        buf.put_i16(-1);
        buf.put_i32(1000);
        buf.put_i32(1);
        buf.put_i16(1);
        buf.put_slice(b"t");
        buf.put_i32(1);
        buf.put_i32(3);
        buf.put_i32(3);
        buf.put_slice(b"abc");
        buf.freeze()
    }

    #[test]
    fn old_produce_requests_decode_and_their_answers_encode_by_version() {
        use kafka_protocol::messages::ProduceResponse;
        use kafka_protocol::messages::produce_response::{
            PartitionProduceResponse, TopicProduceResponse,
        };
        for version in 0..PRODUCE_WITH_MESSAGE_SETS_BELOW {
            let r = decode_request(old_produce_frame(version), |_, _| true).unwrap();
            assert_eq!(r.version(), version);
            let RequestKind::Produce(p) = r.body else {
                panic!("not a produce request");
            };
            assert_eq!((p.acks, p.timeout_ms, p.transactional_id), (-1, 1000, None));
            let partition = &p.topic_data[0].partition_data[0];
            assert_eq!(p.topic_data[0].name.0.as_str(), "t");
            assert_eq!(partition.index, 3);
            assert_eq!(partition.records.as_deref(), Some(&b"abc"[..]));
        }
        let answer = ResponseKind::Produce(
            ProduceResponse::default()
                .with_throttle_time_ms(5)
                .with_responses(vec![
                    TopicProduceResponse::default()
                        .with_name(kafka_protocol::messages::TopicName(
                            kafka_protocol::protocol::StrBytes::from_static_str("t"),
                        ))
                        .with_partition_responses(vec![
                            PartitionProduceResponse::default()
                                .with_index(3)
                                .with_base_offset(10)
                                .with_log_append_time_ms(99),
                        ]),
                ]),
        );
        let body =
            |version| encode_response(ApiKey::Produce, version, 7, &answer).unwrap()[8..].to_vec();
        let v0: Vec<u8> = [
            &1i32.to_be_bytes()[..],
            &1i16.to_be_bytes(),
            b"t",
            &1i32.to_be_bytes(),
            &3i32.to_be_bytes(),
            &0i16.to_be_bytes(),
            &10i64.to_be_bytes(),
        ]
        .concat();
        assert_eq!(body(0), v0);
        assert_eq!(body(1), [&v0[..], &5i32.to_be_bytes()].concat());
        assert_eq!(
            body(2),
            [&v0[..], &99i64.to_be_bytes(), &5i32.to_be_bytes()].concat()
        );
    }
}
