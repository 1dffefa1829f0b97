//! The authorizer: what one user may do in one virtual host, compiled from its grants when
//! a connection opens the virtual host. A connection holds it as a [`LiveAccess`], which
//! the front replaces when the user's permissions change in the store, so an open
//! connection's next check follows the change (as RabbitMQ's channels do).
//!
//! Refusals carry RabbitMQ 3.10's wording, which does not say which access was missing
//! (`access to queue 'q' in vhost '/' refused for user 'u'`, `access to topic 'a.b' in
//! exchange 'amq.topic' in vhost '/' refused for user 'u'`); a front sends it as its
//! protocol's refusal.

use super::store::Grants;
use crate::permissions::{
    Access, DEFAULT_EXCHANGE_NAME, Pattern, Permissions, TopicPermission, TopicVariables,
};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tracing::warn;

/// A resource permissions apply to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource<'a> {
    /// An exchange ("" is the default exchange, checked as `amq.default`).
    Exchange(&'a str),
    /// A queue.
    Queue(&'a str),
}

impl Resource<'_> {
    /// The name patterns are matched against.
    pub fn name(&self) -> &str {
        match *self {
            Self::Exchange("") => DEFAULT_EXCHANGE_NAME,
            Self::Exchange(name) | Self::Queue(name) => name,
        }
    }

    /// The kind, as refusals name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Exchange(_) => "exchange",
            Self::Queue(_) => "queue",
        }
    }
}

/// A refused operation; its text is RabbitMQ's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Refused(String);

/// The compiled topic patterns of one exchange (`None`: the pattern did not compile once
/// the variables were put in, so it matches nothing).
#[derive(Debug, Clone)]
struct TopicPatterns {
    write: Option<Pattern>,
    read: Option<Pattern>,
}

/// What a user may do in a virtual host.
#[derive(Debug, Clone)]
pub struct VhostAccess {
    user: String,
    vhost: String,
    configure: Option<Pattern>,
    write: Option<Pattern>,
    read: Option<Pattern>,
    /// Topic permissions by exchange; an exchange without one allows every routing key.
    topics: HashMap<String, TopicPatterns>,
}

/// Compiles a stored pattern; one that does not compile (set by hand in the store, as
/// setting validates) matches nothing and is logged.
fn compile(user: &str, vhost: &str, field: &str, pattern: &str) -> Option<Pattern> {
    Pattern::compile(field, pattern)
        .inspect_err(|e| {
            warn!(user, vhost, error = %e, "a stored permission does not compile; it allows nothing");
        })
        .ok()
}

impl VhostAccess {
    /// The access `grants` give `user` in `vhost`, topic patterns expanded with
    /// `variables`; `None` when the grants have no permissions (the user may not open
    /// the virtual host).
    pub fn new(
        user: &str,
        vhost: &str,
        grants: &Grants,
        variables: &TopicVariables,
    ) -> Option<Self> {
        let Permissions {
            configure,
            write,
            read,
        } = grants.permissions.as_ref()?;
        let topics = grants
            .topic_permissions
            .iter()
            .map(|t: &TopicPermission| {
                let expanded = |field: &str, pattern: &str| {
                    compile(user, vhost, field, &variables.expand(pattern))
                };
                (
                    t.exchange.clone(),
                    TopicPatterns {
                        write: expanded("write", &t.write),
                        read: expanded("read", &t.read),
                    },
                )
            })
            .collect();
        Some(Self {
            user: user.to_owned(),
            vhost: vhost.to_owned(),
            configure: compile(user, vhost, "configure", configure),
            write: compile(user, vhost, "write", write),
            read: compile(user, vhost, "read", read),
            topics,
        })
    }

    /// No permissions at all: what a connection whose user's permissions on its vhost were
    /// cleared may do (its every check is refused, as RabbitMQ refuses them).
    pub fn refusing(user: &str, vhost: &str) -> Self {
        Self {
            user: user.to_owned(),
            vhost: vhost.to_owned(),
            configure: None,
            write: None,
            read: None,
            topics: HashMap::new(),
        }
    }

    /// Full permissions and no topic permissions: what a trusted internal caller has.
    pub fn unrestricted(user: &str, vhost: &str) -> Self {
        let all = || Pattern::compile("all", ".*").ok();
        Self {
            user: user.to_owned(),
            vhost: vhost.to_owned(),
            configure: all(),
            write: all(),
            read: all(),
            topics: HashMap::new(),
        }
    }

    /// The user.
    pub fn user(&self) -> &str {
        &self.user
    }

    /// May the user `access` `resource`?
    ///
    /// # Errors
    /// [`Refused`] with RabbitMQ's text.
    pub fn check(&self, access: Access, resource: Resource<'_>) -> Result<(), Refused> {
        let pattern = match access {
            Access::Configure => &self.configure,
            Access::Write => &self.write,
            Access::Read => &self.read,
        };
        if pattern.as_ref().is_some_and(|p| p.matches(resource.name())) {
            return Ok(());
        }
        // RabbitMQ 3.10's text does not name the kind of access.
        Err(Refused(format!(
            "access to {} '{}' in vhost '{}' refused for user '{}'",
            resource.kind(),
            resource.name(),
            self.vhost,
            self.user
        )))
    }

