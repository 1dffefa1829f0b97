//! The Kafka front's keyspace, tuple-encoded under `(P, "k")`. `docs/keyspace.md`
//! documents the same layout; change both together. Every value is a tuple whose first
//! element is a format version, except the 8-byte little-endian counters.
//!
//! ```text
//! (P,"k","topic","by_name",name)              = (topic_id,)
//! (P,"k","topic","next_id")                   = (next topic id,)            ids start at 1
//! (P,"k","topic","meta",topic_id)             = TopicMeta
//! (P,"k","topic","version")                   = i64 LE, atomic add: bumped by every topic change
//! (P,"k","broker",node_id)                    = Broker (host, port, deadline)
//! (P,"k","bconf","cluster")                   = BrokerSettings ((name, value), …): the
//!                                               dynamic broker settings of every instance
//! (P,"k","bconf","node",node_id)              = BrokerSettings of instance `node_id` only
//! (P,"k","bconf","version")                   = i64 LE, atomic add: bumped by every change
//!                                               of dynamic broker settings
//! (P,"k","producer","next_id")                = (next idempotent producer id,)
//! (P,"k","txid",transactional_id)             = (producer id,): the id's producer
//! (P,"k","txn",producer_id)                   = TxnState (id, epoch, timeout, open
//!                                               transaction's start, partitions, groups)
//! (P,"k","txn-due",deadline_ms,producer_id)   = "": producer's open transaction times out
//!                                               at `deadline_ms`
//! (P,"k","p",topic_id,partition,"lease")      = Lease (node, epoch, deadline): its sequencer
//! (P,"k","p",topic_id,partition,"hw")         = i64 LE: next offset (high watermark = log end)
//! (P,"k","p",topic_id,partition,"start")      = i64 LE: log start offset
//! (P,"k","p",topic_id,partition,"bytes")      = i64 LE, atomic add: bytes in the log
//! (P,"k","p",topic_id,partition,"maxts")      = (newest timestamp in the log,)
//! (P,"k","p",topic_id,partition,"i",base)     = BatchIndex: one per batch in the log
//! (P,"k","p",topic_id,partition,"l",base,n)   = chunk n of the batch at `base` (≤ 100,000 B)
//! (P,"k","p",topic_id,partition,"spill",base) = (spill id,): the batch at `base` is kept in
//!                                               that spill (no chunks); the log holds one
//!                                               reference to it
//! (P,"k","p",topic_id,partition,"t",ts,base)  = "": the log's newest timestamp first
//!                                               reached `ts` in the batch at `base`
//! (P,"k","p",topic_id,partition,"pid",id)     = ProducerState of an idempotent producer
//! (P,"k","p",topic_id,partition,"open",id)    = i64 LE: first offset of producer `id`'s
//!                                               open transaction in the partition
//! (P,"k","p",topic_id,partition,"ab",last,id) = i64 LE: an aborted transaction of
//!                                               producer `id`, first offset → marker `last`
//! (P,"k","p",topic_id,partition,"ep",epoch)   = i64 LE: first offset of leader epoch `epoch`
//!                                               (the newest 256 epochs are kept)
//! (P,"k","p",topic_id,partition,"clean")      = i64 LE: compaction's checkpoint: the log
//!                                               below it is compacted (the rest is dirty)
//! (P,"k","groups",group)                      = "": the group exists (ListGroups reads these)
//! (P,"k","acl","e",resource_type,pattern_type,name,principal,host,operation,permission)
//!                                             = (1,): an ACL (codes as Kafka's wire codes)
//! (P,"k","acl","version")                     = i64 LE, atomic add: bumped by every ACL change
//! (P,"k","gcoord",group)                      = Lease (node, epoch, deadline): its coordinator
//! (P,"k","g",group,"meta")                    = GroupMeta (generation, protocol, leader)
//! (P,"k","g",group,"m",member)                = Member (client, timeouts, metadata, assignment, instance id)
//! (P,"k","g",group,"cmeta")                   = ConsumerGroupMeta: a group on the consumer protocol
//!                                               (KIP-848): group epoch, assignment epoch, the
//!                                               subscribed topics (name, id, partitions) its
//!                                               target assignment was computed from
//! (P,"k","g",group,"cm",member)               = ConsumerMember (client, subscription, epochs,
//!                                               state, assigned, revoking, target assignment)
//! (P,"k","g",group,"o",topic,partition)       = CommittedOffset
//! (P,"k","g",group,"smeta")                   = "": the group is a share group (KIP-932)
//! (P,"k","g",group,"sconf")                   = (format, ((name, value), …)): a share group's
//!                                               settings that are set (group configs)
//! (P,"k","g",group,"sp",topic_id,partition)   = i64 LE: the next offset the share group feeds
//!                                               into the partition's share stage
//! (P,"k","g",group,"po",producer_id,topic,partition)
//!                                             = CommittedOffset of an open transaction
//! ```
//!
//! A partition's staged batches live in the stage named `kafka/<topic_id>/<partition>`
//! (the stage keyspace), so the produce path is the stage's conflict-free append. A share
//! group's records to deliver of a partition are the messages of the stage
//! `kafka-share/<group>/<topic_id>/<partition>` (each body a record offset).

