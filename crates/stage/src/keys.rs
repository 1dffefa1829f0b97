//! The stage keyspace: every key the stage writes, tuple-encoded under the configured
//! prefix. `docs/keyspace.md` documents the same layout; change both together and bump
//! [`SCHEMA_VERSION`] when a layout changes.
//!
//! ```text
//! (P, "schema")                               = schema version (tuple int)
//! (P, "schema", "ferry")                      = version of the Ferry that last opened it
//! (P, "stages", "by_name", name)              = stage id (tuple int)
//! (P, "stages", "next_id")                    = next stage id (tuple int)
//! (P, "stages", "meta", id)                   = StageMeta tuple
//! (P, "s", id, "b", vs, chunk)                = body chunk i of message vs (≤ 100,000 B)
//! (P, "s", id, "r", lane, vs)                 = Envelope tuple: a message ready for delivery
//! (P, "s", id, "f", holder, lane, vs)         = Envelope tuple: a message leased to holder
//! (P, "s", id, "n", counter)                  = i64 little-endian, atomic add only
//! (P, "s", id, "p", producer)                 = last appended sequence of that producer
//! (P, "s", id, "q", vs)                       = DequeueRequest tuple (high-contention pop)
//! (P, "s", id, "x", vs)                       = (spill,): message vs's payload is spill
//! (P, "s", id, "w", vs)                       = (text,): why dead letter vs came (the last
//!                                               refusal that sent it here), when known
//! (P, "spill", spill, chunk)                  = payload chunk of a spill (≤ 100,000 B)
//! (P, "spills", "refs", spill)                = i64 LE, atomic add: references to a spill
//! (P, "spills", "size", spill)                = i64 LE, atomic add: bytes written to it
//! (P, "spills", "held", holder, spill)        = "" (holder keeps one reference)
//! (P, "spills", "free", spill)                = "" (its references dropped: check it)
//! (P, "spills", "ver" | "bytes")              = i64 LE, atomic add: changes, bytes held
//! (P, "holders", holder)                      = holder deadline, ms since the epoch
//! (P, "held", holder, id)                     = "" (holder has leases in stage id)
//! (P, "owners", holder)                       = (instance, incarnation) that registered it
//! ```
//!
//! `vs` is a 12-byte tuple versionstamp (10-byte commit versionstamp + 2-byte user
//! version): unique per message and increasing in commit order. `lane` is
//! `255 - priority`, so a forward scan of `"r"` yields the highest priority first and,
//! within a lane, the oldest commit first (FIFO within a priority).

use ferry_store::keys::prefix_range;
use foundationdb_tuple::{Subspace, Versionstamp};

/// Version of the layout above.
pub const SCHEMA_VERSION: i64 = 2;

/// The stage's counters, each an atomic-add key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// Messages ever appended (`npush`).
    Push,
    /// Messages ever removed: acknowledged, popped, dropped or dead-lettered (`npop`).
    Pop,
    /// Messages currently leased.
    InFlight,
    /// Messages ever returned to ready by a nack or an expired holder; consumers watch it
    /// (with `Push`) to wake when messages become available again.
    Returned,
    /// Messages moved to the dead-letter stage.
    DeadLettered,
    /// Appends dropped as duplicates by (producer, sequence).
    Duplicates,
}

impl Counter {
    fn name(self) -> &'static str {
        match self {
            Self::Push => "push",
            Self::Pop => "pop",
            Self::InFlight => "flight",
            Self::Returned => "ret",
            Self::DeadLettered => "dl",
            Self::Duplicates => "dup",
        }
    }
}

/// A message's place in its stage: its lane and versionstamp. Orders as the stage
/// delivers: by lane (highest priority first), then by commit order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId {
    /// `255 - priority`.
    pub lane: u8,
    /// The append's versionstamp (12 bytes with the user version).
    pub stamp: [u8; 12],
}

impl MessageId {
    pub(crate) fn versionstamp(&self) -> Versionstamp {
        Versionstamp::from(self.stamp)
    }

