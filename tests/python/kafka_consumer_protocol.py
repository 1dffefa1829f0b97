"""confluent-kafka (its own librdkafka build) consuming with the consumer group protocol of
KIP-848 against Ferry and describing the group with its AdminClient; driven by
tests/kafka/consumer_groups.rs.

kafka_consumer_protocol.py BOOTSTRAP TOPIC GROUP
    Creates TOPIC (4 partitions), produces 40 records, and has two consumers of GROUP
    (group.protocol=consumer, group.remote.assignor=range) read them all. Then prints:

    read <n> records
    describe type=<type> state=<state> assignor=<name> members=<n>
        DescribeConsumerGroups (ConsumerGroupDescribe)
    member <assignment, "topic:partition,..."> target=<same for the target>
        one line per member, sorted by assignment
    listed consumer=<ids of GROUP among type CONSUMER> classic=<among type CLASSIC>
        ListConsumerGroups filtered by group type (ListGroups v5)
    after close state=<state> members=<n>
        DescribeConsumerGroups once both consumers closed (their leave heartbeats)
"""

import sys
import time

from confluent_kafka import Consumer, ConsumerGroupType, Producer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap, topic, group = sys.argv[1:4]
conf = {"bootstrap.servers": bootstrap, "broker.address.family": "v4"}
admin = AdminClient(conf)
admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic].result(30)

producer = Producer(conf)
for i in range(40):
    producer.produce(topic, key=str(i).encode(), value=str(i).encode(), partition=i % 4)
assert producer.flush(30) == 0

consumers = [
    Consumer(
        {
            **conf,
            "group.id": group,
            "group.protocol": "consumer",
            "group.remote.assignor": "range",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    for _ in range(2)
]
for c in consumers:
    c.subscribe([topic])

seen = set()
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    for c in consumers:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            seen.add(int(m.value()))
    assigned = [len(c.assignment()) for c in consumers]
    if len(seen) == 40 and assigned == [2, 2]:
        break
print(f"read {len(seen)} records")


def parts(tps):
    return ",".join(sorted(f"{tp.topic}:{tp.partition}" for tp in tps))


# The members' last acknowledgements may still be on their way: until the group is stable.
deadline = time.monotonic() + 30
while True:
    described = admin.describe_consumer_groups([group])[group].result(30)
    if described.state.name == "STABLE" or time.monotonic() > deadline:
        break
    time.sleep(0.2)
print(
    f"describe type={described.type.name} state={described.state.name} "
    f"assignor={described.partition_assignor} members={len(described.members)}"
)
for m in sorted(described.members, key=lambda m: parts(m.assignment.topic_partitions)):
    print(
        f"member {parts(m.assignment.topic_partitions)} "
        f"target={parts(m.target_assignment.topic_partitions)}"
    )


def listed(kind):
    result = admin.list_consumer_groups(types={kind}).result(30)
    return ",".join(sorted(g.group_id for g in result.valid if g.group_id == group))


print(
    f"listed consumer={listed(ConsumerGroupType.CONSUMER)} "
    f"classic={listed(ConsumerGroupType.CLASSIC)}"
)

for c in consumers:
    c.close()
after = admin.describe_consumer_groups([group])[group].result(30)
print(f"after close state={after.state.name} members={len(after.members)}")