use ferry_store::keys::prefix_range;
use foundationdb_tuple::Subspace;

/// The name of the stage holding a partition's staged batches.
pub(crate) fn stage_name(topic_id: u64, partition: i32) -> String {
    format!("kafka/{topic_id}/{partition}")
}

/// Keys outside any one partition or group.
#[derive(Debug, Clone)]
pub struct KafkaKeys {
    /// `(P, "k")`.
    space: Subspace,
}

impl KafkaKeys {
    /// The Kafka keyspace under the store prefix `prefix`.
    pub fn new(prefix: &str) -> Self {
        Self {
            space: Subspace::from_bytes(foundationdb_tuple::pack(&(prefix, "k"))),
        }
    }

    /// Topic name → id.
    pub fn topic_by_name(&self, name: &str) -> Vec<u8> {
        self.space.pack(&("topic", "by_name", name))
    }

    /// The next topic id.
    pub fn next_topic_id(&self) -> Vec<u8> {
        self.space.pack(&("topic", "next_id"))
    }

    /// A topic's metadata.
    pub fn topic_meta(&self, id: u64) -> Vec<u8> {
        self.space.pack(&("topic", "meta", id))
    }

    /// Every topic's metadata.
    pub fn topic_metas(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("topic", "meta")))
    }

    /// The counter every topic change bumps (topic caches watch it).
    pub fn topics_version(&self) -> Vec<u8> {
        self.space.pack(&("topic", "version"))
    }

    /// The counter every change of a share group's settings, and every deletion of a
    /// share group, bumps (every instance watches it).
    pub fn share_configs_version(&self) -> Vec<u8> {
        self.space.pack(&("sconfv",))
    }

    /// A registered broker (Ferry instance).
    pub fn broker(&self, node_id: i32) -> Vec<u8> {
        self.space.pack(&("broker", i64::from(node_id)))
    }

    /// Every registered broker.
    pub fn brokers(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("broker",)))
    }

    /// Decodes a broker key into its node id.
    pub fn broker_of(&self, key: &[u8]) -> Option<i32> {
        let (_, node) = self.space.unpack::<(String, i64)>(key).ok()?;
        i32::try_from(node).ok()
    }

    /// The dynamic broker settings of every instance (`None`) or of instance `node`.
    pub fn broker_settings(&self, node: Option<i32>) -> Vec<u8> {
        match node {
            None => self.space.pack(&("bconf", "cluster")),
            Some(node) => self.space.pack(&("bconf", "node", i64::from(node))),
        }
    }

    /// Every instance's own dynamic broker settings.
    pub fn node_settings(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("bconf", "node")))
    }

    /// Decodes a key of [`Self::node_settings`] into its node id.
    pub fn node_settings_of(&self, key: &[u8]) -> Option<i32> {
        let (_, _, node) = self.space.unpack::<(String, String, i64)>(key).ok()?;
        i32::try_from(node).ok()
    }

    /// The counter every change of dynamic broker settings bumps (their caches watch it).
    pub fn broker_settings_version(&self) -> Vec<u8> {
        self.space.pack(&("bconf", "version"))
    }

    /// The next idempotent producer id.
    pub fn next_producer_id(&self) -> Vec<u8> {
        self.space.pack(&("producer", "next_id"))
    }

    /// The producer id a transactional id has.
    pub fn transactional_id(&self, id: &str) -> Vec<u8> {
        self.space.pack(&("txid", id))
    }

    /// The transaction state of a transactional producer.
    pub fn transaction(&self, producer_id: i64) -> Vec<u8> {
        self.space.pack(&("txn", producer_id))
    }

    /// Every transactional producer's state.
    pub fn transactions(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("txn",)))
    }

    /// The producer id of a key of [`Self::transactions`].
    pub fn transaction_producer(&self, key: &[u8]) -> Option<i64> {
        self.space
            .unpack::<(String, i64)>(key)
            .ok()
            .map(|(_, id)| id)
    }

    /// The entry saying an open transaction of `producer_id` times out at `deadline_ms`.
    pub fn transaction_due(&self, deadline_ms: u64, producer_id: i64) -> Vec<u8> {
        self.space.pack(&("txn-due", deadline_ms, producer_id))
    }

    /// The open transactions due before `deadline_ms`, oldest deadline first.
    pub fn transactions_due_before(&self, deadline_ms: u64) -> (Vec<u8>, Vec<u8>) {
        (
            self.space.pack(&("txn-due",)),
            self.space.pack(&("txn-due", deadline_ms)),
        )
    }

    /// Decodes a [`Self::transaction_due`] key into its producer id.
    pub fn transaction_due_of(&self, key: &[u8]) -> Option<i64> {
        self.space
            .unpack::<(String, u64, i64)>(key)
            .ok()
            .map(|(_, _, id)| id)
    }

    /// Where ACLs live: `(P, "k", "acl", "e")`, followed by an ACL's fields.
    pub fn acls(&self) -> Subspace {
        self.space.subspace(&("acl", "e"))
    }

    /// The counter every ACL change bumps (ACL caches watch it).
    pub fn acls_version(&self) -> Vec<u8> {
        self.space.pack(&("acl", "version"))
    }

    /// The keys of one partition.
    pub fn partition(&self, topic_id: u64, partition: i32) -> PartitionKeys {
        PartitionKeys {
            space: self.space.subspace(&("p", topic_id, i64::from(partition))),
        }
    }

    /// Every key of every partition of a topic.
    pub fn topic_partitions(&self, topic_id: u64) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("p", topic_id)))
    }

    /// The keys of one consumer group.
    pub fn group(&self, group: &str) -> GroupKeys {
        GroupKeys {
            space: self.space.subspace(&("g", group)),
        }
    }

    /// The lease of a group's coordinator (outside the group's own keys, which a
    /// DeleteGroups clears).
    pub fn group_lease(&self, group: &str) -> Vec<u8> {
        self.space.pack(&("gcoord", group))
    }

    /// Every group's coordinator lease.
    pub fn group_leases(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("gcoord",)))
    }

    /// The listing entry of a group.
    pub fn group_listing(&self, group: &str) -> Vec<u8> {
        self.space.pack(&("groups", group))
    }

    /// Every group's listing entry.
    pub fn group_listings(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("groups",)))
    }

    /// Decodes a listing entry into its group id.
    pub fn group_of(&self, key: &[u8]) -> Option<String> {
        self.space
            .unpack::<(String, String)>(key)
            .ok()
            .map(|(_, g)| g)
    }
}

