//! Record compression codecs, by the batch attribute's number (0 none, 1 gzip, 2 snappy,
//! 3 lz4, 4 zstd): decompression bounded by what it may produce (a few kilobytes of gzip or
//! zstd can stand for gigabytes), and compression as Kafka's clients compress records.
//! Used by the bridge's reads, compaction's rewrites, a topic's `compression.type` and old
//! clients' compressed message sets.

use bytes::{Bytes, BytesMut};
use kafka_protocol::compression::{Compressor, Gzip, Lz4, Snappy, Zstd};
use kafka_protocol::records::Compression;

/// The codec of attribute bits `codec`.
pub(crate) fn compression(codec: i16) -> Option<Compression> {
    Some(match codec {
        0 => Compression::None,
        1 => Compression::Gzip,
        2 => Compression::Snappy,
        3 => Compression::Lz4,
        4 => Compression::Zstd,
        _ => return None,
    })
}

/// `raw` compressed with codec `codec`, as kafka-protocol's encoder compresses records.
pub(crate) fn compress(codec: i16, raw: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = BytesMut::new();
    let put = |buf: &mut BytesMut| {
        buf.extend_from_slice(raw);
        Ok(())
    };
    match compression(codec) {
        Some(Compression::None) => out.extend_from_slice(raw),
        Some(Compression::Gzip) => <Gzip as Compressor<BytesMut>>::compress(&mut out, put)?,
        Some(Compression::Snappy) => <Snappy as Compressor<BytesMut>>::compress(&mut out, put)?,
        Some(Compression::Lz4) => <Lz4 as Compressor<BytesMut>>::compress(&mut out, put)?,
        Some(Compression::Zstd) => <Zstd as Compressor<BytesMut>>::compress(&mut out, put)?,
        None => anyhow::bail!("codec {codec} is not one Kafka defines"),
    }
    Ok(out.to_vec())
}

/// The records of a batch compressed with `compression`, decompressed to at most `max`
/// bytes: a few kilobytes of gzip or zstd can stand for gigabytes, and a route reads
/// whatever a producer sent (librdkafka bounds its consumers the same way, with
/// `receive.message.max.bytes`). The output grows only as it is produced.
pub(crate) fn decompress_bounded(
    records: &mut Bytes,
    compression: Compression,
    max: usize,
) -> anyhow::Result<Bytes> {
    use kafka_protocol::compression::{Decompressor, Snappy};
    use std::io::Read;
    let compressed = records.as_ref();
    let mut reader: Box<dyn Read + '_> = match compression {
        Compression::None => return Ok(records.clone()),
        // Snappy declares its length up front, checked against the block's size before
        // anything is allocated (vendor/README.md).
        Compression::Snappy => {
            let out = <Snappy as Decompressor<Bytes>>::decompress(records, |b: &mut Bytes| {
                Ok(std::mem::take(b))
            })?;
            anyhow::ensure!(
                out.len() <= max,
                "the records decompress to {} bytes, more than the {max} allowed",
                out.len()
            );
            return Ok(out);
        }
        Compression::Gzip => Box::new(flate2::read::GzDecoder::new(compressed)),
        Compression::Zstd => {
            // A frame may ask for a window of up to 128 MiB, allocated up front; none is
            // needed larger than the output allowed.
            let mut decoder = zstd::stream::read::Decoder::new(compressed)?;
            let bits = usize::BITS - max.saturating_sub(1).leading_zeros();
            decoder.window_log_max(bits.clamp(10, 31))?;
            Box::new(decoder)
        }
        Compression::Lz4 => Box::new(lz4::Decoder::new(compressed)?),
    };
    let mut out = Vec::new();
    reader.by_ref().take(max as u64).read_to_end(&mut out)?;
    anyhow::ensure!(
        reader.read(&mut [0])? == 0,
        "the records decompress to more than the {max} bytes allowed"
    );
    Ok(Bytes::from(out))
}
