//! The brokers of the cluster: every live Ferry instance registers its node id and the
//! address clients should use under `(P,"k","broker",node)`, with a deadline it renews.
//! Metadata lists the registrations whose deadline has not passed.

use super::keys::KafkaKeys;
use crate::liveness::Liveness;
use crate::stage::now_ms;
use crate::store::{Database, RangeOption, StoreError};
use foundationdb_tuple::{pack, unpack};
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// Format version of registrations.
const FORMAT: u16 = 1;

/// A broker as clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerAddress {
    /// Its node id.
    pub node: i32,
    /// The host clients connect to.
    pub host: String,
    /// The port clients connect to.
    pub port: i32,
}

/// This instance's registration and the cluster's brokers.
#[derive(Clone)]
pub struct Brokers {
    /// The store.
    db: Database,
    /// The Kafka keyspace.
    keys: KafkaKeys,
    /// This instance.
    me: BrokerAddress,
    /// How long a registration lasts unrenewed.
    liveness: Liveness,
}

impl Brokers {
    /// The registry, with this instance as `me`.
    pub fn new(db: Database, keys: KafkaKeys, me: BrokerAddress, ttl: Duration) -> Self {
        Self {
            db,
            keys,
            me,
            liveness: Liveness::new(ttl),
        }
    }

    /// This instance.
    pub fn me(&self) -> &BrokerAddress {
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
    pub async fn live(&self) -> Result<Vec<BrokerAddress>, StoreError> {
        let tx = self.db.begin()?;
        let (b, e) = self.keys.brokers();
        let now = now_ms();
        let mut live: Vec<BrokerAddress> = tx
            .get_range(&RangeOption::new(b, e), true)
            .await?
            .into_iter()
            .filter_map(|kv| {
                let node = self.keys.broker_of(&kv.key)?;
                let (_, host, port, deadline) =
                    unpack::<(u16, String, i64, u64)>(&kv.value).ok()?;
                let port = i32::try_from(port).ok()?;
                (deadline > now && node != self.me.node).then_some(BrokerAddress {
                    node,
                    host,
                    port,
                })
            })
            .collect();
        live.push(self.me.clone());
        live.sort_by_key(|b| b.node);
        Ok(live)
    }

    async fn write(&self, deadline: u64) -> Result<(), StoreError> {
        let key = self.keys.broker(self.me.node);
        let value = pack(&(
            FORMAT,
            self.me.host.as_str(),
            i64::from(self.me.port),
            deadline,
        ));
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
