"""The admin calls UIs (Kafka UI, AKHQ, Conduktor) and operators' tools make of a broker's
log dirs, leaders and replicas, through kafka-python's KafkaAdminClient and
confluent-kafka's AdminClient, against Ferry; driven by tests/kafka/admin.rs.

kafka_replicas_admin.py BOOTSTRAP TOPIC
    Creates TOPIC (one partition), then prints one line per step:

    logdirs dirs=<n> absolute=<yes|no> disk=<yes|no> size=<bytes>
        describe_log_dirs: the broker's log dirs, whether the one is an absolute path,
        whether its file system's size and free space are given, and TOPIC-0's size
    grew <yes|no>
        after five 1000-byte records: whether the size grew by at least their bytes
    emptied size=<bytes>
        after DeleteRecords of everything: TOPIC-0's size
    moved here=<error class> elsewhere=<error class>
        alter_replica_log_dirs to the log dir describe_log_dirs named, and to another path
    elected <error name>
        kafka-python's elect_leaders (PREFERRED) of TOPIC-0
    reassignments listed=<n> same=<error class, None when accepted> other=<error class>
        list_partition_reassignments, then alter_partition_reassignments of TOPIC-0 to its
        replicas as Metadata names them, and to broker 7
    broker node.id=<v> log.dirs=<same|other> advertised=<yes|no>
        kafka-python's describe_configs of broker 0, every key: whether `log.dirs` is the
        log dir describe_log_dirs named, and `advertised.listeners` begins with
        PLAINTEXT://BOOTSTRAP
    confluent node.id=<v>/<source>/<ro|rw> listeners=<source>/<ro|rw> retention=<source>/<ro|rw>
        confluent-kafka's describe_configs of broker 0 (`log.retention.ms` is dynamic)
    confluent elected <error name>
        confluent-kafka's elect_leaders (PREFERRED) of TOPIC-0
"""

import sys

from confluent_kafka import ElectionType
from confluent_kafka import TopicPartition as ConfluentPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType
from kafka import KafkaProducer, TopicPartition
from kafka.admin import ConfigResource as PyConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient, NewTopic
from kafka.structs import TopicPartitionReplica

TIMEOUT = 20


def main():
    bootstrap, topic = sys.argv[1], sys.argv[2]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])

    def log_dir():
        (broker,) = admin.describe_log_dirs(topic_partitions={topic: [0]})
        dirs = broker["log_dirs"]
        sizes = [
            p["partition_size"]
            for d in dirs
            for t in d["topics"]
            if t["name"] == topic
            for p in t["partitions"]
        ]
        return dirs, sum(sizes)

    dirs, before = log_dir()
    path = dirs[0]["log_dir"]
    disk = dirs[0]["total_bytes"] > 0 and dirs[0]["usable_bytes"] > 0
    print(
        f"logdirs dirs={len(dirs)} absolute={'yes' if path.startswith('/') else 'no'} "
        f"disk={'yes' if disk else 'no'} size={before}",
        flush=True,
    )

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
    for i in range(5):
        producer.send(topic, bytes([65 + i]) * 1000).get(timeout=TIMEOUT)
    producer.close()
    _, after = log_dir()
    print(f"grew {'yes' if after - before >= 5000 else 'no'}", flush=True)

    admin.delete_records({TopicPartition(topic, 0): -1})
    _, emptied = log_dir()
    print(f"emptied size={emptied}", flush=True)

    replica = TopicPartitionReplica(topic, 0, 0)
    here = admin.alter_replica_log_dirs({replica: path})[replica]
    elsewhere = admin.alter_replica_log_dirs({replica: "/var/lib/kafka/data"})[replica]
    print(f"moved here={here.__name__} elsewhere={elsewhere.__name__}", flush=True)

    elected = admin.elect_leaders(0, {topic: [0]}, raise_errors=False)
    codes = [
        p.error_code
        for r in elected.replica_election_results
        for p in r.partition_result
    ]
    names = {0: "NONE", 84: "ELECTION_NOT_NEEDED"}
    print("elected " + ",".join(names.get(c, str(c)) for c in codes), flush=True)

    listed = admin.list_partition_reassignments()
    (described,) = admin.describe_topics([topic])
    replicas = described["partitions"][0]["replica_nodes"]
    tp = TopicPartition(topic, 0)
    same = admin.alter_partition_reassignments({tp: replicas})[tp]
    other = admin.alter_partition_reassignments({tp: [7]})[tp]
    print(
        f"reassignments listed={len(listed)} same={same} other={other.__name__}",
        flush=True,
    )

    configs = admin.describe_configs(
        [PyConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all"
    )["broker"]["0"]
    advertised = configs["advertised.listeners"]["value"]
    print(
        f"broker node.id={configs['node.id']['value']} "
        f"log.dirs={'same' if configs['log.dirs']['value'] == path else 'other'} "
        f"advertised={'yes' if advertised.startswith('PLAINTEXT://' + bootstrap) else 'no'}",
        flush=True,
    )
    admin.close()

    confluent = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "0")
    entries = confluent.describe_configs([resource])[resource].result(TIMEOUT)

    def shown(name):
        e = entries[name]
        return f"{ConfigSource(e.source).name}/{'ro' if e.is_read_only else 'rw'}"

    print(
        f"confluent node.id={entries['node.id'].value}/{shown('node.id')} "
        f"listeners={shown('listeners')} "
        f"retention={shown('log.retention.ms')}",
        flush=True,
    )
    result = confluent.elect_leaders(
        ElectionType.PREFERRED, [ConfluentPartition(topic, 0)]
    ).result(TIMEOUT)
    errors = [
        "NONE" if e is None else e.name() for e in result.values()
    ]
    print("confluent elected " + ",".join(errors), flush=True)


if __name__ == "__main__":
    main()
