//! Permissions and topic permissions in the user store: read, set (validated, for an
//! existing user), cleared and listed — all of them, a user's or a virtual host's — as the
//! management API and `rabbitmqctl`'s permission commands need them.
//!
//! A record is a tuple whose first element is its layout version (1):
//! `(1, configure, write, read)` and `(1, write, read)`.

use super::{UserStore, UserStoreError, read_all};
use crate::permissions::{Permissions, TopicPermission, VhostPermissions};
use crate::user::BadUser;
use ferry_store::{KeyValue, RangeOption, Transaction};
use foundationdb_tuple::Subspace;

/// The layout version of permission records.
const RECORD_VERSION: i64 = 1;

/// Which grants a listing returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Every user's on every virtual host.
    All,
    /// One user's, on every virtual host.
    User(&'a str),
    /// Every user's on one virtual host.
    Vhost(&'a str),
}

/// What a user may do on one virtual host: read together when a connection opens it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Grants {
    /// The permissions; `None`: the user may not open the virtual host.
    pub permissions: Option<Permissions>,
    /// The topic permissions, one per exchange.
    pub topic_permissions: Vec<TopicPermission>,
}

fn bad_record(what: String, e: impl std::fmt::Display) -> UserStoreError {
    UserStoreError::Bad(BadUser {
        key: what,
        reason: format!("is not a permission record of version {RECORD_VERSION} ({e})"),
    })
}

fn encode_permissions(p: &Permissions) -> Vec<u8> {
    foundationdb_tuple::pack(&(RECORD_VERSION, &p.configure, &p.write, &p.read))
}

pub(crate) fn decode_permissions(
    vhost: &str,
    user: &str,
    bytes: &[u8],
) -> Result<Permissions, UserStoreError> {
    let what = || format!("permissions of user '{user}' on vhost '{vhost}'");
    let (version, configure, write, read): (i64, String, String, String) =
        foundationdb_tuple::unpack(bytes).map_err(|e| bad_record(what(), e))?;
    if version != RECORD_VERSION {
        return Err(bad_record(what(), format!("version {version}")));
    }
    Ok(Permissions {
        configure,
        write,
        read,
    })
}

fn encode_topic(t: &TopicPermission) -> Vec<u8> {
    foundationdb_tuple::pack(&(RECORD_VERSION, &t.write, &t.read))
}

pub(crate) fn decode_topic(
    vhost: &str,
    user: &str,
    exchange: &str,
    bytes: &[u8],
) -> Result<TopicPermission, UserStoreError> {
    let what = || {
        format!("topic permissions of user '{user}' on exchange '{exchange}' in vhost '{vhost}'")
    };
    let (version, write, read): (i64, String, String) =
        foundationdb_tuple::unpack(bytes).map_err(|e| bad_record(what(), e))?;
    if version != RECORD_VERSION {
        return Err(bad_record(what(), format!("version {version}")));
    }
    Ok(TopicPermission {
        vhost: vhost.to_owned(),
        user: user.to_owned(),
        exchange: exchange.to_owned(),
        write,
        read,
    })
}

impl UserStore {
    /// The permissions of `user` on `vhost`, if it has any.
    ///
    /// # Errors
    /// [`UserStoreError`] when the store fails or the record is unusable.
    pub async fn permissions(
        &self,
        vhost: &str,
        user: &str,
    ) -> Result<Option<Permissions>, UserStoreError> {
        Ok(self.grants(vhost, user).await?.permissions)
    }

    /// The permissions and topic permissions of `user` on `vhost`, read in one
    /// transaction (what a connection keeps until they change).
    ///
    /// # Errors
    /// [`UserStoreError`] when the store fails or a record is unusable.
    pub async fn grants(&self, vhost: &str, user: &str) -> Result<Grants, UserStoreError> {
        self.db
            .run(|tx| async move {
                let key = self.keys.permissions.pack(&(vhost, user));
                let permissions = tx
                    .get(&key, true)
                    .await?
                    .map(|b| decode_permissions(vhost, user, &b))
                    .transpose()?;
                let topics = self.keys.topic_permissions.subspace(&(vhost, user));
                let topic_permissions = read_all(&tx, &topics, true)
                    .await?
                    .iter()
                    .map(|kv| {
                        let exchange: String = topics
                            .unpack(&kv.key)
                            .map_err(|e| super::bad_key(&kv.key, e))?;
                        decode_topic(vhost, user, &exchange, &kv.value)
                    })
                    .collect::<Result<_, _>>()?;
                Ok(Grants {
                    permissions,
                    topic_permissions,
                })
            })
            .await
    }

