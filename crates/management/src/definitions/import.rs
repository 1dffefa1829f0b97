//! Importing a definitions document: everything is checked first (virtual hosts, user
//! credentials, patterns, queue arguments, equivalence with what exists, bindings' ends),
//! then new virtual hosts, users, permissions, topic permissions and the topology of every
//! virtual host are written in ONE store transaction — the import applies completely or not
//! at all. A virtual host listed under `vhosts` that does not exist is created (its
//! topology planned on an empty one, [`VHosts::scratch`]), as RabbitMQ's import creates it;
//! one that items name but neither exists nor is listed is refused.
//!
//! The virtual hosts involved are planned in name order ([`VHost::plan_declarations`]
//! holds each one's change lock until the commit is reflected in memory), the user store
//! and the AMQP front write into the same transaction (`UserStore::write_user`,
//! `PlannedDeclarations::write_in`), and a retried transaction rewrites the same records.
//!
//! Users: an imported user replaces a stored one of the same name (password hash and
//! tags as the file says; `loopback_only` and `require_tls` stay). Its SCRAM credentials
//! (Kafka logins) stay only when the password hash is unchanged: they cannot be derived
//! from a hash, and kept beside a new hash they would still accept the old password.

use super::model::{Definitions, UserDefinition};
use crate::tables;
use ferry_amqp::admin::QueueArgs;
use ferry_amqp::admin::{AmqpError, TxError};
use ferry_amqp::admin::{
    Binding, Declarations, Destination, Exchange, ExchangeKind, QueueSpec, VHost,
};
use ferry_amqp::admin::{VHosts, VhostMeta};
use ferry_auth::User;
use ferry_auth::password::PasswordHash;
use ferry_auth::permissions::{Permissions, TopicPermission, VhostPermissions};
use ferry_auth::scram::{Mechanism, ScramCredential};
use ferry_auth::store::{UserStore, UserStoreError};
use ferry_store::{StoreError, TransactionError};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// The only password hashing RabbitMQ's definitions may name for Ferry.
pub const HASHING_ALGORITHM: &str = "rabbit_password_hashing_sha256";

/// Why an import did nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImportError {
    /// The document is refused (its field and reason named); nothing was changed.
    #[error("{0}")]
    Refused(String),
    /// The store failed; nothing was changed.
    #[error("the definitions cannot be imported now (the store failed: {0}); nothing was changed")]
    Failed(String),
}

/// What an import wrote (entities that already existed, equivalent, are not counted).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imported {
    /// Virtual hosts created.
    pub vhosts: usize,
    /// Users written.
    pub users: usize,
    /// Permissions written.
    pub permissions: usize,
    /// Topic permissions written.
    pub topic_permissions: usize,
    /// New exchanges.
    pub exchanges: usize,
    /// New queues.
    pub queues: usize,
    /// New bindings.
    pub bindings: usize,
}

/// Where an import goes.
pub struct Target<'a> {
    /// The users.
    pub users: &'a UserStore,
    /// The virtual hosts.
    pub vhosts: &'a VHosts,
    /// The owner of non-durable exchanges and queues (this instance: they go with it).
    pub transient_owner: u64,
}

/// The virtual hosts an import works with: those that exist and those it creates.
struct Hosts {
    /// Every vhost the document may name, by name.
    all: BTreeMap<String, Arc<VHost>>,
    /// The ones it creates, with their metadata.
    created: Vec<(String, VhostMeta)>,
}

impl Hosts {
    fn get(&self, name: &str, field: &str) -> Result<&Arc<VHost>, ImportError> {
        self.all.get(name).ok_or_else(|| {
            refused(format!(
                "{field}: vhost '{name}' does not exist (create it first, or list it under vhosts)"
            ))
        })
    }
}

