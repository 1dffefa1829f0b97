//! RabbitMQ's permissions on the AMQP front: the [`Authorize`] seam the topology asks
//! before it changes (its implementation for a connection is the user's
//! [`VhostAccess`], read at connection.open; the bridge's own declares are
//! [`Unrestricted`]), and the [`PublishGate`] that keeps a channel's publish decisions so
//! the publish path runs no regular expression per message.
//!
//! Which operation needs which permission is RabbitMQ's (`rabbit_channel`), listed in
//! `docs/security.md`, "Authorization"; a refusal is `403 ACCESS_REFUSED` with RabbitMQ's
//! text and closes the channel.

use crate::wire::errors::AmqpError;
use ferry_auth::access::{LiveAccess, Refused, Resource, VhostAccess};
use ferry_auth::permissions::Access;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Topic decisions a channel remembers before it forgets them all (a publisher that uses
/// ever new routing keys must not grow the set without bound).
const MAX_TOPIC_DECISIONS: usize = 256;

/// Answers whether an operation is allowed, as the AMQP refusal.
pub trait Authorize: Send + Sync {
    /// May the user `access` `resource`?
    ///
    /// # Errors
    /// 403 with RabbitMQ's text.
    fn check(&self, access: Access, resource: Resource<'_>) -> Result<(), AmqpError>;

    /// May the user `access` routing key `routing_key` on the topic exchange `exchange`?
    ///
    /// # Errors
    /// 403 with RabbitMQ's text.
    fn check_topic(
        &self,
        access: Access,
        exchange: &str,
        routing_key: &str,
    ) -> Result<(), AmqpError>;
}

fn refused(e: Refused) -> AmqpError {
    AmqpError::access_refused(e.to_string())
}

impl Authorize for VhostAccess {
    fn check(&self, access: Access, resource: Resource<'_>) -> Result<(), AmqpError> {
        VhostAccess::check(self, access, resource).map_err(refused)
    }

    fn check_topic(
        &self,
        access: Access,
        exchange: &str,
        routing_key: &str,
    ) -> Result<(), AmqpError> {
        VhostAccess::check_topic(self, access, exchange, routing_key).map_err(refused)
    }
}

/// Allows everything: the bridge's declares, which no user makes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Unrestricted;

impl Authorize for Unrestricted {
    fn check(&self, _: Access, _: Resource<'_>) -> Result<(), AmqpError> {
        Ok(())
    }

    fn check_topic(&self, _: Access, _: &str, _: &str) -> Result<(), AmqpError> {
        Ok(())
    }
}

/// A channel's publish decisions: the exchanges it may write to and, on topic exchanges
/// the user has topic permissions on, the routing keys it may publish with. Only allowed
/// decisions are kept: a refusal closes the channel. They are forgotten when the user's
/// permissions change ([`PublishGate::follow`]).
#[derive(Debug, Default)]
pub(crate) struct PublishGate {
    /// The access the decisions were made with, and its generation.
    access: Option<(u64, Arc<VhostAccess>)>,
    exchanges: HashSet<String>,
    /// Allowed routing keys by exchange.
    topics: HashMap<String, HashSet<String>>,
    /// Routing keys in `topics`.
    topic_count: usize,
}

impl PublishGate {
    /// The access to decide with: `live`'s current one. When it was replaced since the
    /// last call (the user's permissions changed), every kept decision is forgotten.
    pub(crate) fn follow(&mut self, live: &LiveAccess) -> Arc<VhostAccess> {
        let generation = live.generation();
        match &self.access {
            Some((seen, access)) if *seen == generation => access.clone(),
            _ => {
                self.exchanges.clear();
                self.topics.clear();
                self.topic_count = 0;
                let access = live.current();
                self.access = Some((generation, access.clone()));
                access
            }
        }
    }

    /// May the user write to `exchange`?
    ///
    /// # Errors
    /// 403 with RabbitMQ's text.
    pub(crate) fn check_exchange(
        &mut self,
        access: &VhostAccess,
        exchange: &str,
    ) -> Result<(), AmqpError> {
        if self.exchanges.contains(exchange) {
            return Ok(());
        }
        Authorize::check(access, Access::Write, Resource::Exchange(exchange))?;
        self.exchanges.insert(exchange.to_owned());
        Ok(())
    }

    /// May the user publish with `routing_key` to the topic exchange `exchange`?
    ///
    /// # Errors
    /// 403 with RabbitMQ's text.
    pub(crate) fn check_topic(
        &mut self,
        access: &VhostAccess,
        exchange: &str,
        routing_key: &str,
    ) -> Result<(), AmqpError> {
        if !access.restricts_topics_on(exchange) {
            return Ok(());
        }
        if self
            .topics
            .get(exchange)
            .is_some_and(|keys| keys.contains(routing_key))
        {
            return Ok(());
        }
        Authorize::check_topic(access, Access::Write, exchange, routing_key)?;
        if self.topic_count >= MAX_TOPIC_DECISIONS {
            self.topics.clear();
            self.topic_count = 0;
        }
        self.topics
            .entry(exchange.to_owned())
            .or_default()
            .insert(routing_key.to_owned());
        self.topic_count += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_auth::permissions::{Permissions, TopicPermission, TopicVariables};
    use ferry_auth::store::Grants;

    fn access() -> VhostAccess {
        let grants = Grants {
            permissions: Some(Permissions {
                write: "^(app|amq\\.topic)$".into(),
                ..Permissions::full()
            }),
            topic_permissions: vec![TopicPermission {
                vhost: "/".into(),
                user: "u".into(),
                exchange: "amq.topic".into(),
                write: "^{username}\\.".into(),
                read: ".*".into(),
            }],
        };
        VhostAccess::new("u", "/", &grants, &TopicVariables::new("u", "/")).unwrap()
    }

    #[test]
    fn the_gate_keeps_allowed_decisions_only() {
        let (access, mut gate) = (access(), PublishGate::default());
        gate.check_exchange(&access, "app").unwrap();
        assert!(gate.exchanges.contains("app"));
        let refused = gate.check_exchange(&access, "other").unwrap_err();
        assert_eq!(refused.code.code(), 403);
        assert!(!gate.exchanges.contains("other"));

        gate.check_topic(&access, "amq.topic", "u.orders").unwrap();
        gate.check_topic(&access, "amq.topic", "u.orders").unwrap();
        assert_eq!(gate.topic_count, 1);
        assert!(gate.check_topic(&access, "amq.topic", "v.orders").is_err());
        gate.check_topic(&access, "app", "anything").unwrap();
        assert_eq!(
            gate.topic_count, 1,
            "no topic permission on app: nothing to keep"
        );
    }

    #[test]
    fn the_gate_forgets_topic_decisions_past_its_bound() {
        let (access, mut gate) = (access(), PublishGate::default());
        for i in 0..=MAX_TOPIC_DECISIONS {
            gate.check_topic(&access, "amq.topic", &format!("u.{i}"))
                .unwrap();
        }
        assert_eq!(gate.topic_count, 1);
    }
}