    /// Sets the permissions of `grant.user` on `grant.vhost`, replacing any.
    ///
    /// # Errors
    /// [`UserStoreError::BadPattern`] naming the field of a pattern that does not compile,
    /// [`UserStoreError::NoSuchUser`], [`UserStoreError::Store`]; nothing is changed then.
    pub async fn set_permissions(&self, grant: &VhostPermissions) -> Result<(), UserStoreError> {
        grant.permissions.validate()?;
        let key = self.keys.permissions.pack(&(&grant.vhost, &grant.user));
        let value = encode_permissions(&grant.permissions);
        self.db
            .run(|tx| {
                let (key, value) = (&key, &value);
                async move {
                    self.require_user(&tx, &grant.user).await?;
                    tx.set(key, value.clone());
                    self.changed(&tx);
                    Ok(())
                }
            })
            .await
    }

    /// Removes the permissions of `user` on `vhost` (its topic permissions stay, as in
    /// RabbitMQ); returns whether it had any.
    ///
    /// # Errors
    /// [`UserStoreError::Store`].
    pub async fn clear_permissions(&self, vhost: &str, user: &str) -> Result<bool, UserStoreError> {
        let key = self.keys.permissions.pack(&(vhost, user));
        self.db
            .run(|tx| {
                let key = &key;
                async move {
                    let existed = tx.get(key, false).await?.is_some();
                    tx.clear(key);
                    self.changed(&tx);
                    Ok(existed)
                }
            })
            .await
    }

    /// The permissions in `scope`, by vhost then user.
    ///
    /// # Errors
    /// [`UserStoreError`] when the store fails or a record is unusable.
    pub async fn list_permissions(
        &self,
        scope: Scope<'_>,
    ) -> Result<Vec<VhostPermissions>, UserStoreError> {
        let pairs = self.read_scope(&self.keys.permissions, scope).await?;
        let mut listed = Vec::new();
        for kv in pairs {
            let (vhost, user) = self.grant_owner(&self.keys.permissions, &kv.key)?;
            if matches!(scope, Scope::User(u) if u != user) {
                continue;
            }
            let permissions = decode_permissions(&vhost, &user, &kv.value)?;
            listed.push(VhostPermissions {
                vhost,
                user,
                permissions,
            });
        }
        Ok(listed)
    }

    /// The topic permissions of `user` on `vhost`, one per exchange.
    ///
    /// # Errors
    /// [`UserStoreError`] when the store fails or a record is unusable.
    pub async fn topic_permissions(
        &self,
        vhost: &str,
        user: &str,
    ) -> Result<Vec<TopicPermission>, UserStoreError> {
        Ok(self.grants(vhost, user).await?.topic_permissions)
    }

    /// Sets the topic permission of `topic.user` on `topic.exchange` in `topic.vhost`,
    /// replacing any on that exchange.
    ///
    /// # Errors
    /// As [`UserStore::set_permissions`].
    pub async fn set_topic_permission(
        &self,
        topic: &TopicPermission,
    ) -> Result<(), UserStoreError> {
        topic.validate()?;
        let key = self.topic_key(topic);
        let value = encode_topic(topic);
        self.db
            .run(|tx| {
                let (key, value) = (&key, &value);
                async move {
                    self.require_user(&tx, &topic.user).await?;
                    tx.set(key, value.clone());
                    self.changed(&tx);
                    Ok(())
                }
            })
            .await
    }

