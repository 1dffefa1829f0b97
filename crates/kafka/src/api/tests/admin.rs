//! CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs, AlterConfigs and
//! IncrementalAlterConfigs: topics and their settings as an admin client changes them, and
//! each refusal's code.

use super::acls::{client_of, guarded};
use super::fixture::{Client, Front, batch, name, text};
use super::{create_topic, create_topic_with, produce};
use crate::metadata::settings::broker;
use kafka_protocol::ResponseError;
use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::incremental_alter_configs_request as incremental;
use kafka_protocol::messages::{
    AlterConfigsRequest, BrokerId, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteTopicsRequest, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
};

/// DescribeConfigs' and AlterConfigs' resource types.
const TOPIC: i8 = 2;
const BROKER: i8 = 4;
/// AlterConfigs' resource type of a consumer group (Kafka 4.0's group settings).
const GROUP: i8 = 32;
/// DescribeConfigs' config sources.
const DYNAMIC_TOPIC_CONFIG: i8 = 1;
const DYNAMIC_BROKER_CONFIG: i8 = 2;
const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
const STATIC_BROKER_CONFIG: i8 = 4;
const DEFAULT_CONFIG: i8 = 5;

/// The DescribeConfigs (v4) answer for one resource, restricted to `keys` if given.
async fn describe(
    c: &mut Client,
    resource_type: i8,
    resource: &str,
    keys: Option<&[&str]>,
) -> DescribeConfigsResult {
    let request = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(resource))
            .with_configuration_keys(keys.map(|k| k.iter().map(|k| text(k)).collect())),
    ]);
    c.call(4, request).await.results.remove(0)
}

/// (name, value, source, read-only) of every setting `result` describes.
fn settings(result: &DescribeConfigsResult) -> Vec<(String, String, i8, bool)> {
    result
        .configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                c.config_source,
                c.read_only,
            )
        })
        .collect()
}

/// The (error code, message) of AlterConfigs (v2) setting `configs` on `resource`.
async fn alter(
    c: &mut Client,
    resource_type: i8,
    resource: &str,
    configs: &[(&str, &str)],
    validate_only: bool,
) -> (i16, Option<String>) {
    let request = AlterConfigsRequest::default()
        .with_validate_only(validate_only)
        .with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(text(resource))
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            AlterableConfig::default()
                                .with_name(text(k))
                                .with_value(Some(text(v)))
                        })
                        .collect(),
                ),
        ]);
    let r = c.call(2, request).await.responses.remove(0);
    // A success's message is not asserted (Ferry sends "", Kafka null: clients ignore it).
    let message = (r.error_code != 0).then(|| r.error_message.map(|m| m.to_string()));
    (r.error_code, message.flatten())
}

/// IncrementalAlterConfigs' operations.
const SET: i8 = 0;
const DELETE: i8 = 1;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

/// IncrementalAlterConfigs changes: (name, operation, value).
type Ops<'a> = &'a [(&'a str, i8, Option<&'a str>)];

/// The (error code, message) of IncrementalAlterConfigs (v1) applying `ops` (name,
/// operation, value) to `resource`.
async fn alter_incrementally(
    c: &mut Client,
    resource_type: i8,
    resource: &str,
    ops: Ops<'_>,
) -> (i16, Option<String>) {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        incremental::AlterConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(text(resource))
            .with_configs(
                ops.iter()
                    .map(|(k, op, v)| {
                        incremental::AlterableConfig::default()
                            .with_name(text(k))
                            .with_config_operation(*op)
                            .with_value(v.map(text))
                    })
                    .collect(),
            ),
    ]);
    let r = c.call(1, request).await.responses.remove(0);
    let message = (r.error_code != 0).then(|| r.error_message.map(|m| m.to_string()));
    (r.error_code, message.flatten())
}

/// The (error code, message) of CreatePartitions growing `topic` to `count`, with the
/// new partitions' replica lists if `assignments` are given.
async fn grow(
    c: &mut Client,
    topic: &str,
    count: i32,
    assignments: Option<&[&[i32]]>,
    validate_only: bool,
) -> (i16, Option<String>) {
    let assignments = assignments.map(|lists| {
        lists
            .iter()
            .map(|l| {
                CreatePartitionsAssignment::default()
                    .with_broker_ids(l.iter().map(|b| BrokerId(*b)).collect())
            })
            .collect()
    });
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(5_000)
        .with_validate_only(validate_only)
        .with_topics(vec![
            CreatePartitionsTopic::default()
                .with_name(name(topic))
                .with_count(count)
                .with_assignments(assignments),
        ]);
    let r = c.call(3, request).await.results.remove(0);
    let message = (r.error_code != 0).then(|| r.error_message.map(|m| m.to_string()));
    (r.error_code, message.flatten())
}

