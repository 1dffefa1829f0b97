//! A partition's log and everything that writes it: the log in the store with its
//! retention ([`log`]), the one writer of each partition ([`sequencer`], holder of a fenced
//! [`lease`]), the staged record of a produced batch ([`staged`], [`large`] for batches
//! that need several transactions, [`waiters`] for the produce requests waiting on them),
//! idempotent producers' ids and sequences, checked by the sequencer ([`producers`]),
//! what a topic's settings do to an appended batch ([`append_format`]), leader epochs
//! ([`leader_epochs`]), compaction ([`compaction`]), what the API handlers read of the
//! logs ([`reads`]), and consumers' fetch sessions ([`fetch_sessions`]).

pub mod append_format;
pub(crate) mod compaction;
pub(crate) mod fetch_sessions;
pub(crate) mod large;
pub(crate) mod leader_epochs;
pub(crate) mod lease;
pub(crate) mod log;
pub(crate) mod producers;
pub(crate) mod reads;
pub(crate) mod sequencer;
pub mod staged;
pub(crate) mod waiters;