    /// The priority the message is delivered at (its priority capped by the stage's).
    pub fn priority(&self) -> u8 {
        255 - self.lane
    }
}

/// The lane of a message of `priority` in a stage whose highest priority is `max`.
pub fn lane_of(priority: u8, max: u8) -> u8 {
    255 - priority.min(max)
}

/// Keys outside any one stage.
#[derive(Debug, Clone)]
pub struct RootKeys {
    root: Subspace,
}

impl RootKeys {
    /// The keyspace under the tuple prefix `(prefix,)`.
    pub fn new(prefix: &str) -> Self {
        Self {
            root: Subspace::from_bytes(foundationdb_tuple::pack(&(prefix,))),
        }
    }

    /// The schema version key.
    pub fn schema(&self) -> Vec<u8> {
        self.root.pack(&("schema",))
    }

    /// The version of the Ferry that last opened the keyspace (UTF-8).
    pub fn schema_writer(&self) -> Vec<u8> {
        self.root.pack(&("schema", "ferry"))
    }

    /// Name → id.
    pub fn stage_by_name(&self, name: &str) -> Vec<u8> {
        self.root.pack(&("stages", "by_name", name))
    }

    /// The range of every name → id entry.
    pub fn stage_names(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.root.pack(&("stages", "by_name")))
    }

    /// The next stage id.
    pub fn next_stage_id(&self) -> Vec<u8> {
        self.root.pack(&("stages", "next_id"))
    }

    /// A stage's metadata.
    pub fn stage_meta(&self, id: u64) -> Vec<u8> {
        self.root.pack(&("stages", "meta", id))
    }

    /// The keys of stage `id`.
    pub fn stage(&self, id: u64) -> StageKeys {
        StageKeys {
            id,
            space: self.root.subspace(&("s", id)),
        }
    }

    /// A holder's deadline.
    pub fn holder(&self, holder: u64) -> Vec<u8> {
        self.root.pack(&("holders", holder))
    }

    /// The range of every holder.
    pub fn holders(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.root.pack(&("holders",)))
    }

    /// Decodes a holder key.
    pub fn holder_of(&self, key: &[u8]) -> Option<u64> {
        self.root.unpack::<(String, u64)>(key).ok().map(|(_, h)| h)
    }

    /// The instance incarnation that registered `holder`.
    pub fn holder_owner(&self, holder: u64) -> Vec<u8> {
        self.root.pack(&("owners", holder))
    }

    /// The range of every holder's owner.
    pub fn holder_owners(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.root.pack(&("owners",)))
    }

    /// Marks that `holder` has (or had) leases in stage `stage`, so releasing the holder
    /// knows which stages to look in. Written once per lease transaction, not per message.
    pub fn holder_stage(&self, holder: u64, stage: u64) -> Vec<u8> {
        self.root.pack(&("held", holder, stage))
    }

    /// The stages `holder` has leases in.
    pub fn holder_stages(&self, holder: u64) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.root.pack(&("held", holder)))
    }

    /// The range of every holder's lease index entries.
    pub fn all_held(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.root.pack(&("held",)))
    }

    /// Decodes a [`RootKeys::holder_stage`] key into its holder.
    pub fn holder_of_held(&self, key: &[u8]) -> Option<u64> {
        let (_, holder, _) = self.root.unpack::<(String, u64, u64)>(key).ok()?;
        Some(holder)
    }

    /// Decodes a [`RootKeys::holder_stage`] key into its stage.
    pub fn holder_stage_of(&self, key: &[u8]) -> Option<u64> {
        let (_, _, stage) = self.root.unpack::<(String, u64, u64)>(key).ok()?;
        Some(stage)
    }

    /// Chunk `chunk` of spill `spill`'s payload.
    pub fn spill_chunk(&self, spill: u64, chunk: u32) -> Vec<u8> {
        self.root.pack(&("spill", spill, chunk))
    }

    /// Every chunk of spill `spill`.
    pub fn spill_chunks(&self, spill: u64) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.root.pack(&("spill", spill)))
    }

    /// Every chunk of every spill.
    pub fn all_spill_chunks(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.root.pack(&("spill",)))
    }

    /// A spill's reference count, or bytes written (`what` is `"refs"` or `"size"`).
    pub fn spill_count(&self, what: &str, spill: u64) -> Vec<u8> {
        self.root.pack(&("spills", what, spill))
    }

    /// The reference `holder` keeps to spill `spill`.
    pub fn spill_held(&self, holder: u64, spill: u64) -> Vec<u8> {
        self.root.pack(&("spills", "held", holder, spill))
    }

    /// Every spill `holder` keeps a reference to.
    pub fn spills_held_by(&self, holder: u64) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.root.pack(&("spills", "held", holder)))
    }

    /// Decodes a [`RootKeys::spill_held`] key into its spill.
    pub fn spill_held_of(&self, key: &[u8]) -> Option<u64> {
        let (_, _, _, spill) = self.root.unpack::<(String, String, u64, u64)>(key).ok()?;
        Some(spill)
    }

    /// The mark that spill `spill` lost a reference and may be free.
    pub fn spill_free(&self, spill: u64) -> Vec<u8> {
        self.root.pack(&("spills", "free", spill))
    }

    /// Every spill marked free.
    pub fn spills_free(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.root.pack(&("spills", "free")))
    }

    /// Decodes a [`RootKeys::spill_free`] key into its spill.
    pub fn spill_free_of(&self, key: &[u8]) -> Option<u64> {
        let (_, _, spill) = self.root.unpack::<(String, String, u64)>(key).ok()?;
        Some(spill)
    }

    /// A counter of every spill: `"ver"` (bumped by each lost reference; the collector
    /// watches it) or `"bytes"` (bytes held in spills).
    pub fn spills_counter(&self, what: &str) -> Vec<u8> {
        self.root.pack(&("spills", what))
    }
}