/// Keys of one partition.
#[derive(Debug, Clone)]
pub struct PartitionKeys {
    /// `(P, "k", "p", topic_id, partition)`.
    space: Subspace,
}

impl PartitionKeys {
    /// The sequencer lease.
    pub fn lease(&self) -> Vec<u8> {
        self.space.pack(&("lease",))
    }

    /// The high watermark: the next offset to assign. Fetchers watch it.
    pub fn high_watermark(&self) -> Vec<u8> {
        self.space.pack(&("hw",))
    }

    /// The log start offset.
    pub fn log_start(&self) -> Vec<u8> {
        self.space.pack(&("start",))
    }

    /// Bytes stored in the log (atomic add).
    pub fn bytes(&self) -> Vec<u8> {
        self.space.pack(&("bytes",))
    }

    /// The newest timestamp the log has held.
    pub fn max_timestamp(&self) -> Vec<u8> {
        self.space.pack(&("maxts",))
    }

    /// The index entry of the batch at `base`.
    pub fn index(&self, base: i64) -> Vec<u8> {
        self.space.pack(&("i", base))
    }

    /// Index entries of batches with bases in `[from, to)`.
    pub fn index_range(&self, from: i64, to: i64) -> (Vec<u8>, Vec<u8>) {
        (self.index(from), self.index(to))
    }

