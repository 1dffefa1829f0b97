//! Seeding the user store from `[[users]]` at startup, in one transaction.
//!
//! The configuration is authoritative for the users it lists: each one's record (its
//! credentials, tags and restrictions), its permissions and its topic permissions are
//! replaced by the configuration's; permissions and topic permissions it has in the store
//! on virtual hosts (or exchanges) the configuration does not give it are removed. Users
//! only in the store keep everything. A user stored by an older Ferry (record version 1,
//! which carried vhosts) is rewritten as version 2 with full permissions on those vhosts,
//! unless it already has permissions there.

use super::{UserStore, UserStoreError, read_all};
use crate::UserConfig;
use crate::permissions::{Permissions, TopicPermission, VhostPermissions};
use crate::user::{BadUser, User};
use ferry_store::Transaction;

/// Bytes of the key fake SCRAM salts are derived from.
const FAKE_SALT_KEY_LEN: usize = 32;

/// A user as `[[users]]` declares it, with its permissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeedUser {
    /// The user record.
    pub user: User,
    /// Its permissions, one per virtual host (`vhosts` expanded to full permissions).
    pub permissions: Vec<VhostPermissions>,
    /// Its topic permissions.
    pub topic_permissions: Vec<TopicPermission>,
}

impl SeedUser {
    /// The user `[[users]]` entry `index` declares.
    ///
    /// # Errors
    /// [`BadUser`] naming the key of a credential or pattern that does not parse
    /// (validation checks them first, so this only fails for a config that skipped it).
    pub fn from_config(index: usize, config: &UserConfig) -> Result<Self, BadUser> {
        let user = User::from_config(index, config)?;
        let grant = |vhost: &str, permissions: Permissions| VhostPermissions {
            vhost: vhost.to_owned(),
            user: config.name.clone(),
            permissions,
        };
        let mut permissions: Vec<VhostPermissions> = config
            .full_access_vhosts()
            .iter()
            .map(|vhost| grant(vhost, Permissions::full()))
            .collect();
        for (j, p) in config.permissions.iter().enumerate() {
            let patterns = Permissions {
                configure: p.configure.clone(),
                write: p.write.clone(),
                read: p.read.clone(),
            };
            patterns
                .validate()
                .map_err(|e| bad(e.under(&format!("users[{index}].permissions[{j}]"))))?;
            permissions.push(grant(&p.vhost, patterns));
        }
        let topic_permissions = config
            .topic_permissions
            .iter()
            .enumerate()
            .map(|(j, t)| {
                let topic = TopicPermission {
                    vhost: t.vhost.clone(),
                    user: config.name.clone(),
                    exchange: t.exchange.clone(),
                    write: t.write.clone(),
                    read: t.read.clone(),
                };
                topic
                    .validate()
                    .map_err(|e| bad(e.under(&format!("users[{index}].topic_permissions[{j}]"))))
                    .map(|()| topic)
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            user,
            permissions,
            topic_permissions,
        })
    }
}

fn bad(e: crate::permissions::BadPattern) -> BadUser {
    BadUser {
        key: e.field,
        reason: e.reason,
    }
}

impl UserStore {
    /// Writes `users` as the configuration says (see the module's documentation) and
    /// returns the key fake SCRAM salts are derived from, creating it on first use, in one
    /// transaction.
    ///
    /// # Errors
    /// [`UserStoreError`] when the store fails or a stored user record is unusable.
    pub async fn seed(&self, users: &[SeedUser]) -> Result<Vec<u8>, UserStoreError> {
        self.db
            .run(|tx| async move {
                self.upgrade_version_1_users(&tx, users).await?;
                self.clear_grants(&tx, |_, user| users.iter().any(|s| s.user.name == user))
                    .await?;
                for seed in users {
                    self.write_user(&tx, &seed.user);
                    for grant in &seed.permissions {
                        self.write_permissions(&tx, grant);
                    }
                    for topic in &seed.topic_permissions {
                        self.write_topic_permission(&tx, topic);
                    }
                }
                // A non-snapshot read: instances seeding at once agree on one key.
                Ok(match tx.get(&self.keys.fake_salt_key, false).await? {
                    Some(key) => key,
                    None => {
                        let key = crate::scram::random_bytes(FAKE_SALT_KEY_LEN);
                        tx.set(&self.keys.fake_salt_key, key.clone());
                        key
                    }
                })
            })
            .await
    }

    /// Rewrites, in `tx`, every version-1 user record not in `seeded` as version 2, with
    /// full permissions on the vhosts it listed where it has none.
    async fn upgrade_version_1_users(
        &self,
        tx: &Transaction,
        seeded: &[SeedUser],
    ) -> Result<(), UserStoreError> {
        for kv in read_all(tx, &self.keys.users, false).await? {
            let name = self.user_name(&kv.key)?;
            if seeded.iter().any(|s| s.user.name == name) {
                continue;
            }
            let stored = User::decode_stored(&name, &kv.value)?;
            let Some(vhosts) = stored.version_1_vhosts else {
                continue;
            };
            tx.set(&kv.key, stored.user.encode());
            for vhost in vhosts {
                let key = self.keys.permissions.pack(&(&vhost, &name));
                if tx.get(&key, false).await?.is_none() {
                    self.write_permissions(
                        tx,
                        &VhostPermissions {
                            vhost,
                            user: name.clone(),
                            permissions: Permissions::full(),
                        },
                    );
                }
            }
        }
        Ok(())
    }
}