/// The error the import's transaction closure returns.
#[derive(Debug, thiserror::Error)]
enum WriteError {
    #[error(transparent)]
    Topology(#[from] TxError),
    #[error(transparent)]
    Users(#[from] UserStoreError),
}

impl From<StoreError> for WriteError {
    fn from(e: StoreError) -> Self {
        Self::Topology(e.into())
    }
}

impl TransactionError for WriteError {
    fn store_error(&self) -> Option<&StoreError> {
        match self {
            Self::Topology(e) => e.store_error(),
            Self::Users(e) => e.store_error(),
        }
    }
}

fn refused(reason: impl Into<String>) -> ImportError {
    ImportError::Refused(reason.into())
}

impl Target<'_> {
    /// The vhosts that exist, and those `definitions` lists that do not (unless only one
    /// vhost's topology is imported).
    fn hosts(&self, definitions: &Definitions, only_vhost: Option<&str>) -> Hosts {
        let mut hosts = Hosts {
            all: self
                .vhosts
                .list()
                .into_iter()
                .map(|v| (v.name.clone(), v))
                .collect(),
            created: Vec::new(),
        };
        if only_vhost.is_none() {
            for v in definitions.vhosts.iter().flatten() {
                if !hosts.all.contains_key(&v.name) && !v.name.is_empty() {
                    hosts
                        .all
                        .insert(v.name.clone(), self.vhosts.scratch(&v.name));
                    hosts.created.push((v.name.clone(), v.meta()));
                }
            }
        }
        hosts
    }

    /// Imports `definitions`: every part, or (`only_vhost`) the topology of one virtual
    /// host, whatever vhost its items name (as RabbitMQ's `/api/definitions/{vhost}`).
    ///
    /// # Errors
    /// [`ImportError::Refused`] naming the field and reason of the first problem,
    /// [`ImportError::Failed`] when the store fails; nothing is changed either way.
    pub async fn import(
        &self,
        definitions: Definitions,
        only_vhost: Option<&str>,
    ) -> Result<Imported, ImportError> {
        if let Some(p) = definitions.policies.first() {
            return Err(refused(format!(
                "policies[0]: Ferry has no policies ({p}); remove them from the file (queue arguments are kept)"
            )));
        }
        if let Some(p) = definitions.parameters.first() {
            return Err(refused(format!(
                "parameters[0]: Ferry has no runtime parameters ({p}); remove them from the file"
            )));
        }
        let hosts = self.hosts(&definitions, only_vhost);
        if let Some(vhost) = only_vhost {
            hosts.get(vhost, "the URL")?;
            for (field, present) in [
                (
                    "users",
                    definitions.users.as_ref().is_some_and(|v| !v.is_empty()),
                ),
                (
                    "permissions",
                    definitions
                        .permissions
                        .as_ref()
                        .is_some_and(|v| !v.is_empty()),
                ),
                (
                    "topic_permissions",
                    definitions
                        .topic_permissions
                        .as_ref()
                        .is_some_and(|v| !v.is_empty()),
                ),
            ] {
                if present {
                    return Err(refused(format!(
                        "{field}: a virtual host's import takes queues, exchanges and bindings only; import users and permissions with /api/definitions"
                    )));
                }
            }
        }
        for (i, v) in definitions.vhosts.iter().flatten().enumerate() {
            if v.name.is_empty() {
                return Err(refused(format!("vhosts[{i}].name: a vhost needs a name")));
            }
        }
        let users = definitions
            .users
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, u)| user_of(i, u))
            .collect::<Result<Vec<_>, _>>()?;
        let imported_users: HashSet<&str> = users.iter().map(|u| u.name.as_str()).collect();
        let mut permissions = Vec::new();
        for (i, p) in definitions.permissions.iter().flatten().enumerate() {
            hosts.get(&p.vhost, &format!("permissions[{i}].vhost"))?;
            let grant = VhostPermissions {
                vhost: p.vhost.clone(),
                user: p.user.clone(),
                permissions: Permissions {
                    configure: p.configure.clone(),
                    write: p.write.clone(),
                    read: p.read.clone(),
                },
            };
            grant
                .permissions
                .validate()
                .map_err(|e| refused(e.under(&format!("permissions[{i}]")).to_string()))?;
            permissions.push(grant);
        }
        let mut topics = Vec::new();
        for (i, t) in definitions.topic_permissions.iter().flatten().enumerate() {
            hosts.get(&t.vhost, &format!("topic_permissions[{i}].vhost"))?;
            let topic = TopicPermission {
                vhost: t.vhost.clone(),
                user: t.user.clone(),
                exchange: t.exchange.clone(),
                write: t.write.clone(),
                read: t.read.clone(),
            };
            topic
                .validate()
                .map_err(|e| refused(e.under(&format!("topic_permissions[{i}]")).to_string()))?;
            topics.push(topic);
        }
        let declarations = self.declarations(&hosts, &definitions, only_vhost)?;