#[tokio::test]
async fn created_topics_report_their_shape_and_are_writable_at_once() {
    let front = Front::start_with(|c| c.default_partitions = 2).await;
    let mut c = front.client();
    let created = create_topic_with(&mut c, "new", 3, &[("retention.ms", "60000")]).await;
    assert_eq!(
        (
            created.error_code,
            created.num_partitions,
            created.replication_factor
        ),
        (0, 3, 1)
    );
    let topic = front.ctx.topics.get("new").unwrap();
    assert_eq!(topic.meta.config.retention_ms, Some(60_000));
    for p in 0..3 {
        let answer = produce(&mut c, "new", p, batch(&["x"])).await;
        assert_eq!(
            (answer.error_code, answer.base_offset),
            (0, 0),
            "partition {p}"
        );
    }
    let default = create_topic_with(&mut c, "defaulted", -1, &[]).await;
    assert_eq!(
        (default.error_code, default.num_partitions),
        (0, 2),
        "-1 takes kafka.default_partitions"
    );
    front.stop().await;
}

#[tokio::test]
async fn create_topics_refuses_what_it_cannot_create_with_each_code() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "taken", 1).await;
    /// A topic to create, with its partition count and settings, and the refusal due.
    type Case<'a> = (&'a str, i32, &'a [(&'a str, &'a str)], ResponseError);
    let cases: [Case; 5] = [
        ("taken", 1, &[], ResponseError::TopicAlreadyExists),
        ("bad/name", 1, &[], ResponseError::InvalidTopicException),
        ("zero", 0, &[], ResponseError::InvalidPartitions),
        (
            "odd",
            1,
            &[("segment.bytes", "1")],
            ResponseError::InvalidConfig,
        ),
        (
            "compacted",
            1,
            &[("cleanup.policy", "compress")],
            ResponseError::InvalidConfig,
        ),
    ];
    for (topic, partitions, configs, error) in cases {
        let result = create_topic_with(&mut c, topic, partitions, configs).await;
        assert_eq!(result.error_code, error.code(), "{topic}");
        assert!(result.error_message.is_some(), "{topic} says why");
    }
    assert_eq!(
        create_topic_with(&mut c, "taken", 1, &[])
            .await
            .error_message
            .as_deref(),
        Some("topic 'taken' already exists")
    );
    for refused in ["bad/name", "zero", "odd", "compacted"] {
        assert!(front.ctx.topics.get(refused).is_none(), "{refused}");
    }
    front.stop().await;
}

/// A topic of CreateTopics with a replica assignment: (partition, brokers) per partition,
/// and the partition count and replication factor given beside it.
fn assigned(topic: &str, assignment: &[(i32, &[i32])], given: (i32, i16)) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(name(topic))
        .with_num_partitions(given.0)
        .with_replication_factor(given.1)
        .with_assignments(
            assignment
                .iter()
                .map(|(p, brokers)| {
                    CreatableReplicaAssignment::default()
                        .with_partition_index(*p)
                        .with_broker_ids(brokers.iter().map(|b| BrokerId(*b)).collect())
                })
                .collect(),
        )
}

#[tokio::test]
async fn create_topics_takes_an_assignment_of_live_brokers_and_refuses_what_kafka_refuses() {
    let front = Front::start().await;
    let mut c = front.client();
    let request = |validate_only, topics| {
        CreateTopicsRequest::default()
            .with_validate_only(validate_only)
            .with_topics(topics)
    };
    let placed = assigned("placed", &[(1, &[0]), (0, &[0]), (2, &[0])], (-1, -1));
    let checked = c.call(5, request(true, vec![placed.clone()])).await;
    assert_eq!(
        (
            checked.topics[0].error_code,
            checked.topics[0].num_partitions
        ),
        (0, 3)
    );
    assert!(
        front.ctx.topics.get("placed").is_none(),
        "validate_only creates nothing"
    );
    let created = c
        .call(5, request(false, vec![placed]))
        .await
        .topics
        .remove(0);
    assert_eq!(
        (
            created.error_code,
            created.num_partitions,
            created.replication_factor
        ),
        (0, 3, 1),
        "the assignment gives the partition count; the store keeps one copy"
    );
    for p in 0..3 {
        assert_eq!(
            produce(&mut c, "placed", p, batch(&["x"])).await.error_code,
            0
        );
    }
    let invalid_assignment = ResponseError::InvalidReplicaAssignment.code();
    let cases = [
        (
            assigned("beside", &[(0, &[0])], (1, -1)),
            ResponseError::InvalidRequest.code(),
            "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
        ),
        (
            assigned("elsewhere", &[(0, &[0, 7])], (-1, -1)),
            invalid_assignment,
            "The manual partition assignment includes broker 7, but no such broker is registered.",
        ),
        (
            assigned("gap", &[(0, &[0]), (2, &[0])], (-1, -1)),
            invalid_assignment,
            "partitions should be a consecutive 0-based integer sequence",
        ),
        (
            assigned("twice", &[(0, &[0, 0])], (-1, -1)),
            invalid_assignment,
            "The manual partition assignment includes the broker 0 more than once.",
        ),
    ];
    for validate_only in [true, false] {
        let topics = cases.iter().map(|(t, ..)| t.clone()).collect();
        let answers = c.call(5, request(validate_only, topics)).await.topics;
        for ((topic, code, message), answer) in cases.iter().zip(answers) {
            assert_eq!(
                (answer.error_code, answer.error_message.as_deref()),
                (*code, Some(*message)),
                "{}",
                topic.name.0.as_str()
            );
            assert!(front.ctx.topics.get(topic.name.0.as_str()).is_none());
        }
    }
    front.stop().await;
}

