"""kafka-python pinned to an old Kafka (api_version), so it picks that Kafka's API versions
instead of asking Ferry's ApiVersions; driven by tests/kafka/old_clients.rs.

kafka_old_versions.py BOOTSTRAP API_VERSION TOPIC
    API_VERSION is dotted (0.10, 1.0, 2.0). Creates TOPIC (one partition, with a current
    admin client), then with clients pinned to API_VERSION:
    - produces k0, k1, k2 stamped T, T+10 ms, T+20 ms (T = 1,700,000,000,000),
    - fetches from offset 0 with an assigned consumer,
    - looks up the beginning and end offsets and the offset for time T+10 ms,
    - joins group TOPIC-group, commits offset 2 (metadata "note") and reads it back.
    Prints one JSON object: {"produced": offsets, "fetched": [[offset, key, value,
    timestamp]...], "beginning": n, "end": n, "for_time": [offset, timestamp],
    "assigned": partitions, "committed": [offset, metadata]}; a step the pinned
    version cannot do is the name of the error it raised (steps run with short deadlines).
"""

import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.structs import OffsetAndMetadata

T = 1_700_000_000_000
DEADLINE_S = 10
TIMEOUT_MS = 5_000


def attempt(step):
    """What `step` returns, or the name of the error it raises."""
    try:
        return step()
    except Exception as e:  # pylint: disable=broad-except
        return type(e).__name__


def fetch(consumer, partition):
    """[offset, key, value, timestamp] of every record from offset 0, within the deadline."""
    consumer.assign([partition])
    consumer.seek(partition, 0)
    records = []
    deadline = time.monotonic() + DEADLINE_S
    while len(records) < 3 and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
    return [[r.offset, r.key.decode(), r.value.decode(), r.timestamp] for r in records]


def join(consumer, topic):
    """The partitions the group gives `consumer`, once it has some."""
    consumer.subscribe([topic])
    deadline = time.monotonic() + DEADLINE_S
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=200)
    return sorted(p.partition for p in consumer.assignment())


def main():
    bootstrap, dotted, topic = sys.argv[1], sys.argv[2], sys.argv[3]
    api = tuple(int(n) for n in dotted.split("."))
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    partition = TopicPartition(topic, 0)
    out = {}

    producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=api)
    futures = [producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                             partition=0, timestamp_ms=T + 10 * i) for i in range(3)]
    out["produced"] = attempt(lambda: [f.get(timeout=DEADLINE_S).offset for f in futures])
    producer.close()

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, api_version=api,
                             enable_auto_commit=False, request_timeout_ms=TIMEOUT_MS)
    out["fetched"] = attempt(lambda: fetch(consumer, partition))
    out["beginning"] = attempt(
        lambda: consumer.beginning_offsets([partition], timeout_ms=TIMEOUT_MS)[partition])
    out["end"] = attempt(
        lambda: consumer.end_offsets([partition], timeout_ms=TIMEOUT_MS)[partition])

    def for_time():
        found = consumer.offsets_for_times({partition: T + 10}, timeout_ms=TIMEOUT_MS)
        return [found[partition].offset, found[partition].timestamp]

    out["for_time"] = attempt(for_time)
    consumer.close()

    member = KafkaConsumer(bootstrap_servers=bootstrap, api_version=api,
                           group_id=f"{topic}-group", enable_auto_commit=False,
                           auto_offset_reset="earliest", request_timeout_ms=TIMEOUT_MS,
                           session_timeout_ms=3_000, heartbeat_interval_ms=500)
    out["assigned"] = attempt(lambda: join(member, topic))

    def commit_and_read_back():
        member.commit({partition: OffsetAndMetadata(2, "note", -1)}, timeout_ms=TIMEOUT_MS)
        committed = member.committed(partition, metadata=True, timeout_ms=TIMEOUT_MS)
        return [committed.offset, committed.metadata]

    out["committed"] = attempt(commit_and_read_back)
    member.close()
    print(json.dumps(out, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