    /// Whether the user has a topic permission on `exchange` (without one, every routing
    /// key is allowed and [`VhostAccess::check_topic`] need not run).
    pub fn restricts_topics_on(&self, exchange: &str) -> bool {
        self.topics.contains_key(exchange)
    }

    /// May the user `access` (write: publish, read: bind) routing key `routing_key` on the
    /// topic exchange `exchange`?
    ///
    /// # Errors
    /// [`Refused`] with RabbitMQ's text.
    pub fn check_topic(
        &self,
        access: Access,
        exchange: &str,
        routing_key: &str,
    ) -> Result<(), Refused> {
        let Some(patterns) = self.topics.get(exchange) else {
            return Ok(());
        };
        let pattern = match access {
            Access::Write => &patterns.write,
            Access::Read => &patterns.read,
            Access::Configure => &None,
        };
        if pattern.as_ref().is_some_and(|p| p.matches(routing_key)) {
            return Ok(());
        }
        Err(Refused(format!(
            "access to topic '{routing_key}' in exchange '{exchange}' in vhost '{}' refused for user '{}'",
            self.vhost, self.user
        )))
    }
}

/// The access of an open connection, replaced when the user's permissions change in the
/// store. Readers take the current [`VhostAccess`]; a reader that keeps decisions (a
/// channel's publish cache) compares [`LiveAccess::generation`] to know when to forget
/// them.
#[derive(Debug)]
pub struct LiveAccess {
    current: RwLock<Arc<VhostAccess>>,
    generation: AtomicU64,
}

impl LiveAccess {
    /// `access`, at generation 0.
    pub fn new(access: VhostAccess) -> Self {
        Self {
            current: RwLock::new(Arc::new(access)),
            generation: AtomicU64::new(0),
        }
    }

    /// The access now.
    pub fn current(&self) -> Arc<VhostAccess> {
        self.current.read().clone()
    }

    /// How many times it was replaced.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Replaces it with `access`.
    pub fn replace(&self, access: VhostAccess) {
        *self.current.write() = Arc::new(access);
        self.generation.fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(
        permissions: Option<Permissions>,
        topics: &[(&str, &str, &str)],
    ) -> Option<VhostAccess> {
        let grants = Grants {
            permissions,
            topic_permissions: topics
                .iter()
                .map(|(exchange, write, read)| TopicPermission {
                    vhost: "/".into(),
                    user: "alice".into(),
                    exchange: (*exchange).into(),
                    write: (*write).into(),
                    read: (*read).into(),
                })
                .collect(),
        };
        VhostAccess::new("alice", "/", &grants, &TopicVariables::new("alice", "/"))
    }

    fn restricted() -> VhostAccess {
        access(
            Some(Permissions {
                configure: "^alice-".into(),
                write: "^(alice-|amq\\.default$)".into(),
                read: "".into(),
            }),
            &[("amq.topic", "^{username}\\.", "^{vhost}")],
        )
        .unwrap()
    }

    #[test]
    fn no_permissions_means_no_access_to_the_vhost() {
        assert!(access(None, &[]).is_none());
    }

    #[test]
    fn resources_are_checked_by_name_with_rabbitmqs_refusal() {
        let a = restricted();
        assert_eq!(
            a.check(Access::Configure, Resource::Queue("alice-q")),
            Ok(())
        );
        assert_eq!(
            a.check(Access::Configure, Resource::Queue("bob-q"))
                .unwrap_err()
                .to_string(),
            "access to queue 'bob-q' in vhost '/' refused for user 'alice'"
        );
        assert_eq!(a.check(Access::Write, Resource::Exchange("")), Ok(()));
        assert_eq!(
            a.check(Access::Read, Resource::Exchange(""))
                .unwrap_err()
                .to_string(),
            "access to exchange 'amq.default' in vhost '/' refused for user 'alice'",
            "the default exchange is named amq.default, and '' matches nothing"
        );
    }

    #[test]
    fn topic_permissions_expand_variables_and_apply_only_where_set() {
        let a = restricted();
        assert!(a.restricts_topics_on("amq.topic") && !a.restricts_topics_on("other"));
        assert_eq!(a.check_topic(Access::Write, "amq.topic", "alice.x"), Ok(()));
        assert_eq!(
            a.check_topic(Access::Write, "amq.topic", "bob.x")
                .unwrap_err()
                .to_string(),
            "access to topic 'bob.x' in exchange 'amq.topic' in vhost '/' refused for user 'alice'"
        );
        assert_eq!(
            a.check_topic(Access::Read, "amq.topic", "/anything"),
            Ok(())
        );
        assert_eq!(a.check_topic(Access::Write, "other", "bob.x"), Ok(()));
    }

    #[test]
    fn a_topic_pattern_broken_by_its_variables_allows_nothing() {
        let grants = Grants {
            permissions: Some(Permissions::full()),
            topic_permissions: vec![TopicPermission {
                vhost: "/".into(),
                user: "a(".into(),
                exchange: "t".into(),
                write: "^{username}".into(),
                read: ".*".into(),
            }],
        };
        let a = VhostAccess::new("a(", "/", &grants, &TopicVariables::new("a(", "/")).unwrap();
        assert!(a.check_topic(Access::Write, "t", "a(").is_err());
        assert_eq!(a.check_topic(Access::Read, "t", "x"), Ok(()));
    }
}