#[tokio::test]
async fn create_partitions_takes_an_assignment_of_the_new_partitions() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "placed", 1).await;
    let invalid_assignment = ResponseError::InvalidReplicaAssignment.code();
    assert_eq!(
        grow(&mut c, "placed", 3, Some(&[&[0]]), false).await,
        (
            invalid_assignment,
            Some("Increasing the number of partitions by 2 but 1 assignments provided.".into())
        )
    );
    assert_eq!(
        grow(&mut c, "placed", 3, Some(&[&[0], &[4]]), true).await,
        (
            invalid_assignment,
            Some(
                "The manual partition assignment includes broker 4, but no such broker is registered."
                    .into()
            )
        ),
        "validate_only checks the same"
    );
    assert_eq!(front.ctx.topics.get("placed").unwrap().partitions.len(), 1);
    assert_eq!(
        grow(&mut c, "placed", 3, Some(&[&[0], &[0]]), false).await,
        (0, None)
    );
    assert_eq!(front.ctx.topics.get("placed").unwrap().partitions.len(), 3);
    assert_eq!(
        produce(&mut c, "placed", 2, batch(&["x"])).await.error_code,
        0
    );
    front.stop().await;
}

#[tokio::test]
async fn create_topics_validate_only_checks_and_creates_nothing() {
    let front = Front::start().await;
    let mut c = front.client();
    let request = CreateTopicsRequest::default()
        .with_validate_only(true)
        .with_topics(vec![
            CreatableTopic::default()
                .with_name(name("dry"))
                .with_num_partitions(4)
                .with_replication_factor(1),
            CreatableTopic::default()
                .with_name(name("dry run"))
                .with_num_partitions(1)
                .with_replication_factor(1),
        ]);
    let r = c.call(5, request).await;
    let codes: Vec<i16> = r.topics.iter().map(|t| t.error_code).collect();
    assert_eq!(codes, [0, ResponseError::InvalidTopicException.code()]);
    assert_eq!(r.topics[0].num_partitions, 4);
    assert!(front.ctx.topics.get("dry").is_none());
    front.stop().await;
}

#[tokio::test]
async fn deleted_topics_are_gone_and_deleting_again_is_unknown() {
    let front = Front::start_with(|c| c.auto_create_topics = false).await;
    let mut c = front.client();
    create_topic(&mut c, "doomed", 2).await;
    produce(&mut c, "doomed", 0, batch(&["x"])).await;
    let delete = || DeleteTopicsRequest::default().with_topic_names(vec![name("doomed")]);
    let r = c.call(5, delete()).await;
    assert_eq!(r.responses[0].error_code, 0);
    assert!(front.ctx.topics.get("doomed").is_none());
    assert_eq!(
        produce(&mut c, "doomed", 0, batch(&["y"])).await.error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    let again = c.call(5, delete()).await.responses.remove(0);
    assert_eq!(
        (again.error_code, again.error_message.as_deref()),
        (
            ResponseError::UnknownTopicOrPartition.code(),
            Some("topic 'doomed' does not exist")
        )
    );
    // Re-created, the topic starts empty.
    create_topic(&mut c, "doomed", 1).await;
    assert_eq!(
        produce(&mut c, "doomed", 0, batch(&["z"]))
            .await
            .base_offset,
        0
    );
    front.stop().await;
}

#[tokio::test]
async fn create_partitions_grows_a_topic_and_refuses_to_shrink_it() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "growing", 1).await;
    assert_eq!(grow(&mut c, "growing", 5, None, true).await, (0, None));
    assert_eq!(
        front.ctx.topics.get("growing").unwrap().partitions.len(),
        1,
        "validate_only changes nothing"
    );
    assert_eq!(grow(&mut c, "growing", 3, None, false).await, (0, None));
    assert_eq!(front.ctx.topics.get("growing").unwrap().partitions.len(), 3);
    let answer = produce(&mut c, "growing", 2, batch(&["new"])).await;
    assert_eq!(
        (answer.error_code, answer.base_offset),
        (0, 0),
        "a new partition is writable at once"
    );
    assert_eq!(
        grow(&mut c, "growing", 2, None, false).await,
        (
            ResponseError::InvalidPartitions.code(),
            Some(
                "topic 'growing' has 3 partitions; the new count must be larger, not 2".to_owned()
            )
        )
    );
    assert_eq!(
        grow(&mut c, "missing", 2, None, false).await.0,
        ResponseError::UnknownTopicOrPartition.code()
    );
    front.stop().await;
}