    /// Decodes an index key into its base offset.
    pub fn index_base(&self, key: &[u8]) -> Option<i64> {
        self.space.unpack::<(String, i64)>(key).ok().map(|(_, b)| b)
    }

    /// Chunk `chunk` of the batch at `base`.
    pub fn log_chunk(&self, base: i64, chunk: u32) -> Vec<u8> {
        self.space.pack(&("l", base, chunk))
    }

    /// Every chunk of the batches with bases in `[from, to)`.
    pub fn log_range(&self, from: i64, to: i64) -> (Vec<u8>, Vec<u8>) {
        (self.space.pack(&("l", from)), self.space.pack(&("l", to)))
    }

    /// The entry naming the spill the batch at `base` is kept in.
    pub fn spilled(&self, base: i64) -> Vec<u8> {
        self.space.pack(&("spill", base))
    }

    /// Spill entries of batches with bases in `[from, to)`.
    pub fn spilled_range(&self, from: i64, to: i64) -> (Vec<u8>, Vec<u8>) {
        (self.spilled(from), self.spilled(to))
    }

    /// The time index entry: the log's newest timestamp reached `ts` in the batch at `base`.
    pub fn time(&self, ts: i64, base: i64) -> Vec<u8> {
        self.space.pack(&("t", ts, base))
    }

    /// Time index entries at or after `ts`.
    pub fn time_from(&self, ts: i64) -> (Vec<u8>, Vec<u8>) {
        let (_, end) = prefix_range(&self.space.pack(&("t",)));
        (self.space.pack(&("t", ts)), end)
    }

    /// Decodes a time index key into (timestamp, base offset).
    pub fn time_entry(&self, key: &[u8]) -> Option<(i64, i64)> {
        self.space
            .unpack::<(String, i64, i64)>(key)
            .ok()
            .map(|(_, ts, base)| (ts, base))
    }

    /// An idempotent producer's state in this partition.
    pub fn producer(&self, producer_id: i64) -> Vec<u8> {
        self.space.pack(&("pid", producer_id))
    }

