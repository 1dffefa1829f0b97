"""Ferry's own parts of the definitions, moved between two daemons with clients Ferry did
not write (requests, confluent-kafka): on A, a user made through the API (so with SCRAM
credentials), a topic with a setting, Kafka ACLs, a group's committed offsets and a
runtime route; A's export carries them all; B (which requires SASL on its Kafka listener)
imports it, and then the user logs in to B's Kafka front with SCRAM and reads the group's
offsets there, the topic has its setting, the ACLs and the route are B's. A second import
changes nothing; a document whose topic disagrees with B's is refused naming the field,
before anything changes. Prints ok when every check passed.

usage: management_definitions_ferry.py A_HTTP A_KAFKA B_HTTP B_KAFKA
"""
import sys, time
import requests
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

a_http, a_kafka, b_http, b_kafka = sys.argv[1:5]
AUTH = ("guest", "guest")
TOPIC, GROUP = "defs.t", "defs.g"

r = requests.put(f"{a_http}/api/users/kuser", json={"password": "kpw", "tags": ""}, auth=AUTH)
assert r.status_code == 201, r.text
admin = AdminClient({"bootstrap.servers": a_kafka})
for f in admin.create_topics([NewTopic(TOPIC, 2, 1, config={"retention.ms": "123456789"})]).values():
    f.result(30)
p = Producer({"bootstrap.servers": a_kafka, "acks": "all"})
for i in range(10):
    p.produce(TOPIC, value=f"v{i}", partition=i % 2)
assert p.flush(30) == 0
c = Consumer({"bootstrap.servers": a_kafka, "group.id": GROUP, "enable.auto.commit": False})
# The first commit may come before the client has found the group's coordinator.
for attempt in range(60):
    try:
        c.commit(offsets=[TopicPartition(TOPIC, 0, 3), TopicPartition(TOPIC, 1, 4)], asynchronous=False)
        break
    except KafkaException:
        if attempt == 59:
            raise
        time.sleep(0.5)
c.close()
# The ACLs last: once a resource has one, only the principals they name may use it.
acls = [AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:kuser", "*",
                   AclOperation.ALL, AclPermissionType.ALLOW),
        AclBinding(ResourceType.GROUP, GROUP, ResourcePatternType.LITERAL, "User:kuser", "*",
                   AclOperation.ALL, AclPermissionType.ALLOW)]
for f in admin.create_acls(acls).values():
    f.result(30)
route = {"from": {"kafka_topic": TOPIC}, "to": [{"amqp_exchange": "amq.fanout"}]}
r = requests.put(f"{a_http}/api/ferry/routes/defs-route", json=route, auth=AUTH)
assert r.status_code == 201, r.text

exported = requests.get(f"{a_http}/api/definitions", auth=AUTH).json()
section = exported["ferry"]
topic = next(t for t in section["kafka_topics"] if t["name"] == TOPIC)
assert topic["partitions"] == 2 and topic["configs"]["retention.ms"] == "123456789", topic
assert len([a for a in section["kafka_acls"] if a["principal"] == "User:kuser"]) == 2, section
offsets = {(o["group"], o["topic"], o["partition"]): o["offset"] for o in section["kafka_group_offsets"]}
assert offsets[(GROUP, TOPIC, 0)] == 3 and offsets[(GROUP, TOPIC, 1)] == 4, offsets
assert [r["name"] for r in section["routes"]] == ["defs-route"], section["routes"]
kuser = next(u for u in exported["users"] if u["name"] == "kuser")
assert kuser["scram_sha_256"] and kuser["scram_sha_512"], kuser

# A document whose topic disagrees with B's is refused before anything changes.
requests.post(f"{b_http}/api/definitions", json={"ferry": {"kafka_topics": [
    {"name": "clash.t", "partitions": 1}]}}, auth=AUTH).raise_for_status()
clash = dict(exported, ferry=dict(section, kafka_topics=section["kafka_topics"] + [
    {"name": "clash.t", "partitions": 3}]))
r = requests.post(f"{b_http}/api/definitions", json=clash, auth=AUTH)
assert r.status_code == 400, r.text
assert "ferry.kafka_topics" in r.json()["reason"] and "clash.t" in r.json()["reason"], r.text
assert requests.get(f"{b_http}/api/users/kuser", auth=AUTH).status_code == 404
assert requests.get(f"{b_http}/api/ferry/kafka/topics/{TOPIC}", auth=AUTH).status_code == 404

for attempt in range(2):
    r = requests.post(f"{b_http}/api/definitions", json=exported, auth=AUTH)
    assert r.status_code == 204, (attempt, r.text)

# The user logs in to B's Kafka front with SCRAM (B requires SASL) and reads the offsets.
def consumer(password):
    return Consumer({"bootstrap.servers": b_kafka, "group.id": GROUP,
                     "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
                     "sasl.username": "kuser", "sasl.password": password})
c = consumer("kpw")
committed = c.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=30)
assert [(t.partition, t.offset) for t in committed] == [(0, 3), (1, 4)], committed
c.close()
wrong = consumer("not-kpw")
try:
    wrong.committed([TopicPartition(TOPIC, 0)], timeout=10)
    raise AssertionError("a wrong SCRAM password was let in")
except KafkaException:
    pass
wrong.close()

shown = requests.get(f"{b_http}/api/ferry/kafka/topics/{TOPIC}", auth=AUTH).json()
assert len(shown["partitions"]) == 2 and shown["config"]["retention.ms"] == 123456789, shown
key = lambda a: sorted(a.items())
acls_a = sorted(map(key, requests.get(f"{a_http}/api/ferry/kafka/acls", auth=AUTH).json()))
acls_b = sorted(map(key, requests.get(f"{b_http}/api/ferry/kafka/acls", auth=AUTH).json()))
assert acls_a == acls_b and len(acls_b) == 2, (acls_a, acls_b)
route_b = requests.get(f"{b_http}/api/ferry/routes/defs-route", auth=AUTH).json()
assert route_b["origin"] == "runtime", route_b
print("ok")
