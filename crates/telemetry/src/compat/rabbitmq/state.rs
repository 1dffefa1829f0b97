//! What RabbitMQ's families are computed from: event counters the AMQP front bumps (after
//! the fact they count, never inside a transaction that may retry), the queue depths the
//! resource monitor measured last, and this node's identity. Process-wide, as the
//! counters of the `metrics` crate are.

use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// The event counters; open connections and channels are `opened - closed`.
pub(super) struct Counters {
    pub connections_opened: AtomicU64,
    pub connections_closed: AtomicU64,
    pub channels_opened: AtomicU64,
    pub channels_closed: AtomicU64,
    pub queues_declared: AtomicU64,
    pub queues_created: AtomicU64,
    pub queues_deleted: AtomicU64,
    pub received: AtomicU64,
    pub received_confirm: AtomicU64,
    pub routed: AtomicU64,
    pub unroutable_dropped: AtomicU64,
    pub unroutable_returned: AtomicU64,
    pub stored_in_queues: AtomicU64,
    pub confirmed: AtomicU64,
    pub consume_manual_ack: AtomicU64,
    pub consume_auto_ack: AtomicU64,
    pub get_manual_ack: AtomicU64,
    pub get_auto_ack: AtomicU64,
    pub redelivered: AtomicU64,
    pub acknowledged: AtomicU64,
    pub get_empty: AtomicU64,
}

impl Counters {
    const fn new() -> Self {
        Self {
            connections_opened: AtomicU64::new(0),
            connections_closed: AtomicU64::new(0),
            channels_opened: AtomicU64::new(0),
            channels_closed: AtomicU64::new(0),
            queues_declared: AtomicU64::new(0),
            queues_created: AtomicU64::new(0),
            queues_deleted: AtomicU64::new(0),
            received: AtomicU64::new(0),
            received_confirm: AtomicU64::new(0),
            routed: AtomicU64::new(0),
            unroutable_dropped: AtomicU64::new(0),
            unroutable_returned: AtomicU64::new(0),
            stored_in_queues: AtomicU64::new(0),
            confirmed: AtomicU64::new(0),
            consume_manual_ack: AtomicU64::new(0),
            consume_auto_ack: AtomicU64::new(0),
            get_manual_ack: AtomicU64::new(0),
            get_auto_ack: AtomicU64::new(0),
            redelivered: AtomicU64::new(0),
            acknowledged: AtomicU64::new(0),
            get_empty: AtomicU64::new(0),
        }
    }
}

/// One queue as the resource monitor last measured it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueSample {
    /// Its virtual host.
    pub vhost: String,
    /// Its name.
    pub queue: String,
    /// Messages ready.
    pub ready: u64,
    /// Messages delivered and not yet acknowledged.
    pub unacked: u64,
    /// Consumers on this instance.
    pub consumers: u64,
}

/// Who this node is, and what the process figures need; set once at startup.
#[derive(Debug, Clone, Default)]
pub struct Node {
    /// `rabbitmq_node`: `ferry-NODE_ID@HOSTNAME`.
    pub node: String,
    /// `rabbitmq_cluster`: instances over one store are one cluster, named by its prefix.
    pub cluster: String,
    /// `rabbitmq_cluster_permanent_id`.
    pub cluster_permanent_id: String,
    /// The resident memory that holds publishers back (`daemon.max_memory_mb`).
    pub memory_limit_bytes: u64,
    /// The embedded store's directory, whose file system's free space is reported.
    pub data_dir: Option<PathBuf>,
    /// The free space below which publishers are blocked (`store.min_free_disk_mb`), if
    /// any.
    pub disk_limit_bytes: Option<u64>,
}

pub(super) static COUNTERS: Counters = Counters::new();
pub(super) static MEASURED: Mutex<Vec<QueueSample>> = Mutex::new(Vec::new());
pub(super) static NODE: Mutex<Option<Node>> = Mutex::new(None);

fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// Records this node's identity (the daemon, at startup).
pub fn set_node(node: Node) {
    *NODE.lock() = Some(node);
}

/// An AMQP connection passed its handshake.
pub fn connection_opened() {
    add(&COUNTERS.connections_opened, 1);
}

/// An AMQP connection that [`connection_opened`] counted ended.
pub fn connection_closed() {
    add(&COUNTERS.connections_closed, 1);
}

/// An AMQP channel opened.
pub fn channel_opened() {
    add(&COUNTERS.channels_opened, 1);
}

/// An AMQP channel that [`channel_opened`] counted ended.
pub fn channel_closed() {
    add(&COUNTERS.channels_closed, 1);
}

/// A queue.declare succeeded; `created` when it made a new queue.
pub fn queue_declared(created: bool) {
    add(&COUNTERS.queues_declared, 1);
    if created {
        add(&COUNTERS.queues_created, 1);
    }
}

/// `n` queues were deleted.
pub fn queues_deleted(n: usize) {
    add(&COUNTERS.queues_deleted, n as u64);
}

/// What became of one basic.publish at routing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routed {
    /// To at least one queue.
    ToQueues,
    /// Nowhere, and returned to its publisher (mandatory).
    Returned,
    /// Nowhere, and dropped.
    Dropped,
}

/// A basic.publish was received and routed; `confirm` when its channel is in confirm mode.
pub fn message_received(routed: Routed, confirm: bool) {
    add(&COUNTERS.received, 1);
    if confirm {
        add(&COUNTERS.received_confirm, 1);
    }
    add(
        match routed {
            Routed::ToQueues => &COUNTERS.routed,
            Routed::Returned => &COUNTERS.unroutable_returned,
            Routed::Dropped => &COUNTERS.unroutable_dropped,
        },
        1,
    );
}

/// A commit stored `n` messages into queues (a message counts once per queue).
pub fn stored_in_queues(n: u64) {
    add(&COUNTERS.stored_in_queues, n);
}

/// `n` publishes were confirmed (basic.ack) to their publisher.
pub fn confirmed(n: u64) {
    add(&COUNTERS.confirmed, n);
}

/// How messages were handed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeliveryMode {
    /// By basic.get (else to a consumer).
    pub get: bool,
    /// With no-ack (else they await an acknowledgement).
    pub no_ack: bool,
}

/// `n` messages were delivered as `how` says, `redelivered` of them with the flag set.
pub fn delivered(how: DeliveryMode, n: u64, redelivered: u64) {
    let counter = match (how.get, how.no_ack) {
        (false, false) => &COUNTERS.consume_manual_ack,
        (false, true) => &COUNTERS.consume_auto_ack,
        (true, false) => &COUNTERS.get_manual_ack,
        (true, true) => &COUNTERS.get_auto_ack,
    };
    add(counter, n);
    add(&COUNTERS.redelivered, redelivered);
}

/// `n` deliveries were acknowledged (the commit is durable).
pub fn acknowledged(n: u64) {
    add(&COUNTERS.acknowledged, n);
}

/// A basic.get found its queue empty.
pub fn get_empty() {
    add(&COUNTERS.get_empty, 1);
}

/// The resource monitor measured every queue of this instance.
pub fn queues_measured(queues: Vec<QueueSample>) {
    *MEASURED.lock() = queues;
}
