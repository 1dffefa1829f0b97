//! The Kafka front's authorizer: "may this principal, from this host, do this to that
//! resource", answered from an in-memory copy of the stored ACLs, as Kafka's
//! `StandardAuthorizer` answers it (rules in [`super::model`]), with `kafka.super_users`
//! allowed everything.
//!
//! The copy is replaced whenever the store's ACL counter moves: at once after a change
//! this instance made (before the request that made it is answered), and after a change
//! another instance made once the watch on the counter fires (`docs/security.md`, "Kafka
//! ACLs"). A check never reads the store.

use super::model::{
    Acl, AclFilter, CLUSTER_NAME, Operation, PatternType, Permission, ResourceType, WILDCARD,
};
use super::store::{AclSet, AclStore};
use parking_lot::RwLock;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;
use tracing::warn;

/// How long the follower waits after a failed watch before watching again.
const RETRY: Duration = Duration::from_secs(1);

/// Who makes a request, for authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// `User:name`.
    pub principal: String,
    /// The client's IP address, as ACL hosts are written.
    pub host: String,
}

/// `kafka.super_users` and `kafka.allow_everyone_if_no_acl_found`.
#[derive(Debug, Clone, Default)]
pub struct AuthorizerSettings {
    /// Principals allowed everything.
    pub super_users: Vec<String>,
    /// Whether a resource no ACL applies to is open to everyone.
    pub allow_everyone_if_no_acl_found: bool,
}

/// The ACLs of the store, cached, and the checks against them. Cheap to clone.
#[derive(Clone)]
pub struct Acls {
    /// Where ACLs are stored.
    store: AclStore,
    /// Super users and the rule for resources without ACLs.
    settings: Arc<AuthorizerSettings>,
    /// The ACLs at the newest version read.
    cache: Arc<RwLock<Arc<AclSet>>>,
}

impl Acls {
    /// The authorizer over `store`, with the ACLs it holds now.
    ///
    /// # Errors
    /// The store's error.
    pub async fn start(
        store: AclStore,
        settings: AuthorizerSettings,
    ) -> Result<Self, ferry_store::StoreError> {
        let acls = Self {
            store,
            settings: Arc::new(settings),
            cache: Arc::default(),
        };
        acls.refresh().await?;
        Ok(acls)
    }

    /// Whether `caller` may do `operation` to the resource `name` of type `resource_type`.
    pub fn allows(
        &self,
        caller: &Caller,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        let set = self.cache.read().clone();
        Rules::new(&set.acls, &self.settings).allows(caller, operation, resource_type, name)
    }

    /// Whether `caller` may do `operation` to some resource of type `resource_type`
    /// ([`Rules::allows_some`]).
    pub fn allows_some(
        &self,
        caller: &Caller,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        let set = self.cache.read().clone();
        Rules::new(&set.acls, &self.settings).allows_some(caller, operation, resource_type)
    }

    /// Stores `acls`, then reloads the cache so this instance enforces them at once.
    ///
    /// # Errors
    /// The store's error.
    pub async fn create(&self, acls: &[Acl]) -> Result<(), ferry_store::StoreError> {
        self.store.create(acls).await?;
        self.refresh().await
    }

    /// Deletes the ACLs each filter matches (see [`AclStore::delete`]), then reloads the
    /// cache.
    ///
    /// # Errors
    /// The store's error.
    pub async fn delete(
        &self,
        filters: &[AclFilter],
    ) -> Result<Vec<Vec<Acl>>, ferry_store::StoreError> {
        let deleted = self.store.delete(filters).await?;
        self.refresh().await?;
        Ok(deleted)
    }

    /// Every stored ACL, read from the store (not the cache), for DescribeAcls and the
    /// management API.
    ///
    /// # Errors
    /// The store's error.
    pub async fn list(&self) -> Result<AclSet, ferry_store::StoreError> {
        self.store.list().await
    }

    /// Reloads the cache whenever the store's ACL counter moves, until `shutdown`.
    pub async fn follow_changes(self, shutdown: CancellationToken) {
        loop {
            let seen = self.cache.read().version;
            let outcome = tokio::select! {
                () = shutdown.cancelled() => return,
                changed = self.store.changed_since(seen) => changed,
            };
            let outcome = match outcome {
                Ok(()) => self.refresh().await,
                Err(e) => Err(e),
            };
            if let Err(e) = outcome {
                warn!(error = %e, "following the Kafka ACLs failed; retrying");
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(RETRY) => {}
                }
            }
        }
    }

    /// Reads every ACL and makes them the cache, unless the cache holds a newer version.
    async fn refresh(&self) -> Result<(), ferry_store::StoreError> {
        let fresh = self.store.list().await?;
        let mut cache = self.cache.write();
        if fresh.version >= cache.version {
            *cache = Arc::new(fresh);
        }
        Ok(())
    }
}

/// The operations Kafka reports as authorized on a topic (KIP-430).
const TOPIC_OPERATIONS: &[Operation] = &[
    Operation::Read,
    Operation::Write,
    Operation::Create,
    Operation::Describe,
    Operation::Alter,
    Operation::Delete,
    Operation::DescribeConfigs,
    Operation::AlterConfigs,
];

/// The operations Kafka reports as authorized on the cluster (KIP-430).
const CLUSTER_OPERATIONS: &[Operation] = &[
    Operation::Create,
    Operation::ClusterAction,
    Operation::DescribeConfigs,
    Operation::AlterConfigs,
    Operation::IdempotentWrite,
    Operation::Alter,
    Operation::Describe,
];

/// One request's caller with the authorizer: the checks an API handler makes. Cheap to
/// clone, and `'static`, so a handler's future may keep it.
#[derive(Clone)]
pub(crate) struct Access {
    /// The authorizer.
    acls: Acls,
    /// Who asks.
    caller: Caller,
}

