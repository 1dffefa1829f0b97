"""Kafka Connect's use of compacted topics, with kafka-python (its own protocol code), against
Ferry; driven by tests/kafka/compaction.rs.

kafka_compaction.py BOOTSTRAP PREFIX
    Creates PREFIX-configs (1 partition), PREFIX-offsets (5) and PREFIX-status (3) with
    cleanup.policy=compact, as a Connect worker does (and min.cleanable.dirty.ratio=0.01,
    so that the last round's records are compacted over whatever passes ran meanwhile);
    writes keys k0..k7 five times over to each (a flush after each round), the last round
    to PREFIX-configs deleting k0 with a tombstone; then, until
    compaction has run (bounded), reads each topic from the beginning to its end offsets,
    as Connect's KafkaBasedLog does. Prints one line per topic:

    <topic> policy=compact records=<n> newest=<yes|no> gaps=<yes|no> tombstones=<keys>
        records: how many were read; newest: each key read once, with its last value;
        gaps: the offsets read are not dense; tombstones: keys whose last record is one

    then, after a consumer group reads PREFIX-configs from the beginning and commits:

    group committed=<offset> end=<offset>
"""

import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

KEYS = [f"k{i}" for i in range(8)]
ROUNDS = 5
DEADLINE_S = 60


def read_to_end(bootstrap, topic):
    """Every record of `topic` from the beginning to the end offsets read first."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    partitions = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    end = consumer.end_offsets(partitions)
    records = []
    deadline = time.monotonic() + DEADLINE_S
    while any(consumer.position(tp) < end[tp] for tp in partitions):
        if time.monotonic() > deadline:
            raise SystemExit(f"{topic}: could not read to the end offsets {end}")
        for tp, batch in consumer.poll(timeout_ms=500).items():
            for m in batch:
                if m.offset < end[tp]:
                    records.append((tp.partition, m.offset, m.key.decode(), m.value))
    consumer.close()
    return records


def summary(topic, records, tombstoned):
    last = {}
    for _, _, key, value in records:
        last[key] = value
    keys = sorted(last)
    newest = keys == KEYS and len(records) == len(KEYS) and all(
        last[k] == (None if k in tombstoned else f"{k}-r{ROUNDS}".encode()) for k in KEYS
    )
    by_partition = {}
    for partition, offset, _, _ in records:
        by_partition.setdefault(partition, []).append(offset)
    gaps = any(
        offsets != list(range(offsets[0], offsets[0] + len(offsets))) or offsets[0] > 0
        for offsets in by_partition.values()
    )
    tombstones = ",".join(k for k in keys if last[k] is None) or "-"
    return newest, gaps, tombstones


def main():
    bootstrap, prefix = sys.argv[1], sys.argv[2]
    topics = {f"{prefix}-configs": 1, f"{prefix}-offsets": 5, f"{prefix}-status": 3}
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics(
        [
            NewTopic(
                name,
                partitions,
                1,
                topic_configs={
                    "cleanup.policy": "compact",
                    "min.cleanable.dirty.ratio": "0.01",
                },
            )
            for name, partitions in topics.items()
        ]
    )
    resources = [ConfigResource(ConfigResourceType.TOPIC, name) for name in topics]
    policies = {
        name: configs.get("cleanup.policy", {}).get("value")
        for name, configs in admin.describe_configs(resources)["topic"].items()
    }
    admin.close()

    configs = f"{prefix}-configs"
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    for r in range(1, ROUNDS + 1):
        for name in topics:
            for key in KEYS:
                deleted = r == ROUNDS and name == configs and key == "k0"
                value = None if deleted else f"{key}-r{r}".encode()
                producer.send(name, key=key.encode(), value=value)
        producer.flush()
    producer.close()

    tombstoned = {configs: {"k0"}}
    for name in topics:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            records = read_to_end(bootstrap, name)
            newest, gaps, tombstones = summary(name, records, tombstoned.get(name, set()))
            if newest or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        print(
            f"{name} policy={policies.get(name)} records={len(records)} "
            f"newest={'yes' if newest else 'no'} gaps={'yes' if gaps else 'no'} "
            f"tombstones={tombstones}",
            flush=True,
        )

    group = KafkaConsumer(
        configs,
        bootstrap_servers=bootstrap,
        group_id=f"{prefix}-worker",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    tp = TopicPartition(configs, 0)
    read = 0
    deadline = time.monotonic() + DEADLINE_S
    while read < len(KEYS) and time.monotonic() < deadline:
        read += sum(len(batch) for batch in group.poll(timeout_ms=500).values())
    group.commit()
    committed = group.committed(tp)
    end = group.end_offsets([tp])[tp]
    group.close()
    print(f"group committed={committed} end={end}", flush=True)


if __name__ == "__main__":
    main()