        // Plan every virtual host in name order (BTreeMap), holding their change locks.
        let mut plans = Vec::new();
        for (name, wanted) in declarations {
            let vhost = hosts.get(&name, "vhost")?;
            let plan = vhost
                .plan_declarations(wanted)
                .await
                .map_err(|e| refused(format!("vhost '{name}': {}", e.text)))?;
            plans.push(plan);
        }
        let (store, registry) = (self.users, self.vhosts);
        let (users_ref, permissions_ref, topics_ref, plans_ref) =
            (&users, &permissions, &topics, &plans);
        let (imported_ref, created_ref) = (&imported_users, &hosts.created);
        store
            .database()
            .run(|tx| async move {
                for (name, meta) in created_ref {
                    registry.write_record_in(&tx, name, meta);
                }
                for user in users_ref {
                    let stored = store.user_in(&tx, &user.name).await?;
                    store.write_user(&tx, &merged(user.clone(), stored));
                }
                for grant in permissions_ref {
                    if !imported_ref.contains(grant.user.as_str()) {
                        store.require_user(&tx, &grant.user).await?;
                    }
                    store.write_permissions(&tx, grant);
                }
                for topic in topics_ref {
                    if !imported_ref.contains(topic.user.as_str()) {
                        store.require_user(&tx, &topic.user).await?;
                    }
                    store.write_topic_permission(&tx, topic);
                }
                for plan in plans_ref {
                    plan.write_in(&tx).await?;
                }
                Ok::<_, WriteError>(())
            })
            .await
            .map_err(|e| match e {
                WriteError::Users(UserStoreError::NoSuchUser(user)) => refused(format!(
                    "permissions: user '{user}' is neither in the file nor in the store"
                )),
                WriteError::Topology(TxError::Amqp(e)) => refused(e.text),
                other => ImportError::Failed(other.to_string()),
            })?;
        let mut imported = Imported {
            users: users.len(),
            permissions: permissions.len(),
            topic_permissions: topics.len(),
            ..Imported::default()
        };
        for plan in plans {
            let (exchanges, queues, bindings) = plan.counts();
            imported.exchanges += exchanges;
            imported.queues += queues;
            imported.bindings += bindings;
            // The commit stands; a failed reload is retried by the version watch.
            let _ = plan.finish().await;
        }
        if !hosts.created.is_empty() {
            // The commit stands; a failed load is retried by the vhosts' watch.
            let _ = registry.sync().await;
        }
        imported.vhosts = hosts.created.len();
        Ok(imported)
    }

    /// The topology of `definitions`, by virtual host.
    fn declarations(
        &self,
        hosts: &Hosts,
        definitions: &Definitions,
        only_vhost: Option<&str>,
    ) -> Result<BTreeMap<String, Declarations>, ImportError> {
        let mut by_vhost: BTreeMap<String, Declarations> = BTreeMap::new();
        let vhost_of = |field: String, named: &Option<String>| -> Result<String, ImportError> {
            let name = match (only_vhost, named) {
                (Some(v), _) => v.to_owned(),
                (None, Some(v)) => v.clone(),
                (None, None) => return Err(refused(format!("{field}: field 'vhost' is missing"))),
            };
            hosts.get(&name, &field)?;
            Ok(name)
        };
        let table = |field: String, args| {
            tables::from_json(&format!("{field}.arguments"), args).map_err(|e| refused(e.reason))
        };
        for (i, x) in definitions.exchanges.iter().enumerate() {
            let field = format!("exchanges[{i}]");
            let vhost = vhost_of(format!("{field}.vhost"), &x.vhost)?;
            let arguments = table(field.clone(), &x.arguments)?;
            let (kind, delayed) = ExchangeKind::declared(&x.kind, &arguments)
                .map_err(|e| refused(format!("{field}.type: {}", e.text)))?;
            let exchange = Exchange {
                name: x.name.clone(),
                kind,
                delayed,
                durable: x.durable,
                auto_delete: x.auto_delete,
                internal: x.internal,
                arguments,
                owner: if x.durable { 0 } else { self.transient_owner },
                builtin: false,
            };
            by_vhost.entry(vhost).or_default().exchanges.push(exchange);
        }
        for (i, q) in definitions.queues.iter().enumerate() {
            let field = format!("queues[{i}]");
            let vhost = vhost_of(format!("{field}.vhost"), &q.vhost)?;
            let arguments = table(field.clone(), &q.arguments)?;
            let args = QueueArgs::parse(&arguments)
                .map_err(|e: AmqpError| refused(format!("{field}.arguments: {}", e.text)))?;
            let spec = QueueSpec {
                durable: q.durable,
                exclusive_owner: None,
                auto_delete: q.auto_delete,
                args,
                owner: if q.durable { 0 } else { self.transient_owner },
            };
            by_vhost
                .entry(vhost)
                .or_default()
                .queues
                .push((q.name.clone(), spec));
        }
        for (i, b) in definitions.bindings.iter().enumerate() {
            let field = format!("bindings[{i}]");
            let vhost = vhost_of(format!("{field}.vhost"), &b.vhost)?;
            let destination = match b.destination_type.as_str() {
                "queue" => Destination::Queue(b.destination.clone()),
                "exchange" => Destination::Exchange(b.destination.clone()),
                other => {
                    return Err(refused(format!(
                        "{field}.destination_type: '{other}' is neither 'queue' nor 'exchange'"
                    )));
                }
            };
            let binding = Binding {
                source: b.source.clone(),
                destination,
                routing_key: b.routing_key.clone(),
                arguments: table(field, &b.arguments)?,
            };
            by_vhost.entry(vhost).or_default().bindings.push(binding);
        }
        Ok(by_vhost)
    }
}

