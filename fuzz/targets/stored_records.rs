//! Everything Ferry reads back from the store: values and keys, as a damaged store or one
//! written by another version could hold them.
//!
//! Feeds, by the input's first byte (the rest is split into chunks, each a big-endian u16
//! length and its bytes, the last one taking what is left):
//! - stage values (`stage::record`): `Envelope`, `StageMeta`, `DequeueRequest`, integers
//!   and counters, each re-encoded and decoded again;
//! - AMQP: `StoredMessage::decode` (stage bodies) and the properties a delivery carries,
//!   the bridge's `AmqpMessage::from_stage_body` and its AMQP ↔ Kafka mapping both ways,
//!   topology records (`decode_exchange`, `QueueRecord::decode` with its arguments
//!   table and `QueueArgs::parse`), vhost metadata, users and permissions;
//! - Kafka: staged records (`kafka::staged`) as the sequencer reads them (batch header,
//!   producer state judgement), a partition log read by the bridge
//!   (`port::decode_committed`, every batch's CRC-32C set right as the produce path
//!   guarantees, so the record decoder and its decompressors are reached), committed
//!   offsets, leases, producer states, topic metadata, transaction states, batch indexes,
//!   broker registrations, and consumer groups: stored metadata and members restored
//!   into `groups::state::Group`, then driven by joins, syncs, heartbeats, leaves and
//!   ticks of the input's choosing;
//! - keys decoded from range reads (topology, stage, Kafka): a real key cut at a point
//!   of the input's choosing, the input appended.
//!
//! Bound: nothing a stored length or count declares is allocated before its bytes are
//! seen (`-malloc_limit_mb` catches one that is), and bad bytes give an error, never a
//! panic: a damaged record must fail its read, not the process.

use bytes::Bytes;
use ferry::fuzzing::{
    DequeueRequest, amqp_vhost_meta, decode_counter, decode_u64, kafka_batch_index,
    kafka_broker_registration, kafka_decode_committed, kafka_topic_meta, kafka_txn_state,
    user_permissions, user_topic_permission,
};
use ferry_amqp::StoredMessage;
use ferry_amqp::port::AmqpMessage;
use ferry_amqp::{Binding, Destination};
use ferry_amqp::{QueueArgs, decode_table};
use ferry_amqp::{QueueRecord, TopologyKeys, decode_exchange, encode_exchange, entity_name};
use ferry_auth::User;
use ferry_bridge::mapping::{amqp_to_kafka, kafka_to_amqp, values};
use ferry_config::KeySource;
use ferry_kafka::fuzzing::Aborted;
use ferry_kafka::fuzzing::ConsumerSettings;
use ferry_kafka::fuzzing::Lease;
use ferry_kafka::fuzzing::ProducerState;
use ferry_kafka::fuzzing::batch::{self, BatchHeader};
use ferry_kafka::fuzzing::staged;
use ferry_kafka::fuzzing::{Group, GroupSettings, JoinRequest, MemberRef};
use ferry_kafka::fuzzing::{KafkaKeys, decode_i64};
use ferry_kafka::fuzzing::{decode_member, decode_meta, decode_offset};
use ferry_stage::Owner;
use ferry_stage::keys::RootKeys;
use ferry_stage::{Envelope, StageMeta};
use std::time::{Duration, Instant};

/// The most a batch's records may decompress to in the bridge's reads here. The daemon
/// allows `kafka.max_request_size` (100 MiB by default); 1 MiB keeps decoding within the
/// 64 MB allocation bound, so the bound checks that decoding stays proportional to it.
const MAX_DECOMPRESSED: usize = 1 << 20;

/// Feeds `data` to what this target drives; panics on what the target finds.
pub fn run(data: &[u8]) {
    let [selector, rest @ ..] = data else {
        return;
    };
    let chunks = chunks(rest);
    let first = chunks.first().copied().unwrap_or_default();
    match selector % 12 {
        0 => stage_values(first),
        1 => amqp_message(first),
        2 => topology(&chunks),
        3 => kafka_staged(&chunks),
        4 => kafka_log(&chunks),
        5 => group(&chunks),
        6 => kafka_values(first),
        7 => users(first),
        8 => keys(&chunks),
        9 => {
            let letter = char::from(first.first().copied().unwrap_or(b'S'));
            let _ = values::decode(letter, first.get(1..));
            let _ = values::decode(letter, None);
        }
        10 => {
            let _ = amqp_vhost_meta(first);
            let _ = Owner::decode(first);
        }
        _ => {
            let _ = decode_u64(first);
            let _ = decode_counter(Some(first));
            let _ = decode_i64(Some(first));
        }
    }
}