impl Access {
    /// `caller`'s access by `acls`.
    pub(crate) fn new(acls: Acls, caller: Caller) -> Self {
        Self { acls, caller }
    }

    /// Whether the caller may do `operation` to topic `name`.
    pub(crate) fn topic(&self, operation: Operation, name: &str) -> bool {
        self.acls
            .allows(&self.caller, operation, ResourceType::Topic, name)
    }

    /// Whether the caller may do `operation` to group `name`.
    pub(crate) fn group(&self, operation: Operation, name: &str) -> bool {
        self.acls
            .allows(&self.caller, operation, ResourceType::Group, name)
    }

    /// Whether the caller may do `operation` to transactional id `name`.
    pub(crate) fn transactional_id(&self, operation: Operation, name: &str) -> bool {
        self.acls
            .allows(&self.caller, operation, ResourceType::TransactionalId, name)
    }

    /// Whether the caller may do `operation` to the cluster.
    pub(crate) fn cluster(&self, operation: Operation) -> bool {
        self.acls
            .allows(&self.caller, operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether the caller may create topic `name`: Create on the cluster or on the topic.
    pub(crate) fn create_topic(&self, name: &str) -> bool {
        self.cluster(Operation::Create) || self.topic(Operation::Create, name)
    }

    /// Whether the caller may use an idempotent producer (KIP-679): IdempotentWrite on the
    /// cluster, or Write on some topic.
    pub(crate) fn idempotent_write(&self) -> bool {
        self.cluster(Operation::IdempotentWrite)
            || self
                .acls
                .allows_some(&self.caller, Operation::Write, ResourceType::Topic)
    }

    /// The operations the caller may do to topic `name`, as KIP-430's bit field (bit
    /// `1 << code` per operation) of the operations Kafka reports for a topic.
    pub(crate) fn topic_operations(&self, name: &str) -> i32 {
        self.operations(TOPIC_OPERATIONS, |op| self.topic(op, name))
    }

    /// The operations the caller may do to the cluster, as [`Access::topic_operations`]:
    /// 0 without Describe on the cluster, as Kafka answers.
    pub(crate) fn cluster_operations(&self) -> i32 {
        if !self.cluster(Operation::Describe) {
            return 0;
        }
        self.operations(CLUSTER_OPERATIONS, |op| self.cluster(op))
    }

    /// The bit field of `operations` that `allowed`.
    fn operations(&self, operations: &[Operation], allowed: impl Fn(Operation) -> bool) -> i32 {
        operations
            .iter()
            .filter(|&&op| allowed(op))
            .fold(0, |bits, op| bits | 1 << op.code())
    }

    /// Who asks.
    pub(crate) fn caller(&self) -> &Caller {
        &self.caller
    }
}

/// The decisions over one set of ACLs. Pure.
struct Rules<'a> {
    /// The ACLs.
    acls: &'a [Acl],
    /// Super users and the rule for resources without ACLs.
    settings: &'a AuthorizerSettings,
}

impl<'a> Rules<'a> {
    /// The decisions over `acls` with `settings`.
    fn new(acls: &'a [Acl], settings: &'a AuthorizerSettings) -> Self {
        Self { acls, settings }
    }

    /// Whether `caller` may do `operation` to the resource `name` of type
    /// `resource_type`: a super user may; else a deny ACL for the operation refuses; else
    /// an allow ACL granting it allows; a resource no ACL applies to follows
    /// `allow_everyone_if_no_acl_found`.
    fn allows(
        &self,
        caller: &Caller,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.settings.super_users.contains(&caller.principal) {
            return true;
        }
        let mut applicable = self
            .acls
            .iter()
            .filter(|a| a.resource.resource_type == resource_type && a.resource.covers(name))
            .peekable();
        if applicable.peek().is_none() {
            return self.settings.allow_everyone_if_no_acl_found;
        }
        let mut allowed = false;
        for acl in applicable.filter(|a| a.concerns(&caller.principal, &caller.host)) {
            match acl.permission {
                Permission::Deny if acl.operation.refuses(operation) => return false,
                Permission::Allow if acl.operation.grants(operation) => allowed = true,
                _ => {}
            }
        }
        allowed
    }

    /// Whether `caller` may do `operation` to some resource of type `resource_type`
    /// (Kafka's `authorizeByResourceType`, which KIP-679 uses for idempotent producers):
    /// allowed on an arbitrary name, or by an allow ACL for exactly `operation` (or `All`)
    /// whose pattern no deny ACL of the caller covers entirely.
    fn allows_some(
        &self,
        caller: &Caller,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        if self.allows(caller, operation, resource_type, "hardcode") {
            return true;
        }
        let mine = |permission| {
            self.acls.iter().filter(move |a| {
                a.resource.resource_type == resource_type
                    && a.permission == permission
                    && (a.operation == operation || a.operation == Operation::All)
                    && a.concerns(&caller.principal, &caller.host)
            })
        };
        let denies: Vec<&Acl> = mine(Permission::Deny).collect();
        let denied = |allow: &Acl| {
            denies.iter().any(|d| {
                let (deny, pattern) = (&d.resource, &allow.resource);
                match deny.pattern_type {
                    PatternType::Literal => {
                        deny.name == WILDCARD
                            || (pattern.pattern_type == PatternType::Literal
                                && deny.name == pattern.name)
                    }
                    PatternType::Prefixed => pattern.name.starts_with(&deny.name),
                }
            })
        };
        mine(Permission::Allow).any(|allow| !denied(allow))
    }
}

#[cfg(test)]
mod tests;
