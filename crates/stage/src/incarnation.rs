//! Instance incarnations: which run of which Ferry instance owns what it keeps alive in the
//! store (lease holders, sequencer and coordinator leases, broker registrations).
//!
//! An instance is named by `kafka.node_id`, stable across its restarts and unique among the
//! instances sharing a store. Each start bumps the instance's incarnation number under
//! `(P, "incarnation", instance)`, so what an earlier run registered can be told from what
//! this one does. A starting instance frees at once what its earlier incarnations held —
//! they died with their process — instead of waiting for their terms to lapse. With the
//! embedded engine ([`Scope::Sole`]) the store has one instance, so everything in it at open
//! belonged to a dead process; over FoundationDB ([`Scope::Shared`]) only this instance's
//! own earlier incarnations are freed, and other instances keep their leases: theirs lapse
//! only if they die for good.

use ferry_store::{Database, EngineKind, StoreError};
use foundationdb_tuple::{pack, unpack};

/// Whether other instances may use the store at the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// This instance is the store's only user (the embedded engine, which one process opens).
    Sole,
    /// Other instances may share the store (FoundationDB).
    Shared,
}

impl Scope {
    /// The scope of `db`'s engine.
    pub fn of(db: &Database) -> Self {
        match db.engine_kind() {
            EngineKind::Embedded => Self::Sole,
            EngineKind::Fdb => Self::Shared,
        }
    }
}

/// Who registered something: an instance and its incarnation number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner {
    /// The instance (`kafka.node_id`).
    pub instance: i32,
    /// Its incarnation, from 1, bumped at every start.
    pub number: u64,
}

impl Owner {
    /// The stored form: the tuple `(instance, number)`.
    pub fn encode(&self) -> Vec<u8> {
        pack(&(i64::from(self.instance), self.number))
    }

    /// Decodes a stored owner; `None` for bytes that are not one.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        let (instance, number) = unpack::<(i64, u64)>(bytes).ok()?;
        Some(Self {
            instance: i32::try_from(instance).ok()?,
            number,
        })
    }
}

/// This run of this instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Incarnation {
    /// This instance and its incarnation number.
    owner: Owner,
    /// Whether other instances share the store.
    scope: Scope,
}

impl Incarnation {
    /// Begins a new incarnation of `instance` in the store `db` under the key prefix
    /// `prefix`: bumps and records its incarnation number.
    ///
    /// # Errors
    /// The store's error, or a stored incarnation number this ferry cannot decode.
    pub async fn begin(
        db: &Database,
        prefix: &str,
        instance: i32,
        scope: Scope,
    ) -> Result<Self, StoreError> {
        let key = pack(&(prefix, "incarnation", i64::from(instance)));
        let number = db
            .run(|tx| {
                let key = key.clone();
                async move {
                    let last = match tx.get(&key, false).await? {
                        None => 0,
                        Some(v) => unpack::<(u64,)>(&v).map(|(n,)| n).map_err(|_| {
                            StoreError::Storage(format!(
                                "the store holds an incarnation number of instance {instance} \
                                 this ferry cannot decode"
                            ))
                        })?,
                    };
                    tx.set(&key, pack(&(last + 1,)));
                    Ok::<_, StoreError>(last + 1)
                }
            })
            .await?;
        Ok(Self {
            owner: Owner { instance, number },
            scope,
        })
    }

    /// This instance and incarnation, as recorded on what it registers.
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// Whether something registered by `owner` (`None`: registered without one, by an
    /// older ferry) died with an earlier incarnation: in a store of one instance, anything
    /// not this incarnation's; in a shared store, what this instance's earlier incarnations
    /// registered.
    pub fn outlived(&self, owner: Option<Owner>) -> bool {
        match self.scope {
            Scope::Sole => owner != Some(self.owner),
            Scope::Shared => owner
                .is_some_and(|o| o.instance == self.owner.instance && o.number < self.owner.number),
        }
    }

    /// Whether a lease or registration that names only its `node` died with an earlier
    /// incarnation — valid before this incarnation takes any (at start): in a store of one
    /// instance, any; in a shared store, this instance's own.
    pub fn outlived_node(&self, node: i32) -> bool {
        self.scope == Scope::Sole || node == self.owner.instance
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_store::StoreConfig;

    #[tokio::test]
    async fn each_start_is_a_new_incarnation_that_outlives_only_its_own_instance_s_past() {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            path: dir.path().join("store"),
            ..StoreConfig::default()
        };
        let db = Database::open(&config).await.unwrap();
        assert_eq!(Scope::of(&db), Scope::Sole);
        let first = Incarnation::begin(&db, "p", 1, Scope::Shared)
            .await
            .unwrap();
        let other = Incarnation::begin(&db, "p", 2, Scope::Shared)
            .await
            .unwrap();
        let second = Incarnation::begin(&db, "p", 1, Scope::Shared)
            .await
            .unwrap();
        assert_eq!(
            first.owner(),
            Owner {
                instance: 1,
                number: 1
            }
        );
        assert_eq!(
            other.owner(),
            Owner {
                instance: 2,
                number: 1
            }
        );
        assert_eq!(
            second.owner(),
            Owner {
                instance: 1,
                number: 2
            }
        );

        assert!(second.outlived(Some(first.owner())), "its own earlier run");
        assert!(!second.outlived(Some(second.owner())), "itself");
        assert!(
            !second.outlived(Some(other.owner())),
            "another live instance"
        );
        assert!(!second.outlived(None), "unknown owner: left to its term");
        assert!(second.outlived_node(1) && !second.outlived_node(2));

        let sole = Incarnation::begin(&db, "p", 1, Scope::Sole).await.unwrap();
        assert!(sole.outlived(Some(other.owner())) && sole.outlived(None));
        assert!(!sole.outlived(Some(sole.owner())));
        assert!(sole.outlived_node(2));

        let owner = Owner {
            instance: 7,
            number: 9,
        };
        assert_eq!(Owner::decode(&owner.encode()), Some(owner));
        assert_eq!(Owner::decode(b"junk"), None);
        db.close().await;
    }
}
