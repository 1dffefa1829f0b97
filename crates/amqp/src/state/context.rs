//! What the channels of one AMQP connection share with it: the instance's state, the
//! opened virtual host, the connection's identity, permissions and negotiated limits, the
//! socket's writer, which channels consume which queues, and the line back to the connection loop ([`Control`]).
//!
//! Its own module so the connection, its channels and their consumers all depend on it
//! and none on another: the AMQP modules form a tree (connection → channel → consumers
//! and publish → settle).

use super::broker::Broker;
use super::consumed::ConsumedQueues;
use super::registry::LiveConnection;
use super::topology::VHost;
use crate::wire::errors::AmqpError;
use crate::wire::writer::Writer;
use ferry_auth::access::LiveAccess;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Optional behaviours a client announces in its client properties.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capabilities {
    /// It handles a server-sent basic.cancel (its queue was deleted).
    pub consumer_cancel_notify: bool,
    /// It handles connection.blocked and connection.unblocked.
    pub connection_blocked: bool,
}

/// What every channel of a connection shares.
pub(crate) struct ConnectionContext {
    /// The instance's shared state.
    pub broker: Arc<Broker>,
    /// The opened virtual host.
    pub vhost: Arc<VHost>,
    /// The connection's lease holder: its identity as the owner of exclusive queues.
    pub id: u64,
    /// The logged-in user.
    pub user: String,
    /// What the user may do in the virtual host: read at connection.open, replaced when
    /// the user's permissions change in the store.
    pub access: Arc<LiveAccess>,
    /// The negotiated frame size.
    pub frame_max: u32,
    /// What the client supports.
    pub capabilities: Capabilities,
    /// The socket's writer.
    pub writer: Writer,
    /// Channel news for the connection loop.
    pub control: mpsc::UnboundedSender<Control>,
    /// The connection as the management API lists it (channels and consumers record
    /// themselves in it).
    pub live: Arc<LiveConnection>,
    /// Which channels consume which queues, asked before a confirm of a message stored to
    /// one of them is written.
    pub consumed: ConsumedQueues,
}

impl std::fmt::Debug for ConnectionContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionContext")
            .field("id", &self.id)
            .field("user", &self.user)
            .field("vhost", &self.vhost.name)
            .finish()
    }
}

/// News from a channel task.
#[derive(Debug)]
pub(crate) enum Control {
    /// The channel failed with a channel exception and sent channel.close; its frames are
    /// dropped until the client's close-ok.
    ChannelFailed(u16),
    /// The channel finished the client's channel.close and sent close-ok; its number is
    /// free again.
    ChannelClosed(u16),
    /// A channel met a connection exception.
    ConnectionFailed(AmqpError),
}
