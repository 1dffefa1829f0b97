//! The AMQP front's keyspace: exchanges, queues and bindings of each virtual host, a
//! version key per virtual host that other instances watch, and single-active-consumer
//! claims. `docs/keyspace.md` documents the same layout.
//!
//! ```text
//! (P, "amqp", "v", vhost, "x", name)                          = ExchangeRecord tuple
//! (P, "amqp", "v", vhost, "q", name)                          = QueueRecord tuple
//! (P, "amqp", "v", vhost, "b", source, kind, dest, key, args)  = "" (a binding)
//! (P, "amqp", "v", vhost, "ver")                              = i64 LE, atomic add per change
//! (P, "amqp", "v", vhost, "d", exchange, due_ms, vs)          = (1, len): a message a delayed-message exchange holds
//!                                                              (2, len, spill, spill_len): a large one
//! (P, "amqp", "v", vhost, "db", exchange, vs, chunk)          = its stored bytes, in chunks
//! (P, "amqp", "v", vhost, "dn", exchange)                     = i64 LE, atomic add: messages it holds
//! (P, "amqp", "v", vhost, "dp", exchange, producer)           = (last_sequence,): idempotent holds
//! (P, "amqp", "delayed-ver")                                  = i64 LE, atomic add per message held
//! (P, "amqp", "sac", stage_id)                                = tuple (holder,): the active consumer
//! (P, "amqp", "vhost", name)                                  = VhostRecord tuple (a vhost made at runtime, or a configured one's metadata)
//! (P, "amqp", "vhosts-ver")                                   = i64 LE, atomic add per vhost created, changed or deleted
//! ```

use super::args::{decode_table, encode_table};
use super::exchange::{Exchange, ExchangeKind};
use super::routing::{Binding, Destination};
use ferry_stage::{Spill, Spills};
use ferry_store::keys::prefix_range;
use ferry_store::{RangeOption, StoreError, Transaction};
use foundationdb_tuple::{Subspace, Versionstamp, pack, unpack};

/// Format version of a held message's index value `(DELAYED_FORMAT, len)`.
const DELAYED_FORMAT: u16 = 1;
/// Format version of the index value of a held large message, `(SPILLED_FORMAT, len,
/// spill, spill_len)`: its stored bytes are its head, its body is in the spill, which the
/// hold references.
const SPILLED_FORMAT: u16 = 2;

/// Format version of the records below.
const FORMAT: u16 = 1;

/// Keys of the AMQP front.
#[derive(Debug, Clone)]
pub struct TopologyKeys {
    space: Subspace,
}

impl TopologyKeys {
    /// The keys under `(prefix, "amqp")`.
    pub fn new(prefix: &str) -> Self {
        Self {
            space: Subspace::from_bytes(pack(&(prefix,))).subspace(&("amqp",)),
        }
    }

    /// An exchange.
    pub fn exchange(&self, vhost: &str, name: &str) -> Vec<u8> {
        self.space.pack(&("v", vhost, "x", name))
    }

