//! The live AMQP connections of this instance, with their channels and consumers, as the
//! management API lists them (`/api/connections`, `/api/channels`, `/api/consumers`) and
//! closes them (`DELETE /api/connections/{name}`).
//!
//! The connection loop registers a connection once its handshake is done and removes it
//! when it ends; it records channels as they open and close, and a channel's consumers
//! record themselves as they start and stop. Nothing here is stored: a connection lives on
//! one instance, and so does what is known about it (as RabbitMQ's per-node statistics).

use crate::wire::errors::{AmqpError, ReplyCode};
use amq_protocol::types::FieldTable;
use ferry_auth::access::LiveAccess;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

/// Every live connection of the instance, by connection id.
#[derive(Debug, Default)]
pub struct Connections {
    live: Mutex<BTreeMap<u64, Arc<LiveConnection>>>,
}

impl Connections {
    /// Registers `connection` (under its id) until [`Connections::remove`].
    pub(crate) fn add(&self, connection: Arc<LiveConnection>) {
        self.live.lock().insert(connection.id, connection);
    }

    /// Forgets the connection `id` (it ended).
    pub(crate) fn remove(&self, id: u64) {
        self.live.lock().remove(&id);
    }

    /// Every live connection, oldest first.
    pub fn list(&self) -> Vec<Arc<LiveConnection>> {
        self.live.lock().values().cloned().collect()
    }

    /// The live connection called `name` (RabbitMQ's `"peer -> local"` form).
    pub fn named(&self, name: &str) -> Option<Arc<LiveConnection>> {
        self.live.lock().values().find(|c| c.name == name).cloned()
    }
}

/// What the handshake established about a connection.
#[derive(Debug, Clone)]
pub struct ConnectionInfo {
    /// The user it logged in as.
    pub user: String,
    /// The virtual host it opened.
    pub vhost: String,
    /// The client's address.
    pub peer: SocketAddr,
    /// The address it connected to.
    pub local: SocketAddr,
    /// Whether TLS protects it.
    pub tls: bool,
    /// The SASL mechanism it logged in with.
    pub mechanism: String,
    /// The client properties of its connection.start-ok.
    pub client_properties: FieldTable,
    /// When the handshake finished, ms since the epoch.
    pub connected_at_ms: u64,
    /// The negotiated frame size.
    pub frame_max: u32,
    /// The negotiated highest channel number.
    pub channel_max: u16,
    /// The negotiated heartbeat, s.
    pub heartbeat: u16,
}

/// One live connection.
pub struct LiveConnection {
    /// The connection's id (its lease holder).
    pub id: u64,
    /// Its name, RabbitMQ's form: `"peer_host:peer_port -> local_host:local_port"`.
    pub name: String,
    /// What its handshake established.
    pub info: ConnectionInfo,
    /// What its user may do in its vhost, shared with its channels; replaced when the
    /// user's permissions change in the store.
    pub access: Arc<LiveAccess>,
    /// Its open channels by number.
    channels: Mutex<BTreeMap<u16, LiveChannel>>,
    /// Ends the connection with a connection exception (the connection loop's news
    /// line, given as a function so this module needs nothing of the connection's).
    fail: Fail,
}

/// How a [`LiveConnection`] is made to fail.
pub(crate) type Fail = Box<dyn Fn(AmqpError) + Send + Sync>;

impl std::fmt::Debug for LiveConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveConnection")
            .field("id", &self.id)
            .field("name", &self.name)
            .finish()
    }
}

/// One open channel.
#[derive(Debug, Clone, Default)]
pub struct LiveChannel {
    /// basic.qos global=false: each new consumer's prefetch (0: unlimited).
    pub prefetch: u16,
    /// basic.qos global=true: the channel's shared prefetch (0: unlimited).
    pub global_prefetch: u16,
    /// Its consumers.
    pub consumers: Vec<LiveConsumer>,
}

/// One consumer of a channel.
#[derive(Debug, Clone)]
pub struct LiveConsumer {
    /// Its consumer tag.
    pub tag: String,
    /// The queue it consumes from.
    pub queue: String,
    /// Whether its deliveries must be acknowledged (not no-ack).
    pub ack_required: bool,
    /// Whether it consumes exclusively.
    pub exclusive: bool,
    /// Its prefetch (0: unlimited).
    pub prefetch: u16,
}

