//! Users, their permissions and topic permissions in the store, so every Ferry instance
//! over one store knows the same users and the management API can change them at runtime.
//! Logins read the user afresh and a connection reads its permissions when it opens a
//! virtual host (logins are rare; a read per login means a change is seen by the next login
//! on every instance, with no cache to invalidate).
//!
//! - this module: the keys, the user records (`get`, `put`, `upsert`, `upsert_each`,
//!   `list`, `delete`);
//! - [`permissions`]: permissions and topic permissions (get, set, clear, list);
//! - [`seed`]: writing `[[users]]` at startup, authoritative for the users it lists.
//!
//! Layout in `docs/keyspace.md`:
//!
//! ```text
//! (P, "auth", "users", name)                                     = User::encode tuple
//! (P, "auth", "permissions", vhost, user)                        = (1, configure, write, read)
//! (P, "auth", "topic_permissions", vhost, user, exchange)        = (1, write, read)
//! (P, "auth", "fake_salt_key")                                   = 32 random bytes, written once
//! (P, "auth", "version")                                         = i64 LE, bumped by every change
//! ```
//!
//! Every change to a user, a permission or a topic permission bumps the version in its
//! transaction; a front watches it ([`UserStore::changed_since`]) to apply the change to
//! its open connections (close a deleted user's, refresh the others' permissions).

pub mod permissions;
pub mod seed;

use super::user::{BadUser, User};
use crate::permissions::BadPattern;
use ferry_store::{ChangeCounter, Database, KeyValue, RangeOption, StoreError, Transaction};
use foundationdb_tuple::Subspace;

pub use permissions::{Grants, Scope};
pub use seed::SeedUser;

/// Why the user store cannot do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum UserStoreError {
    /// The store failed.
    #[error("the user store cannot be read or written: {0}")]
    Store(#[from] StoreError),
    /// A stored record is unusable.
    #[error("{0}")]
    Bad(#[from] BadUser),
    /// Permissions were set for a user that does not exist.
    #[error("user '{0}' does not exist")]
    NoSuchUser(String),
    /// A permission pattern does not compile.
    #[error("{0}")]
    BadPattern(#[from] BadPattern),
}

impl ferry_store::TransactionError for UserStoreError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) => Some(e),
            Self::Bad(_) | Self::NoSuchUser(_) | Self::BadPattern(_) => None,
        }
    }
}

/// The users, permissions and topic permissions under one store prefix.
#[derive(Clone)]
pub struct UserStore {
    db: Database,
    keys: Keys,
}

/// The subspaces of the user store.
#[derive(Clone)]
struct Keys {
    users: Subspace,
    permissions: Subspace,
    topic_permissions: Subspace,
    fake_salt_key: Vec<u8>,
    version: ChangeCounter,
}

impl Keys {
    fn user(&self, name: &str) -> Vec<u8> {
        self.users.pack(&name)
    }
}

/// Every pair under `subspace`, in key order.
async fn read_all(
    tx: &Transaction,
    subspace: &Subspace,
    snapshot: bool,
) -> Result<Vec<KeyValue>, StoreError> {
    let (begin, end) = subspace.range();
    tx.get_range(&RangeOption::new(begin, end), snapshot).await
}

impl UserStore {
    /// The user store under `prefix`.
    pub fn new(db: Database, prefix: &str) -> Self {
        let auth =
            |name: &str| Subspace::from_bytes(foundationdb_tuple::pack(&(prefix, "auth", name)));
        Self {
            db,
            keys: Keys {
                users: auth("users"),
                permissions: auth("permissions"),
                topic_permissions: auth("topic_permissions"),
                fake_salt_key: foundationdb_tuple::pack(&(prefix, "auth", "fake_salt_key")),
                version: ChangeCounter::new(foundationdb_tuple::pack(&(prefix, "auth", "version"))),
            },
        }
    }

    /// The user called `name`, if there is one.
    ///
    /// # Errors
    /// [`UserStoreError`] when the store fails or the record is unusable.
    pub async fn get(&self, name: &str) -> Result<Option<User>, UserStoreError> {
        let key = self.keys.user(name);
        let bytes = self
            .db
            .run(|tx| {
                let key = key.clone();
                async move { tx.get(&key, true).await }
            })
            .await?;
        Ok(bytes.map(|b| User::decode(name, &b)).transpose()?)
    }

    /// Every user, by name.
    ///
    /// # Errors
    /// [`UserStoreError`] when the store fails or a record is unusable.
    pub async fn list(&self) -> Result<Vec<User>, UserStoreError> {
        let pairs = self
            .db
            .run(|tx| async move { read_all(&tx, &self.keys.users, true).await })
            .await?;
        pairs
            .iter()
            .map(|kv| {
                let name = self.user_name(&kv.key)?;
                Ok(User::decode(&name, &kv.value)?)
            })
            .collect()
    }

    /// Stores `user`, replacing any user of the same name (its permissions stay).
    ///
    /// # Errors
    /// [`UserStoreError::Store`].
    pub async fn put(&self, user: &User) -> Result<(), UserStoreError> {
        self.db
            .run(|tx| {
                self.write_user(&tx, user);
                async { Ok(()) }
            })
            .await
    }

    /// Creates or changes user `name` in one transaction: `change` gets the stored user
    /// (`None`: there is none) and returns the record to store; returns whether the user
    /// is new.
    ///
    /// # Errors
    /// [`UserStoreError`] when the store fails or the stored record is unusable.
    pub async fn upsert(
        &self,
        name: &str,
        change: impl Fn(Option<User>) -> User,
    ) -> Result<bool, UserStoreError> {
        let outcomes = self
            .upsert_each(&[name], |_, current| {
                let created = current.is_none();
                Ok::<_, std::convert::Infallible>((change(current), created))
            })
            .await?;
        Ok(matches!(outcomes.first(), Some(Ok(true))))
    }

