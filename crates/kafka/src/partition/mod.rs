//! A partition's log and everything that writes it: the log in the store with its
//! retention ([`log`]), the one writer of each partition ([`sequencer`], holder of a fenced
//! [`lease`]), the staged record of a produced batch ([`staged`], [`large`] for batches
//! that need several transactions, [`waiters`] for the produce requests waiting on them),
//! idempotent producers' ids and sequences, checked by the sequencer ([`producers`]),
//! what a topic's settings do to an appended batch ([`append_format`]), leader epochs
//! ([`leader_epochs`]), compaction ([`compaction`]), what the API handlers read of the
//! logs ([`reads`]), and consumers' fetch sessions ([`fetch_sessions`]).

pub mod append_format;
pub mod compaction;
pub mod fetch_sessions;
pub mod large;
pub mod leader_epochs;
pub mod lease;
pub mod log;
pub mod producers;
pub mod reads;
pub mod sequencer;
pub mod staged;
pub mod waiters;
