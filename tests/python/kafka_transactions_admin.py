"""kafka-python's KafkaAdminClient transaction tools (what kafka-transactions.sh offers)
against Ferry, driven by tests/kafka/admin.rs.

kafka_transactions_admin.py BOOTSTRAP TOPIC
    A transactional KafkaProducer (id TOPIC-tx) opens a transaction on TOPIC and sends one
    record, then one line per step:

    listed <id>:<state> ...
        list_transactions(), the ids sorted
    ongoing <id> ...
        list_transactions(state_filters=["Ongoing"])
    described state=<state> epoch=<n> partitions=<topic-partition,...> started=<yes|no>
        describe_transactions([TOPIC-tx])
    producers <producer id matches: yes|no> txn_start=<offset>
        describe_producers([TOPIC-0]): the producer writing the transaction
    hanging <n>
        find_hanging_transactions(): a transaction a minute old is not hanging
    committed state=<state>
        describe_transactions after the producer commits
"""

import sys

from kafka import KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient

bootstrap, topic = sys.argv[1], sys.argv[2]
txn_id = f"{topic}-tx"

producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id)
producer.init_transactions()
producer.begin_transaction()
producer.send(topic, b"open").get(timeout=30)

admin = KafkaAdminClient(bootstrap_servers=bootstrap)
listings = sorted(
    (t.transactional_id, t.state.value)
    for per_broker in admin.list_transactions().values()
    for t in per_broker
)
print("listed " + " ".join(f"{i}:{s}" for i, s in listings), flush=True)
ongoing = sorted(
    t.transactional_id
    for per_broker in admin.list_transactions(state_filters=["Ongoing"]).values()
    for t in per_broker
)
print("ongoing " + " ".join(ongoing), flush=True)

description = admin.describe_transactions([txn_id])[txn_id]
partitions = ",".join(sorted(f"{tp.topic}-{tp.partition}" for tp in description.topic_partitions))
print(
    f"described state={description.state.value} epoch={description.producer_epoch} "
    f"partitions={partitions} started={'yes' if description.transaction_start_time_ms > 0 else 'no'}",
    flush=True,
)

states = admin.describe_producers([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
writer = [p for p in states.active_producers if p.producer_id == description.producer_id]
print(
    f"producers {'yes' if writer else 'no'} "
    f"txn_start={writer[0].current_transaction_start_offset if writer else 'none'}",
    flush=True,
)
print(f"hanging {len(admin.find_hanging_transactions())}", flush=True)

producer.commit_transaction()
committed = admin.describe_transactions([txn_id])[txn_id]
print(f"committed state={committed.state.value}", flush=True)
producer.close()
admin.close()