#[tokio::test]
async fn describe_configs_shows_a_topics_overrides_and_the_defaults_it_follows() {
    let front = Front::start_with(|c| c.max_message_bytes = 5_000).await;
    let mut c = front.client();
    create_topic_with(&mut c, "tuned", 1, &[("retention.ms", "1000")]).await;
    let result = describe(&mut c, TOPIC, "tuned", None).await;
    assert_eq!(result.error_code, 0);
    let retention_bytes = ferry_config::KafkaConfig::default().retention_bytes;
    assert_eq!(
        settings(&result),
        [
            (
                "retention.ms".into(),
                "1000".into(),
                DYNAMIC_TOPIC_CONFIG,
                false
            ),
            (
                "retention.bytes".into(),
                retention_bytes.to_string(),
                DEFAULT_CONFIG,
                false
            ),
            (
                "max.message.bytes".into(),
                "5000".into(),
                DEFAULT_CONFIG,
                false
            ),
            (
                "cleanup.policy".into(),
                "delete".into(),
                DEFAULT_CONFIG,
                false
            ),
            (
                "delete.retention.ms".into(),
                "86400000".into(),
                DEFAULT_CONFIG,
                false
            ),
            (
                "min.compaction.lag.ms".into(),
                "0".into(),
                DEFAULT_CONFIG,
                false
            ),
            (
                "min.cleanable.dirty.ratio".into(),
                "0.5".into(),
                DEFAULT_CONFIG,
                false
            ),
            (
                "message.timestamp.type".into(),
                "CreateTime".into(),
                DEFAULT_CONFIG,
                false
            ),
            (
                "compression.type".into(),
                "producer".into(),
                DEFAULT_CONFIG,
                false
            ),
        ]
    );
    let compacted = [
        ("cleanup.policy", "compact"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    assert_eq!(
        create_topic_with(&mut c, "compacted", 1, &compacted)
            .await
            .error_code,
        0
    );
    let keys = ["cleanup.policy", "min.cleanable.dirty.ratio"];
    let described = describe(&mut c, TOPIC, "compacted", Some(&keys)).await;
    assert_eq!(
        settings(&described),
        [
            (
                "cleanup.policy".into(),
                "compact".into(),
                DYNAMIC_TOPIC_CONFIG,
                false
            ),
            (
                "min.cleanable.dirty.ratio".into(),
                "0.01".into(),
                DYNAMIC_TOPIC_CONFIG,
                false
            ),
        ]
    );
    let only = describe(&mut c, TOPIC, "tuned", Some(&["max.message.bytes"])).await;
    assert_eq!(
        settings(&only),
        [(
            "max.message.bytes".into(),
            "5000".into(),
            DEFAULT_CONFIG,
            false
        )]
    );
    front.stop().await;
}

#[tokio::test]
async fn describe_configs_shows_the_broker_settings_read_only_and_refuses_the_rest() {
    let front = Front::start_with(|c| c.default_partitions = 4).await;
    let mut c = front.client();
    let broker = describe(&mut c, BROKER, "0", Some(&["num.partitions"])).await;
    assert_eq!(
        settings(&broker),
        [(
            "num.partitions".into(),
            "4".into(),
            STATIC_BROKER_CONFIG,
            true
        )]
    );
    let missing = describe(&mut c, TOPIC, "missing", None).await;
    assert_eq!(
        (missing.error_code, missing.error_message.as_deref()),
        (
            ResponseError::UnknownTopicOrPartition.code(),
            Some("topic 'missing' does not exist")
        )
    );
    let group = describe(&mut c, 3, "g", None).await;
    assert_eq!(group.error_code, ResponseError::InvalidRequest.code());
    front.stop().await;
}

/// The keys admin tools read of a broker, as this instance has them: its listeners (bound
/// and advertised), its id, its one log dir, Kafka's types; an empty key list is every key.
#[tokio::test]
async fn describe_configs_shows_the_broker_keys_tools_read_and_an_empty_key_list_is_all() {
    let front = Front::start().await;
    let mut c = front.client();
    let keys = [
        "node.id",
        "broker.id",
        "log.dirs",
        "listeners",
        "advertised.listeners",
        "message.max.bytes",
        "log.retention.ms",
        "auto.create.topics.enable",
        "log.cleanup.policy",
    ];
    let broker = describe(&mut c, BROKER, "0", Some(&keys)).await;
    let described: std::collections::HashMap<String, (String, i8, bool, i8)> = broker
        .configs
        .iter()
        .map(|e| {
            (
                e.name.to_string(),
                (
                    e.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                    e.config_source,
                    e.read_only,
                    e.config_type,
                ),
            )
        })
        .collect();
    let ctx = &front.ctx;
    let plaintext = ctx.bound[0].clone();
    assert!(
        plaintext.starts_with("PLAINTEXT://127.0.0.1:"),
        "{plaintext}"
    );
    let me = &ctx.brokers.me().listeners[0];
    let advertised = ctx
        .brokers
        .me()
        .listeners
        .iter()
        .map(|l| format!("{}://{}:{}", l.name, l.host, l.port))
        .collect::<Vec<_>>()
        .join(",");
    assert!(advertised.starts_with(&format!("PLAINTEXT://{}:{}", me.host, me.port)));
    // Kafka's config types: INT 3, LONG 5, STRING 2, BOOLEAN 1, LIST 7.
    let fixed = |value: String, kind: i8| (value, STATIC_BROKER_CONFIG, true, kind);
    assert_eq!(described["node.id"], fixed("0".into(), 3));
    assert_eq!(described["broker.id"], fixed("0".into(), 3));
    assert_eq!(described["log.dirs"], fixed(ctx.log_dir.path.clone(), 2));
    assert!(ctx.log_dir.path.ends_with("/store"), "{}", ctx.log_dir.path);
    assert!(described["listeners"].0.starts_with(&plaintext));
    assert_eq!(described["listeners"].1, STATIC_BROKER_CONFIG);
    assert_eq!(described["advertised.listeners"], fixed(advertised, 2));
    assert_eq!(
        described["auto.create.topics.enable"],
        fixed("true".into(), 1)
    );
    assert_eq!(described["message.max.bytes"].3, 3);
    assert!(
        !described["log.retention.ms"].2,
        "dynamic, so not read-only"
    );
    assert_eq!(
        described["log.cleanup.policy"].3, 7,
        "a LIST, as Kafka types it"
    );
    assert_eq!(described.len(), keys.len());

    let every = describe(&mut c, BROKER, "0", None).await;
    let empty = describe(&mut c, BROKER, "0", Some(&[])).await;
    assert!(every.configs.len() > keys.len());
    assert_eq!(
        settings(&empty),
        settings(&every),
        "empty is every key, as Kafka"
    );
    let topic_keys = describe(&mut c, TOPIC, "missing", Some(&[])).await;
    assert_eq!(
        topic_keys.error_code,
        ResponseError::UnknownTopicOrPartition.code()
    );
    front.stop().await;
}

#[tokio::test]
async fn alter_configs_replaces_a_topics_settings() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic_with(&mut c, "altered", 1, &[("retention.ms", "1000")]).await;
    assert_eq!(
        alter(
            &mut c,
            TOPIC,
            "altered",
            &[("max.message.bytes", "2000")],
            true
        )
        .await,
        (0, None)
    );
    let unchanged = front.ctx.topics.get("altered").unwrap().meta.config;
    assert_eq!(
        (unchanged.retention_ms, unchanged.max_message_bytes),
        (Some(1000), None),
        "validate_only changes nothing"
    );
    assert_eq!(
        alter(
            &mut c,
            TOPIC,
            "altered",
            &[("max.message.bytes", "2000")],
            false
        )
        .await,
        (0, None)
    );
    let result = describe(&mut c, TOPIC, "altered", None).await;
    let sources: Vec<(String, String, i8)> = settings(&result)
        .into_iter()
        .map(|(name, value, source, _)| (name, value, source))
        .take(3)
        .collect();
    let defaults = ferry_config::KafkaConfig::default();
    assert_eq!(
        sources,
        [
            (
                "retention.ms".into(),
                defaults.retention_ms.to_string(),
                DEFAULT_CONFIG
            ),
            (
                "retention.bytes".into(),
                defaults.retention_bytes.to_string(),
                DEFAULT_CONFIG
            ),
            (
                "max.message.bytes".into(),
                "2000".into(),
                DYNAMIC_TOPIC_CONFIG
            ),
        ],
        "settings not named return to the default"
    );
    // The new limit is enforced.
    assert_eq!(
        produce(&mut c, "altered", 0, batch(&[&"x".repeat(2_500)]))
            .await
            .error_code,
        ResponseError::MessageTooLarge.code()
    );
    front.stop().await;
}

#[tokio::test]
async fn alter_configs_refuses_unknown_settings_topics_and_broker_settings() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "fixed", 1).await;
    let (code, message) = alter(&mut c, TOPIC, "fixed", &[("segment.mss", "1")], false).await;
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert!(
        message
            .unwrap()
            .starts_with("segment.mss: is not a setting Ferry supports")
    );
    // Kafka's segment settings are taken, with no effect (metadata::settings).
    let (code, _) = alter(&mut c, TOPIC, "fixed", &[("segment.ms", "1")], false).await;
    assert_eq!(code, 0);
    let (code, _) = alter(&mut c, TOPIC, "fixed", &[("retention.ms", "soon")], false).await;
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert_eq!(
        alter(&mut c, TOPIC, "missing", &[("retention.ms", "1")], false)
            .await
            .0,
        ResponseError::UnknownTopicOrPartition.code()
    );
    let (code, message) = alter(&mut c, BROKER, "0", &[("num.partitions", "3")], false).await;
    assert_eq!(code, ResponseError::InvalidConfig.code());
    assert!(
        message
            .unwrap()
            .starts_with("num.partitions: is not a broker setting Ferry changes at runtime"),
        "kafka.default_partitions comes from ferry.toml"
    );
    front.stop().await;
}

