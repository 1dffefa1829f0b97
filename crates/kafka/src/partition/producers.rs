//! Idempotent producers: ids allocated from the store, and per (producer, partition) the
//! epoch and the last five batches' sequence ranges, checked by the partition's sequencer
//! in the transaction that writes the batch to the log — so a resent batch is recognised
//! and never stored twice, whatever happened in between (a lost answer, a Ferry restart).
//!
//! Kafka's rules: a batch continues its producer's last sequence; one of the last five
//! batches again is a duplicate (answered with its original offset); an older sequence is
//! `DUPLICATE_SEQUENCE_NUMBER`, a gap `OUT_OF_ORDER_SEQUENCE_NUMBER`, an older epoch
//! `INVALID_PRODUCER_EPOCH`; a newer epoch starts again at sequence 0.

use crate::keys::{KafkaKeys, PartitionKeys, decode_i64};
use crate::wire::batch::BatchHeader;
use ferry_store::{RangeOption, StoreError, Transaction};
use foundationdb_tuple::{pack, unpack};
use kafka_protocol::ResponseError;
use std::collections::HashMap;
use std::collections::VecDeque;

/// Format version of [`ProducerState`] values.
const FORMAT: u16 = 1;
/// Batches per producer and partition whose resends are answered with their offset
/// (Kafka's `max.in.flight.requests.per.connection` limit for idempotence).
const RECENT_BATCHES: usize = 5;

/// One batch an idempotent producer wrote to a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrittenBatch {
    /// Its first sequence number.
    pub first_sequence: i32,
    /// Its last sequence number.
    pub last_sequence: i32,
    /// The offset it was written at.
    pub base_offset: i64,
}

/// What the log knows about one idempotent producer in one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerState {
    /// The producer's current epoch.
    pub epoch: i16,
    /// Its most recent batches, oldest first.
    pub recent: VecDeque<WrittenBatch>,
}

/// What to do with an idempotent producer's batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Write it.
    Append,
    /// Do not write it: it is already in the log at this offset.
    Duplicate(i64),
    /// Refuse it with this error.
    Refuse(ResponseError),
}

impl ProducerState {
    /// Judges `batch` against the producer's state in its partition (`None`: the producer
    /// never wrote there).
    pub fn judge(state: Option<&Self>, batch: &BatchHeader) -> Verdict {
        let Some(state) = state else {
            return if batch.base_sequence == 0 {
                Verdict::Append
            } else {
                Verdict::Refuse(ResponseError::OutOfOrderSequenceNumber)
            };
        };
        if batch.producer_epoch < state.epoch {
            return Verdict::Refuse(ResponseError::InvalidProducerEpoch);
        }
        if batch.producer_epoch > state.epoch {
            return if batch.base_sequence == 0 {
                Verdict::Append
            } else {
                Verdict::Refuse(ResponseError::OutOfOrderSequenceNumber)
            };
        }
        let (first, last) = (batch.base_sequence, batch.last_sequence());
        if let Some(w) = state
            .recent
            .iter()
            .find(|w| w.first_sequence == first && w.last_sequence == last)
        {
            return Verdict::Duplicate(w.base_offset);
        }
        let Some(newest) = state.recent.back() else {
            return Verdict::Append;
        };
        let next = if newest.last_sequence == i32::MAX {
            0
        } else {
            newest.last_sequence + 1
        };
        if first == next {
            Verdict::Append
        } else if first < next {
            Verdict::Refuse(ResponseError::DuplicateSequenceNumber)
        } else {
            Verdict::Refuse(ResponseError::OutOfOrderSequenceNumber)
        }
    }

    /// The state after `batch` was written at `base_offset`.
    pub fn after(state: Option<Self>, batch: &BatchHeader, base_offset: i64) -> Self {
        let mut state = match state {
            Some(s) if s.epoch == batch.producer_epoch => s,
            _ => Self {
                epoch: batch.producer_epoch,
                recent: VecDeque::with_capacity(RECENT_BATCHES),
            },
        };
        if state.recent.len() == RECENT_BATCHES {
            state.recent.pop_front();
        }
        state.recent.push_back(WrittenBatch {
            first_sequence: batch.base_sequence,
            last_sequence: batch.last_sequence(),
            base_offset,
        });
        state
    }

    /// The state after a transaction marker at `epoch`: a newer epoch fences the older
    /// one's batches and starts again; the same or an older one changes nothing.
    pub fn at_epoch(state: Option<Self>, epoch: i16) -> Self {
        match state {
            Some(s) if s.epoch >= epoch => s,
            _ => Self {
                epoch,
                recent: VecDeque::with_capacity(RECENT_BATCHES),
            },
        }
    }

    /// The stored value.
    pub fn encode(&self) -> Vec<u8> {
        let recent: Vec<(i64, i64, i64)> = self
            .recent
            .iter()
            .map(|w| {
                (
                    i64::from(w.first_sequence),
                    i64::from(w.last_sequence),
                    w.base_offset,
                )
            })
            .collect();
        pack(&(FORMAT, i64::from(self.epoch), recent))
    }

    /// Decodes a stored value; `None` when it does not decode.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let (_, epoch, recent) = unpack::<(u16, i64, Vec<(i64, i64, i64)>)>(bytes).ok()?;
        Some(Self {
            epoch: i16::try_from(epoch).ok()?,
            recent: recent
                .into_iter()
                .map(|(f, l, b)| {
                    Some(WrittenBatch {
                        first_sequence: i32::try_from(f).ok()?,
                        last_sequence: i32::try_from(l).ok()?,
                        base_offset: b,
                    })
                })
                .collect::<Option<_>>()?,
        })
    }
}

