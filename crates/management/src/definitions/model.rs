//! RabbitMQ's definitions JSON (`GET /api/definitions` of RabbitMQ 3.x) as serde types:
//! what Ferry exports and what it imports. Every field of RabbitMQ's export is accepted;
//! a field it does not have is refused by name (`deny_unknown_fields`), so a typo is not
//! silently dropped. Fields Ferry has no use for (versions, `limits`, a vhost's
//! `description`, `global_parameters`) are accepted and ignored; `parameters` and
//! `policies` must be empty (Ferry has neither, and dropping a policy would change what a
//! queue does).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A definitions document, whole (every part) or of one virtual host (topology only).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Definitions {
    /// The version of the server that exported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rabbit_version: Option<String>,
    /// The same, under its newer name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rabbitmq_version: Option<String>,
    /// The exporting product (`RabbitMQ`, `Ferry`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_name: Option<String>,
    /// The exporting product's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub product_version: Option<String>,
    /// Users (absent from a virtual host's export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users: Option<Vec<UserDefinition>>,
    /// Virtual hosts (absent from a virtual host's export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vhosts: Option<Vec<VhostDefinition>>,
    /// Permissions (absent from a virtual host's export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Vec<PermissionDefinition>>,
    /// Topic permissions (absent from a virtual host's export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_permissions: Option<Vec<TopicPermissionDefinition>>,
    /// Runtime parameters: Ferry has none; must be empty on import.
    #[serde(default)]
    pub parameters: Vec<Value>,
    /// Cluster-wide parameters (RabbitMQ's cluster name and id): ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global_parameters: Option<Vec<Value>>,
    /// Policies: Ferry has none; must be empty on import.
    #[serde(default)]
    pub policies: Vec<Value>,
    /// Queues.
    #[serde(default)]
    pub queues: Vec<QueueDefinition>,
    /// Exchanges (the built-in ones are not listed).
    #[serde(default)]
    pub exchanges: Vec<ExchangeDefinition>,
    /// Bindings.
    #[serde(default)]
    pub bindings: Vec<BindingDefinition>,
    /// Ferry's own parts, which RabbitMQ's definitions have no place for (absent from
    /// RabbitMQ's exports and from a virtual host's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ferry: Option<FerryDefinitions>,
}

/// The Kafka front's topics, ACLs and committed offsets, and the bridge's runtime routes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FerryDefinitions {
    /// Kafka topics with their settings.
    #[serde(default)]
    pub kafka_topics: Vec<TopicDefinition>,
    /// Kafka ACLs.
    #[serde(default)]
    pub kafka_acls: Vec<AclDefinition>,
    /// Consumer groups' committed offsets.
    #[serde(default)]
    pub kafka_group_offsets: Vec<GroupOffsetDefinition>,
    /// Routes added through the API (those of `[[routes]]` belong to the config file),
    /// each as `PUT /api/ferry/routes/{name}` takes it.
    #[serde(default)]
    pub routes: Vec<Value>,
}

/// A Kafka topic.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicDefinition {
    /// Its name.
    pub name: String,
    /// How many partitions it has.
    pub partitions: i32,
    /// Its settings (`retention.ms`, `cleanup.policy`, …) as DescribeConfigs names them.
    #[serde(default)]
    pub configs: Map<String, Value>,
}

/// A Kafka ACL, with Kafka's names for its enums (as `/api/ferry/kafka/acls` shows it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclDefinition {
    /// `TOPIC`, `GROUP`, `CLUSTER` or `TRANSACTIONAL_ID`.
    pub resource_type: String,
    /// `LITERAL` or `PREFIXED`.
    pub pattern_type: String,
    /// The resource's name (or prefix).
    pub name: String,
    /// `User:NAME` or `User:*`.
    pub principal: String,
    /// An IP address or `*`.
    pub host: String,
    /// `READ`, `WRITE`, `DESCRIBE`, …
    pub operation: String,
    /// `ALLOW` or `DENY`.
    pub permission: String,
}

/// One committed offset of a consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupOffsetDefinition {
    /// The group.
    pub group: String,
    /// The topic.
    pub topic: String,
    /// The partition.
    pub partition: i32,
    /// The offset the group consumes next.
    pub offset: i64,
}

