"""kafka-python's transactional producer and read_committed consumer against a broker.

    kafka_txn.py produce BOOTSTRAP TOPIC   three transactions of five records to partition 0:
                                           a-* committed, b-* aborted, c-* committed
    kafka_txn.py read BOOTSTRAP TOPIC ISOLATION COUNT
                                           prints the first COUNT values of partition 0 read
                                           at ISOLATION (read_committed or read_uncommitted)
"""

import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def produce(bootstrap, topic):
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id="kafka-python-tx",
        request_timeout_ms=30000,
    )
    producer.init_transactions()
    for prefix, commit in (("a", True), ("b", False), ("c", True)):
        producer.begin_transaction()
        for i in range(5):
            producer.send(topic, value=f"{prefix}-{i}".encode(), partition=0)
        producer.flush()
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()


def read(bootstrap, topic, isolation, count):
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        enable_auto_commit=False,
    )
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    values = []
    deadline = time.monotonic() + 60
    while len(values) < count and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            values.extend(r.value.decode() for r in records)
    consumer.close()
    for v in values[:count]:
        print(v)


if __name__ == "__main__":
    command, bootstrap, topic = sys.argv[1:4]
    if command == "produce":
        produce(bootstrap, topic)
    else:
        read(bootstrap, topic, sys.argv[4], int(sys.argv[5]))