/// One producer active in a partition, as DescribeProducers shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveProducer {
    /// Its id.
    pub producer_id: i64,
    /// Its state in the partition.
    pub state: ProducerState,
    /// The first offset of its open transaction in the partition, if one is open.
    pub open_transaction: Option<i64>,
}

/// Every producer with a state in the partition of `keys`, by id, read in `tx`.
///
/// # Errors
/// The store's error; states that do not decode are skipped.
pub(crate) async fn active(
    tx: &Transaction,
    keys: &PartitionKeys,
) -> Result<Vec<ActiveProducer>, StoreError> {
    let (begin, end) = keys.producers();
    let producers = RangeOption::new(begin, end);
    let (begin, end) = keys.open_transactions();
    let transactions = RangeOption::new(begin, end);
    let (states, open) = futures::try_join!(
        tx.get_range(&producers, true),
        tx.get_range(&transactions, true),
    )?;
    let open: HashMap<i64, i64> = open
        .iter()
        .filter_map(|kv| Some((keys.producer_of(&kv.key)?, decode_i64(Some(&kv.value)))))
        .collect();
    Ok(states
        .iter()
        .filter_map(|kv| {
            let producer_id = keys.producer_of(&kv.key)?;
            Some(ActiveProducer {
                producer_id,
                state: ProducerState::decode(&kv.value)?,
                open_transaction: open.get(&producer_id).copied(),
            })
        })
        .collect())
}

/// Allocates a new producer id within `tx`.
///
/// # Errors
/// The store's error.
pub(crate) async fn allocate_in(tx: &Transaction, keys: &KafkaKeys) -> Result<i64, StoreError> {
    let key = keys.next_producer_id();
    let id = match tx.get(&key, false).await? {
        Some(v) => unpack::<(i64,)>(&v)
            .map(|(id,)| id)
            .map_err(|e| StoreError::Storage(format!("next producer id: {e:?}")))?,
        None => 1,
    };
    tx.set(&key, pack(&(id + 1,)));
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(epoch: i16, first: i32, records: i32) -> BatchHeader {
        BatchHeader {
            base_offset: 0,
            size: 100,
            attributes: 0,
            last_offset_delta: records - 1,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: 9,
            producer_epoch: epoch,
            base_sequence: first,
            record_count: records,
        }
    }

    fn written(batches: &[(i16, i32, i32, i64)]) -> ProducerState {
        batches
            .iter()
            .fold(None, |s, &(e, f, n, at)| {
                Some(ProducerState::after(s, &header(e, f, n), at))
            })
            .unwrap()
    }

    #[test]
    fn a_new_producer_starts_at_sequence_zero() {
        assert_eq!(
            ProducerState::judge(None, &header(0, 0, 3)),
            Verdict::Append
        );
        assert_eq!(
            ProducerState::judge(None, &header(0, 5, 3)),
            Verdict::Refuse(ResponseError::OutOfOrderSequenceNumber)
        );
    }

    #[test]
    fn the_next_sequence_is_appended_and_a_resent_batch_is_a_duplicate() {
        let s = written(&[(0, 0, 3, 100), (0, 3, 2, 103)]);
        assert_eq!(
            ProducerState::judge(Some(&s), &header(0, 5, 1)),
            Verdict::Append
        );
        assert_eq!(
            ProducerState::judge(Some(&s), &header(0, 0, 3)),
            Verdict::Duplicate(100)
        );
        assert_eq!(
            ProducerState::judge(Some(&s), &header(0, 3, 2)),
            Verdict::Duplicate(103)
        );
    }

    #[test]
    fn gaps_old_sequences_and_old_epochs_are_refused() {
        let s = written(&[(1, 0, 3, 0)]);
        assert_eq!(
            ProducerState::judge(Some(&s), &header(1, 4, 1)),
            Verdict::Refuse(ResponseError::OutOfOrderSequenceNumber)
        );
        assert_eq!(
            ProducerState::judge(Some(&s), &header(1, 1, 1)),
            Verdict::Refuse(ResponseError::DuplicateSequenceNumber)
        );
        assert_eq!(
            ProducerState::judge(Some(&s), &header(0, 3, 1)),
            Verdict::Refuse(ResponseError::InvalidProducerEpoch)
        );
        assert_eq!(
            ProducerState::judge(Some(&s), &header(2, 0, 1)),
            Verdict::Append
        );
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let s = written(&[
            (0, 0, 1, 0),
            (0, 1, 1, 1),
            (0, 2, 1, 2),
            (0, 3, 1, 3),
            (0, 4, 1, 4),
            (0, 5, 1, 5),
        ]);
        assert_eq!(s.recent.len(), 5);
        assert_eq!(
            ProducerState::judge(Some(&s), &header(0, 0, 1)),
            Verdict::Refuse(ResponseError::DuplicateSequenceNumber)
        );
        assert_eq!(
            ProducerState::judge(Some(&s), &header(0, 1, 1)),
            Verdict::Duplicate(1)
        );
        assert_eq!(ProducerState::decode(&s.encode()), Some(s));
    }

    #[test]
    fn sequences_wrap_after_i32_max() {
        let s = written(&[(0, i32::MAX - 1, 2, 0)]);
        assert_eq!(
            ProducerState::judge(Some(&s), &header(0, 0, 1)),
            Verdict::Append
        );
    }
}