    /// Creates or changes users `names` in one transaction: `change` gets each name with
    /// its stored user (`None`: there is none) and returns the record to store with what
    /// to report for it, or why that user stays as it is; the outcomes come back in the
    /// order of `names`. `change` may run more than once (the transaction retries).
    ///
    /// # Errors
    /// [`UserStoreError`] when the store fails or a stored record is unusable.
    pub async fn upsert_each<T, R>(
        &self,
        names: &[&str],
        change: impl Fn(&str, Option<User>) -> Result<(User, T), R>,
    ) -> Result<Vec<Result<T, R>>, UserStoreError> {
        let change = &change;
        self.db
            .run(|tx| async move {
                let mut outcomes = Vec::with_capacity(names.len());
                for &name in names {
                    let current = self.user_in(&tx, name).await?;
                    outcomes.push(change(name, current).map(|(user, report)| {
                        tx.set(&self.keys.user(name), user.encode());
                        self.changed(&tx);
                        report
                    }));
                }
                Ok(outcomes)
            })
            .await
    }

    /// The user called `name` as `tx` sees it (read with a conflict: a caller that
    /// replaces it retries when it changes meanwhile).
    ///
    /// # Errors
    /// [`UserStoreError`] when the store fails or the record is unusable.
    pub async fn user_in(
        &self,
        tx: &Transaction,
        name: &str,
    ) -> Result<Option<User>, UserStoreError> {
        let bytes = tx.get(&self.keys.user(name), false).await?;
        Ok(bytes.map(|b| User::decode(name, &b)).transpose()?)
    }

    /// Writes, in `tx`, the record of `user`, replacing any user of the same name (its
    /// permissions stay): a definitions import writes users with everything else.
    pub fn write_user(&self, tx: &Transaction, user: &User) {
        tx.set(&self.keys.user(&user.name), user.encode());
        self.changed(tx);
    }

    /// Notes, in `tx`, that users or permissions change (bumps the version).
    fn changed(&self, tx: &Transaction) {
        self.keys.version.bump(tx);
    }

    /// The version now: it moves with every change to users and permissions.
    ///
    /// # Errors
    /// The store's error.
    pub async fn version(&self) -> Result<i64, StoreError> {
        self.keys.version.read(&self.db).await
    }

    /// Waits until the version differs from `seen` (a store watch), returning at once
    /// when it already does.
    ///
    /// # Errors
    /// The store's error.
    pub async fn changed_since(&self, seen: i64) -> Result<(), StoreError> {
        self.keys.version.changed_since(&self.db, seen).await
    }

    /// The store the users live in (the same as every front's: a caller may write users
    /// and its own records in one transaction).
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Deletes user `name` with its permissions and topic permissions on every virtual
    /// host, in one transaction; returns whether the user existed.
    ///
    /// # Errors
    /// [`UserStoreError::Store`].
    pub async fn delete(&self, name: &str) -> Result<bool, UserStoreError> {
        self.db
            .run(|tx| async move {
                let key = self.keys.user(name);
                let existed = tx.get(&key, false).await?.is_some();
                tx.clear(&key);
                self.clear_grants(&tx, |_, user| user == name).await?;
                self.changed(&tx);
                Ok(existed)
            })
            .await
    }

    /// Removes every permission and topic permission on `vhost` (the vhost is deleted).
    ///
    /// # Errors
    /// [`UserStoreError`] when the store fails or a record is unusable.
    pub async fn clear_vhost(&self, vhost: &str) -> Result<(), UserStoreError> {
        self.db
            .run(|tx| async move {
                self.clear_grants(&tx, |v, _| v == vhost).await?;
                self.changed(&tx);
                Ok(())
            })
            .await
    }

    /// Clears, in `tx`, the permissions and topic permissions whose (vhost, user)
    /// `doomed` accepts.
    async fn clear_grants(
        &self,
        tx: &Transaction,
        doomed: impl Fn(&str, &str) -> bool,
    ) -> Result<(), UserStoreError> {
        for subspace in [&self.keys.permissions, &self.keys.topic_permissions] {
            for kv in read_all(tx, subspace, false).await? {
                let (vhost, user) = self.grant_owner(subspace, &kv.key)?;
                if doomed(&vhost, &user) {
                    tx.clear(&kv.key);
                }
            }
        }
        Ok(())
    }

    /// The user name a key of the users subspace is for.
    fn user_name(&self, key: &[u8]) -> Result<String, UserStoreError> {
        self.keys
            .users
            .unpack::<String>(key)
            .map_err(|e| bad_key(key, e))
    }

    /// The (vhost, user) a permissions or topic permissions key is for.
    fn grant_owner(
        &self,
        subspace: &Subspace,
        key: &[u8],
    ) -> Result<(String, String), UserStoreError> {
        let elements = subspace
            .unpack::<Vec<foundationdb_tuple::Element<'_>>>(key)
            .map_err(|e| bad_key(key, e))?;
        match (
            elements.first().and_then(|e| e.as_str()),
            elements.get(1).and_then(|e| e.as_str()),
        ) {
            (Some(vhost), Some(user)) => Ok((vhost.to_owned(), user.to_owned())),
            _ => Err(bad_key(key, "it does not start with a vhost and a user")),
        }
    }
}

/// A key of the user store that does not have its layout.
fn bad_key(key: &[u8], why: impl std::fmt::Display) -> UserStoreError {
    UserStoreError::Bad(BadUser {
        key: format!("user store key {}", foundationdb_tuple::Bytes::from(key)),
        reason: format!("cannot be read ({why})"),
    })
}