/// A user.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserDefinition {
    /// The login name.
    pub name: String,
    /// The RabbitMQ-format password hash; "" for a user without a password.
    #[serde(default)]
    pub password_hash: String,
    /// How the hash was made: only `rabbit_password_hashing_sha256` is read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hashing_algorithm: Option<String>,
    /// The tags: a list, or (older exports) one comma-separated string.
    #[serde(default)]
    pub tags: Tags,
    /// RabbitMQ's per-user limits: ignored (Ferry has none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Value>,
    /// Ferry's own: the user's SCRAM-SHA-256 credential for the Kafka front, in the form
    /// `ferry hash-password` prints (absent from RabbitMQ's exports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scram_sha_256: Option<String>,
    /// Ferry's own: the user's SCRAM-SHA-512 credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scram_sha_512: Option<String>,
}

/// User tags as RabbitMQ writes them: a list, or a comma-separated string (older
/// exports, `rabbitmqadmin`); always written as a list.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(from = "TagsText")]
pub struct Tags(pub Vec<String>);

/// The two forms of [`Tags`] on the wire.
#[derive(Deserialize)]
#[serde(untagged)]
enum TagsText {
    List(Vec<String>),
    Text(String),
}

impl From<TagsText> for Tags {
    fn from(text: TagsText) -> Self {
        let tags = match text {
            TagsText::List(list) => list,
            TagsText::Text(text) => text.split(',').map(str::to_owned).collect(),
        };
        Self(
            tags.into_iter()
                .map(|t| t.trim().to_owned())
                .filter(|t| !t.is_empty())
                .collect(),
        )
    }
}

impl Serialize for Tags {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// A virtual host: its name, and for one an import creates its description, tags and
/// default queue type (the rest is ignored).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VhostDefinition {
    /// The name.
    pub name: String,
    /// RabbitMQ's description (a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<Value>,
    /// RabbitMQ's vhost tags (a list or a comma-separated string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Value>,
    /// RabbitMQ's vhost metadata (`description`, `tags`: used where the fields above are
    /// absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
    /// RabbitMQ's default queue type (a string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_queue_type: Option<Value>,
    /// RabbitMQ's vhost limits: ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Value>,
}

impl VhostDefinition {
    /// The metadata a vhost created from this definition gets (values of another shape
    /// are left out).
    pub fn meta(&self) -> ferry_amqp::admin::VhostMeta {
        let field = |name: &str| {
            let own = match name {
                "description" => self.description.as_ref(),
                _ => self.tags.as_ref(),
            };
            own.or_else(|| self.metadata.as_ref().and_then(|m| m.get(name)))
                .cloned()
        };
        ferry_amqp::admin::VhostMeta {
            description: field("description")
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            tags: field("tags")
                .and_then(|v| serde_json::from_value::<Tags>(v).ok())
                .map(|t| t.0)
                .unwrap_or_default(),
            default_queue_type: self
                .default_queue_type
                .as_ref()
                .and_then(|v| v.as_str().map(str::to_owned)),
        }
    }
}

/// A user's permissions on a virtual host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PermissionDefinition {
    /// The user.
    pub user: String,
    /// The virtual host.
    pub vhost: String,
    /// The configure pattern.
    pub configure: String,
    /// The write pattern.
    pub write: String,
    /// The read pattern.
    pub read: String,
}

/// A user's topic permission on an exchange.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopicPermissionDefinition {
    /// The user.
    pub user: String,
    /// The virtual host.
    pub vhost: String,
    /// The exchange.
    pub exchange: String,
    /// The write pattern (routing keys of publishes).
    pub write: String,
    /// The read pattern (routing keys of bindings).
    pub read: String,
}

