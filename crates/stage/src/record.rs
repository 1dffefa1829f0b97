//! The stage's values, each a tuple whose first element is a format version. The layout of
//! every value is in `docs/keyspace.md`.

use super::error::StageError;
use foundationdb_tuple::{pack, unpack};

/// Format version of the values below.
const FORMAT: u16 = 1;
/// Format version of an envelope whose payload is in a spill: format 1's fields, then the
/// spill's id and length. Only such messages use it, so every other envelope is as before.
const SPILLED_FORMAT: u16 = 2;

/// Why a message left its stage for the dead-letter stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeadLetterReason {
    /// A consumer rejected it without requeueing.
    Rejected = 1,
    /// It was delivered as many times as the stage allows.
    DeliveryLimit = 2,
    /// Its time to live ran out before delivery.
    Expired = 3,
    /// It was the oldest message of a stage at its length limit when another arrived
    /// (AMQP `x-overflow: drop-head`).
    MaxLength = 4,
}

impl DeadLetterReason {
    /// Every reason, as their counters are exported.
    pub const ALL: [Self; 4] = [
        Self::Rejected,
        Self::DeliveryLimit,
        Self::Expired,
        Self::MaxLength,
    ];

    fn from_code(code: u16) -> Option<Self> {
        match code {
            1 => Some(Self::Rejected),
            2 => Some(Self::DeliveryLimit),
            3 => Some(Self::Expired),
            4 => Some(Self::MaxLength),
            _ => None,
        }
    }

    /// The reason as RabbitMQ names it in `x-death`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rejected => "rejected",
            Self::DeliveryLimit => "delivery_limit",
            Self::Expired => "expired",
            Self::MaxLength => "maxlen",
        }
    }
}

/// Why a message is being dead-lettered: the reason, and when a route destination refused
/// it, that refusal ([`super::Stage::release_refused`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DeadLetterCause<'a> {
    /// Why, as `x-death` names it.
    pub reason: DeadLetterReason,
    /// The last refusal, kept beside the dead letter.
    pub why: Option<&'a str>,
}

impl From<DeadLetterReason> for DeadLetterCause<'_> {
    fn from(reason: DeadLetterReason) -> Self {
        Self { reason, why: None }
    }
}

/// Where a dead-lettered message came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadLetter {
    /// Why it was dead-lettered.
    pub reason: DeadLetterReason,
    /// The stage it left.
    pub from_stage: u64,
    /// When, in ms since the epoch.
    pub at_ms: u64,
}

/// Where a message's payload is, when it is too large for one transaction: a spill
/// ([`super::spill`]) and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Spill {
    /// The spill's id (random).
    pub id: u64,
    /// Its payload's length in bytes.
    pub len: u64,
}

/// Everything the stage keeps about a message besides its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    /// The body's length in bytes (it is stored in chunks of at most 100,000 bytes).
    pub body_len: u32,
    /// The priority the producer gave (the lane caps it by the stage's maximum).
    pub priority: u8,
    /// How many times it has been leased.
    pub delivery_count: u32,
    /// When it was appended, ms since the epoch.
    pub enqueued_ms: u64,
    /// When it expires, ms since the epoch; 0: never.
    pub expires_ms: u64,
    /// Set when it was dead-lettered into this stage.
    pub dead_letter: Option<DeadLetter>,
    /// Where the rest of its payload is, for a message too large for one transaction: the
    /// body is then only its head ([`super::spill`]).
    pub spill: Option<Spill>,
}

type EnvelopeTuple = (u16, u32, u16, u32, u64, u64, u16, u64, u64);
type SpilledTuple = (u16, u32, u16, u32, u64, u64, u16, u64, u64, u64, u64);

impl Envelope {
    fn to_tuple(self) -> EnvelopeTuple {
        let (reason, from, at) = self
            .dead_letter
            .map_or((0, 0, 0), |d| (d.reason as u16, d.from_stage, d.at_ms));
        (
            FORMAT,
            self.body_len,
            u16::from(self.priority),
            self.delivery_count,
            self.enqueued_ms,
            self.expires_ms,
            reason,
            from,
            at,
        )
    }

    fn from_tuple(t: EnvelopeTuple) -> Self {
        let (_, body_len, priority, delivery_count, enqueued_ms, expires_ms, reason, from, at) = t;
        Self {
            body_len,
            priority: u8::try_from(priority).unwrap_or(u8::MAX),
            delivery_count,
            enqueued_ms,
            expires_ms,
            dead_letter: DeadLetterReason::from_code(reason).map(|reason| DeadLetter {
                reason,
                from_stage: from,
                at_ms: at,
            }),
            spill: None,
        }
    }

    /// The value of a ready entry.
    pub fn encode(&self) -> Vec<u8> {
        let t = self.to_tuple();
        match self.spill {
            None => pack(&t),
            Some(spill) => pack(&(
                SPILLED_FORMAT,
                t.1,
                t.2,
                t.3,
                t.4,
                t.5,
                t.6,
                t.7,
                t.8,
                spill.id,
                spill.len,
            )),
        }
    }