/// The input after the selector as chunks: a big-endian u16 length, that many bytes; the
/// last chunk takes what is left when its length says more.
fn chunks(mut rest: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let [hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        out.push(&tail[..len]);
        rest = &tail[len..];
    }
    out
}

fn stage_values(bytes: &[u8]) {
    if let Ok(e) = Envelope::decode(bytes) {
        assert_eq!(Envelope::decode(&e.encode()).ok(), Some(e));
        let _ = e.expired(u64::MAX);
    }
    if let Ok(m) = StageMeta::decode(bytes) {
        assert_eq!(StageMeta::decode(&m.encode()).ok(), Some(m));
    }
    if let Ok(r) = DequeueRequest::decode(bytes) {
        assert_eq!(DequeueRequest::decode(&r.encode()).ok(), Some(r));
    }
}

/// A stage body of an AMQP queue or a route: what a delivery and the bridge read of it.
fn amqp_message(bytes: &[u8]) {
    if let Ok(stored) = StoredMessage::decode(Bytes::copy_from_slice(bytes)) {
        assert_eq!(
            StoredMessage::decode(stored.encode()).ok(),
            Some(stored.clone())
        );
        let _ = stored.properties();
        for returns in [0, 1, u32::MAX] {
            let _ = stored.delivered_properties(true, returns);
        }
    }
    let Ok(message) = AmqpMessage::from_stage_body(Bytes::copy_from_slice(bytes)) else {
        return;
    };
    for key in [KeySource::RoutingKey, KeySource::MessageId, KeySource::None] {
        let record = amqp_to_kafka(&message, key);
        // Back to AMQP and stored, as a route from a Kafka topic to an exchange does.
        let _ = kafka_to_amqp(&record, "amq.topic").message.to_stage_body();
    }
}

/// Topology records: chunk 0 an exchange's value, chunk 1 a queue's.
fn topology(chunks: &[&[u8]]) {
    let exchange = chunks.first().copied().unwrap_or_default();
    if let Ok(x) = decode_exchange("x", exchange) {
        decode_exchange("x", &encode_exchange(&x)).expect("an encoded exchange decodes");
    }
    let queue = chunks.get(1).copied().unwrap_or_default();
    if let Ok(q) = QueueRecord::decode(queue) {
        assert_eq!(QueueRecord::decode(&q.encode()).ok(), Some(q.clone()));
        if let Some(table) = decode_table(&q.arguments) {
            let _ = QueueArgs::parse(&table);
        }
    }
}

/// A staged Kafka record (chunk 0) as the partition's sequencer reads it, judged against
/// a stored producer state (chunk 1).
fn kafka_staged(chunks: &[&[u8]]) {
    let body = chunks.first().copied().unwrap_or_default();
    let _ = staged::waiter(body);
    let mut body = body.to_vec();
    let records = staged::batch_mut(&mut body);
    let Ok(header) = BatchHeader::parse(records) else {
        return;
    };
    let _ = (
        header.offset_span(),
        header.last_sequence(),
        header.newest_timestamp(),
    );
    let _ = batch::marker_commits(records);
    let state = chunks.get(1).and_then(|b| ProducerState::decode(b));
    let _ = ProducerState::judge(state.as_ref(), &header);
    let after = ProducerState::after(state.clone(), &header, 42);
    assert_eq!(ProducerState::decode(&after.encode()), Some(after));
    let _ = ProducerState::at_epoch(state, header.producer_epoch);
    if records.len() >= 8 {
        batch::set_base_offset(records, i64::MAX);
        let _ = batch::first_record_at_or_after(records, 0);
    }
}