fn message_id(lane: u16, vs: &Versionstamp) -> Option<MessageId> {
    Some(MessageId {
        lane: u8::try_from(lane).ok()?,
        stamp: *vs.as_bytes(),
    })
}

/// Keys of one stage.
#[derive(Debug, Clone)]
pub struct StageKeys {
    /// The stage's id.
    pub id: u64,
    space: Subspace,
}

impl StageKeys {
    /// Chunk `chunk` of a message's body.
    pub fn body_chunk(&self, id: &MessageId, chunk: u32) -> Vec<u8> {
        self.space.pack(&("b", id.versionstamp(), chunk))
    }

    /// Chunk `chunk` of the body of the message the current transaction appends with
    /// `user_version` (a versionstamped key).
    pub fn new_body_chunk(&self, user_version: u16, chunk: u32) -> Vec<u8> {
        self.space
            .pack_with_versionstamp(&("b", Versionstamp::incomplete(user_version), chunk))
    }

    /// A ready message.
    pub fn ready(&self, id: &MessageId) -> Vec<u8> {
        self.space
            .pack(&("r", u16::from(id.lane), id.versionstamp()))
    }

    /// The ready entry of the message the current transaction appends (versionstamped).
    pub fn new_ready(&self, lane: u8, user_version: u16) -> Vec<u8> {
        self.space.pack_with_versionstamp(&(
            "r",
            u16::from(lane),
            Versionstamp::incomplete(user_version),
        ))
    }

