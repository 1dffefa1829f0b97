//! Leases in the store, fenced by epochs: who sequences a partition and who coordinates a
//! consumer group when several instances share a store.
//!
//! A lease names a node, an epoch and a deadline. A node claims it when nobody holds it,
//! when its deadline passed, or when the lease already names that node (a restarted
//! instance); every claim bumps the epoch, so a former holder's fenced transactions (which
//! read the lease without snapshot, checking node and epoch) conflict and fail. The holder
//! renews the deadline; a stopping holder releases it (deadline 0) so another node can take
//! over at once.

use ferry_stage::Liveness;
use ferry_store::{StoreError, Transaction};
use foundationdb_tuple::{pack, unpack};

/// Format version of lease values.
const FORMAT: u16 = 1;

/// A lease, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// The node holding it.
    pub node: i32,
    /// Bumped by every claim; the holder's transactions check it.
    pub epoch: i64,
    /// When it lapses unless renewed, ms since the Unix epoch.
    pub deadline_ms: u64,
}

impl Lease {
    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        pack(&(FORMAT, i64::from(self.node), self.epoch, self.deadline_ms))
    }

    /// Decodes a stored lease.
    ///
    /// # Errors
    /// [`StoreError::Storage`] for bytes that are not a lease.
    pub fn decode(bytes: &[u8]) -> Result<Self, StoreError> {
        let corrupt =
            || StoreError::Storage("the store holds a lease this ferry cannot decode".into());
        let (_, node, epoch, deadline_ms) =
            unpack::<(u16, i64, i64, u64)>(bytes).map_err(|_| corrupt())?;
        Ok(Self {
            node: i32::try_from(node).map_err(|_| corrupt())?,
            epoch,
            deadline_ms,
        })
    }

    /// The lease at `key` (`snapshot`: without a conflict on it).
    ///
    /// # Errors
    /// The store's error, or an undecodable lease.
    pub async fn read(
        tx: &Transaction,
        key: &[u8],
        snapshot: bool,
    ) -> Result<Option<Self>, StoreError> {
        match tx.get(key, snapshot).await? {
            Some(v) => Ok(Some(Self::decode(&v)?)),
            None => Ok(None),
        }
    }

    /// The node holding `lease` at `now`, if it has not lapsed.
    pub fn holder(lease: Option<Self>, now: u64) -> Option<i32> {
        lease.filter(|l| l.deadline_ms > now).map(|l| l.node)
    }

    /// Claims the lease at `key` for `node` for a term of `liveness`: the new lease, or the
    /// live holder that keeps it.
    ///
    /// # Errors
    /// The store's error, or an undecodable lease.
    pub async fn claim(
        tx: &Transaction,
        key: &[u8],
        node: i32,
        liveness: Liveness,
        now: u64,
    ) -> Result<Result<Self, i32>, StoreError> {
        let epoch = match Self::read(tx, key, false).await? {
            None => 1,
            Some(l) if l.node == node || l.deadline_ms <= now => l.epoch + 1,
            Some(l) => return Ok(Err(l.node)),
        };
        let lease = Self {
            node,
            epoch,
            deadline_ms: liveness.deadline(now),
        };
        tx.set(key, lease.encode());
        Ok(Ok(lease))
    }

    /// Whether `node` still holds the lease at `key` with `epoch` and it has not lapsed
    /// (nor been released) — a conflicting read, so a claim by another node makes this
    /// transaction fail — renewing it for another term once [`Liveness::is_due`] says so.
    ///
    /// # Errors
    /// The store's error, or an undecodable lease.
    pub async fn hold(
        tx: &Transaction,
        key: &[u8],
        holder: (i32, i64),
        liveness: Liveness,
        now: u64,
    ) -> Result<bool, StoreError> {
        let Some(lease) = Self::held(tx, key, holder, now).await? else {
            return Ok(false);
        };
        if liveness.is_due(lease.deadline_ms, now) {
            let renewed = Self {
                deadline_ms: liveness.deadline(now),
                ..lease
            };
            tx.set(key, renewed.encode());
        }
        Ok(true)
    }

    /// The lease at `key` if `node` holds it with `epoch` and it has not lapsed: a
    /// conflicting read (a claim by another node makes this transaction fail) that never
    /// renews it, for work beside the lease's holder that must stop when it does.
    ///
    /// # Errors
    /// The store's error, or an undecodable lease.
    pub async fn held(
        tx: &Transaction,
        key: &[u8],
        (node, epoch): (i32, i64),
        now: u64,
    ) -> Result<Option<Self>, StoreError> {
        Ok(Self::read(tx, key, false)
            .await?
            .filter(|l| l.node == node && l.epoch == epoch && l.deadline_ms > now))
    }

    /// Lets the lease at `key` lapse now if `node` still holds it with `epoch`.
    ///
    /// # Errors
    /// The store's error, or an undecodable lease.
    pub async fn release(
        tx: &Transaction,
        key: &[u8],
        (node, epoch): (i32, i64),
    ) -> Result<(), StoreError> {
        if let Some(lease) = Self::read(tx, key, false).await?
            && lease.node == node
            && lease.epoch == epoch
        {
            let lapsed = Self {
                deadline_ms: 0,
                ..lease
            };
            tx.set(key, lapsed.encode());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_store::Database;
    use ferry_store::StoreConfig;

    const KEY: &[u8] = b"lease";
    const TERM: Liveness = Liveness::new(std::time::Duration::from_millis(1000));

    async fn claim(db: &Database, node: i32, now: u64) -> Result<Lease, i32> {
        db.run(|tx| async move { Lease::claim(&tx, KEY, node, TERM, now).await })
            .await
            .unwrap()
    }

    async fn hold(db: &Database, holder: (i32, i64), now: u64) -> bool {
        db.run(|tx| async move { Lease::hold(&tx, KEY, holder, TERM, now).await })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn one_node_holds_a_lease_until_it_lapses_or_is_released() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            path: dir.path().join("store"),
            ..StoreConfig::default()
        };
        let db = Database::open(&config).await.unwrap();
        let first = claim(&db, 0, 100).await.unwrap();
        assert_eq!((first.node, first.epoch), (0, 1));
        assert_eq!(claim(&db, 1, 200).await, Err(0), "held by a live node");
        assert!(
            hold(&db, (0, 1), 900).await,
            "renewed past a third of its term"
        );
        assert_eq!(
            claim(&db, 1, 1500).await,
            Err(0),
            "the renewal moved the deadline"
        );
        let second = claim(&db, 1, 1900).await.unwrap();
        assert_eq!((second.node, second.epoch), (1, 2), "lapsed: taken over");
        assert!(
            !hold(&db, (0, 1), 1901).await,
            "the former holder is fenced out"
        );
        db.run(|tx| async move { Lease::release(&tx, KEY, (1, 2)).await })
            .await
            .unwrap();
        assert!(!hold(&db, (1, 2), 1902).await, "released");
        assert_eq!(claim(&db, 0, 1903).await.map(|l| l.epoch), Ok(3));
        db.close().await;
    }

    #[test]
    fn a_lease_round_trips_and_lapses_at_its_deadline() {
        let l = Lease {
            node: 3,
            epoch: 7,
            deadline_ms: 1000,
        };
        assert_eq!(Lease::decode(&l.encode()).unwrap(), l);
        assert_eq!(Lease::holder(Some(l), 999), Some(3));
        assert_eq!(Lease::holder(Some(l), 1000), None);
        assert_eq!(Lease::holder(None, 0), None);
        assert!(Lease::decode(b"junk").is_err());
    }
}
