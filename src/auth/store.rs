//! Users in the store, so every Ferry instance over one store knows the same users and the
//! management API can change them at runtime. Logins read the user afresh (logins are rare;
//! a read per login means a change is seen by the next login on every instance, with no
//! cache to invalidate).
//!
//! At startup [`UserStore::seed`] writes every `[[users]]` entry: the configuration is
//! authoritative for the names it lists (their stored records are replaced), and users
//! only in the store are kept. Layout in `docs/keyspace.md`:
//!
//! ```text
//! (P, "auth", "users", name)  = User::encode tuple
//! (P, "auth", "fake_salt_key") = 32 random bytes, written once
//! ```

use super::user::{BadUser, User};
use crate::store::{Database, StoreError};
use foundationdb_tuple::Subspace;

/// Bytes of the key fake SCRAM salts are derived from.
const FAKE_SALT_KEY_LEN: usize = 32;

/// Why the user store cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum UserStoreError {
    /// The store failed.
    #[error("the user store cannot be read or written: {0}")]
    Store(#[from] StoreError),
    /// A stored record is unusable.
    #[error("{0}")]
    Bad(#[from] BadUser),
}

impl crate::store::TransactionError for UserStoreError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Store(e) => Some(e),
            Self::Bad(_) => None,
        }
    }
}

/// The users under one store prefix.
#[derive(Clone)]
pub struct UserStore {
    db: Database,
    users: Subspace,
    fake_salt_key: Vec<u8>,
}

impl UserStore {
    /// The user store under `prefix`.
    pub fn new(db: Database, prefix: &str) -> Self {
        Self {
            db,
            users: Subspace::from_bytes(foundationdb_tuple::pack(&(prefix, "auth", "users"))),
            fake_salt_key: foundationdb_tuple::pack(&(prefix, "auth", "fake_salt_key")),
        }
    }

    /// Writes `users` (replacing stored users of the same names, keeping the others) and
    /// returns the key fake SCRAM salts are derived from, creating it on first use, in one
    /// transaction.
    ///
    /// # Errors
    /// [`UserStoreError::Store`].
    pub async fn seed(&self, users: &[User]) -> Result<Vec<u8>, UserStoreError> {
        self.db
            .run(|tx| async move {
                for user in users {
                    tx.set(&self.users.pack(&user.name), user.encode());
                }
                // A non-snapshot read: instances seeding at once agree on one key.
                Ok(match tx.get(&self.fake_salt_key, false).await? {
                    Some(key) => key,
                    None => {
                        let key = crate::scram::random_bytes(FAKE_SALT_KEY_LEN);
                        tx.set(&self.fake_salt_key, key.clone());
                        key
                    }
                })
            })
            .await
    }

    /// The user called `name`, if there is one.
    ///
    /// # Errors
    /// [`UserStoreError`] when the store fails or the record is unusable.
    pub async fn get(&self, name: &str) -> Result<Option<User>, UserStoreError> {
        let key = self.users.pack(&name);
        let bytes = self
            .db
            .run(|tx| {
                let key = key.clone();
                async move { tx.get(&key, true).await }
            })
            .await?;
        Ok(bytes.map(|b| User::decode(name, &b)).transpose()?)
    }

    /// Stores `user`, replacing any user of the same name.
    ///
    /// # Errors
    /// [`UserStoreError::Store`].
    pub async fn put(&self, user: &User) -> Result<(), UserStoreError> {
        let (key, value) = (self.users.pack(&user.name), user.encode());
        self.db
            .run(|tx| {
                tx.set(&key, value.clone());
                async { Ok(()) }
            })
            .await
    }
}