/// The user `users[index]` describes (credentials and tags only).
fn user_of(index: usize, u: &UserDefinition) -> Result<User, ImportError> {
    let field = |name: &str| format!("users[{index}].{name}");
    if u.name.is_empty() {
        return Err(refused(format!("{}: a user needs a name", field("name"))));
    }
    if let Some(algorithm) = u.hashing_algorithm.as_deref()
        && algorithm != HASHING_ALGORITHM
    {
        return Err(refused(format!(
            "{}: '{algorithm}' is not supported; Ferry reads {HASHING_ALGORITHM} hashes",
            field("hashing_algorithm")
        )));
    }
    let password_hash = match u.password_hash.as_str() {
        "" => None,
        hash => Some(
            PasswordHash::parse(hash)
                .map_err(|reason| refused(format!("{}: {reason}", field("password_hash"))))?,
        ),
    };
    let scram = |mechanism: Mechanism, text: &Option<String>, name: &str| {
        text.as_deref()
            .map(|t| ScramCredential::parse(mechanism, t))
            .transpose()
            .map_err(|reason| refused(format!("{}: {reason}", field(name))))
    };
    Ok(User {
        password_hash,
        scram_sha_256: scram(Mechanism::Sha256, &u.scram_sha_256, "scram_sha_256")?,
        scram_sha_512: scram(Mechanism::Sha512, &u.scram_sha_512, "scram_sha_512")?,
        ..User::new(&u.name)
    }
    .with_tags(u.tags.0.iter().cloned()))
}

/// `imported` as it is stored over `stored`: restrictions kept; SCRAM credentials the
/// document gives replace the stored ones, which are otherwise kept only when the
/// password hash is unchanged.
fn merged(imported: User, stored: Option<User>) -> User {
    match stored {
        None => imported,
        Some(stored) => {
            let same_password = stored.password_hash == imported.password_hash;
            User {
                scram_sha_256: imported
                    .scram_sha_256
                    .or(stored.scram_sha_256.filter(|_| same_password)),
                scram_sha_512: imported
                    .scram_sha_512
                    .or(stored.scram_sha_512.filter(|_| same_password)),
                loopback_only: stored.loopback_only,
                require_tls: stored.require_tls,
                ..imported
            }
        }
    }
}
