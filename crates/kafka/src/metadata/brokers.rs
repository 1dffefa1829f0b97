//! The brokers of the cluster: every live Ferry instance registers its node id and, for
//! each of its listeners (named by security protocol, as Kafka names them), the address
//! clients of that listener should use, under `(P,"k","broker",node)`, with a deadline it
//! renews. Metadata lists the registrations whose deadline has not passed, each at the
//! address of the listener the asking client came in on.
//!
//! Value formats: 2 is `(2, deadline, ((name, host, port), …))`; 1, written by instances
//! that had one PLAINTEXT listener, is `(1, host, port, deadline)` and still read.

use crate::keys::KafkaKeys;
use ferry_stage::Liveness;
use ferry_stage::now_ms;
use ferry_store::{Database, RangeOption, StoreError};
use foundationdb_tuple::{pack, unpack};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Format version of registrations.
const FORMAT: u16 = 2;
/// The one listener of a format 1 registration.
const FORMAT_1_LISTENER: &str = "PLAINTEXT";

/// A broker as the clients of one listener see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerAddress {
    /// Its node id.
    pub node: i32,
    /// The host clients connect to.
    pub host: String,
    /// The port clients connect to.
    pub port: i32,
}

/// Where clients of one listener reach a broker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerAddress {
    /// The listener's name: its security protocol (`SASL_SSL`).
    pub name: String,
    /// The host its clients connect to.
    pub host: String,
    /// The port its clients connect to.
    pub port: i32,
}

/// A broker's registration: every listener's advertised address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// Its node id.
    pub node: i32,
    /// Its listeners.
    pub listeners: Vec<ListenerAddress>,
}

impl Registration {
    /// The broker as clients of listener `name` see it; `None` when it has no such
    /// listener (Kafka leaves such a broker out of the answer).
    pub fn address(&self, name: &str) -> Option<BrokerAddress> {
        self.listeners
            .iter()
            .find(|l| l.name == name)
            .map(|l| BrokerAddress {
                node: self.node,
                host: l.host.clone(),
                port: l.port,
            })
    }

    /// Decodes a stored registration of `node`.
    pub(crate) fn decode(node: i32, value: &[u8]) -> Option<(Self, u64)> {
        if let Ok((FORMAT, deadline, listeners)) =
            unpack::<(u16, u64, Vec<(String, String, i64)>)>(value)
        {
            let listeners = listeners
                .into_iter()
                .map(|(name, host, port)| {
                    Some(ListenerAddress {
                        name,
                        host,
                        port: i32::try_from(port).ok()?,
                    })
                })
                .collect::<Option<Vec<_>>>()?;
            return Some((Self { node, listeners }, deadline));
        }
        let (_, host, port, deadline) = unpack::<(u16, String, i64, u64)>(value).ok()?;
        let listener = ListenerAddress {
            name: FORMAT_1_LISTENER.to_owned(),
            host,
            port: i32::try_from(port).ok()?,
        };
        Some((
            Self {
                node,
                listeners: vec![listener],
            },
            deadline,
        ))
    }

    /// The stored form, with `deadline`.
    fn encode(&self, deadline: u64) -> Vec<u8> {
        let listeners: Vec<(&str, &str, i64)> = self
            .listeners
            .iter()
            .map(|l| (l.name.as_str(), l.host.as_str(), i64::from(l.port)))
            .collect();
        pack(&(FORMAT, deadline, listeners))
    }
}

/// This instance's registration and the cluster's brokers.
#[derive(Clone)]
pub struct Brokers {
    /// The store.
    db: Database,
    /// The Kafka keyspace.
    keys: KafkaKeys,
    /// This instance.
    me: Registration,
    /// How long a registration lasts unrenewed.
    liveness: Liveness,
}

impl Brokers {
    /// The registry, with this instance as `me`.
    pub fn new(db: Database, keys: KafkaKeys, me: Registration, ttl: Duration) -> Self {
        Self {
            db,
            keys,
            me,
            liveness: Liveness::new(ttl),
        }
    }

    /// This instance.
    pub fn me(&self) -> &Registration {
        &self.me
    }

    /// Registers (or renews) this instance.
    ///
    /// # Errors
    /// The store's error.
    pub async fn register(&self) -> Result<(), StoreError> {
        self.write(self.liveness.deadline(now_ms())).await
    }

    /// Renews the registration until `shutdown`, then removes it.
    pub async fn run(self, shutdown: CancellationToken) {
        self.liveness
            .renew_until(&shutdown, || async {
                if let Err(e) = self.register().await {
                    warn!(error = %e, "cannot renew this broker's registration");
                }
            })
            .await;
        let key = self.keys.broker(self.me.node);
        let removed = self
            .db
            .run(|tx| {
                let key = key.clone();
                async move {
                    tx.clear(&key);
                    Ok::<_, StoreError>(())
                }
            })
            .await;
        if let Err(e) = removed {
            warn!(error = %e, "cannot remove this broker's registration");
        }
    }

    /// The live brokers, by node id; this instance is always among them.
    ///
    /// # Errors
    /// The store's error.
    pub async fn live(&self) -> Result<Vec<Registration>, StoreError> {
        let tx = self.db.begin()?;
        let (b, e) = self.keys.brokers();
        let now = now_ms();
        let mut live: Vec<Registration> = tx
            .get_range(&RangeOption::new(b, e), true)
            .await?
            .into_iter()
            .filter_map(|kv| {
                let node = self.keys.broker_of(&kv.key)?;
                let (registration, deadline) = Registration::decode(node, &kv.value)?;
                (deadline > now && node != self.me.node).then_some(registration)
            })
            .collect();
        live.push(self.me.clone());
        live.sort_by_key(|b| b.node);
        Ok(live)
    }

    /// The node ids of the live brokers, in order; this instance's is always among them.
    ///
    /// # Errors
    /// The store's error.
    pub async fn live_nodes(&self) -> Result<Vec<i32>, StoreError> {
        Ok(self.live().await?.into_iter().map(|b| b.node).collect())
    }

    async fn write(&self, deadline: u64) -> Result<(), StoreError> {
        let key = self.keys.broker(self.me.node);
        let value = self.me.encode(deadline);
        self.db
            .run(|tx| {
                let (key, value) = (key.clone(), value.clone());
                async move {
                    tx.set(&key, &value);
                    Ok::<_, StoreError>(())
                }
            })
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registrations_round_trip_and_format_1_reads_as_plaintext() {
        let me = Registration {
            node: 3,
            listeners: vec![
                ListenerAddress {
                    name: "PLAINTEXT".into(),
                    host: "a".into(),
                    port: 9092,
                },
                ListenerAddress {
                    name: "SSL".into(),
                    host: "b".into(),
                    port: 9093,
                },
            ],
        };
        assert_eq!(
            Registration::decode(3, &me.encode(7)),
            Some((me.clone(), 7))
        );
        let old = pack(&(1u16, "h", 9092i64, 8u64));
        let (decoded, deadline) = Registration::decode(3, &old).unwrap();
        assert_eq!(deadline, 8);
        assert_eq!(
            decoded.address("PLAINTEXT"),
            Some(BrokerAddress {
                node: 3,
                host: "h".into(),
                port: 9092
            })
        );
        assert_eq!(decoded.address("SSL"), None);
        assert_eq!(me.address("SSL").unwrap().port, 9093);
    }
}
