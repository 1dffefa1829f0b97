//! The values of two topic settings, as Kafka spells them and as the store keeps them:
//! `message.timestamp.type` ([`TimestampType`]) and `compression.type`
//! ([`CompressionType`]). What they do to appended batches is
//! [`crate::partition::append_format`]'s.

/// Kafka's `message.timestamp.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// `CreateTime`: each record's timestamp is the producer's.
    CreateTime,
    /// `LogAppendTime`: every record's timestamp is the time the broker appended it.
    LogAppendTime,
}

impl TimestampType {
    /// Parses Kafka's spelling.
    pub fn parse(value: &str) -> Option<Self> {
        [Self::CreateTime, Self::LogAppendTime]
            .into_iter()
            .find(|t| t.as_str() == value.trim())
    }

    /// Kafka's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CreateTime => "CreateTime",
            Self::LogAppendTime => "LogAppendTime",
        }
    }

    /// The stored code.
    pub fn code(self) -> i64 {
        match self {
            Self::CreateTime => 0,
            Self::LogAppendTime => 1,
        }
    }

    /// The type of stored code `code`.
    pub fn from_code(code: i64) -> Option<Self> {
        [Self::CreateTime, Self::LogAppendTime]
            .into_iter()
            .find(|t| t.code() == code)
    }
}

/// Kafka's topic `compression.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionType {
    /// `producer`: batches keep the codec their producer chose.
    Producer,
    /// `uncompressed`.
    Uncompressed,
    /// `gzip`.
    Gzip,
    /// `snappy`.
    Snappy,
    /// `lz4`.
    Lz4,
    /// `zstd`.
    Zstd,
}

impl CompressionType {
    const ALL: [Self; 6] = [
        Self::Producer,
        Self::Uncompressed,
        Self::Gzip,
        Self::Snappy,
        Self::Lz4,
        Self::Zstd,
    ];

    /// Parses Kafka's spelling.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == value.trim())
    }

    /// Kafka's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Producer => "producer",
            Self::Uncompressed => "uncompressed",
            Self::Gzip => "gzip",
            Self::Snappy => "snappy",
            Self::Lz4 => "lz4",
            Self::Zstd => "zstd",
        }
    }

    /// The batch attribute codec this type imposes (0 none … 4 zstd); `None` for
    /// `producer`.
    pub fn codec(self) -> Option<i16> {
        match self {
            Self::Producer => None,
            Self::Uncompressed => Some(0),
            Self::Gzip => Some(1),
            Self::Snappy => Some(2),
            Self::Lz4 => Some(3),
            Self::Zstd => Some(4),
        }
    }

    /// The stored code.
    pub fn code(self) -> i64 {
        Self::ALL
            .iter()
            .position(|t| *t == self)
            .map_or(0, |i| i as i64)
    }

    /// The type of stored code `code`.
    pub fn from_code(code: i64) -> Option<Self> {
        usize::try_from(code)
            .ok()
            .and_then(|i| Self::ALL.get(i).copied())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_their_codes_and_spellings() {
        for t in CompressionType::ALL {
            assert_eq!(CompressionType::from_code(t.code()), Some(t));
            assert_eq!(CompressionType::parse(t.as_str()), Some(t));
        }
        for t in [TimestampType::CreateTime, TimestampType::LogAppendTime] {
            assert_eq!(TimestampType::from_code(t.code()), Some(t));
            assert_eq!(TimestampType::parse(t.as_str()), Some(t));
        }
        assert_eq!(CompressionType::parse("brotli"), None);
        assert_eq!(TimestampType::parse("createtime"), None);
    }
}
