"""Old clients' message formats and topic timestamp types, with kafka-python (its own
protocol code) told the broker is old, against Ferry; driven by tests/kafka/formats.rs.

kafka_legacy.py BOOTSTRAP PREFIX
    Creates PREFIX-CreateTime and PREFIX-LogAppendTime (message.timestamp.type), then
    for each producer -- api_version (0, 9): Produce v1 with message format v0, which has
    no timestamps; (0, 10, 1): Produce v2 with message format v1 -- and each codec (none,
    gzip: a compressed wrapper message), sends 5 records stamped a day ahead to each topic
    and reads them back with a current consumer. Prints one line per producer, codec and
    topic:

    <api> <codec> <type> read=<n> values=<ok|bad> timestamps=<kind> ack=<kind>
        read: records read back (5 expected); values: keys and values as sent, in order;
        timestamps: what the records read carry -- none (-1: no timestamp), producer (the
        day-ahead stamp, CreateTime), broker (the time of the run, LogAppendTime) or
        bad:<what>; ack: the timestamp the Produce answer gave, as kafka-python reports it
        (the broker's log_append_time when it sends one: Produce v2), for (0, 10, 1) only,
        "-" for (0, 9), whose answer (v1) carries none.
"""

import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

COUNT = 5
DEADLINE_S = 30
DAY_MS = 86_400_000


def classify(stamps, types, ahead, start, end):
    """What timestamps (with their types, or None) say about who stamped them."""
    if all(t == -1 for t in stamps):
        return "none"
    if all(t == ahead for t in stamps) and all(k in (None, 0) for k in types):
        return "producer"
    if all(start <= t <= end for t in stamps) and all(k in (None, 1) for k in types):
        return "broker"
    return f"bad:{sorted(set(stamps))}/{sorted(set(types))}"


def read(bootstrap, topic, count):
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    records = []
    deadline = time.monotonic() + DEADLINE_S
    while len(records) < count and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
    consumer.close()
    return records


def main():
    bootstrap, prefix = sys.argv[1], sys.argv[2]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    kinds = ["CreateTime", "LogAppendTime"]
    admin.create_topics([NewTopic(f"{prefix}-{kind}", 1, 1,
                                  topic_configs={"message.timestamp.type": kind})
                         for kind in kinds])
    admin.close()
    produced = {kind: 0 for kind in kinds}
    for api in [(0, 9), (0, 10, 1)]:
        for codec in [None, "gzip"]:
            for kind in kinds:
                topic = f"{prefix}-{kind}"
                start = int(time.time() * 1000)
                ahead = start + DAY_MS
                producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=api,
                                         compression_type=codec, linger_ms=50)
                sent = [(f"k{i}".encode(), f"{api} {codec} {i}".encode()) for i in range(COUNT)]
                futures = [producer.send(topic, key=k, value=v, timestamp_ms=ahead)
                           for k, v in sent]
                acks = [f.get(timeout=DEADLINE_S) for f in futures]
                producer.close()
                produced[kind] += COUNT
                records = read(bootstrap, topic, produced[kind])
                end = int(time.time() * 1000)
                # The topic holds every earlier round too: this round's are its last ones.
                ours = records[len(records) - COUNT:] if len(records) == produced[kind] else []
                values = "ok" if [(r.key, r.value) for r in ours] == sent else "bad"
                stamps = classify([r.timestamp for r in ours],
                                  [r.timestamp_type for r in ours], ahead, start, end)
                ack = "-" if api == (0, 9) else classify(
                    [a.timestamp for a in acks], [None] * len(acks), ahead, start, end)
                name = ".".join(map(str, api))
                print(f"{name} {codec or 'none'} {kind} read={len(ours)} values={values} "
                      f"timestamps={stamps} ack={ack}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