    /// Every ready message, in delivery order.
    pub fn ready_range(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("r",)))
    }

    /// A message leased to `holder`.
    pub fn leased(&self, holder: u64, id: &MessageId) -> Vec<u8> {
        self.space
            .pack(&("f", holder, u16::from(id.lane), id.versionstamp()))
    }

    /// Every message leased to `holder`, in delivery order.
    pub fn leased_by(&self, holder: u64) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("f", holder)))
    }

    /// Decodes a ready key.
    pub fn message_of(&self, key: &[u8]) -> Option<MessageId> {
        let (_, lane, vs) = self.space.unpack::<(String, u16, Versionstamp)>(key).ok()?;
        message_id(lane, &vs)
    }

    /// Decodes a leased key.
    pub fn leased_message_of(&self, key: &[u8]) -> Option<MessageId> {
        let (_, _, lane, vs) = self
            .space
            .unpack::<(String, u64, u16, Versionstamp)>(key)
            .ok()?;
        message_id(lane, &vs)
    }

    /// Why a dead letter came: the last refusal of its message.
    pub fn why(&self, id: &MessageId) -> Vec<u8> {
        self.space.pack(&("w", id.versionstamp()))
    }

    /// Why the dead letter the current transaction appends with `user_version` came
    /// (versionstamped).
    pub fn new_why(&self, user_version: u16) -> Vec<u8> {
        self.space
            .pack_with_versionstamp(&("w", Versionstamp::incomplete(user_version)))
    }

    /// A counter.
    pub fn counter(&self, c: Counter) -> Vec<u8> {
        self.space.pack(&("n", c.name()))
    }

    /// A producer's last appended sequence.
    pub fn producer(&self, producer: u64) -> Vec<u8> {
        self.space.pack(&("p", producer))
    }

    /// A dequeue request of the current transaction (versionstamped).
    pub fn new_request(&self, user_version: u16) -> Vec<u8> {
        self.space
            .pack_with_versionstamp(&("q", Versionstamp::incomplete(user_version)))
    }

    /// A dequeue request whose versionstamp is known.
    pub fn request(&self, stamp: [u8; 12]) -> Vec<u8> {
        self.space.pack(&("q", Versionstamp::from(stamp)))
    }

    /// Every pending dequeue request, oldest first.
    pub fn requests(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("q",)))
    }

    /// The spill message `stamp`'s payload is in (the stage's index of its spills).
    pub fn spill_ref(&self, stamp: [u8; 12]) -> Vec<u8> {
        self.space.pack(&("x", Versionstamp::from(stamp)))
    }

    /// The spill index entry of the message the current transaction appends
    /// (versionstamped).
    pub fn new_spill_ref(&self, user_version: u16) -> Vec<u8> {
        self.space
            .pack_with_versionstamp(&("x", Versionstamp::incomplete(user_version)))
    }

    /// The stage's whole spill index.
    pub fn spill_refs(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("x",)))
    }

    /// Every key of the stage.
    pub fn all(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(self.space.bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(lane: u8, v: u8) -> MessageId {
        let mut stamp = [0u8; 12];
        stamp[7] = v;
        MessageId { lane, stamp }
    }

    #[test]
    fn ready_keys_sort_by_priority_then_commit_order() {
        let keys = RootKeys::new("ferry").stage(7);
        let high_old = keys.ready(&id(lane_of(9, 9), 1));
        let high_new = keys.ready(&id(lane_of(9, 9), 2));
        let low_old = keys.ready(&id(lane_of(0, 9), 0));
        assert!(high_old < high_new, "FIFO within a lane");
        assert!(high_new < low_old, "higher priority first");
    }

    #[test]
    fn priorities_above_the_stage_maximum_share_its_lane() {
        assert_eq!(lane_of(200, 10), lane_of(10, 10));
        assert_eq!(lane_of(3, 0), 255);
    }

    #[test]
    fn keys_decode_back() {
        let root = RootKeys::new("ferry");
        let keys = root.stage(3);
        let m = id(250, 9);
        assert_eq!(keys.message_of(&keys.ready(&m)), Some(m));
        assert_eq!(keys.leased_message_of(&keys.leased(42, &m)), Some(m));
        assert_eq!(root.holder_stage_of(&root.holder_stage(42, 3)), Some(3));
        assert_eq!(root.holder_of(&root.holder(42)), Some(42));
    }
}
