//! ACLs in the store, so every instance over one store enforces the same ones: one key per
//! ACL under `(P, "k", "acl", "e")` (its fields, by Kafka's wire codes, are the key) and a
//! version counter every change bumps in the same transaction, which caches watch
//! (`docs/keyspace.md`).

use super::model::{
    Acl, AclFilter, Operation, PatternType, Permission, ResourcePattern, ResourceType,
};
use crate::keys::KafkaKeys;
use ferry_store::{ChangeCounter, Database, RangeOption, StoreError, Transaction};

/// The fields of an ACL key after the subspace, as tuple elements.
type AclKey = (i64, i64, String, String, String, i64, i64);

/// The ACLs of one store.
#[derive(Clone)]
pub struct AclStore {
    /// The store.
    db: Database,
    /// The Kafka keyspace.
    keys: KafkaKeys,
    /// Bumped by every change.
    version: ChangeCounter,
}

/// Every ACL, read at one version of the ACL counter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclSet {
    /// The ACL counter when read (0 before the first change).
    pub version: i64,
    /// The ACLs, in key order (by resource type, pattern type, name, …).
    pub acls: Vec<Acl>,
}

impl AclStore {
    /// The ACLs of `db` under `keys`.
    pub fn new(db: Database, keys: KafkaKeys) -> Self {
        let version = ChangeCounter::new(keys.acls_version());
        Self { db, keys, version }
    }

    /// Stores `acls` (an ACL already stored stays as it is) in one transaction.
    ///
    /// # Errors
    /// The store's error; nothing is stored then.
    pub async fn create(&self, acls: &[Acl]) -> Result<(), StoreError> {
        if acls.is_empty() {
            return Ok(());
        }
        self.db
            .run(|tx| async move {
                for acl in acls {
                    tx.set(&self.key(acl), foundationdb_tuple::pack(&(1_i64,)));
                }
                self.version.bump(&tx);
                Ok::<_, StoreError>(())
            })
            .await
    }

    /// Deletes every ACL matching each filter, in one transaction; returns, per filter,
    /// the ACLs it matched (an ACL matching two filters is in both answers).
    ///
    /// # Errors
    /// The store's error; nothing is deleted then.
    pub async fn delete(&self, filters: &[AclFilter]) -> Result<Vec<Vec<Acl>>, StoreError> {
        self.db
            .run(|tx| async move {
                let stored = self.read(&tx, false).await?;
                let matched: Vec<Vec<Acl>> = filters
                    .iter()
                    .map(|f| stored.iter().filter(|a| f.matches(a)).cloned().collect())
                    .collect();
                let mut changed = false;
                for acl in matched.iter().flatten() {
                    tx.clear(&self.key(acl));
                    changed = true;
                }
                if changed {
                    self.version.bump(&tx);
                }
                Ok(matched)
            })
            .await
    }

    /// Every ACL and the version they were read at.
    ///
    /// # Errors
    /// The store's error.
    pub async fn list(&self) -> Result<AclSet, StoreError> {
        let tx = self.db.begin()?;
        let version = self.version.read_in(&tx).await?;
        let acls = self.read(&tx, true).await?;
        Ok(AclSet { version, acls })
    }

    /// The ACL counter, read cheaply (a snapshot read of one key).
    ///
    /// # Errors
    /// The store's error.
    pub async fn version(&self) -> Result<i64, StoreError> {
        self.version.read(&self.db).await
    }

    /// Waits until the ACL counter differs from `seen` (a store watch), returning at once
    /// when it already does.
    ///
    /// # Errors
    /// The store's error.
    pub async fn changed_since(&self, seen: i64) -> Result<(), StoreError> {
        self.version.changed_since(&self.db, seen).await
    }

    /// Every stored ACL in `tx`; keys that do not decode (written by a newer Ferry) are
    /// skipped.
    async fn read(&self, tx: &Transaction, snapshot: bool) -> Result<Vec<Acl>, StoreError> {
        let (b, e) = self.keys.acls().range();
        let kvs = tx.get_range(&RangeOption::new(b, e), snapshot).await?;
        Ok(kvs.iter().filter_map(|kv| self.decode(&kv.key)).collect())
    }

    /// The key of `acl`.
    fn key(&self, acl: &Acl) -> Vec<u8> {
        let r = &acl.resource;
        let fields: AclKey = (
            r.resource_type.code().into(),
            r.pattern_type.code().into(),
            r.name.clone(),
            acl.principal.clone(),
            acl.host.clone(),
            acl.operation.code().into(),
            acl.permission.code().into(),
        );
        self.keys.acls().pack(&fields)
    }

    /// The ACL a key stores.
    fn decode(&self, key: &[u8]) -> Option<Acl> {
        let (rt, pt, name, principal, host, op, perm) =
            self.keys.acls().unpack::<AclKey>(key).ok()?;
        let code = |c: i64| i8::try_from(c).ok();
        Some(Acl {
            resource: ResourcePattern {
                resource_type: ResourceType::from_code(code(rt)?)?,
                pattern_type: PatternType::from_code(code(pt)?)?,
                name,
            },
            principal,
            host,
            operation: Operation::from_code(code(op)?)?,
            permission: Permission::from_code(code(perm)?)?,
        })
    }
}