    /// Every idempotent producer's state in this partition.
    pub fn producers(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("pid",)))
    }

    /// The producer id of a key of [`Self::producers`] (or [`Self::open_transactions`]).
    pub fn producer_of(&self, key: &[u8]) -> Option<i64> {
        self.space
            .unpack::<(String, i64)>(key)
            .ok()
            .map(|(_, id)| id)
    }

    /// Where producer `producer_id`'s open transaction begins in this partition.
    pub fn open_transaction(&self, producer_id: i64) -> Vec<u8> {
        self.space.pack(&("open", producer_id))
    }

    /// Every open transaction in this partition.
    pub fn open_transactions(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("open",)))
    }

    /// An aborted transaction whose abort marker is at `last`.
    pub fn aborted(&self, last: i64, producer_id: i64) -> Vec<u8> {
        self.space.pack(&("ab", last, producer_id))
    }

    /// Aborted transactions whose markers are at offsets in `[from, to)`.
    pub fn aborted_range(&self, from: i64, to: i64) -> (Vec<u8>, Vec<u8>) {
        (self.space.pack(&("ab", from)), self.space.pack(&("ab", to)))
    }

    /// Decodes an aborted-transaction key into (marker offset, producer id).
    pub fn aborted_entry(&self, key: &[u8]) -> Option<(i64, i64)> {
        self.space
            .unpack::<(String, i64, i64)>(key)
            .ok()
            .map(|(_, last, id)| (last, id))
    }

    /// Compaction's checkpoint: the offset below which the log is compacted.
    pub fn cleaned(&self) -> Vec<u8> {
        self.space.pack(&("clean",))
    }

    /// Where leader epoch `epoch` begins.
    pub fn leader_epoch(&self, epoch: i64) -> Vec<u8> {
        self.space.pack(&("ep", epoch))
    }

    /// Every recorded leader epoch, oldest first.
    pub fn leader_epochs(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("ep",)))
    }

    /// The epoch of a key of [`Self::leader_epochs`].
    pub fn leader_epoch_of(&self, key: &[u8]) -> Option<i64> {
        self.space
            .unpack::<(String, i64)>(key)
            .ok()
            .map(|(_, epoch)| epoch)
    }
}

/// Keys of one consumer group.
#[derive(Debug, Clone)]
pub struct GroupKeys {
    /// `(P, "k", "g", group)`.
    space: Subspace,
}

impl GroupKeys {
    /// Generation, protocol and leader.
    pub fn meta(&self) -> Vec<u8> {
        self.space.pack(&("meta",))
    }

    /// One member.
    pub fn member(&self, member: &str) -> Vec<u8> {
        self.space.pack(&("m", member))
    }

    /// Every member.
    pub fn members(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("m",)))
    }

    /// Decodes a member key into the member id.
    pub fn member_of(&self, key: &[u8]) -> Option<String> {
        self.space
            .unpack::<(String, String)>(key)
            .ok()
            .map(|(_, m)| m)
    }

    /// A consumer-protocol group's epochs and subscribed topics.
    pub fn consumer_meta(&self) -> Vec<u8> {
        self.space.pack(&("cmeta",))
    }

    /// One member of a consumer-protocol group.
    pub fn consumer_member(&self, member: &str) -> Vec<u8> {
        self.space.pack(&("cm", member))
    }

    /// Every member of a consumer-protocol group.
    pub fn consumer_members(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("cm",)))
    }

    /// A committed offset.
    pub fn offset(&self, topic: &str, partition: i32) -> Vec<u8> {
        self.space.pack(&("o", topic, i64::from(partition)))
    }

    /// Every committed offset.
    pub fn offsets(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("o",)))
    }

    /// Decodes an offset key into (topic, partition).
    pub fn offset_of(&self, key: &[u8]) -> Option<(String, i32)> {
        let (_, topic, partition) = self.space.unpack::<(String, String, i64)>(key).ok()?;
        Some((topic, i32::try_from(partition).ok()?))
    }

    /// An offset committed by producer `producer_id`'s open transaction.
    pub fn pending_offset(&self, producer_id: i64, topic: &str, partition: i32) -> Vec<u8> {
        self.space
            .pack(&("po", producer_id, topic, i64::from(partition)))
    }

    /// Every offset committed by producer `producer_id`'s open transaction.
    pub fn pending_offsets(&self, producer_id: i64) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("po", producer_id)))
    }

    /// Decodes a pending offset key into (topic, partition).
    pub fn pending_offset_of(&self, key: &[u8]) -> Option<(String, i32)> {
        let (_, _, topic, partition) = self.space.unpack::<(String, i64, String, i64)>(key).ok()?;
        Some((topic, i32::try_from(partition).ok()?))
    }

    /// Present when the group is a share group.
    pub fn share_meta(&self) -> Vec<u8> {
        self.space.pack(&("smeta",))
    }

    /// A share group's settings (its group configs).
    pub fn share_config(&self) -> Vec<u8> {
        self.space.pack(&("sconf",))
    }

    /// The next offset a share group feeds of a partition (its share-partition end offset).
    pub fn share_partition(&self, topic_id: u64, partition: i32) -> Vec<u8> {
        self.space.pack(&("sp", topic_id, i64::from(partition)))
    }

    /// Every share-partition end offset of the group.
    pub fn share_partitions(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("sp",)))
    }

    /// Decodes a [`Self::share_partition`] key into (topic id, partition).
    pub fn share_partition_of(&self, key: &[u8]) -> Option<(u64, i32)> {
        let (_, topic_id, partition) = self.space.unpack::<(String, u64, i64)>(key).ok()?;
        Some((topic_id, i32::try_from(partition).ok()?))
    }

    /// Every key of the group.
    pub fn all(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(self.space.bytes())
    }
}

