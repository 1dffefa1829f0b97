//! Exporting definitions in RabbitMQ's JSON: users (with their RabbitMQ-format password
//! hash and, as fields of Ferry's own, their SCRAM credentials), the configured virtual hosts, permissions, topic
//! permissions, and every virtual host's durable and transient exchanges (not the
//! built-in ones), queues (not those exclusive to a connection) and bindings.
//! `parameters` and `policies` are always empty: Ferry has neither.

use super::import::HASHING_ALGORITHM;
use super::model::{
    BindingDefinition, Definitions, ExchangeDefinition, PermissionDefinition, QueueDefinition,
    Tags, TopicPermissionDefinition, UserDefinition, VhostDefinition,
};
use crate::tables;
use amq_protocol::types::FieldTable;
use ferry_amqp::admin::{Destination, VHost};
use ferry_amqp::admin::{VHosts, VhostMeta};
use ferry_auth::User;
use ferry_auth::store::{Scope, UserStore, UserStoreError};
use serde_json::{Map, Value};

/// Everything: users, virtual hosts, permissions and topology. `rabbit_version` is the
/// RabbitMQ version whose format this follows.
///
/// # Errors
/// [`UserStoreError`] when the user store cannot be read.
pub async fn export_all(
    users: &UserStore,
    vhosts: &VHosts,
    rabbit_version: &str,
) -> Result<Definitions, UserStoreError> {
    let vhosts = vhosts.list_with_meta();
    let mut definitions = Definitions {
        rabbit_version: Some(rabbit_version.to_owned()),
        rabbitmq_version: Some(rabbit_version.to_owned()),
        product_name: Some("Ferry".to_owned()),
        product_version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        users: Some(
            users
                .list()
                .await?
                .into_iter()
                .map(|u| user_definition(&u))
                .collect(),
        ),
        vhosts: Some(
            vhosts
                .iter()
                .map(|(v, meta)| vhost_definition(&v.name, meta))
                .collect(),
        ),
        permissions: Some(
            users
                .list_permissions(Scope::All)
                .await?
                .into_iter()
                .map(|p| PermissionDefinition {
                    user: p.user,
                    vhost: p.vhost,
                    configure: p.permissions.configure,
                    write: p.permissions.write,
                    read: p.permissions.read,
                })
                .collect(),
        ),
        topic_permissions: Some(
            users
                .list_topic_permissions(Scope::All)
                .await?
                .into_iter()
                .map(|t| TopicPermissionDefinition {
                    user: t.user,
                    vhost: t.vhost,
                    exchange: t.exchange,
                    write: t.write,
                    read: t.read,
                })
                .collect(),
        ),
        global_parameters: Some(Vec::new()),
        ..Definitions::default()
    };
    for (vhost, _) in &vhosts {
        add_topology(&mut definitions, vhost, true);
    }
    Ok(definitions)
}

/// `user` as RabbitMQ lists it: its RabbitMQ-format password hash ("" without one) and
/// tags; never its SCRAM credentials.
pub fn user_definition(user: &User) -> UserDefinition {
    UserDefinition {
        name: user.name.clone(),
        password_hash: user
            .password_hash
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        hashing_algorithm: Some(HASHING_ALGORITHM.to_owned()),
        tags: Tags(user.tags.clone()),
        limits: Some(serde_json::json!({})),
        scram_sha_256: user.scram_sha_256.as_ref().map(ToString::to_string),
        scram_sha_512: user.scram_sha_512.as_ref().map(ToString::to_string),
    }
}

/// A vhost as RabbitMQ exports it: its name, and its description, tags and default queue
/// type when it has any (top-level and under `metadata`, as RabbitMQ 3.10 writes them).
fn vhost_definition(name: &str, meta: &VhostMeta) -> VhostDefinition {
    let empty = meta.description.is_empty() && meta.tags.is_empty();
    VhostDefinition {
        name: name.to_owned(),
        description: (!empty).then(|| meta.description.clone().into()),
        tags: (!empty).then(|| meta.tags.clone().into()),
        metadata: (!empty)
            .then(|| serde_json::json!({"description": meta.description, "tags": meta.tags})),
        default_queue_type: meta.default_queue_type.clone().map(Into::into),
        limits: None,
    }
}

/// One virtual host's topology, its items without a `vhost` field (RabbitMQ's
/// `/api/definitions/{vhost}`).
pub fn export_vhost(vhost: &VHost, rabbit_version: &str) -> Definitions {
    let mut definitions = Definitions {
        rabbit_version: Some(rabbit_version.to_owned()),
        ..Definitions::default()
    };
    add_topology(&mut definitions, vhost, false);
    definitions
}

/// `table` as the JSON object of an `arguments` field.
fn to_json(table: &FieldTable) -> Map<String, Value> {
    match tables::to_json(table) {
        Value::Object(object) => object,
        _ => Map::new(),
    }
}

/// Appends `vhost`'s exchanges, queues and bindings, sorted by name, each naming the
/// vhost when `named`.
fn add_topology(definitions: &mut Definitions, vhost: &VHost, named: bool) {
    let name = named.then(|| vhost.name.clone());
    let topology = vhost.topology();
    let mut exchanges: Vec<_> = topology.exchanges.values().filter(|x| !x.builtin).collect();
    exchanges.sort_by(|a, b| a.name.cmp(&b.name));
    definitions
        .exchanges
        .extend(exchanges.into_iter().map(|x| ExchangeDefinition {
            name: x.name.clone(),
            vhost: name.clone(),
            kind: x.type_name().to_owned(),
            durable: x.durable,
            auto_delete: x.auto_delete,
            internal: x.internal,
            arguments: to_json(&x.arguments),
        }));
    let mut queues: Vec<_> = topology
        .queues
        .values()
        .filter(|q| q.spec.exclusive_owner.is_none())
        .collect();
    queues.sort_by(|a, b| a.name.cmp(&b.name));
    definitions.queues.extend(queues.into_iter().map(|q| {
        let mut arguments = FieldTable::default();
        q.spec.args.write_into(&mut arguments);
        QueueDefinition {
            name: q.name.clone(),
            vhost: name.clone(),
            durable: q.spec.durable,
            auto_delete: q.spec.auto_delete,
            arguments: to_json(&arguments),
        }
    }));
    let mut bindings: Vec<_> = topology.bindings.values().flatten().collect();
    bindings.sort_by(|a, b| {
        (&a.source, a.destination.name(), &a.routing_key).cmp(&(
            &b.source,
            b.destination.name(),
            &b.routing_key,
        ))
    });
    definitions.bindings.extend(bindings.into_iter().map(|b| {
        BindingDefinition {
            source: b.source.clone(),
            vhost: name.clone(),
            destination: b.destination.name().to_owned(),
            destination_type: match b.destination {
                Destination::Queue(_) => "queue",
                Destination::Exchange(_) => "exchange",
            }
            .to_owned(),
            routing_key: b.routing_key.clone(),
            arguments: to_json(&b.arguments),
        }
    }));
}
