"""confluent-kafka's ShareConsumer (KIP-932, librdkafka's share consumer) against Ferry,
driven by tests/kafka/share_groups.rs.

kafka_share_groups.py BOOTSTRAP SCENARIO TOPIC GROUP
    Creates TOPIC (6 partitions unless the scenario says) unless it exists, sets GROUP's share.auto.offset.reset to
    earliest with IncrementalAlterConfigs (a GROUP resource), produces the records the
    scenario needs and runs it, printing one line per finding:

    split MODE RECORDS MEMBERS
        MEMBERS share consumers in MODE (implicit or explicit acknowledgement), one
        thread each, join; RECORDS records are produced and consumed until every one was
        seen; prints
        "seen N distinct N members-with-records M" and, after a later consumer of the
        group waits 3 s, "left 0" when every record was accepted.
    redeliver
        An explicit consumer RELEASEs the first record it gets and REJECTs the second; the
        released record comes back with delivery count 2, the rejected one never; prints
        "released again 2" and "rejected again False".
    expire LOCK_MS
        Sets the group's lock to LOCK_MS; a consumer acquires records of TOPIC (made with
        one partition, which both members are assigned) and sits on them past the lock;
        another member of the group then gets them with delivery count 2; prints
        "redelivered N of N count 2".
    limit
        Sets share.delivery.count.limit to 2; a record released twice is archived: prints
        "deliveries 2" and "after limit none".
    dead-letters
        With errors.deadletterqueue.topic.name = dlq.TOPIC and a delivery count limit of 2,
        an explicit consumer rejects dl-0, releases dl-1 until it is archived and accepts
        dl-2; a plain consumer then reads dlq.TOPIC and prints each record there as
        "VALUE reason R count N from TOPIC/PARTITION@OFFSET group GROUP" (its headers).
    transactions
        With share.isolation.level read_committed, a transactional producer aborts 5 records
        and commits 5 to TOPIC (one partition); a consumer takes what it is given; prints
        "committed N aborted M deliveries D".
    hold
        Produces 60 records to TOPIC (one partition); an explicit consumer accepts the
        first half of its first batch, holds the rest and exits without closing; prints
        "accepted KEYS" and "held KEYS" (comma-separated).
    drain ACCEPTED HELD
        (After Ferry was killed and restarted.) A consumer of GROUP takes every record it
        can; prints "accepted again N", "held again N of M counts [C...]" (their delivery
        counts) and "total N of M".
    figures RECORDS
        Produces RECORDS records to TOPIC (one partition); an explicit consumer (client id
        "figures-member") takes its first batch, rejects its first 2 records, accepts the
        next 3 and holds the rest; prints "batch N from FIRST" and "holding", then waits
        for a line on its input (the caller reads the figures meanwhile); then accepts
        what it holds and every record it can still get until RECORDS were seen, closes,
        and prints "accepted all".
"""

import os
import sys
import threading
import time

from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    KafkaException,
    Producer,
    ShareConsumer,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

TIMEOUT = 60
PARTITIONS = 6


def trace(*words):
    """One line of what a scenario saw, on stderr: the Rust test shows it when it fails."""
    print(f"{time.monotonic():.3f}", *words, file=sys.stderr, flush=True)


def admin_setup(bootstrap, topic, group, settings, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, partitions, 1)])
    for f in futures.values():
        try:
            f.result(TIMEOUT)
        except KafkaException as e:
            if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in settings.items()
    ]
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(TIMEOUT)


def produce(bootstrap, topic, count, tag, partitions=PARTITIONS):
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, key=f"{tag}-{i}", value=f"{tag}-{i}", partition=i % partitions)
    assert producer.flush(TIMEOUT) == 0


def consumer(bootstrap, group, topic, mode="implicit", client_id=None):
    settings = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "share.acknowledgement.mode": mode,
    }
    if client_id:
        settings["client.id"] = client_id
    c = ShareConsumer(settings)
    c.subscribe([topic])
    return c


