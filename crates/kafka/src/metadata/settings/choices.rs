//! The values of three topic settings, as Kafka spells them and as the store keeps them:
//! `cleanup.policy` ([`CleanupPolicy`]), `message.timestamp.type` ([`TimestampType`]) and
//! `compression.type` ([`CompressionType`]). What the last two do to appended batches is
//! [`crate::partition::append_format`]'s.

/// What becomes of a topic's old records: Kafka's `cleanup.policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CleanupPolicy {
    /// `delete`: retention deletes them by age and size.
    Delete,
    /// `compact`: compaction keeps the newest record of each key; no retention.
    Compact,
    /// `compact,delete`: both.
    CompactDelete,
}

impl CleanupPolicy {
    /// Parses Kafka's list (`compact,delete` in any order, spaces allowed).
    pub fn parse(value: &str) -> Option<Self> {
        Self::edited((false, false), value, true)
    }

    /// This policy with the items of the list `items` added (`add`) or taken away; `None`
    /// when an item is neither `compact` nor `delete`, or no policy is left.
    pub(super) fn edit(self, items: &str, add: bool) -> Option<Self> {
        Self::edited((self.compacts(), self.deletes()), items, add)
    }

    /// The policy of the flags (compact, delete) with `items` added or taken away.
    fn edited((mut compact, mut delete): (bool, bool), items: &str, add: bool) -> Option<Self> {
        for item in items.split(',').map(str::trim) {
            match item {
                "compact" => compact = add,
                "delete" => delete = add,
                _ => return None,
            }
        }
        match (compact, delete) {
            (true, true) => Some(Self::CompactDelete),
            (true, false) => Some(Self::Compact),
            (false, true) => Some(Self::Delete),
            (false, false) => None,
        }
    }

    /// Kafka's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delete => "delete",
            Self::Compact => "compact",
            Self::CompactDelete => "compact,delete",
        }
    }

    /// Whether compaction applies.
    pub fn compacts(self) -> bool {
        self != Self::Delete
    }

    /// Whether retention (by age and size) applies.
    pub fn deletes(self) -> bool {
        self != Self::Compact
    }

    /// The stored code.
    pub fn code(self) -> i64 {
        match self {
            Self::Delete => 0,
            Self::Compact => 1,
            Self::CompactDelete => 2,
        }
    }

    /// The policy of stored code `code`.
    pub fn from_code(code: i64) -> Option<Self> {
        [Self::Delete, Self::Compact, Self::CompactDelete]
            .into_iter()
            .find(|p| p.code() == code)
    }
}

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
