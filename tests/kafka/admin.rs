//! Topic administration and retention through librdkafka's admin client: CreateTopics
//! with settings and with replica assignments, DescribeConfigs, AlterConfigs,
//! CreatePartitions, DeleteTopics, DeleteRecords; dynamic broker settings (AlterConfigs of
//! a broker) as topics' defaults; retention by bytes and by time deleting old ranges;
//! ListOffsets by timestamp. And confluent-kafka's AdminClient (`tests/python/kafka_admin.py`):
//! IncrementalAlterConfigs, DeleteRecords, DescribeCluster and DescribeTopics with
//! authorized operations, ListConsumerGroups by state; kafka-python's transaction tools
//! (`tests/python/kafka_transactions_admin.py`): ListTransactions, DescribeTransactions,
//! DescribeProducers and find-hanging.

use crate::common::clients::{python_script, run};
use crate::common::fronts::KafkaServer;
use crate::common::kafka::{PATIENCE, client_config, consumer, producer};
use crate::common::wait;
use rdkafka::admin::{
    AdminClient, AdminOptions, AlterConfig, ConfigEntry, ConfigSource, NewPartitions, NewTopic,
    ResourceSpecifier, TopicReplication,
};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::{FutureProducer, FutureRecord, Producer};
use rdkafka::util::Timeout;
use rdkafka::{Message, Offset, TopicPartitionList};
use std::time::{SystemTime, UNIX_EPOCH};

fn admin(broker: &KafkaServer) -> AdminClient<DefaultClientContext> {
    client_config(&broker.bootstrap(), &[]).create().unwrap()
}

/// Assigns `c` partition 0 of `topic` from its beginning and returns the first record.
async fn first_from_the_beginning<'a>(
    c: &'a StreamConsumer,
    topic: &str,
) -> rdkafka::message::BorrowedMessage<'a> {
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    c.assign(&tpl).unwrap();
    tokio::time::timeout(PATIENCE, c.recv())
        .await
        .unwrap()
        .unwrap()
}

fn options() -> AdminOptions {
    AdminOptions::new().operation_timeout(Some(Timeout::After(PATIENCE)))
}

/// Setting `name` of `resource` as DescribeConfigs describes it, if it does.
async fn entry(
    admin: &AdminClient<DefaultClientContext>,
    resource: ResourceSpecifier<'_>,
    name: &str,
) -> Option<ConfigEntry> {
    let described = admin
        .describe_configs(&[resource], &options())
        .await
        .unwrap();
    let resource = described
        .into_iter()
        .next()
        .unwrap()
        .expect("the resource is described");
    resource.entries.into_iter().find(|e| e.name == name)
}

/// The value of `name` in the topic's described settings.
async fn setting(
    admin: &AdminClient<DefaultClientContext>,
    topic: &str,
    name: &str,
) -> Option<String> {
    entry(admin, ResourceSpecifier::Topic(topic), name)
        .await
        .and_then(|e| e.value)
}

/// Sends one record per request, with timestamp `timestamp(i)`.
async fn send_each(p: &FutureProducer, topic: &str, n: usize, timestamp: impl Fn(usize) -> i64) {
    for i in 0..n {
        let value = format!("{i:0>400}");
        p.send(
            FutureRecord::to(topic)
                .key("k")
                .payload(value.as_bytes())
                .timestamp(timestamp(i)),
            Timeout::After(PATIENCE),
        )
        .await
        .expect("acknowledged");
    }
}