    /// Every exchange of a virtual host.
    pub fn exchanges(&self, vhost: &str) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("v", vhost, "x")))
    }

    /// A queue.
    pub fn queue(&self, vhost: &str, name: &str) -> Vec<u8> {
        self.space.pack(&("v", vhost, "q", name))
    }

    /// Every queue of a virtual host.
    pub fn queues(&self, vhost: &str) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("v", vhost, "q")))
    }

    /// A binding.
    pub fn binding(&self, vhost: &str, b: &Binding) -> Vec<u8> {
        let (kind, dest) = match &b.destination {
            Destination::Queue(q) => ("q", q.as_str()),
            Destination::Exchange(x) => ("x", x.as_str()),
        };
        self.space.pack(&(
            "v",
            vhost,
            "b",
            b.source.as_str(),
            kind,
            dest,
            b.routing_key.as_str(),
            encode_table(&b.arguments),
        ))
    }

    /// Every binding of a virtual host.
    pub fn bindings(&self, vhost: &str) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("v", vhost, "b")))
    }

    /// Decodes a binding key.
    pub fn binding_of(&self, key: &[u8]) -> Option<Binding> {
        type Key = (
            String,
            String,
            String,
            String,
            String,
            String,
            String,
            Vec<u8>,
        );
        let (_, _, _, source, kind, dest, routing_key, args) =
            self.space.unpack::<Key>(key).ok()?;
        let destination = match kind.as_str() {
            "q" => Destination::Queue(dest),
            "x" => Destination::Exchange(dest),
            _ => return None,
        };
        Some(Binding {
            source,
            destination,
            routing_key,
            arguments: decode_table(&args)?,
        })
    }

    /// The change counter of a virtual host's topology.
    pub fn version(&self, vhost: &str) -> Vec<u8> {
        self.space.pack(&("v", vhost, "ver"))
    }

    /// Everything of a virtual host's topology (exchanges, queues, bindings, version).
    pub(crate) fn vhost_topology(&self, vhost: &str) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("v", vhost)))
    }

    /// A virtual host's record.
    pub fn vhost_record(&self, name: &str) -> Vec<u8> {
        self.space.pack(&("vhost", name))
    }

    /// Every virtual host record.
    pub(crate) fn vhost_records(&self) -> (Vec<u8>, Vec<u8>) {
        prefix_range(&self.space.pack(&("vhost",)))
    }

    /// The name in a virtual host record's key.
    pub fn vhost_record_name(&self, key: &[u8]) -> Option<String> {
        self.space
            .unpack::<(String, String)>(key)
            .ok()
            .map(|(_, name)| name)
    }

    /// The change counter of the set of virtual hosts.
    pub(crate) fn vhosts_version(&self) -> Vec<u8> {
        self.space.pack(&("vhosts-ver",))
    }

    /// A message a delayed-message exchange holds until `due_ms`, written by the current
    /// transaction (versionstamped).
    pub(crate) fn new_delayed(
        &self,
        vhost: &str,
        exchange: &str,
        due_ms: u64,
        user_version: u16,
    ) -> Vec<u8> {
        self.space.pack_with_versionstamp(&(
            "v",
            vhost,
            "d",
            exchange,
            due_ms,
            Versionstamp::incomplete(user_version),
        ))
    }

    /// The messages a delayed-message exchange holds, in due order (then commit order),
    /// from the first to those due at `until_ms` (inclusive); `None`: all of them.
    pub fn delayed(
        &self,
        vhost: &str,
        exchange: &str,
        until_ms: Option<u64>,
    ) -> (Vec<u8>, Vec<u8>) {
        let (begin, end) = prefix_range(&self.space.pack(&("v", vhost, "d", exchange)));
        match until_ms {
            None => (begin, end),
            Some(at) => (begin, self.space.pack(&("v", vhost, "d", exchange, at + 1))),
        }
    }

    /// The due time and versionstamp in a held message's key.
    pub fn delayed_of(&self, key: &[u8]) -> Option<(u64, Versionstamp)> {
        type Key = (String, String, String, String, u64, Versionstamp);
        let (_, _, _, _, due, stamp) = self.space.unpack::<Key>(key).ok()?;
        Some((due, stamp))
    }

    /// A chunk of a held message's stored bytes (`stamp` incomplete: written by the
    /// current transaction).
    pub(crate) fn delayed_chunk(
        &self,
        vhost: &str,
        exchange: &str,
        stamp: &Versionstamp,
        chunk: u32,
    ) -> Vec<u8> {
        let key = ("v", vhost, "db", exchange, stamp, chunk);
        if stamp.is_complete() {
            self.space.pack(&key)
        } else {
            self.space.pack_with_versionstamp(&key)
        }
    }

    /// How many messages a delayed-message exchange holds (an i64 counter).
    pub(crate) fn delayed_count(&self, vhost: &str, exchange: &str) -> Vec<u8> {
        self.space.pack(&("v", vhost, "dn", exchange))
    }

    /// The last sequence a publisher's channel had held by a delayed-message exchange.
    pub(crate) fn delayed_producer(&self, vhost: &str, exchange: &str, producer: u64) -> Vec<u8> {
        self.space.pack(&("v", vhost, "dp", exchange, producer))
    }

    /// The ranges of what a delayed-message exchange holds besides its count: its
    /// messages, their bytes and the publishers' sequences.
    pub(crate) fn delayed_ranges(&self, vhost: &str, exchange: &str) -> [(Vec<u8>, Vec<u8>); 3] {
        ["d", "db", "dp"].map(|kind| prefix_range(&self.space.pack(&("v", vhost, kind, exchange))))
    }

    /// The change counter every held message bumps (every instance's mover watches it).
    pub(crate) fn delayed_version(&self) -> Vec<u8> {
        self.space.pack(&("delayed-ver",))
    }

    /// The single-active-consumer claim of a queue's stage.
    pub(crate) fn active_consumer(&self, stage_id: u64) -> Vec<u8> {
        self.space.pack(&("sac", stage_id))
    }
}