/// Encodes an 8-byte little-endian counter or offset value.
pub(crate) fn encode_i64(v: i64) -> [u8; 8] {
    v.to_le_bytes()
}

/// Decodes an 8-byte little-endian value; a missing or malformed one is 0.
pub fn decode_i64(bytes: Option<&[u8]>) -> i64 {
    bytes
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, i64::from_le_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_keys_sort_by_offset_then_chunk() {
        let p = KafkaKeys::new("ferry").partition(1, 0);
        assert!(p.log_chunk(9, 1) < p.log_chunk(10, 0));
        assert!(p.log_chunk(10, 0) < p.log_chunk(10, 1));
        let (b, e) = p.log_range(10, 11);
        assert!(b <= p.log_chunk(10, 0) && p.log_chunk(10, 99) < e);
        assert!(p.log_chunk(11, 0) >= e);
    }

    #[test]
    fn keys_decode_back() {
        let k = KafkaKeys::new("ferry");
        assert_eq!(k.broker_of(&k.broker(3)), Some(3));
        let p = k.partition(4, 2);
        assert_eq!(p.index_base(&p.index(77)), Some(77));
        assert_eq!(p.time_entry(&p.time(-1, 5)), Some((-1, 5)));
        let g = k.group("g1");
        assert_eq!(g.offset_of(&g.offset("t", 3)), Some(("t".into(), 3)));
        assert_eq!(g.member_of(&g.member("m-1")), Some("m-1".into()));
        assert_eq!(k.group_of(&k.group_listing("g1")), Some("g1".into()));
        assert_eq!(
            k.transaction_due_of(&k.transaction_due(9_000, 42)),
            Some(42)
        );
        let (b, e) = k.transactions_due_before(9_001);
        assert!((b.clone()..e.clone()).contains(&k.transaction_due(9_000, 42)));
        assert!(!(b..e).contains(&k.transaction_due(9_001, 42)));
        assert_eq!(p.aborted_entry(&p.aborted(12, 7)), Some((12, 7)));
        assert_eq!(
            g.pending_offset_of(&g.pending_offset(7, "t", 3)),
            Some(("t".into(), 3))
        );
        let (b, e) = g.offsets();
        assert!(!(b..e).contains(&g.pending_offset(7, "t", 3)));
    }

    #[test]
    fn partitions_of_one_topic_share_a_prefix() {
        let k = KafkaKeys::new("ferry");
        let (b, e) = k.topic_partitions(4);
        for key in [k.partition(4, 0).lease(), k.partition(4, 9).log_chunk(0, 0)] {
            assert!(b <= key && key < e);
        }
        assert!(k.partition(5, 0).lease() >= e);
    }
}