/// Waits until the partition's (log start, end) offsets satisfy `done`; returns them.
async fn offsets_until(
    c: &StreamConsumer,
    topic: &str,
    done: impl Fn(i64, i64) -> bool,
) -> (i64, i64) {
    wait::until("retention deleting", PATIENCE, async || {
        let (low, high) = c
            .fetch_watermarks(topic, 0, Timeout::After(PATIENCE))
            .unwrap();
        done(low, high).then_some((low, high))
    })
    .await
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_are_created_described_altered_grown_and_deleted() {
    let broker = KafkaServer::start_with(|c| c.auto_create_topics = false).await;
    let admin = admin(&broker);
    let created = admin
        .create_topics(
            &[NewTopic::new("admin", 2, TopicReplication::Fixed(1))
                .set("retention.ms", "86400000")],
            &options(),
        )
        .await
        .unwrap();
    assert_eq!(created, vec![Ok("admin".to_owned())]);
    let again = admin
        .create_topics(
            &[NewTopic::new("admin", 2, TopicReplication::Fixed(1))],
            &options(),
        )
        .await
        .unwrap();
    assert!(matches!(
        &again[0],
        Err((_, rdkafka::types::RDKafkaErrorCode::TopicAlreadyExists))
    ));
    let bad = admin
        .create_topics(
            &[NewTopic::new("bad", 1, TopicReplication::Fixed(1)).set("cleanup.policy", "shred")],
            &options(),
        )
        .await
        .unwrap();
    assert!(matches!(
        &bad[0],
        Err((_, rdkafka::types::RDKafkaErrorCode::InvalidConfig))
    ));

    assert_eq!(
        setting(&admin, "admin", "retention.ms").await.as_deref(),
        Some("86400000")
    );
    assert_eq!(
        setting(&admin, "admin", "retention.bytes").await.as_deref(),
        Some("-1")
    );

    let altered = admin
        .alter_configs(
            &[AlterConfig::new(ResourceSpecifier::Topic("admin"))
                .set("retention.bytes", "1048576")],
            &options(),
        )
        .await
        .unwrap();
    assert!(altered[0].is_ok());
    assert_eq!(
        setting(&admin, "admin", "retention.bytes").await.as_deref(),
        Some("1048576")
    );
    // AlterConfigs replaces the settings: retention.ms returns to the broker default.
    assert_eq!(
        setting(&admin, "admin", "retention.ms").await.as_deref(),
        Some("604800000")
    );

    let grown = admin
        .create_partitions(&[NewPartitions::new("admin", 4)], &options())
        .await
        .unwrap();
    assert!(grown[0].is_ok());
    let p = producer(&broker.bootstrap(), &[]);
    let delivery = p
        .send(
            FutureRecord::to("admin")
                .key("k")
                .payload("in partition 3")
                .partition(3),
            Timeout::After(PATIENCE),
        )
        .await
        .expect("the new partition takes records");
    assert_eq!((delivery.partition, delivery.offset), (3, 0));

    let deleted = admin.delete_topics(&["admin"], &options()).await.unwrap();
    assert_eq!(deleted, vec![Ok("admin".to_owned())]);
    let metadata = p
        .client()
        .fetch_metadata(Some("admin"), Timeout::After(PATIENCE))
        .unwrap();
    assert_eq!(
        metadata.topics()[0].error(),
        Some(rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART)
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_by_bytes_deletes_the_oldest_batches() {
    let broker = KafkaServer::start_with(|c| c.retention_check_interval_ms = 100).await;
    admin(&broker)
        .create_topics(
            &[
                NewTopic::new("small", 1, TopicReplication::Fixed(1))
                    .set("retention.bytes", "5000"),
            ],
            &options(),
        )
        .await
        .unwrap();
    let p = producer(&broker.bootstrap(), &[("linger.ms", "0")]);
    send_each(&p, "small", 40, |_| now_ms()).await;
    let c = consumer(&broker.bootstrap(), "retention", &[]);
    // Batches are about 480 bytes: at most ten fit in 5000.
    let (start, end) = offsets_until(&c, "small", |start, end| end - start <= 10).await;
    assert_eq!(end, 40);

    // Reading from the beginning starts at the log start; older offsets are gone.
    let first = first_from_the_beginning(&c, "small").await;
    assert!(first.offset() >= start);
    assert_eq!(
        first.payload().unwrap(),
        format!("{:0>400}", first.offset()).as_bytes()
    );
    broker.stop().await;
}

/// Creates `topic` (one partition, `settings`) on `broker` and sends it ten batches two
/// hours old, then five new ones.
async fn old_then_new(broker: &KafkaServer, topic: &str, settings: &[(&str, &str)]) {
    let created = settings.iter().fold(
        NewTopic::new(topic, 1, TopicReplication::Fixed(1)),
        |t, (k, v)| t.set(k, v),
    );
    admin(broker)
        .create_topics(&[created], &options())
        .await
        .unwrap();
    let p = producer(&broker.bootstrap(), &[("linger.ms", "0")]);
    let two_hours_ago = now_ms() - 2 * 3_600_000;
    send_each(&p, topic, 10, |_| two_hours_ago).await;
    send_each(&p, topic, 5, |_| now_ms()).await;
}

/// Waits until retention has deleted the ten old batches of an [`old_then_new`] topic, and
/// checks it deleted only those.
async fn only_the_old_batches_go(broker: &KafkaServer, topic: &str) {
    let c = consumer(&broker.bootstrap(), topic, &[]);
    // Retention may run between the old sends; wait until all ten old batches went.
    let offsets = offsets_until(&c, topic, |start, _| start >= 10).await;
    assert_eq!(offsets, (10, 15), "only the old batches go");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_by_time_deletes_batches_older_than_retention_ms() {
    let broker = KafkaServer::start_with(|c| c.retention_check_interval_ms = 100).await;
    old_then_new(&broker, "aging", &[("retention.ms", "3600000")]).await;
    only_the_old_batches_go(&broker, "aging").await;
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_are_found_by_timestamp() {
    let broker = KafkaServer::start().await;
    let p = producer(&broker.bootstrap(), &[("linger.ms", "50")]);
    // Batched (several records per batch), uncompressed: timestamps 1000, 2000, …
    let sends = (0..10).map(|i| {
        let p = &p;
        async move {
            p.send(
                FutureRecord::to("times")
                    .key("k")
                    .payload("v")
                    .timestamp(1000 * (i + 1)),
                Timeout::After(PATIENCE),
            )
            .await
            .unwrap()
        }
    });
    futures::future::join_all(sends).await;
    let c = consumer(&broker.bootstrap(), "times", &[]);
    let at = |ts: i64| {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("times", 0, Offset::Offset(ts))
            .unwrap();
        let found = c.offsets_for_times(tpl, Timeout::After(PATIENCE)).unwrap();
        found.find_partition("times", 0).unwrap().offset()
    };
    assert_eq!(at(1000), Offset::Offset(0));
    assert_eq!(at(2500), Offset::Offset(2));
    assert_eq!(at(10_000), Offset::Offset(9));
    assert_eq!(at(10_001), Offset::End, "no record is that new");
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_start_consumers_read_from() {
    let broker = KafkaServer::start().await;
    let admin = admin(&broker);
    admin
        .create_topics(
            &[NewTopic::new("trimmed", 1, TopicReplication::Fixed(1))],
            &options(),
        )
        .await
        .unwrap();
    let p = producer(&broker.bootstrap(), &[("linger.ms", "0")]);
    send_each(&p, "trimmed", 6, |_| now_ms()).await;
    let mut before = TopicPartitionList::new();
    before
        .add_partition_offset("trimmed", 0, Offset::Offset(4))
        .unwrap();
    let deleted = admin.delete_records(&before, &options()).await.unwrap();
    let low = deleted.find_partition("trimmed", 0).unwrap();
    assert_eq!((low.offset(), low.error()), (Offset::Offset(4), Ok(())));
    let mut past = TopicPartitionList::new();
    past.add_partition_offset("trimmed", 0, Offset::Offset(7))
        .unwrap();
    let refused = admin.delete_records(&past, &options()).await.unwrap();
    assert!(
        refused
            .find_partition("trimmed", 0)
            .unwrap()
            .error()
            .is_err(),
        "beyond the high watermark"
    );

    let c = consumer(&broker.bootstrap(), "trimmed", &[]);
    let first = first_from_the_beginning(&c, "trimmed").await;
    assert_eq!(first.offset(), 4);
    let (low, high) = c
        .fetch_watermarks("trimmed", 0, Timeout::After(PATIENCE))
        .unwrap();
    assert_eq!((low, high), (4, 6));
    broker.stop().await;
}

/// A dynamic broker setting set with librdkafka's AlterConfigs is the default of every
/// topic without its own: DescribeConfigs shows it as the broker's, and retention applies
/// it. An inert one is described back; a bad value changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dynamic_broker_setting_is_the_default_of_topics_without_their_own() {
    let broker = KafkaServer::start_with(|c| c.retention_check_interval_ms = 100).await;
    old_then_new(&broker, "defaulted", &[]).await;
    let admin = admin(&broker);
    let altered = admin
        .alter_configs(
            &[AlterConfig::new(ResourceSpecifier::Broker(0))
                .set("log.retention.ms", "3600000")
                .set("num.io.threads", "4")],
            &options(),
        )
        .await
        .unwrap();
    assert!(altered[0].is_ok(), "{altered:?}");
    let value_and_source = |e: Option<ConfigEntry>| e.map(|e| (e.value, e.source));
    let topic = ResourceSpecifier::Topic("defaulted");
    assert_eq!(
        value_and_source(entry(&admin, topic, "retention.ms").await),
        Some((Some("3600000".into()), ConfigSource::DynamicBroker))
    );
    only_the_old_batches_go(&broker, "defaulted").await;
    let own = ResourceSpecifier::Broker(0);
    assert_eq!(
        value_and_source(entry(&admin, own, "num.io.threads").await),
        Some((Some("4".into()), ConfigSource::DynamicBroker)),
        "an inert setting is described back"
    );
    // rdkafka 0.39 reports every resource of an AlterConfigs as done (it drops their
    // errors), so the refusal shows as the settings left as they were.
    admin
        .alter_configs(
            &[AlterConfig::new(ResourceSpecifier::Broker(0)).set("log.retention.ms", "soon")],
            &options(),
        )
        .await
        .unwrap();
    let retention = entry(&admin, ResourceSpecifier::Broker(0), "log.retention.ms").await;
    assert_eq!(
        value_and_source(retention),
        Some((Some("3600000".into()), ConfigSource::DynamicBroker)),
        "a bad value changes nothing"
    );
    broker.stop().await;
}

/// Two instances over one store are brokers 0 and 1: an assignment naming both is taken
/// and gives the partition count, one naming a broker that is not live is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replica_assignments_of_live_brokers_are_taken() {
    let broker = KafkaServer::start_with(|c| c.node_id = 0).await;
    let peer = broker.peer(1).await;
    let admin = admin(&broker);
    let created = admin
        .create_topics(
            &[
                NewTopic::new("placed", 2, TopicReplication::Variable(&[&[0, 1], &[1, 0]])),
                NewTopic::new("misplaced", 1, TopicReplication::Variable(&[&[0, 2]])),
            ],
            &options(),
        )
        .await
        .unwrap();
    assert_eq!(created[0], Ok("placed".to_owned()));
    assert!(matches!(
        &created[1],
        Err((
            _,
            rdkafka::types::RDKafkaErrorCode::InvalidReplicaAssignment
        ))
    ));
    let grown = admin
        .create_partitions(
            &[NewPartitions::new("placed", 4).assign(&[&[1, 0], &[0, 1]])],
            &options(),
        )
        .await
        .unwrap();
    assert_eq!(grown, vec![Ok("placed".to_owned())]);
    let p = producer(&broker.bootstrap(), &[]);
    let metadata = p
        .client()
        .fetch_metadata(Some("placed"), Timeout::After(PATIENCE))
        .unwrap();
    assert_eq!(metadata.topics()[0].partitions().len(), 4);
    let delivery = p
        .send(
            FutureRecord::to("placed")
                .key("k")
                .payload("x")
                .partition(3),
            Timeout::After(PATIENCE),
        )
        .await
        .expect("a partition added with an assignment takes records");
    assert_eq!(delivery.partition, 3);
    peer.stop().await;
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confluent_kafka_admin_client_alters_deletes_and_describes() {
    let broker = KafkaServer::start().await;
    let out = run(
        "python3",
        &[&python_script("kafka_admin.py"), &broker.bootstrap(), "adm"],
        b"",
    )
    .await;
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "configs retention.ms=604800000/DEFAULT_CONFIG \
         max.message.bytes=2000/DYNAMIC_TOPIC_CONFIG\n\
         deleted low_watermark=3\n\
         consumed 3,4\n\
         cluster nodes=1 controller=0 ops=ALTER,ALTER_CONFIGS,CLUSTER_ACTION,CREATE,DESCRIBE,\
         DESCRIBE_CONFIGS,IDEMPOTENT_WRITE\n\
         topic partitions=1 ops=ALTER,ALTER_CONFIGS,CREATE,DELETE,DESCRIBE,DESCRIBE_CONFIGS,\
         READ,WRITE\n\
         groups empty=kafka-admin-py stable=\n"
    );
    broker.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_python_lists_describes_and_finds_no_hanging_transactions() {
    let broker = KafkaServer::start().await;
    let out = run(
        "python3",
        &[
            &python_script("kafka_transactions_admin.py"),
            &broker.bootstrap(),
            "ledger",
        ],
        b"",
    )
    .await;
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "listed ledger-tx:Ongoing\n\
         ongoing ledger-tx\n\
         described state=Ongoing epoch=0 partitions=ledger-0 started=yes\n\
         producers yes txn_start=0\n\
         hanging 0\n\
         committed state=Empty\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    broker.stop().await;
}

/// What UIs and operators' tools ask of a broker's log dirs, leaders and replicas, through
/// kafka-python's and confluent-kafka's admin clients: one log dir whose partition sizes
/// follow the bytes produced and deleted, moves only to it, no election needed, no
/// reassignment but to the current replica, and the broker's own keys described.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_clients_see_one_log_dir_led_partitions_and_the_brokers_keys() {
    let broker = KafkaServer::start().await;
    let out = run(
        "python3",
        &[
            &python_script("kafka_replicas_admin.py"),
            &broker.bootstrap(),
            "sized",
        ],
        b"",
    )
    .await;
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "logdirs dirs=1 absolute=yes disk=yes size=0\n\
         grew yes\n\
         emptied size=0\n\
         moved here=NoError elsewhere=LogDirNotFoundError\n\
         elected ELECTION_NOT_NEEDED\n\
         reassignments listed=0 same=None other=InvalidReplicationAssignmentError\n\
         broker node.id=0 log.dirs=same advertised=yes\n\
         confluent node.id=0/STATIC_BROKER_CONFIG/ro listeners=STATIC_BROKER_CONFIG/ro \
         retention=STATIC_BROKER_CONFIG/rw\n\
         confluent elected ELECTION_NOT_NEEDED\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // librdkafka (rdkafka) describes the broker alike.
    let advertised = entry(
        &admin(&broker),
        ResourceSpecifier::Broker(0),
        "advertised.listeners",
    )
    .await
    .expect("advertised.listeners is described");
    assert_eq!(
        (advertised.source, advertised.is_read_only),
        (ConfigSource::StaticBroker, true)
    );
    let value = advertised.value.unwrap_or_default();
    assert!(
        value.starts_with(&format!("PLAINTEXT://{}", broker.bootstrap())),
        "{value}"
    );
    broker.stop().await;
}