/// Why a stored record cannot be read.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the store holds an AMQP {0} record this ferry cannot decode; the keyspace was written by another version or damaged"
)]
pub struct RecordError(&'static str);

/// The index value of a message a delayed-message exchange holds: the length of its stored
/// bytes, and the spill its body is in, for a large one.
pub(crate) fn encode_delayed(len: usize, spill: Option<Spill>) -> Vec<u8> {
    match spill {
        None => pack(&(DELAYED_FORMAT, len as u64)),
        Some(spill) => pack(&(SPILLED_FORMAT, len as u64, spill.id, spill.len)),
    }
}

/// Decodes [`encode_delayed`]'s value (a damaged one as 0 bytes, no spill).
pub(crate) fn decode_delayed(value: &[u8]) -> (usize, Option<Spill>) {
    if let Ok((_, len, id, spill_len)) = unpack::<(u16, u64, u64, u64)>(value) {
        return (len as usize, Some(Spill { id, len: spill_len }));
    }
    (
        unpack::<(u16, u64)>(value).map_or(0, |(_, len)| len as usize),
        None,
    )
}

/// Within `tx`: drops everything delayed-message exchange `exchange` holds (it is
/// deleted), with the references of its large messages to their spills.
///
/// # Errors
/// The store's error.
pub(crate) async fn drop_delayed_in(
    tx: &Transaction,
    keys: &TopologyKeys,
    spills: &Spills,
    vhost: &str,
    exchange: &str,
) -> Result<(), StoreError> {
    let (begin, end) = keys.delayed(vhost, exchange, None);
    for kv in tx.get_range(&RangeOption::new(begin, end), false).await? {
        if let (_, Some(spill)) = decode_delayed(&kv.value) {
            spills.drop_ref_in(tx, spill.id);
        }
    }
    for (begin, end) in keys.delayed_ranges(vhost, exchange) {
        tx.clear_range(&begin, &end);
    }
    tx.clear(&keys.delayed_count(vhost, exchange));
    Ok(())
}

/// Encodes an exchange.
pub fn encode_exchange(x: &Exchange) -> Vec<u8> {
    pack(&(
        FORMAT,
        x.type_name(),
        x.durable,
        x.auto_delete,
        x.internal,
        encode_table(&x.arguments),
        x.owner,
    ))
}

/// Decodes an exchange named `name`.
///
/// # Errors
/// [`RecordError`] for a value of another layout.
pub fn decode_exchange(name: &str, bytes: &[u8]) -> Result<Exchange, RecordError> {
    type Record = (u16, String, bool, bool, bool, Vec<u8>, u64);
    let (_, kind, durable, auto_delete, internal, args, owner) =
        unpack::<Record>(bytes).map_err(|_| RecordError("exchange"))?;
    let arguments = decode_table(&args).ok_or(RecordError("exchange"))?;
    let (kind, delayed) =
        ExchangeKind::declared(&kind, &arguments).map_err(|_| RecordError("exchange"))?;
    Ok(Exchange {
        name: name.to_owned(),
        kind,
        delayed,
        durable,
        auto_delete,
        internal,
        arguments,
        owner,
        builtin: false,
    })
}

/// A queue as stored: its declaration and its stages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueRecord {
    /// Whether it survives a restart.
    pub durable: bool,
    /// Whether it goes with its last consumer.
    pub auto_delete: bool,
    /// The owning connection's holder, 0 when not exclusive.
    pub exclusive_owner: u64,
    /// The holder whose death removes it, 0 when durable.
    pub owner: u64,
    /// The arguments table as declared.
    pub arguments: Vec<u8>,
    /// Its stage's name.
    pub stage: String,
    /// Its dead-letter stage's name, "" when it has no dead-letter exchange.
    pub dead_letter_stage: String,
    /// Its stage's id: tells this incarnation of the queue from a deleted one of the same
    /// name, so a reload never keeps a handle on a deleted stage.
    pub stage_id: u64,
}