#[tokio::test]
async fn incremental_alter_configs_changes_the_named_settings_and_keeps_the_others() {
    let front = Front::start().await;
    let mut c = front.client();
    let settings = [("retention.ms", "1000"), ("retention.bytes", "5000")];
    create_topic_with(&mut c, "inc", 1, &settings).await;
    let ops = [
        ("max.message.bytes", SET, Some("2000")),
        ("retention.bytes", DELETE, None),
        ("segment.ms", SET, Some("100")),
    ];
    assert_eq!(
        alter_incrementally(&mut c, TOPIC, "inc", &ops).await,
        (0, None)
    );
    let config = front.ctx.topics.get("inc").unwrap().meta.config;
    assert_eq!(
        (
            config.retention_ms,
            config.retention_bytes,
            config.max_message_bytes
        ),
        (Some(1000), None, Some(2000)),
        "retention.ms, not named, keeps its value"
    );
    let result = describe(&mut c, TOPIC, "inc", Some(&["retention.ms"])).await;
    assert_eq!(
        settings_of(&result),
        [("retention.ms".into(), "1000".into(), DYNAMIC_TOPIC_CONFIG)]
    );
    // cleanup.policy is a list: APPEND and SUBTRACT edit it (librdkafka's 0011 does).
    let policy = async |c: &mut _, op, item| {
        let ops = [("cleanup.policy", op, Some(item))];
        assert_eq!(alter_incrementally(c, TOPIC, "inc", &ops).await, (0, None));
        let policy = front
            .ctx
            .topics
            .get("inc")
            .unwrap()
            .meta
            .config
            .cleanup_policy();
        policy.as_str()
    };
    assert_eq!(policy(&mut c, APPEND, "compact").await, "compact,delete");
    assert_eq!(policy(&mut c, SUBTRACT, "delete").await, "compact");
    assert_eq!(
        alter_incrementally(
            &mut c,
            TOPIC,
            "inc",
            &[("cleanup.policy", SUBTRACT, Some("compact"))]
        )
        .await,
        (
            ResponseError::InvalidConfig.code(),
            Some(
                "cleanup.policy: the items must be delete or compact, and leave at least one"
                    .to_owned()
            )
        )
    );
    front.stop().await;
}

