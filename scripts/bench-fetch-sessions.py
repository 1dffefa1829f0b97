#!/usr/bin/env python3
"""Fetch sessions (KIP-227) measured: a kafka-python consumer of one topic of PARTITIONS
partitions, fed a trickle of records, with incremental fetch sessions on and off in
alternating rounds against one `ferry run` (this checkout's config/ferry.toml, listeners
on free loopback ports, a fresh store). Prints per round: Fetch requests answered, the
consumer's average request size (kafka-python's `request-size-avg`), Ferry's CPU per
fetch (utime+stime of the daemon from /proc), fetch sessions open (Ferry's
`ferry_kafka_fetch_sessions`), and whether every record produced was consumed.

    scripts/bench-fetch-sessions.py FERRY_BIN [PARTITIONS] [ROUNDS] [SECONDS]

Defaults: 1000 partitions, 2 rounds of each mode, 20 s each; 20 records a second to
partitions picked at random. Stops the daemon it started by its PID.
"""

import random
import sys
import time

from bench_daemon import cpu_seconds, metric, started
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

TOPIC = "sessions"
RATE = 20


def round_(bootstrap, metrics_url, pid, partitions, seconds, sessions, producer):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        enable_auto_commit=False,
        enable_incremental_fetch_sessions=sessions,
        client_id=f"bench-{'sessions' if sessions else 'full'}",
    )
    consumer.assign([TopicPartition(TOPIC, p) for p in range(partitions)])
    consumer.seek_to_end()
    for p in range(partitions):
        consumer.position(TopicPartition(TOPIC, p))
    fetches0 = metric(metrics_url, r'ferry_kafka_requests_total\{api="Fetch"')
    cpu0 = cpu_seconds(pid)
    sent, got = set(), set()
    start = time.time()
    next_send = start
    while time.time() - start < seconds:
        now = time.time()
        while next_send <= now:
            value = f"{sessions}-{len(sent)}".encode()
            producer.send(TOPIC, value=value, partition=random.randrange(partitions))
            sent.add(value)
            next_send += 1 / RATE
        for records in consumer.poll(timeout_ms=50).values():
            got.update(r.value for r in records)
    producer.flush()
    deadline = time.time() + 10
    while not sent <= got and time.time() < deadline:
        for records in consumer.poll(timeout_ms=100).values():
            got.update(r.value for r in records)
    elapsed = time.time() - start
    fetches = metric(metrics_url, r'ferry_kafka_requests_total\{api="Fetch"') - fetches0
    cpu = cpu_seconds(pid) - cpu0
    open_sessions = metric(metrics_url, r"ferry_kafka_fetch_sessions ")
    request_size = consumer.metrics().get("consumer-metrics", {}).get("request-size-avg", 0)
    consumer.close()
    mode = "sessions" if sessions else "full    "
    print(
        f"{mode}  fetches {fetches:6.0f} ({fetches / elapsed:5.1f}/s)  "
        f"request-size-avg {request_size:8.0f} B  "
        f"ferry CPU {cpu:6.2f} s, {1e6 * cpu / max(fetches, 1):7.0f} us/fetch  "
        f"sessions open {open_sessions:.0f}  "
        f"records {len(got & sent)}/{len(sent)}",
        flush=True,
    )


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    ferry = sys.argv[1]
    partitions = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 2
    seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 20
    with started(ferry) as daemon:
        bootstrap, metrics_url = daemon.bootstrap, daemon.metrics_url
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        admin.create_topics([NewTopic(TOPIC, num_partitions=partitions, replication_factor=1)])
        admin.close()
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0)
        print(f"{partitions} partitions, {RATE} records/s, {seconds:.0f} s rounds", flush=True)
        for _ in range(rounds):
            for sessions in (False, True):
                round_(bootstrap, metrics_url, daemon.pid, partitions, seconds, sessions, producer)
        producer.close()


if __name__ == "__main__":
    main()
