//! Recovery at start: the Kafka front frees what its instance's earlier incarnations held
//! — partition sequencer leases, group coordinator leases, broker registrations — before it
//! registers and claims anything, so partitions and groups are served again at once rather
//! than when those leases lapse.
//!
//! These leases and registrations name a node (`kafka.node_id`, the instance), not an
//! incarnation: run before this incarnation takes any, a lease naming this node was taken
//! by an earlier one ([`Incarnation::outlived_node`]). A freed lease lapses (deadline 0,
//! epoch kept) exactly as a stopping holder releases it, so the next claim bumps the epoch
//! and fences any transaction of the dead holder.

use super::keys::KafkaKeys;
use crate::metadata::topics::Topics;
use crate::partition::lease::Lease;
use ferry_stage::Incarnation;
use ferry_stage::now_ms;
use ferry_store::{Database, RangeOption, StoreError};

/// Leases one transaction frees at most.
const BATCH: usize = 500;

/// What a start freed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Freed {
    /// Partition sequencer leases.
    pub partitions: usize,
    /// Group coordinator leases.
    pub groups: usize,
    /// Broker registrations.
    pub brokers: usize,
}

/// Frees every sequencer lease (of the partitions of `topics`), coordinator lease and
/// broker registration that `incarnation` outlived; call it before this incarnation
/// registers or claims anything.
///
/// # Errors
/// The store's error, or an undecodable lease.
pub(crate) async fn release_outlived(
    db: &Database,
    keys: &KafkaKeys,
    topics: &Topics,
    incarnation: &Incarnation,
) -> Result<Freed, StoreError> {
    let partitions: Vec<Vec<u8>> = topics
        .all()
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.keys.lease()))
        .collect();
    let (b, e) = keys.group_leases();
    let groups: Vec<Vec<u8>> = db
        .begin()?
        .get_range(&RangeOption::new(b, e), true)
        .await?
        .into_iter()
        .map(|kv| kv.key)
        .collect();
    Ok(Freed {
        partitions: release_leases(db, &partitions, incarnation).await?,
        groups: release_leases(db, &groups, incarnation).await?,
        brokers: remove_registrations(db, keys, incarnation).await?,
    })
}

/// Lets every live lease at `keys` that `incarnation` outlived lapse; returns how many.
async fn release_leases(
    db: &Database,
    keys: &[Vec<u8>],
    incarnation: &Incarnation,
) -> Result<usize, StoreError> {
    let mut freed = 0;
    for chunk in keys.chunks(BATCH) {
        freed += db
            .run(|tx| async move {
                let (now, mut n) = (now_ms(), 0);
                for key in chunk {
                    if let Some(lease) = Lease::read(&tx, key, false).await?
                        && Lease::holder(Some(lease), now)
                            .is_some_and(|node| incarnation.outlived_node(node))
                    {
                        Lease::release(&tx, key, (lease.node, lease.epoch)).await?;
                        n += 1;
                    }
                }
                Ok::<_, StoreError>(n)
            })
            .await?;
    }
    Ok(freed)
}

/// Removes every broker registration that `incarnation` outlived; returns how many.
async fn remove_registrations(
    db: &Database,
    keys: &KafkaKeys,
    incarnation: &Incarnation,
) -> Result<usize, StoreError> {
    db.run(|tx| async move {
        let (b, e) = keys.brokers();
        let mut removed = 0;
        for kv in tx.get_range(&RangeOption::new(b, e), false).await? {
            if keys
                .broker_of(&kv.key)
                .is_some_and(|node| incarnation.outlived_node(node))
            {
                tx.clear(&kv.key);
                removed += 1;
            }
        }
        Ok::<_, StoreError>(removed)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_stage::Liveness;
    use ferry_stage::Scope;
    use ferry_stage::Stages;
    use ferry_store::StoreConfig;
    use std::time::Duration;

    const TERM: Liveness = Liveness::new(Duration::from_secs(60));

    async fn claim(db: &Database, key: &[u8], node: i32) -> Lease {
        db.run(|tx| async move { Lease::claim(&tx, key, node, TERM, now_ms()).await })
            .await
            .unwrap()
            .unwrap()
    }

    async fn holder(db: &Database, key: &[u8]) -> Option<i32> {
        let tx = db.begin().unwrap();
        Lease::holder(Lease::read(&tx, key, true).await.unwrap(), now_ms())
    }

    #[tokio::test]
    async fn a_restart_frees_its_own_leases_and_leaves_another_live_instance_s() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            path: dir.path().join("store"),
            ..StoreConfig::default()
        };
        let db = Database::open(&config).await.unwrap();
        let keys = KafkaKeys::new("p");
        let topics = Topics::new(db.clone(), keys.clone(), Stages::new(db.clone(), "p"));
        let (mine, theirs) = (keys.group_lease("mine"), keys.group_lease("theirs"));
        Incarnation::begin(&db, "p", 1, Scope::Shared)
            .await
            .unwrap();
        Incarnation::begin(&db, "p", 2, Scope::Shared)
            .await
            .unwrap();
        let held = claim(&db, &mine, 1).await;
        claim(&db, &theirs, 2).await;
        for (node, key) in [(1, keys.broker(1)), (2, keys.broker(2))] {
            db.run(|tx| {
                let key = key.clone();
                async move {
                    tx.set(&key, pack_registration(node));
                    Ok::<_, StoreError>(())
                }
            })
            .await
            .unwrap();
        }

        // Instance 1 restarts; instance 2 lives on.
        let restarted = Incarnation::begin(&db, "p", 1, Scope::Shared)
            .await
            .unwrap();
        let freed = release_outlived(&db, &keys, &topics, &restarted)
            .await
            .unwrap();
        assert_eq!(
            freed,
            Freed {
                partitions: 0,
                groups: 1,
                brokers: 1
            }
        );
        assert_eq!(holder(&db, &mine).await, None, "its own lease freed");
        assert_eq!(
            holder(&db, &theirs).await,
            Some(2),
            "the live instance's kept"
        );
        let tx = db.begin().unwrap();
        assert!(tx.get(&keys.broker(1), true).await.unwrap().is_none());
        assert!(tx.get(&keys.broker(2), true).await.unwrap().is_some());
        let next = claim(&db, &mine, 1).await;
        assert_eq!(
            next.epoch,
            held.epoch + 1,
            "the next claim fences the dead holder"
        );

        // A store of one instance: whatever any node held died with the process.
        let sole = Incarnation::begin(&db, "p", 1, Scope::Sole).await.unwrap();
        let freed = release_outlived(&db, &keys, &topics, &sole).await.unwrap();
        assert_eq!((freed.groups, freed.brokers), (2, 1));
        assert_eq!(holder(&db, &theirs).await, None);
        db.close().await;
    }

    fn pack_registration(node: i32) -> Vec<u8> {
        foundationdb_tuple::pack(&(
            2u16,
            now_ms() + 60_000,
            vec![("PLAINTEXT", "h", i64::from(node))],
        ))
    }
}
