"""confluent-kafka's AdminClient (librdkafka's admin API) against Ferry, driven by
tests/kafka/admin_client.rs.

kafka_admin.py BOOTSTRAP TOPIC
    Creates TOPIC (one partition, retention.ms=60000), then prints one line per step:

    configs retention.ms=<value>/<source> max.message.bytes=<value>/<source>
        after IncrementalAlterConfigs SETs max.message.bytes=2000 and DELETEs retention.ms
    deleted low_watermark=<n>
        after five records are produced and DeleteRecords deletes those before offset 3
    consumed <offsets>
        the offsets a consumer reads from the beginning afterwards
    cluster nodes=<n> controller=<id> ops=<operations, sorted>
        DescribeCluster with the cluster's authorized operations
    topic partitions=<n> ops=<operations, sorted>
        DescribeTopics of TOPIC with its authorized operations
    groups empty=<ids> stable=<ids>
        ListConsumerGroups filtered by state (EMPTY, then STABLE): the consumer that read
        committed its offsets and left, so its group is empty
"""

import sys

from confluent_kafka import (
    ConsumerGroupState,
    Consumer,
    Producer,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

TIMEOUT = 20


def ops(operations):
    return ",".join(sorted(op.name for op in operations))


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    created = admin.create_topics(
        [NewTopic(topic, 1, 1, config={"retention.ms": "60000"})]
    )
    created[topic].result(TIMEOUT)

    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(
                "max.message.bytes",
                "2000",
                incremental_operation=AlterConfigOpType.SET,
            ),
            ConfigEntry(
                "retention.ms", None, incremental_operation=AlterConfigOpType.DELETE
            ),
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(TIMEOUT)
    described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)])
    configs = list(described.values())[0].result(TIMEOUT)
    shown = " ".join(
        f"{name}={configs[name].value}/{ConfigSource(configs[name].source).name}"
        for name in ("retention.ms", "max.message.bytes")
    )
    print(f"configs {shown}", flush=True)

    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce(topic, value=f"v{i}".encode())
        producer.flush(TIMEOUT)  # one batch per record
    deleted = admin.delete_records([TopicPartition(topic, 0, 3)])
    result = list(deleted.values())[0].result(TIMEOUT)
    print(f"deleted low_watermark={result.low_watermark}", flush=True)

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kafka-admin-py",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING
    offsets = []
    while len(offsets) < 2:
        message = consumer.poll(TIMEOUT)
        if message is None:
            break
        if message.error() is None:
            offsets.append(message.offset())
    consumer.commit(offsets=[TopicPartition(topic, 0, 5)], asynchronous=False)
    consumer.close()
    print("consumed " + ",".join(map(str, offsets)), flush=True)

    cluster = admin.describe_cluster(include_authorized_operations=True).result(TIMEOUT)
    print(
        f"cluster nodes={len(cluster.nodes)} controller={cluster.controller.id} "
        f"ops={ops(cluster.authorized_operations)}",
        flush=True,
    )

    topics = admin.describe_topics(
        TopicCollection([topic]), include_authorized_operations=True
    )
    description = topics[topic].result(TIMEOUT)
    print(
        f"topic partitions={len(description.partitions)} "
        f"ops={ops(description.authorized_operations)}",
        flush=True,
    )

    listed = {}
    for state in (ConsumerGroupState.EMPTY, ConsumerGroupState.STABLE):
        groups = admin.list_consumer_groups(states={state}).result(TIMEOUT)
        listed[state.name.lower()] = ",".join(sorted(g.group_id for g in groups.valid))
    print(f"groups empty={listed['empty']} stable={listed['stable']}", flush=True)


if __name__ == "__main__":
    main()
