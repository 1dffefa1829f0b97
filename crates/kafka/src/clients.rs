//! The Kafka front's live client connections, for the management API's Connections page:
//! each connection registers when it is accepted and is gone when its guard drops, with
//! what it has said about itself since (its client id, the user it authenticated as); the
//! API may close one ([`Clients::close`]), as RabbitMQ's closes an AMQP connection. Only
//! this instance's connections are here; instances sharing a store each list theirs.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;
use tokio_util::sync::CancellationToken;

/// One live connection as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaClient {
    /// This instance's number for the connection (unique while the process runs).
    pub id: u64,
    /// The client's address.
    pub peer: SocketAddr,
    /// The address of the listener it came in on.
    pub local: SocketAddr,
    /// That listener's security protocol (`PLAINTEXT`, `SASL_SSL`, ...).
    pub listener: String,
    /// Whether the connection is TLS.
    pub tls: bool,
    /// The client id of its latest request (empty before its first).
    pub client_id: String,
    /// The user it authenticated as (SASL) or the principal its certificate maps to.
    pub user: Option<String>,
    /// When it was accepted.
    pub connected_at: SystemTime,
}

/// The registry; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Clients {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// The next connection's number.
    next: AtomicU64,
    /// The live connections, by number, each with what closes it.
    live: Mutex<BTreeMap<u64, (KafkaClient, CancellationToken)>>,
}

impl Clients {
    /// Registers a connection just accepted; it stays listed until the guard drops.
    pub(crate) fn register(
        &self,
        peer: SocketAddr,
        local: SocketAddr,
        listener: String,
        tls: bool,
    ) -> ClientGuard {
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed);
        let client = KafkaClient {
            id,
            peer,
            local,
            listener,
            tls,
            client_id: String::new(),
            user: None,
            connected_at: SystemTime::now(),
        };
        let close = CancellationToken::new();
        self.inner.live.lock().insert(id, (client, close.clone()));
        ClientGuard {
            id,
            clients: self.clone(),
            close,
        }
    }

    /// The live connections, oldest first.
    pub fn list(&self) -> Vec<KafkaClient> {
        self.inner
            .live
            .lock()
            .values()
            .map(|(c, _)| c.clone())
            .collect()
    }

    /// Closes connection `id` (it stops reading, answers what it was answering and goes);
    /// whether it was live.
    pub fn close(&self, id: u64) -> bool {
        self.inner
            .live
            .lock()
            .get(&id)
            .map(|(_, close)| close.cancel())
            .is_some()
    }
}

/// A registered connection: what it says about itself is noted through it, and dropping
/// it takes the connection off the list.
#[derive(Debug)]
pub(crate) struct ClientGuard {
    id: u64,
    clients: Clients,
    /// Cancelled by [`Clients::close`].
    close: CancellationToken,
}

impl ClientGuard {
    /// Notes the client id of its latest request and the user it is now known as.
    pub(crate) fn note(&self, client_id: &str, user: Option<&str>) {
        if let Some((c, _)) = self.clients.inner.live.lock().get_mut(&self.id) {
            if c.client_id != client_id {
                client_id.clone_into(&mut c.client_id);
            }
            if c.user.as_deref() != user {
                c.user = user.map(str::to_owned);
            }
        }
    }
}

impl ClientGuard {
    /// Resolves once the API closes the connection.
    pub(crate) async fn closed(&self) {
        self.close.cancelled().await;
    }
}

impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.clients.inner.live.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_is_listed_with_what_it_said_until_its_guard_drops() {
        let clients = Clients::default();
        let peer: SocketAddr = "127.0.0.1:50000".parse().unwrap();
        let local: SocketAddr = "127.0.0.1:9092".parse().unwrap();
        let first = clients.register(peer, local, "PLAINTEXT".into(), false);
        let second = clients.register(peer, local, "SASL_SSL".into(), true);
        first.note("billing", None);
        second.note("audit", Some("alice"));
        let listed = clients.list();
        assert_eq!(
            listed
                .iter()
                .map(|c| (
                    c.client_id.as_str(),
                    c.user.as_deref(),
                    c.listener.as_str(),
                    c.tls
                ))
                .collect::<Vec<_>>(),
            [
                ("billing", None, "PLAINTEXT", false),
                ("audit", Some("alice"), "SASL_SSL", true)
            ]
        );
        drop(first);
        assert_eq!(clients.list().len(), 1);
        drop(second);
        assert!(clients.list().is_empty());
    }
}
