//! Large record batches: a produced batch above [`SPILL_ABOVE`] bytes does not travel
//! through the store in one transaction but in pieces, kept in a spill
//! ([`ferry_stage::spill`]).
//!
//! **Producing.** The Produce handler writes the batch to a new spill in segments of a few
//! MB, one transaction each, held by the front's lease holder, then stages a record holding
//! only the batch's header and naming the spill ([`ferry_stage::NewMessage::spill`]); the
//! staging commit lets go of the hold, so the stage entry's reference is the spill's only
//! one. A batch the staging commit refuses (or that never reaches it) is let go of at once.
//! The partition's sequencer then moves the reference into the log in its one transaction
//! ([`crate::partition::log`]): no reader sees the batch before that commit, and its producer is
//! answered after it. A produce cut short (the process killed) leaves a spill only the
//! holder references; a restart releases the holders of the killed incarnation, which
//! drops that reference, and the spill collector frees the spill.
//!
//! **Routes.** A bridge route into a topic stages a large record's batch the same way,
//! through the port ([`crate::port::KafkaPort::append_spilled_in`]): the route writes the
//! batch to a spill held by its own lease holder, and the transaction that acknowledges the
//! message in the route's stage stages the head and lets go of that hold.
//!
//! **Reading.** Fetch and the port read a spilled batch in pieces outside the transaction
//! that found it in the log ([`crate::partition::log::Read::fill`]).

use crate::wire::batch;
use bytes::Bytes;
use ferry_stage::Liveness;
use ferry_stage::spill::SEGMENT;
use ferry_stage::{Holders, Spill, Spills, StageError, Stages};
use ferry_store::Transaction;
use ferry_telemetry::kafka as m;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Batches larger than this many bytes are spilled: 4 MiB, the most one Produce staging
/// transaction and one sequencer transaction carry, so every batch at most this large
/// still takes the one-transaction path.
pub(crate) const SPILL_ABOVE: usize = 4 * 1024 * 1024;

/// The front's writer of large batches; cheap to share.
#[derive(Clone)]
pub struct LargeBatches {
    /// Where the batches are written.
    spills: Spills,
    /// The lease holders (to renew and release the front's).
    holders: Holders,
    /// The front's lease holder, which holds each spill from its first segment until the
    /// commit that stages its batch.
    holder: u64,
    /// The holder's term, renewed every third of it.
    liveness: Liveness,
}

impl LargeBatches {
    /// Registers the front's lease holder over `stages`, alive for `liveness`' term.
    ///
    /// # Errors
    /// The store's error.
    pub async fn start(stages: &Stages, liveness: Liveness) -> Result<Self, StageError> {
        let holders = Holders::new(stages);
        let holder = holders.register(liveness.ttl()).await?;
        Ok(Self {
            spills: stages.spills(),
            holders,
            holder,
            liveness,
        })
    }

    /// The spills the batches are kept in, for their readers.
    pub fn spills(&self) -> &Spills {
        &self.spills
    }

    /// Whether `records`, a validated batch, is to be spilled.
    pub fn is_large(records: &[u8]) -> bool {
        records.len() > SPILL_ABOVE
    }

    /// The head of a large batch that its staged record keeps: its header, which the
    /// sequencer reads.
    pub fn head(records: &Bytes) -> Bytes {
        records.slice(..batch::HEADER_LEN.min(records.len()))
    }

    /// Writes `records` to a new spill held by the front's holder, one segment per
    /// transaction (each a slice of `records`, not a copy). On failure the spill is let go
    /// of, so the collector frees what was written.
    ///
    /// # Errors
    /// The store's error.
    pub async fn write(&self, records: &Bytes) -> Result<Spill, StageError> {
        let spill = Spill {
            id: Spills::new_id(),
            len: records.len() as u64,
        };
        for start in (0..records.len()).step_by(SEGMENT) {
            let segment = records.slice(start..(start + SEGMENT).min(records.len()));
            let written = self
                .spills
                .write(self.holder, spill.id, start as u64, &segment)
                .await;
            if let Err(e) = written {
                self.abandon(spill).await;
                return Err(e);
            }
            metrics::counter!(m::SPILLED_BYTES_TOTAL).increment(segment.len() as u64);
        }
        Ok(spill)
    }

    /// Within `tx`, the transaction that stages the batch kept in `spill` (or refuses it):
    /// the front's holder lets go of it.
    ///
    /// # Errors
    /// [`StageError::SpillGone`] when the holder no longer held it (it expired, and the
    /// spill may have been freed), or the store's error.
    pub async fn let_go_in(&self, tx: &Transaction, spill: Spill) -> Result<(), StageError> {
        if !self.spills.let_go_in(tx, self.holder, spill.id).await? && !tx.maybe_committed() {
            return Err(StageError::SpillGone(spill.id));
        }
        Ok(())
    }

    /// Lets go of `spill`, whose batch will not be staged, in a transaction of its own; a
    /// failure is logged (releasing the holder at the next start lets go of it then).
    pub async fn abandon(&self, spill: Spill) {
        if let Err(e) = self.spills.let_go(self.holder, spill.id).await {
            warn!(spill = spill.id, error = %e, "cannot let go of the spill of a refused batch");
        }
    }

    /// Renews the front's holder every third of its term until `shutdown`, then releases
    /// it (letting go of any spill still held).
    pub async fn hold_until(&self, shutdown: &CancellationToken) {
        let ttl = self.liveness.ttl();
        self.liveness
            .renew_until(shutdown, || async {
                if let Err(e) = self.holders.renew(self.holder, ttl).await {
                    warn!(error = %e, "cannot renew the Kafka front's lease holder");
                }
            })
            .await;
        if let Err(e) = self.holders.release(self.holder).await {
            warn!(error = %e, "cannot release the Kafka front's lease holder");
        }
    }
}