/// A queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueDefinition {
    /// Its name.
    pub name: String,
    /// Its virtual host (absent in a virtual host's export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vhost: Option<String>,
    /// Whether it survives a restart.
    #[serde(default)]
    pub durable: bool,
    /// Whether it goes with its last consumer.
    #[serde(default)]
    pub auto_delete: bool,
    /// Its arguments (`x-max-priority`, `x-message-ttl`, ...).
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// An exchange.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExchangeDefinition {
    /// Its name.
    pub name: String,
    /// Its virtual host (absent in a virtual host's export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vhost: Option<String>,
    /// Its kind: `direct`, `fanout`, `topic`, `headers`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Whether it survives a restart.
    #[serde(default)]
    pub durable: bool,
    /// Whether it goes with its last binding.
    #[serde(default)]
    pub auto_delete: bool,
    /// Whether publishers may not use it.
    #[serde(default)]
    pub internal: bool,
    /// Its arguments (`alternate-exchange`).
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

/// A binding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BindingDefinition {
    /// The source exchange.
    pub source: String,
    /// Its virtual host (absent in a virtual host's export).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vhost: Option<String>,
    /// The destination's name.
    pub destination: String,
    /// `queue` or `exchange`.
    pub destination_type: String,
    /// The binding key.
    #[serde(default)]
    pub routing_key: String,
    /// The binding arguments.
    #[serde(default)]
    pub arguments: Map<String, Value>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An export of RabbitMQ 3.10.8 (the test suite's node), trimmed.
    const RABBITMQ_EXPORT: &str = r#"{"rabbit_version":"3.10.8","rabbitmq_version":"3.10.8","product_name":"RabbitMQ","product_version":"3.10.8","users":[{"name":"erin","password_hash":"XWYYSLLWpwEW2nX6jgUFo0tkTf3n/kxb0jfkNRzIfXMhKTAC","hashing_algorithm":"rabbit_password_hashing_sha256","tags":["management","policymaker"],"limits":{}}],"vhosts":[{"name":"/"}],"permissions":[{"user":"alice","vhost":"/","configure":"^a","write":".*","read":"r"}],"topic_permissions":[{"user":"alice","vhost":"/","exchange":"amq.topic","write":"^{username}","read":".*"}],"parameters":[],"global_parameters":[{"name":"internal_cluster_id","value":"rabbitmq-cluster-id-XyalL"}],"policies":[],"queues":[{"name":"orders.q","vhost":"/","durable":true,"auto_delete":false,"arguments":{"x-max-priority":5}}],"exchanges":[{"name":"orders","vhost":"/","type":"topic","durable":true,"auto_delete":false,"internal":false,"arguments":{"alternate-exchange":"ae"}}],"bindings":[{"source":"orders","vhost":"/","destination":"orders.q","destination_type":"queue","routing_key":"order.*","arguments":{"x":"y"}}]}"#;

    #[test]
    fn rabbitmqs_export_is_read_whole() {
        let d: Definitions = serde_json::from_str(RABBITMQ_EXPORT).unwrap();
        let users = d.users.as_ref().unwrap();
        assert_eq!(users[0].tags.0, ["management", "policymaker"]);
        assert_eq!(d.queues[0].arguments["x-max-priority"], 5);
        assert_eq!(d.exchanges[0].kind, "topic");
        assert_eq!(d.bindings[0].destination_type, "queue");
        let again: Definitions = serde_json::from_value(serde_json::to_value(&d).unwrap()).unwrap();
        assert_eq!(again, d);
    }

    #[test]
    fn tags_are_read_from_a_string_or_a_list() {
        let user = |tags: &str| -> UserDefinition {
            serde_json::from_str(&format!(r#"{{"name":"u","tags":{tags}}}"#)).unwrap()
        };
        assert_eq!(
            user(r#""administrator, monitoring""#).tags.0,
            ["administrator", "monitoring"]
        );
        assert_eq!(user(r#""""#).tags.0, Vec::<String>::new());
        assert_eq!(user(r#"["management"]"#).tags.0, ["management"]);
    }

    #[test]
    fn an_unknown_field_is_refused_by_name() {
        let e = serde_json::from_str::<Definitions>(r#"{"queues":[],"quues":[]}"#).unwrap_err();
        assert!(e.to_string().starts_with("unknown field `quues`"), "{e}");
        let e = serde_json::from_str::<Definitions>(
            r#"{"queues":[{"name":"q","durable":true,"exclusive":true}]}"#,
        )
        .unwrap_err();
        assert!(
            e.to_string().starts_with("unknown field `exclusive`"),
            "{e}"
        );
    }
}
