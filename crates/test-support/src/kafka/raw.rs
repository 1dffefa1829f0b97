//! A raw Kafka protocol client for tests that send what real clients never would:
//! requests encoded by hand with `kafka-protocol`, arbitrary bytes, half frames.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader, ResponseKind};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a test waits for an answer or a close.
const WAIT: Duration = Duration::from_secs(10);

/// One raw connection.
pub struct Raw {
    stream: TcpStream,
    correlation_id: i32,
}

impl Raw {
    /// Connects to `addr`.
    pub async fn connect(addr: SocketAddr) -> Self {
        Self {
            stream: TcpStream::connect(addr).await.unwrap(),
            correlation_id: 0,
        }
    }

    /// Writes `bytes` as they are.
    pub async fn send_bytes(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// Closes the writing side (the server sees end of file).
    pub async fn shutdown_write(&mut self) {
        self.stream.shutdown().await.unwrap();
    }

    /// Sends `body` as `api` at `version` and decodes the answer.
    pub async fn request(
        &mut self,
        api: ApiKey,
        version: i16,
        body: &impl Encodable,
    ) -> ResponseKind {
        self.send(api, version, body).await;
        self.answer(api, version).await
    }

    /// Sends `body` as `api` at `version` without waiting for an answer.
    pub async fn send(&mut self, api: ApiKey, version: i16, body: &impl Encodable) {
        let mut encoded = BytesMut::new();
        body.encode(&mut encoded, version).unwrap();
        self.send_encoded(api, version, &encoded).await;
    }

    /// Sends an already encoded body as `api` at `version` and decodes the answer.
    pub async fn request_encoded(
        &mut self,
        api: ApiKey,
        version: i16,
        body: &[u8],
    ) -> ResponseKind {
        self.send_encoded(api, version, body).await;
        self.answer(api, version).await
    }

    /// Sends an already encoded body as `api` at `version`.
    async fn send_encoded(&mut self, api: ApiKey, version: i16, body: &[u8]) {
        self.correlation_id += 1;
        let frame = frame(api, version, self.correlation_id, body);
        self.send_bytes(&frame).await;
    }

    /// Reads the next answer, decoding it as `api` at `version`.
    pub async fn answer(&mut self, api: ApiKey, version: i16) -> ResponseKind {
        let mut frame = self.read_frame().await.expect("an answer, not a close");
        let header =
            ResponseHeader::decode(&mut frame, api.response_header_version(version)).unwrap();
        assert_eq!(header.correlation_id, self.correlation_id);
        ResponseKind::decode(api, &mut frame, version).unwrap()
    }

    /// The next frame, or `None` when the server closed the connection.
    pub async fn read_frame(&mut self) -> Option<Bytes> {
        tokio::time::timeout(WAIT, async {
            let mut size = [0u8; 4];
            if self.stream.read_exact(&mut size).await.is_err() {
                return None;
            }
            let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
            self.stream.read_exact(&mut body).await.ok()?;
            Some(Bytes::from(body))
        })
        .await
        .expect("an answer or a close within the wait")
    }

    /// Reads what is left until the connection ends; how it ended.
    pub async fn ending(&mut self) -> crate::sockets::Ending {
        crate::sockets::read_to_the_end(&mut self.stream, WAIT).await
    }

    /// Whether the server closes the connection (rather than answering) within the wait.
    pub async fn is_closed(&mut self) -> bool {
        self.read_frame().await.is_none()
    }
}

/// A request frame: size, header, encoded body.
pub fn frame(api: ApiKey, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(api as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("raw-test")))
        .encode(&mut buf, api.request_header_version(version))
        .unwrap();
    buf.extend_from_slice(body);
    let mut out = (buf.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(&buf);
    out
}

/// `body` encoded at `version`.
pub fn encoded(body: &impl Encodable, version: i16) -> Vec<u8> {
    let mut buf = BytesMut::new();
    body.encode(&mut buf, version).unwrap();
    buf.to_vec()
}

/// A v2 record batch of `values`, uncompressed, without a producer id.
pub fn batch(values: &[&str]) -> Bytes {
    batch_of(values, None, false)
}

/// A v2 record batch of `values`, uncompressed, written by `producer` (id, epoch) from
/// sequence 0, with the transactional and control bits `transactional` and `control`.
pub fn transactional_batch(values: &[&str], producer: (i64, i16), control: bool) -> Bytes {
    batch_of(values, Some(producer), control)
}

fn batch_of(values: &[&str], producer: Option<(i64, i16)>, control: bool) -> Bytes {
    let (producer_id, producer_epoch) = producer.unwrap_or((-1, -1));
    let records: Vec<Record> = values
        .iter()
        .enumerate()
        .map(|(i, v)| Record {
            transactional: producer.is_some(),
            control,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: if producer.is_some() {
                i as i32
            } else {
                i as i32 - 1
            },
            timestamp: 1_700_000_000_000 + i as i64,
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

/// `batch(&[value])` rewritten so that its only record declares `i32::MAX` headers, with the
/// record's length, the batch's length and the CRC fixed up: a batch a broker that checks
/// only headers and CRCs accepts, whose records do not decode.
pub fn with_header_count_beyond_the_batch(value: &str) -> Bytes {
    let mut b = batch(&[value]).to_vec();
    assert_eq!(b.pop(), Some(0), "the record ends with its header count, 0");
    b.extend_from_slice(&[0xfe, 0xff, 0xff, 0xff, 0x0f]); // zigzag varint of i32::MAX
    b[61] += 8; // the record's length (zigzag: +4 bytes)
    let length = i32::from_be_bytes(b[8..12].try_into().unwrap()) + 4;
    b[8..12].copy_from_slice(&length.to_be_bytes());
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(b)
}
