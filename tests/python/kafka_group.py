"""kafka-python against Ferry's Kafka front, driven by tests/kafka_interop.rs.

kafka_group.py produce BOOTSTRAP TOPIC RECORDS
    Creates TOPIC with 4 partitions unless it exists, produces RECORDS records (key kI, value vI, header
    i=I) with acks=all, and prints the broker version kafka-python inferred from
    ApiVersions.
kafka_group.py member BOOTSTRAP TOPIC GROUP
    Joins GROUP on TOPIC and consumes until killed, committing after every poll. Prints
    "assigned P..." whenever its assignment changes and "record VALUE PARTITION OFFSET"
    for every record, after checking its key and header.
"""

import sys

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import TopicAlreadyExistsError

TIMEOUT_S = 60


def produce(bootstrap, topic, records):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="py-admin")
    try:
        admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])
    except TopicAlreadyExistsError:
        pass
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", client_id="py-producer")
    for i in range(records):
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("i", str(i).encode())])
    producer.flush(timeout=TIMEOUT_S)
    print(".".join(map(str, producer.config["api_version"])), flush=True)
    producer.close()


def await_partitions(bootstrap, consumer, topic):
    """Makes the subscribed consumer's metadata know TOPIC's partitions before its first join;
    a producer's metadata request creates the topic when auto-create is on.

    This works around a kafka-python bug (seen in 3.0.12; 2.x has the same loop): when
    metadata arriving after a join changes the subscribed partitions, the member rejoins
    because its assignment snapshot differs from the metadata snapshot; if poll() returns
    while that join is in flight, the leader's assignment makes need_rejoin() false before
    the finished join is applied, so the member never takes its partitions. Joining only once
    the topic's partitions are known keeps that rejoin from happening.
    """
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="py-member-metadata")
    producer.partitions_for(topic)
    producer.close()
    if not consumer.partitions_for_topic(topic):
        sys.exit(f"no partitions for {topic}")


def member(bootstrap, topic, group):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id="py-member",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=3000,
        heartbeat_interval_ms=300,
    )
    consumer.subscribe([topic])
    await_partitions(bootstrap, consumer, topic)
    assigned = None
    while True:
        batches = consumer.poll(timeout_ms=100)
        now = sorted(tp.partition for tp in consumer.assignment())
        if now != assigned:
            assigned = now
            print("assigned", *now, flush=True)
        for tp, messages in batches.items():
            for m in messages:
                i = m.value.decode()[1:]
                assert m.key.decode() == "k" + i, m
                assert dict(m.headers)["i"].decode() == i, m
                print("record", m.value.decode(), tp.partition, m.offset, flush=True)
        if batches:
            consumer.commit()


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "produce":
        produce(args[0], args[1], int(args[2]))
    elif command == "member":
        member(args[0], args[1], args[2])
    else:
        sys.exit("usage: kafka_group.py produce|member ...")