/// (name, value, source) of every setting `result` describes.
fn settings_of(result: &DescribeConfigsResult) -> Vec<(String, String, i8)> {
    settings(result)
        .into_iter()
        .map(|(name, value, source, _)| (name, value, source))
        .collect()
}

#[tokio::test]
async fn incremental_alter_configs_refuses_with_each_code_and_changes_nothing() {
    let front = guarded().await;
    let mut c = client_of(&front, "admin");
    create_topic_with(&mut c, "inc", 1, &[("retention.ms", "1000")]).await;
    let invalid_config = ResponseError::InvalidConfig.code();
    let invalid_request = ResponseError::InvalidRequest.code();
    let refusals: [(Ops, i16, &str); 5] = [
        (
            &[("retention.ms", APPEND, Some("5"))],
            invalid_config,
            "retention.ms: APPEND and SUBTRACT apply to list settings only (cleanup.policy)",
        ),
        (
            &[
                ("retention.ms", SET, Some("7")),
                ("retention.ms", DELETE, None),
            ],
            invalid_request,
            "retention.ms: named twice",
        ),
        (
            &[
                ("max.message.bytes", SET, Some("9")),
                ("retention.ms", SET, Some("soon")),
            ],
            invalid_config,
            "retention.ms: 'soon' must be an integer from -1 to 9223372036854775807",
        ),
        (
            &[("retention.ms", SET, None)],
            invalid_request,
            "retention.ms: SET needs a value",
        ),
        (
            &[("retention.ms", 9, Some("1"))],
            invalid_request,
            "retention.ms: unknown operation 9",
        ),
    ];
    for (ops, code, message) in refusals {
        assert_eq!(
            alter_incrementally(&mut c, TOPIC, "inc", ops).await,
            (code, Some(message.to_owned())),
            "{ops:?}"
        );
    }
    let config = front.ctx.topics.get("inc").unwrap().meta.config;
    assert_eq!(
        (config.retention_ms, config.max_message_bytes),
        (Some(1000), None)
    );
    let set = [("retention.ms", SET, Some("1"))];
    assert_eq!(
        alter_incrementally(&mut c, TOPIC, "missing", &set).await.0,
        ResponseError::UnknownTopicOrPartition.code()
    );
    assert_eq!(
        alter_incrementally(&mut c, BROKER, "0", &[("num.partitions", SET, Some("3"))])
            .await
            .0,
        invalid_config
    );
    assert_eq!(
        alter_incrementally(&mut c, GROUP, "g", &set).await,
        (
            invalid_config,
            Some("Unknown group config name: retention.ms".into())
        ),
        "a group's settings are its share group settings (Kafka 4)"
    );
    let lock = [("share.record.lock.duration.ms", SET, Some("10"))];
    let refused = alter_incrementally(&mut c, GROUP, "g", &lock).await;
    assert_eq!(refused.0, invalid_config, "{refused:?}");
    assert!(
        refused.1.unwrap().contains("share.record.lock.duration.ms"),
        "the message names the setting"
    );
    let mut alice = client_of(&front, "alice");
    assert_eq!(
        alter_incrementally(&mut alice, TOPIC, "inc", &set).await.0,
        ResponseError::TopicAuthorizationFailed.code()
    );
    assert_eq!(
        alter_incrementally(&mut alice, BROKER, "0", &set).await.0,
        ResponseError::ClusterAuthorizationFailed.code()
    );
    front.stop().await;
}

