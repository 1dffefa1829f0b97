"""A large record with kafka-python, driven by tests/kafka/large.rs: creates TOPIC (one
partition) with max.message.bytes at 128 MiB, produces a small record, one of SIZE_MIB MiB
and another small one with acks=all, then reads the partition from its beginning with the
consumer's default max_partition_fetch_bytes (1 MiB), so the large batch comes as the first
of its fetch.

Usage:
    kafka_large.py BOOTSTRAP TOPIC SIZE_MIB

Prints one JSON list: for each record read, [offset, length, whether its SHA-256 matches
what was produced].
"""
import hashlib
import json
import os
import sys

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

TIMEOUT_S = 60
MIB = 1024 * 1024

bootstrap, topic, size_mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="py-admin")
admin.create_topics(
    [NewTopic(topic, 1, 1, topic_configs={"max.message.bytes": str(128 * MIB)})]
)
admin.close()

values = [b"first", os.urandom(size_mib * MIB), b"last"]
producer = KafkaProducer(
    bootstrap_servers=bootstrap,
    acks="all",
    client_id="py-producer",
    max_request_size=(size_mib + 1) * MIB,
)
for value in values:
    producer.send(topic, key=b"k", value=value, partition=0).get(timeout=TIMEOUT_S)
producer.close()

consumer = KafkaConsumer(
    bootstrap_servers=bootstrap, client_id="py-consumer", enable_auto_commit=False
)
partition = TopicPartition(topic, 0)
consumer.assign([partition])
consumer.seek_to_beginning(partition)
read = []
while len(read) < len(values):
    batches = consumer.poll(timeout_ms=TIMEOUT_S * 1000)
    if not batches:
        break
    for record in batches.get(partition, []):
        digest = hashlib.sha256(values[len(read)]).digest()
        read.append(
            [record.offset, len(record.value), hashlib.sha256(record.value).digest() == digest]
        )
consumer.close()
print(json.dumps(read))