    /// Decodes a ready entry.
    pub fn decode(bytes: &[u8]) -> Result<Self, StageError> {
        match unpack::<EnvelopeTuple>(bytes) {
            Ok(t) => Ok(Self::from_tuple(t)),
            Err(e) => {
                let t = unpack::<SpilledTuple>(bytes)
                    .map_err(|_| StageError::Corrupt(format!("ready entry: {e:?}")))?;
                let (_, a, b, c, d, e, f, g, h, id, len) = t;
                Ok(Self {
                    spill: Some(Spill { id, len }),
                    ..Self::from_tuple((FORMAT, a, b, c, d, e, f, g, h))
                })
            }
        }
    }

    /// Whether it has expired at `now_ms`.
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_ms != 0 && self.expires_ms <= now_ms
    }
}

/// A stage's settings, stored with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageMeta {
    /// The stage's name.
    pub name: String,
    /// The highest priority it distinguishes; higher priorities share its lane. 0: one lane.
    pub max_priority: u8,
    /// Deliveries after which a returned message is dead-lettered; 0: no limit.
    pub max_deliveries: u32,
    /// The stage dead-lettered messages move to; `None`: they are dropped.
    pub dead_letter: Option<u64>,
}

impl StageMeta {
    /// The stored value.
    pub fn encode(&self) -> Vec<u8> {
        pack(&(
            FORMAT,
            self.name.as_str(),
            u16::from(self.max_priority),
            self.max_deliveries,
            self.dead_letter.unwrap_or(0),
        ))
    }

    /// Decodes the stored value.
    pub fn decode(bytes: &[u8]) -> Result<Self, StageError> {
        unpack::<(u16, String, u16, u32, u64)>(bytes)
            .map(|(_, name, max_priority, max_deliveries, dl)| Self {
                name,
                max_priority: u8::try_from(max_priority).unwrap_or(u8::MAX),
                max_deliveries,
                dead_letter: (dl != 0).then_some(dl),
            })
            .map_err(|e| StageError::Corrupt(format!("stage metadata: {e:?}")))
    }
}

/// A pending high-contention dequeue request: `holder` wants up to `want` messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DequeueRequest {
    /// Who asked.
    pub holder: u64,
    /// How many messages it wants.
    pub want: u32,
}

impl DequeueRequest {
    /// The stored value.
    pub fn encode(&self) -> Vec<u8> {
        pack(&(self.holder, self.want))
    }

    /// Decodes the stored value.
    pub fn decode(bytes: &[u8]) -> Result<Self, StageError> {
        unpack::<(u64, u32)>(bytes)
            .map(|(holder, want)| Self { holder, want })
            .map_err(|e| StageError::Corrupt(format!("dequeue request: {e:?}")))
    }
}

/// Encodes a tuple-int value (schema version, stage ids, sequences, deadlines).
pub(crate) fn encode_u64(v: u64) -> Vec<u8> {
    pack(&(v,))
}

/// The value of a dead letter's why: `(format, text)`.
pub(crate) fn encode_why(text: &str) -> Vec<u8> {
    pack(&(FORMAT, text))
}

/// Decodes [`encode_why`]'s value.
pub(crate) fn decode_why(bytes: &[u8]) -> Result<String, StageError> {
    unpack::<(u16, String)>(bytes)
        .map(|(_, text)| text)
        .map_err(|e| StageError::Corrupt(format!("dead letter's why: {e:?}")))
}

/// Decodes a tuple-int value.
pub fn decode_u64(bytes: &[u8]) -> Result<u64, StageError> {
    unpack::<(u64,)>(bytes)
        .map(|(v,)| v)
        .map_err(|e| StageError::Corrupt(format!("integer value: {e:?}")))
}

/// Decodes an atomic-add counter (little-endian i64; missing is 0).
pub fn decode_counter(bytes: Option<&[u8]>) -> i64 {
    bytes
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, i64::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_round_trips() {
        let e = Envelope {
            body_len: 1024,
            priority: 7,
            delivery_count: 2,
            enqueued_ms: 1_700_000_000_000,
            expires_ms: 0,
            dead_letter: Some(DeadLetter {
                reason: DeadLetterReason::DeliveryLimit,
                from_stage: 4,
                at_ms: 1_700_000_000_500,
            }),
            spill: None,
        };
        assert_eq!(Envelope::decode(&e.encode()).unwrap(), e);
        let spilled = Envelope {
            spill: Some(Spill {
                id: 77,
                len: 100 << 20,
            }),
            ..e
        };
        assert_eq!(Envelope::decode(&spilled.encode()).unwrap(), spilled);
        assert_eq!(
            e.encode(),
            Envelope::decode(&spilled.encode())
                .map(|d| Envelope { spill: None, ..d })
                .unwrap()
                .encode(),
            "an envelope without a spill keeps format 1"
        );
    }

    #[test]
    fn garbage_is_reported_as_corrupt() {
        assert!(matches!(
            Envelope::decode(b"\xff\x00"),
            Err(StageError::Corrupt(_))
        ));
    }
}