/// A partition log read (chunk 1, CRCs set right) from the offset in chunk 0, with the
/// aborted transactions of chunk 2 (triples of big-endian i64s).
fn kafka_log(chunks: &[&[u8]]) {
    let from = chunks
        .first()
        .and_then(|b| b.get(..8))
        .map_or(0, |b| i64::from_be_bytes(b.try_into().expect("8 bytes")));
    let mut log = chunks.get(1).copied().unwrap_or_default().to_vec();
    fix_crcs(&mut log);
    let aborted: Vec<Aborted> = chunks
        .get(2)
        .copied()
        .unwrap_or_default()
        .chunks_exact(24)
        .map(|t| {
            let at = |i: usize| i64::from_be_bytes(t[i..i + 8].try_into().expect("8 bytes"));
            Aborted {
                producer_id: at(0),
                first: at(8),
                marker: at(16),
            }
        })
        .collect();
    if let Ok(read) = kafka_decode_committed(&log, from, &aborted, MAX_DECOMPRESSED) {
        // A route from the topic to an exchange maps each record and stores it.
        for record in &read.records {
            let _ = kafka_to_amqp(record, "amq.topic").message.to_stage_body();
        }
    }
}

/// Sets the CRC-32C of every whole batch of `log` right, as every stored batch has it
/// (the produce path refuses any other).
fn fix_crcs(log: &mut [u8]) {
    let mut at = 0;
    while let Ok(header) = BatchHeader::parse(&log[at..]) {
        let Some(end) = at.checked_add(header.size).filter(|e| *e <= log.len()) else {
            return;
        };
        let crc = crc32c::crc32c(&log[at + 21..end]);
        log[at + 17..at + 21].copy_from_slice(&crc.to_be_bytes());
        at = end;
    }
}

/// A stored group (chunk 0 its metadata, then up to 8 members), restored and then driven
/// by the operations of the last chunk.
fn group(chunks: &[&[u8]]) {
    let Some((ops, stored)) = chunks.split_last() else {
        return;
    };
    let Some(Ok(mut meta)) = stored.first().map(|b| decode_meta(b)) else {
        return;
    };
    for (i, bytes) in stored.iter().skip(1).take(8).enumerate() {
        match decode_member(format!("m{i}"), bytes) {
            Ok(member) => meta.members.push(member),
            Err(_) => return,
        }
    }
    // A new member's id is random; seeded, every run of an input is the same.
    fastrand::seed(7);
    let settings = GroupSettings {
        min_session: Duration::from_millis(6_000),
        max_session: Duration::from_millis(1_800_000),
        initial_delay: Duration::from_millis(3_000),
        consumer: ConsumerSettings {
            session_timeout: Duration::from_millis(45_000),
            heartbeat_interval: Duration::from_millis(5_000),
        },
    };
    let start = Instant::now();
    let mut now = start;
    let mut group = Group::restore(
        "g",
        settings,
        meta.generation,
        meta.protocol_type,
        meta.protocol,
        meta.leader,
        meta.members,
        meta.stable,
        now,
    );
    let _ = group.next_deadline();
    let mut ops = *ops;
    while let [op, a, b, tail @ ..] = ops {
        ops = tail;
        let member = member_ref(&group, *a, *b);
        let generation = group.generation.wrapping_add(i32::from(*b as i8 % 3) - 1);
        match op % 6 {
            0 => {
                let millis = |x: u8| Duration::from_millis(u64::from(x) * 1_000);
                let join = JoinRequest {
                    member_id: if b & 1 == 0 { member.id } else { String::new() },
                    instance_id: member.instance_id,
                    client_id: "c".into(),
                    client_host: "/127.0.0.1".into(),
                    session_timeout: millis(*b),
                    rebalance_timeout: millis(a.wrapping_mul(*b)),
                    protocol_type: if b & 2 == 0 { "consumer" } else { "connect" }.into(),
                    protocols: ["range", "roundrobin", "sticky"]
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| a & (1 << i) != 0)
                        .map(|(i, name)| ((*name).to_owned(), Bytes::from(vec![*b; i])))
                        .collect(),
                    requires_known_member_id: a & 8 != 0,
                };
                let _ = group.join(join, now);
            }
            1 => {
                let assignments = group
                    .members
                    .keys()
                    .map(|id| (id.clone(), Bytes::from(vec![*b; 3])))
                    .collect();
                let _ = group.sync(&member, generation, assignments, now);
            }
            2 => {
                let _ = group.heartbeat(&member, generation, now);
            }
            3 => {
                let _ = group.leave(&[member], now);
            }
            4 => {
                now += Duration::from_millis(u64::from(u16::from_be_bytes([*a, *b])) * 100);
                let _ = group.tick(now);
            }
            _ => {
                let _ = group.check_commit(&member, generation);
            }
        }
        let _ = group.next_deadline();
        let _ = (group.take_dirty(), group.take_rebalances());
    }
}

