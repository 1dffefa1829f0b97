#!/usr/bin/env python3
"""Share groups (KIP-932) measured against classic consumer groups: one `ferry run` (this
checkout's config/ferry.toml, listeners on free loopback ports, a fresh store); per round
one topic of 6 partitions holding RECORDS records of 1 KiB (produced beforehand with a
confluent-kafka Producer, linger.ms 5, not measured), read whole twice with a fresh group
id each time:

    share  3 confluent-kafka ShareConsumers (implicit acknowledgement), one thread each,
           of a share group whose share.auto.offset.reset is set to earliest
           (IncrementalAlterConfigs on the GROUP resource) before they subscribe;
    group  3 classic confluent-kafka Consumers of one consumer group
           (auto.offset.reset earliest), one thread each.

Each mode consumes until every record was seen (or 300 s pass). The order of the two
modes alternates between rounds. Prints per round and mode: records seen, seconds from the
first poll to the last new record (and to the first record), records/s over those seconds
(and from the first record on, without the join), Ferry's CPU over the consume phase
(utime+stime of the daemon from /proc, from before the consumers start until they have
closed) and per record, duplicates (deliveries beyond the first of a record), and the
Fetch or ShareFetch, and OffsetCommit or ShareAcknowledge, requests Ferry answered (its
`ferry_kafka_requests_total`).

    scripts/bench-share-groups.py FERRY_BIN [RECORDS] [ROUNDS]

Defaults: 60,000 records, 2 rounds. Stops the daemon it started by its PID.
"""

import sys
import threading
import time

from bench_daemon import cpu_seconds, metric, started
from confluent_kafka import Consumer, KafkaException, Producer, ShareConsumer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

PARTITIONS = 6
MEMBERS = 3
RECORD_SIZE = 1024
TIMEOUT = 300


def requests(metrics_url, apis):
    """Ferry's `ferry_kafka_requests_total` summed over `apis` and every error code."""
    return metric(metrics_url, rf'ferry_kafka_requests_total\{{api="({"|".join(apis)})"')


def create_topic(admin, topic):
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)]).values():
        f.result(60)


def produce(bootstrap, topic, records):
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    value = b"x" * RECORD_SIZE
    for i in range(records):
        while True:
            try:
                producer.produce(topic, key=str(i).encode(), value=value, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(TIMEOUT)
    if left:
        raise SystemExit(f"{left} records of {topic} not delivered")


def share_member(bootstrap, group, topic):
    c = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "implicit",
        }
    )
    c.subscribe([topic])
    return c, lambda: c.poll(0.5) or [], lambda: (c.commit_sync(), c.close())


def group_member(bootstrap, group, topic):
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
        }
    )
    c.subscribe([topic])
    return c, lambda: c.consume(500, 0.5), c.close


def consume(bootstrap, metrics_url, pid, topic, group, mode, records):
    """The members of `mode` read `topic` until every record was seen; one result line."""
    if mode == "share":
        admin = AdminClient({"bootstrap.servers": bootstrap})
        entry = ConfigEntry(
            "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
        )
        resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[entry])
        for f in admin.incremental_alter_configs([resource]).values():
            f.result(60)
    make = share_member if mode == "share" else group_member
    seen = set()
    deliveries = [0]
    firsts, first_record, last_record = [], [], []
    lock = threading.Lock()
    done = threading.Event()
    errors = []

    def member():
        try:
            _, poll, close = make(bootstrap, group, topic)
            deadline = time.monotonic() + TIMEOUT
            with lock:
                firsts.append(time.monotonic())
            try:
                while not done.is_set() and time.monotonic() < deadline:
                    batch = poll()
                    now = time.monotonic()
                    with lock:
                        for m in batch:
                            if m.error():
                                raise KafkaException(m.error())
                            deliveries[0] += 1
                            key = m.key()
                            if key not in seen:
                                seen.add(key)
                                if not first_record:
                                    first_record.append(now)
                                last_record[:] = [now]
                        if len(seen) >= records:
                            done.set()
            finally:
                # Implicit acknowledgement accepts a poll's records at the next poll or
                # commit; close alone would release the last poll's.
                close()
        except Exception as e:  # noqa: BLE001 - reported with the round
            errors.append(repr(e))
            done.set()

    fetch_apis, ack_apis = ("ShareFetch", "Fetch"), ("ShareAcknowledge", "OffsetCommit")
    fetches0, acks0 = requests(metrics_url, fetch_apis), requests(metrics_url, ack_apis)
    cpu0 = cpu_seconds(pid)
    threads = [threading.Thread(target=member) for _ in range(MEMBERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cpu = cpu_seconds(pid) - cpu0
    fetches = requests(metrics_url, fetch_apis) - fetches0
    acks = requests(metrics_url, ack_apis) - acks0
    start = min(firsts) if firsts else time.monotonic()
    elapsed = (last_record[0] - start) if last_record else float("nan")
    to_first = (first_record[0] - start) if first_record else float("nan")
    got = len(seen)
    rate = got / elapsed if got else 0
    after_first = got / (elapsed - to_first) if got and elapsed > to_first else float("nan")
    line = (
        f"{mode:5}  records {got}/{records}  {elapsed:6.1f} s (first record {to_first:4.1f} s)  "
        f"{rate:7.0f} records/s ({after_first:7.0f} after the first)  ferry CPU {cpu:6.2f} s, "
        f"{1e6 * cpu / max(got, 1):5.0f} us/record  duplicates {deliveries[0] - got}  "
        f"requests: fetch {fetches:.0f}, ack/commit {acks:.0f}"
    )
    if errors:
        line += f"  ERRORS {errors}"
    return line


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    ferry = sys.argv[1]
    records = int(sys.argv[2]) if len(sys.argv) > 2 else 60_000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    with started(ferry) as daemon:
        bootstrap, metrics_url = daemon.bootstrap, daemon.metrics_url
        admin = AdminClient({"bootstrap.servers": bootstrap})
        print(
            f"{records} records of {RECORD_SIZE} B on {PARTITIONS} partitions, "
            f"{MEMBERS} members, {rounds} rounds",
            flush=True,
        )
        for n in range(1, rounds + 1):
            topic = f"share-bench-{n}"
            create_topic(admin, topic)
            produce(bootstrap, topic, records)
            modes = ("share", "group") if n % 2 else ("group", "share")
            for mode in modes:
                group = f"bench-{mode}-{n}"
                line = consume(bootstrap, metrics_url, daemon.pid, topic, group, mode, records)
                print(f"round {n}  {line}", flush=True)


if __name__ == "__main__":
    main()