impl QueueRecord {
    /// The stored value.
    pub fn encode(&self) -> Vec<u8> {
        pack(&(
            FORMAT,
            self.durable,
            self.auto_delete,
            self.exclusive_owner,
            self.owner,
            self.arguments.clone(),
            self.stage.as_str(),
            self.dead_letter_stage.as_str(),
            self.stage_id,
        ))
    }

    /// Decodes the stored value.
    ///
    /// # Errors
    /// [`RecordError`] for a value of another layout.
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordError> {
        type Record = (u16, bool, bool, u64, u64, Vec<u8>, String, String, u64);
        let (
            _,
            durable,
            auto_delete,
            exclusive_owner,
            owner,
            arguments,
            stage,
            dead_letter_stage,
            stage_id,
        ) = unpack::<Record>(bytes).map_err(|_| RecordError("queue"))?;
        Ok(Self {
            durable,
            auto_delete,
            exclusive_owner,
            owner,
            arguments,
            stage,
            dead_letter_stage,
            stage_id,
        })
    }
}

/// The exchange or queue name in an exchange or queue key.
pub fn entity_name(keys: &TopologyKeys, key: &[u8]) -> Option<String> {
    keys.space
        .unpack::<(String, String, String, String)>(key)
        .ok()
        .map(|(_, _, _, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use amq_protocol::types::{AMQPValue, FieldTable};

    #[test]
    fn records_round_trip() {
        let mut x = Exchange::builtins().remove(3);
        x.name = "events".into();
        x.builtin = false;
        x.owner = 9;
        x.arguments.insert(
            "alternate-exchange".into(),
            AMQPValue::LongString("ae".into()),
        );
        assert_eq!(decode_exchange("events", &encode_exchange(&x)).unwrap(), x);
        let q = QueueRecord {
            durable: true,
            auto_delete: false,
            exclusive_owner: 0,
            owner: 0,
            arguments: encode_table(&FieldTable::default()),
            stage: "amqp/1///q".into(),
            dead_letter_stage: String::new(),
            stage_id: 4,
        };
        assert_eq!(QueueRecord::decode(&q.encode()).unwrap(), q);
    }

    #[test]
    fn binding_and_entity_keys_decode_back() {
        let keys = TopologyKeys::new("ferry");
        let mut arguments = FieldTable::default();
        arguments.insert("x-match".into(), AMQPValue::LongString("any".into()));
        let b = Binding {
            source: "amq.headers".into(),
            destination: Destination::Exchange("downstream".into()),
            routing_key: String::new(),
            arguments,
        };
        assert_eq!(keys.binding_of(&keys.binding("/", &b)), Some(b));
        assert_eq!(
            entity_name(&keys, &keys.queue("/", "orders")).as_deref(),
            Some("orders")
        );
    }
}