def records(batch):
    out = []
    for m in batch or []:
        if m.error():
            raise KafkaException(m.error())
        out.append(m)
    return out


def split(bootstrap, topic, group, mode, count, members):
    seen = {}
    lock = threading.Lock()
    done = threading.Event()

    def member(index):
        c = consumer(bootstrap, group, topic, mode)
        deadline = time.monotonic() + TIMEOUT
        try:
            while not done.is_set() and time.monotonic() < deadline:
                for m in records(c.poll(0.5)):
                    with lock:
                        seen.setdefault(m.key().decode(), []).append(index)
                        if len(seen) >= count:
                            done.set()
                    if mode == "explicit":
                        c.acknowledge(m)
                if mode == "explicit":
                    c.commit_sync()
            # Implicit mode accepts a poll's records at the next poll or commit; close
            # alone would release the last poll's.
            c.commit_sync()
        finally:
            c.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in range(members)]
    for t in threads:
        t.start()
    # Every member joins and learns its partitions (heartbeats every 500 ms) before the
    # records come.
    time.sleep(4)
    produce(bootstrap, topic, count, "split")
    for t in threads:
        t.join()
    deliveries = sum(len(v) for v in seen.values())
    holders = len({i for v in seen.values() for i in v})
    print(f"seen {deliveries} distinct {len(seen)} members-with-records {holders}")
    c = consumer(bootstrap, group, topic)
    left = 0
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        left += len(records(c.poll(0.5)))
    c.commit_sync()
    c.close()
    print(f"left {left}")