impl LiveConnection {
    /// A connection with no channels yet, whose user may do `access`, which `fail` ends
    /// with an exception.
    pub(crate) fn new(id: u64, info: ConnectionInfo, access: Arc<LiveAccess>, fail: Fail) -> Self {
        Self {
            id,
            name: format!("{} -> {}", info.peer, info.local),
            info,
            access,
            channels: Mutex::new(BTreeMap::new()),
            fail,
        }
    }

    /// Closes the connection with 320 CONNECTION_FORCED and `reason` as the reply text,
    /// as RabbitMQ's management API does; it goes once its channels finished.
    pub fn close(&self, reason: &str) {
        (self.fail)(AmqpError::new(ReplyCode::ConnectionForced, reason));
    }

    /// Records channel `number` as open.
    pub(crate) fn channel_opened(&self, number: u16) {
        self.channels.lock().insert(number, LiveChannel::default());
    }

    /// Records channel `number` as closed.
    pub(crate) fn channel_closed(&self, number: u16) {
        self.channels.lock().remove(&number);
    }

    /// Records channel `number`'s basic.qos.
    pub(crate) fn set_prefetch(&self, number: u16, prefetch: u16, global: bool) {
        if let Some(channel) = self.channels.lock().get_mut(&number) {
            if global {
                channel.global_prefetch = prefetch;
            } else {
                channel.prefetch = prefetch;
            }
        }
    }

    /// Records a consumer of channel `number`.
    pub(crate) fn consumer_started(&self, number: u16, consumer: LiveConsumer) {
        if let Some(channel) = self.channels.lock().get_mut(&number) {
            channel.consumers.push(consumer);
        }
    }

    /// Forgets consumer `tag` of channel `number`.
    pub(crate) fn consumer_stopped(&self, number: u16, tag: &str) {
        if let Some(channel) = self.channels.lock().get_mut(&number) {
            channel.consumers.retain(|c| c.tag != tag);
        }
    }

    /// Its open channels, by number.
    pub fn channels(&self) -> Vec<(u16, LiveChannel)> {
        self.channels
            .lock()
            .iter()
            .map(|(n, c)| (*n, c.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> ConnectionInfo {
        ConnectionInfo {
            user: "guest".into(),
            vhost: "/".into(),
            peer: "127.0.0.1:40000".parse().unwrap(),
            local: "127.0.0.1:5672".parse().unwrap(),
            tls: false,
            mechanism: "PLAIN".into(),
            client_properties: FieldTable::default(),
            connected_at_ms: 1,
            frame_max: 131_072,
            channel_max: 2047,
            heartbeat: 60,
        }
    }

    fn access() -> Arc<LiveAccess> {
        Arc::new(LiveAccess::new(
            ferry_auth::access::VhostAccess::unrestricted("guest", "/"),
        ))
    }

    #[test]
    fn a_connection_is_named_and_closed_as_rabbitmq_does() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let fail: Fail = Box::new(move |e| {
            let _ = tx.send(e);
        });
        let connections = Connections::default();
        connections.add(Arc::new(LiveConnection::new(7, info(), access(), fail)));
        let found = connections
            .named("127.0.0.1:40000 -> 127.0.0.1:5672")
            .unwrap();
        found.close("bye now");
        let e = rx.try_recv().expect("no close sent");
        assert_eq!(
            (e.code.code(), e.reply_text().as_str()),
            (320, "CONNECTION_FORCED - bye now")
        );
        connections.remove(7);
        assert!(connections.list().is_empty());
    }

    #[test]
    fn channels_carry_their_prefetch_and_consumers() {
        let c = LiveConnection::new(1, info(), access(), Box::new(|_| {}));
        c.channel_opened(1);
        c.set_prefetch(1, 5, false);
        let consumer = LiveConsumer {
            tag: "t".into(),
            queue: "q".into(),
            ack_required: true,
            exclusive: false,
            prefetch: 5,
        };
        c.consumer_started(1, consumer);
        assert_eq!(c.channels()[0].1.prefetch, 5);
        assert_eq!(c.channels()[0].1.consumers.len(), 1);
        c.consumer_stopped(1, "t");
        assert!(c.channels()[0].1.consumers.is_empty());
        c.channel_closed(1);
        assert!(c.channels().is_empty());
    }
}