    /// Removes the topic permissions of `user` on `vhost`: on `exchange` only, or on every
    /// exchange when it is `None` (`rabbitmqctl clear_topic_permissions`); returns whether
    /// there were any.
    ///
    /// # Errors
    /// [`UserStoreError::Store`].
    pub async fn clear_topic_permissions(
        &self,
        vhost: &str,
        user: &str,
        exchange: Option<&str>,
    ) -> Result<bool, UserStoreError> {
        let range = match exchange {
            Some(x) => {
                let key = self.keys.topic_permissions.pack(&(vhost, user, x));
                let mut end = key.clone();
                end.push(0);
                (key, end)
            }
            None => self.keys.topic_permissions.subspace(&(vhost, user)).range(),
        };
        self.db
            .run(|tx| {
                let (begin, end) = (&range.0, &range.1);
                async move {
                    let existing = tx
                        .get_range(
                            &RangeOption::new(begin.clone(), end.clone()).limit(1),
                            false,
                        )
                        .await?;
                    tx.clear_range(begin, end);
                    self.changed(&tx);
                    Ok(!existing.is_empty())
                }
            })
            .await
    }

    /// The topic permissions in `scope`, by vhost, user, then exchange.
    ///
    /// # Errors
    /// [`UserStoreError`] when the store fails or a record is unusable.
    pub async fn list_topic_permissions(
        &self,
        scope: Scope<'_>,
    ) -> Result<Vec<TopicPermission>, UserStoreError> {
        let pairs = self.read_scope(&self.keys.topic_permissions, scope).await?;
        let mut listed = Vec::new();
        for kv in pairs {
            let (vhost, user, exchange): (String, String, String) = self
                .keys
                .topic_permissions
                .unpack(&kv.key)
                .map_err(|e| super::bad_key(&kv.key, e))?;
            if matches!(scope, Scope::User(u) if u != user) {
                continue;
            }
            listed.push(decode_topic(&vhost, &user, &exchange, &kv.value)?);
        }
        Ok(listed)
    }

    /// The records under `grants` (permissions or topic permissions, keyed by vhost first)
    /// that `scope` may hold: one vhost's, or all (a user's are filtered by the caller).
    async fn read_scope(
        &self,
        grants: &Subspace,
        scope: Scope<'_>,
    ) -> Result<Vec<KeyValue>, UserStoreError> {
        let subspace = match scope {
            Scope::Vhost(vhost) => grants.subspace(&(vhost,)),
            Scope::All | Scope::User(_) => grants.clone(),
        };
        Ok(self
            .db
            .run(|tx| {
                let subspace = &subspace;
                async move { read_all(&tx, subspace, true).await }
            })
            .await?)
    }

    fn topic_key(&self, topic: &TopicPermission) -> Vec<u8> {
        self.keys
            .topic_permissions
            .pack(&(&topic.vhost, &topic.user, &topic.exchange))
    }

    /// Writes, in `tx`, the permissions of `grant`, replacing any (the seed and a
    /// definitions import use it; the caller has validated the patterns and the user).
    pub fn write_permissions(&self, tx: &Transaction, grant: &VhostPermissions) {
        tx.set(
            &self.keys.permissions.pack(&(&grant.vhost, &grant.user)),
            encode_permissions(&grant.permissions),
        );
        self.changed(tx);
    }

    /// Writes, in `tx`, the topic permission `topic`, replacing any on its exchange (the
    /// seed and a definitions import use it; the caller has validated the patterns and the
    /// user).
    pub fn write_topic_permission(&self, tx: &Transaction, topic: &TopicPermission) {
        tx.set(&self.topic_key(topic), encode_topic(topic));
        self.changed(tx);
    }

    /// Fails unless user `name` exists in `tx` (read with a conflict, so a concurrent
    /// delete of the user makes the transaction retry rather than leave orphan
    /// permissions).
    ///
    /// # Errors
    /// [`UserStoreError::NoSuchUser`], [`UserStoreError::Store`].
    pub async fn require_user(&self, tx: &Transaction, name: &str) -> Result<(), UserStoreError> {
        match tx.get(&self.keys.user(name), false).await? {
            Some(_) => Ok(()),
            None => Err(UserStoreError::NoSuchUser(name.to_owned())),
        }
    }
}