#[tokio::test]
async fn broker_settings_set_the_defaults_of_topics_and_are_described_with_their_scope() {
    let front = Front::start().await;
    let mut c = front.client();
    create_topic(&mut c, "plain", 1).await;
    create_topic_with(&mut c, "own", 1, &[("retention.ms", "1000")]).await;
    let retention = async |c: &mut Client, topic| {
        let described = describe(c, TOPIC, topic, Some(&["retention.ms"])).await;
        settings_of(&described).remove(0)
    };
    // The cluster's default: every topic without its own follows it.
    let cluster = [("log.retention.ms", "5000")];
    assert_eq!(alter(&mut c, BROKER, "", &cluster, false).await, (0, None));
    assert_eq!(
        retention(&mut c, "plain").await,
        (
            "retention.ms".into(),
            "5000".into(),
            DYNAMIC_DEFAULT_BROKER_CONFIG
        )
    );
    assert_eq!(
        retention(&mut c, "own").await,
        ("retention.ms".into(), "1000".into(), DYNAMIC_TOPIC_CONFIG)
    );
    // This instance's own, over the cluster's; an inert setting is stored; the policy list
    // is edited from Kafka's default.
    let ops = [
        ("log.retention.ms", SET, Some("6000")),
        ("background.threads", SET, Some("9")),
        ("log.cleanup.policy", APPEND, Some("compact")),
    ];
    assert_eq!(
        alter_incrementally(&mut c, BROKER, "0", &ops).await,
        (0, None)
    );
    let plain = describe(
        &mut c,
        TOPIC,
        "plain",
        Some(&["retention.ms", "cleanup.policy"]),
    )
    .await;
    assert_eq!(
        settings_of(&plain),
        [
            ("retention.ms".into(), "6000".into(), DYNAMIC_BROKER_CONFIG),
            (
                "cleanup.policy".into(),
                "compact,delete".into(),
                DYNAMIC_BROKER_CONFIG
            ),
        ]
    );
    assert_eq!(
        produce(&mut c, "plain", 0, batch(&["keyless"]))
            .await
            .error_code,
        ResponseError::InvalidRecord.code(),
        "the topic is compacted now"
    );
    let keys = [
        "log.retention.ms",
        "message.max.bytes",
        "log.cleanup.policy",
        "background.threads",
    ];
    let broker = describe(&mut c, BROKER, "0", Some(&keys)).await;
    let max_message_bytes = ferry_config::KafkaConfig::default().max_message_bytes;
    assert_eq!(
        settings(&broker),
        [
            (
                "log.retention.ms".into(),
                "6000".into(),
                DYNAMIC_BROKER_CONFIG,
                false
            ),
            (
                "message.max.bytes".into(),
                max_message_bytes.to_string(),
                STATIC_BROKER_CONFIG,
                false
            ),
            (
                "log.cleanup.policy".into(),
                "compact,delete".into(),
                DYNAMIC_BROKER_CONFIG,
                false
            ),
            (
                "background.threads".into(),
                "9".into(),
                DYNAMIC_BROKER_CONFIG,
                false
            ),
        ]
    );
    assert_eq!(
        settings(&describe(&mut c, BROKER, "", None).await),
        [(
            "log.retention.ms".into(),
            "5000".into(),
            DYNAMIC_DEFAULT_BROKER_CONFIG,
            false
        )]
    );
    let elsewhere = describe(&mut c, BROKER, "1", None).await;
    assert_eq!(
        (elsewhere.error_code, elsewhere.error_message.as_deref()),
        (
            ResponseError::InvalidRequest.code(),
            Some("Unexpected broker id, expected 0 or empty string, but received 1")
        )
    );
    // Back: DELETE and SUBTRACT.
    let ops = [
        ("log.retention.ms", DELETE, None),
        ("background.threads", DELETE, None),
        ("log.cleanup.policy", SUBTRACT, Some("compact")),
    ];
    assert_eq!(
        alter_incrementally(&mut c, BROKER, "0", &ops).await,
        (0, None)
    );
    assert_eq!(
        retention(&mut c, "plain").await,
        (
            "retention.ms".into(),
            "5000".into(),
            DYNAMIC_DEFAULT_BROKER_CONFIG
        )
    );
    assert_eq!(
        produce(&mut c, "plain", 0, batch(&["keyless"]))
            .await
            .error_code,
        0
    );
    // AlterConfigs replaces the cluster's settings: log.retention.ms goes.
    let limit = [("message.max.bytes", "2000")];
    assert_eq!(alter(&mut c, BROKER, "", &limit, true).await, (0, None));
    assert_eq!(
        retention(&mut c, "plain").await.1,
        "5000",
        "validate_only changes nothing"
    );
    assert_eq!(alter(&mut c, BROKER, "", &limit, false).await, (0, None));
    assert_eq!(
        retention(&mut c, "plain").await,
        (
            "retention.ms".into(),
            ferry_config::KafkaConfig::default()
                .retention_ms
                .to_string(),
            DEFAULT_CONFIG
        )
    );
    assert_eq!(
        produce(&mut c, "plain", 0, batch(&[&"x".repeat(2_500)]))
            .await
            .error_code,
        ResponseError::MessageTooLarge.code()
    );
    front.stop().await;
}