/// A member of `group` picked by `pick` (or an unknown one), static with one of three
/// instance ids when `flags` says so.
fn member_ref(group: &Group, pick: u8, flags: u8) -> MemberRef {
    let n = group.members.len();
    let id = if n == 0 || usize::from(pick) >= n * 2 {
        format!("unknown-{pick}")
    } else {
        group
            .members
            .keys()
            .nth(usize::from(pick) % n)
            .cloned()
            .unwrap_or_default()
    };
    let instance = ["i0", "i1", "i2"][usize::from(flags >> 6) % 3];
    MemberRef::new(&id, (flags & 0x20 != 0).then_some(instance))
}

fn kafka_values(bytes: &[u8]) {
    let _ = decode_offset(bytes);
    if let Ok(lease) = Lease::decode(bytes) {
        let _ = Lease::holder(Some(lease), u64::MAX);
    }
    let _ = kafka_topic_meta(1, bytes);
    let _ = kafka_txn_state(1, bytes);
    let _ = kafka_batch_index(0, bytes);
    let _ = kafka_broker_registration(1, bytes);
}

fn users(bytes: &[u8]) {
    let _ = User::decode_stored("alice", bytes);
    let _ = user_permissions(bytes);
    let _ = user_topic_permission(bytes);
}

/// Keys of range reads: chunk 0 picks a key kind and where to cut it (its first two
/// bytes), chunk 1 is appended to the cut key.
fn keys(chunks: &[&[u8]]) {
    let head = chunks.first().copied().unwrap_or_default();
    let (kind, cut) = match head {
        [k, c, ..] => (*k, usize::from(*c)),
        [k] => (*k, 255),
        [] => (0, 255),
    };
    let tail = chunks.get(1).copied().unwrap_or_default();
    let key = |template: Vec<u8>| {
        let mut key = template[..cut.min(template.len())].to_vec();
        key.extend_from_slice(tail);
        key
    };
    let topology = TopologyKeys::new("ferry");
    let root = RootKeys::new("ferry");
    let kafka = KafkaKeys::new("ferry");
    let group = kafka.group("g");
    let partition = kafka.partition(1, 0);
    let binding = Binding {
        source: "amq.topic".into(),
        destination: Destination::Queue("q".into()),
        routing_key: "a.b".into(),
        arguments: Default::default(),
    };
    match kind % 12 {
        0 => {
            let _ = topology.binding_of(&key(topology.binding("/", &binding)));
        }
        1 => {
            let _ = topology.vhost_record_name(&key(topology.vhost_record("/")));
        }
        2 => {
            let _ = topology.delayed_of(&key(topology.delayed("/", "d", Some(5)).0));
        }
        3 => {
            let _ = entity_name(&topology, &key(topology.queue("/", "q")));
        }
        4 => {
            let _ = root.holder_of(&key(root.holder(3)));
        }
        5 => {
            let _ = root.holder_stage_of(&key(root.holder_stage(3, 4)));
        }
        6 => {
            let _ = kafka.broker_of(&key(kafka.broker(1)));
        }
        7 => {
            let _ = kafka.transaction_due_of(&key(kafka.transaction_due(5, 7)));
        }
        8 => {
            let _ = group.member_of(&key(group.member("m")));
        }
        9 => {
            let _ = group.offset_of(&key(group.offset("t", 0)));
            let _ = group.pending_offset_of(&key(group.pending_offset(7, "t", 0)));
        }
        10 => {
            let _ = partition.index_base(&key(partition.index(5)));
            let _ = partition.time_entry(&key(partition.time(5, 6)));
        }
        _ => {
            let _ = partition.aborted_entry(&key(partition.aborted(5, 6)));
        }
    }
}