def poll_until(c, want, seconds=TIMEOUT):
    """Polls until `want(batch)` is true for a batch; returns it (or [] on timeout)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        batch = records(c.poll(0.5))
        if batch and want(batch):
            return batch
        for m in batch:
            c.acknowledge(m, AcknowledgeType.RELEASE)
    return []


def redeliver(bootstrap, topic, group):
    produce(bootstrap, topic, 2, "re")
    c = consumer(bootstrap, group, topic, "explicit")
    got = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < 2 and time.monotonic() < deadline:
        for m in records(c.poll(0.5)):
            if len(got) == 0:
                c.acknowledge(m, AcknowledgeType.RELEASE)
            elif len(got) == 1:
                c.acknowledge(m, AcknowledgeType.REJECT)
            else:
                c.acknowledge(m, AcknowledgeType.RELEASE)
            got.append((m.key().decode(), m.delivery_count()))
        c.commit_sync()
    released, rejected = got[0][0], got[1][0]
    again = {}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for m in records(c.poll(0.5)):
            again.setdefault(m.key().decode(), m.delivery_count())
            c.acknowledge(m)
        c.commit_sync()
    c.close()
    print(f"released again {again.get(released)}")
    print(f"rejected again {rejected in again}")


def expire(bootstrap, topic, group, lock_ms):
    produce(bootstrap, topic, 6, "ex", partitions=1)
    first = consumer(bootstrap, group, topic, "explicit")
    held = []
    deadline = time.monotonic() + TIMEOUT
    while not held and time.monotonic() < deadline:
        held = records(first.poll(0.5))
    keys = {m.key().decode() for m in held}
    # The first member keeps heartbeating (librdkafka's thread) but never acknowledges.
    second = consumer(bootstrap, group, topic, "explicit")
    again = {}
    deadline = time.monotonic() + lock_ms / 1000 + TIMEOUT
    while not keys <= set(again) and time.monotonic() < deadline:
        for m in records(second.poll(0.5)):
            again.setdefault(m.key().decode(), m.delivery_count())
            second.acknowledge(m)
        second.commit_sync()
    counts = {again[k] for k in keys if k in again}
    print(f"redelivered {len(keys & set(again))} of {len(keys)} count {','.join(map(str, sorted(counts)))}")
    second.close()
    first.close()


def limit(bootstrap, topic, group):
    produce(bootstrap, topic, 1, "lim")
    c = consumer(bootstrap, group, topic, "explicit")
    deliveries = 0
    deadline = time.monotonic() + TIMEOUT
    while deliveries < 2 and time.monotonic() < deadline:
        for m in records(c.poll(0.5)):
            deliveries = m.delivery_count()
            c.acknowledge(m, AcknowledgeType.RELEASE)
        c.commit_sync()
    print(f"deliveries {deliveries}")
    after = []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        after += records(c.poll(0.5))
    c.close()
    print(f"after limit {'none' if not after else len(after)}")


def hold(bootstrap, topic, group):
    produce(bootstrap, topic, 60, "crash", partitions=1)
    c = consumer(bootstrap, group, topic, "explicit")
    batch = []
    deadline = time.monotonic() + TIMEOUT
    while not batch and time.monotonic() < deadline:
        batch = records(c.poll(0.5))
    half = len(batch) // 2
    for m in batch[:half]:
        c.acknowledge(m)
    c.commit_sync()
    print("accepted " + ",".join(m.key().decode() for m in batch[:half]))
    print("held " + ",".join(m.key().decode() for m in batch[half:]))
    sys.stdout.flush()
    # Gone without a word: the held records stay acquired until Ferry frees them.
    os._exit(0)


def drain(bootstrap, topic, group, accepted, held):
    accepted, held = set(accepted.split(",")), set(held.split(","))
    c = consumer(bootstrap, group, topic, "explicit")
    got = {}
    deadline = time.monotonic() + TIMEOUT
    while len(got) < 60 - len(accepted) and time.monotonic() < deadline:
        for m in records(c.poll(0.5)):
            got.setdefault(m.key().decode(), m.delivery_count())
            c.acknowledge(m)
        c.commit_sync()
    c.close()
    counts = sorted({got[k] for k in held if k in got})
    print(f"accepted again {len(accepted & set(got))}")
    print(f"held again {len(held & set(got))} of {len(held)} counts {counts}")
    print(f"total {len(got)} of {60 - len(accepted)}")


def dead_letters(bootstrap, topic, group):
    produce(bootstrap, topic, 3, "dl", partitions=1)
    c = consumer(bootstrap, group, topic, "explicit")
    settled = {}
    deadline = time.monotonic() + TIMEOUT
    while len(settled) < 3 and time.monotonic() < deadline:
        for m in records(c.poll(0.5)):
            key = m.key().decode()
            trace("acquired", key, "offset", m.offset(), "count", m.delivery_count())
            if key == "dl-0":
                c.acknowledge(m, AcknowledgeType.REJECT)
                settled[key] = "rejected"
            elif key == "dl-1":
                # Released until the delivery count limit (2) archives it.
                c.acknowledge(m, AcknowledgeType.RELEASE)
                if m.delivery_count() >= 2:
                    settled[key] = "limit"
            else:
                c.acknowledge(m)
                settled[key] = "accepted"
        c.commit_sync()
    trace("settled", settled)
    c.close()
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{group}-reader",
            "auto.offset.reset": "earliest",
        }
    )
    reader.subscribe([f"dlq.{topic}"])
    seen = []
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < 2 and time.monotonic() < deadline:
        m = reader.poll(0.5)
        if m is None or m.error():
            continue
        h = {k: v.decode() for k, v in m.headers() or []}
        trace("dead letter", m.value().decode(), h)
        seen.append(
            f"{m.value().decode()} reason {h.get('ferry.dlq.reason')} "
            f"count {h.get('ferry.dlq.delivery.count')} from {h.get('ferry.dlq.topic')}"
            f"/{h.get('ferry.dlq.partition')}@{h.get('ferry.dlq.offset')} "
            f"group {h.get('ferry.dlq.group')}"
        )
    reader.close()
    for line in sorted(seen):
        print(line)


def transactions(bootstrap, topic, group):
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{group}-txn"})
    producer.init_transactions(TIMEOUT)
    for outcome in ("aborted", "committed"):
        producer.begin_transaction()
        for i in range(5):
            producer.produce(topic, key=f"{outcome}-{i}", value=outcome, partition=0)
        if outcome == "aborted":
            producer.abort_transaction(TIMEOUT)
        else:
            producer.commit_transaction(TIMEOUT)
    c = consumer(bootstrap, group, topic, "explicit")
    seen = []
    deadline = time.monotonic() + TIMEOUT
    quiet_until = None
    while time.monotonic() < deadline:
        for m in records(c.poll(0.5)):
            seen.append(m.key().decode())
            c.acknowledge(m)
        c.commit_sync()
        if len([k for k in seen if k.startswith("committed")]) >= 5 and quiet_until is None:
            quiet_until = time.monotonic() + 2
        if quiet_until is not None and time.monotonic() > quiet_until:
            break
    c.close()
    committed = len([k for k in seen if k.startswith("committed")])
    aborted = len([k for k in seen if k.startswith("aborted")])
    print(f"committed {committed} aborted {aborted} deliveries {len(seen)}")


def figures(bootstrap, topic, group, count):
    produce(bootstrap, topic, count, "fig", partitions=1)
    c = consumer(bootstrap, group, topic, "explicit", client_id="figures-member")
    batch = []
    deadline = time.monotonic() + TIMEOUT
    while not batch and time.monotonic() < deadline:
        batch = records(c.poll(0.5))
    assert len(batch) > 5, f"a first batch of {len(batch)} records"
    for m in batch[:2]:
        c.acknowledge(m, AcknowledgeType.REJECT)
    for m in batch[2:5]:
        c.acknowledge(m)
    c.commit_sync()
    print(f"batch {len(batch)} from {batch[0].offset()}", flush=True)
    print("holding", flush=True)
    sys.stdin.readline()
    for m in batch[5:]:
        c.acknowledge(m)
    c.commit_sync()
    seen = len(batch)
    deadline = time.monotonic() + TIMEOUT
    while seen < count and time.monotonic() < deadline:
        for m in records(c.poll(0.5)):
            c.acknowledge(m)
            seen += 1
        c.commit_sync()
    c.close()
    print("accepted all", flush=True)


def main():
    bootstrap, scenario, topic, group, *rest = sys.argv[1:]
    settings = {"share.auto.offset.reset": "earliest"}
    if scenario == "split":
        # Members learn a new assignment on their next heartbeat.
        settings["share.heartbeat.interval.ms"] = "500"
    if scenario == "expire":
        settings["share.record.lock.duration.ms"] = rest[0]
    if scenario in ("limit", "dead-letters"):
        settings["share.delivery.count.limit"] = "2"
    if scenario == "dead-letters":
        settings["errors.deadletterqueue.topic.name"] = f"dlq.{topic}"
    if scenario == "transactions":
        settings["share.isolation.level"] = "read_committed"
    if scenario != "drain":
        one = scenario in ("expire", "hold", "dead-letters", "transactions", "figures")
        admin_setup(bootstrap, topic, group, settings, 1 if one else PARTITIONS)
    if scenario == "split":
        split(bootstrap, topic, group, rest[0], int(rest[1]), int(rest[2]))
    elif scenario == "redeliver":
        redeliver(bootstrap, topic, group)
    elif scenario == "expire":
        expire(bootstrap, topic, group, int(rest[0]))
    elif scenario == "limit":
        limit(bootstrap, topic, group)
    elif scenario == "dead-letters":
        dead_letters(bootstrap, topic, group)
    elif scenario == "transactions":
        transactions(bootstrap, topic, group)
    elif scenario == "hold":
        hold(bootstrap, topic, group)
    elif scenario == "drain":
        drain(bootstrap, topic, group, rest[0], rest[1])
    elif scenario == "figures":
        figures(bootstrap, topic, group, int(rest[0]))
    else:
        raise SystemExit(f"unknown scenario {scenario}")


if __name__ == "__main__":
    main()