#[tokio::test]
async fn broker_settings_refuse_unknown_brokers_settings_and_values() {
    let front = Front::start().await;
    let mut c = front.client();
    let set = [("log.retention.ms", "1")];
    let invalid_request = ResponseError::InvalidRequest.code();
    assert_eq!(
        alter(&mut c, BROKER, "1", &set, false).await,
        (
            invalid_request,
            Some("broker 1 is not a live broker of this cluster (live: 0)".into())
        )
    );
    assert_eq!(
        alter(&mut c, BROKER, "one", &set, false).await,
        (
            invalid_request,
            Some("Broker id must be an integer, but it is: one".into())
        )
    );
    let invalid_config = ResponseError::InvalidConfig.code();
    assert_eq!(
        alter(&mut c, BROKER, "", &[("log.retention.ms", "soon")], false).await,
        (
            invalid_config,
            Some(
                "log.retention.ms: 'soon' must be an integer from -1 to 9223372036854775807".into()
            )
        )
    );
    assert_eq!(
        alter_incrementally(
            &mut c,
            BROKER,
            "0",
            &[("log.retention.ms", APPEND, Some("1"))]
        )
        .await,
        (
            invalid_config,
            Some(
                "log.retention.ms: APPEND and SUBTRACT apply to list settings only (log.cleanup.policy)"
                    .into()
            )
        )
    );
    assert_eq!(
        alter(&mut c, BROKER, "", &[("retention.ms", "1")], false)
            .await
            .0,
        invalid_config,
        "a topic setting's name is not a broker setting"
    );
    assert!(
        front
            .ctx
            .broker_settings
            .of(broker::Scope::Cluster)
            .is_empty()
    );
    front.stop().await;
}
