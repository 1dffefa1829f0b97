"""The management API's Kafka endpoints read with urllib, as a script or dashboard would:
a monitoring user and an administrator made through the API see topics, records, groups and the Kafka clients, a
`management` user is refused, only the administrator sees the ACLs (one made first with
kafka-python's admin client: User:alice may READ topics prefixed TOPIC-acl). Prints one
JSON object with what each request answered; the Rust test checks it against what it
produced and committed.

Usage: management_kafka.py FERRY_HTTP KAFKA_BOOTSTRAP TOPIC GROUP
"""
import json
import sys
import time
import urllib.parse

from kafka import KafkaProducer
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourceType,
)

import management_http

ferry_http, bootstrap, topic, group = sys.argv[1:5]

admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="py-acls", request_timeout_ms=30000)
created = admin.create_acls([ACL(
    principal="User:alice",
    host="*",
    operation=ACLOperation.READ,
    permission_type=ACLPermissionType.ALLOW,
    resource_pattern=ResourcePattern(ResourceType.TOPIC, f"{topic}-acl", ACLResourcePatternType.PREFIXED),
)])
assert created["succeeded"] and not created["failed"], created
admin.close()


def call(user, password, method, path, body=None):
    return management_http.call(ferry_http, method, path, body, user, password)


for name, tags in (("kmon", "monitoring"), ("kmgmt", "management")):
    status, _ = call("guest", "guest", "PUT", f"/api/users/{name}",
                     {"password": "secret", "tags": tags})
    assert status in (201, 204), (name, status)

quoted_topic = urllib.parse.quote(topic, safe="")
quoted_group = urllib.parse.quote(group, safe="")
answers = {}
for user in ("guest", "kmon", "kmgmt"):
    password = "guest" if user == "guest" else "secret"
    for what, path in (
        ("topics", "/api/ferry/kafka/topics"),
        ("topic", f"/api/ferry/kafka/topics/{quoted_topic}"),
        ("groups", "/api/ferry/kafka/groups"),
        ("group", f"/api/ferry/kafka/groups/{quoted_group}"),
        ("acls", "/api/ferry/kafka/acls"),
        ("missing_topic", "/api/ferry/kafka/topics/no-such-topic"),
        ("missing_group", "/api/ferry/kafka/groups/no-such-group"),
        ("records", f"/api/ferry/kafka/topics/{quoted_topic}/records?partition=0&offset=1&limit=2"),
        ("records_from_time", f"/api/ferry/kafka/topics/{quoted_topic}/records?timestamp=0&limit=1"),
        ("records_missing_partition", f"/api/ferry/kafka/topics/{quoted_topic}/records?partition=2"),
        ("records_missing_topic", "/api/ferry/kafka/topics/no-such-topic/records"),
        ("clients", "/api/ferry/kafka/clients"),
    ):
        status, body = call(user, password, "GET", path)
        if what == "topics" and status == 200:
            body = [t for t in body if t["name"] == topic]
        if what == "groups" and status == 200:
            body = [g for g in body if g["group_id"] == group]
        answers[f"{user} {what}"] = [status, body]


def client_ids(client_id):
    """The connection ids of the live Kafka clients that sent `client_id`."""
    status, listed = call("guest", "guest", "GET", "/api/ferry/kafka/clients")
    assert status == 200, listed
    return [c["id"] for c in listed if c["client_id"] == client_id]


producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="py-closed")
producer.partitions_for(topic)
target = client_ids("py-closed")[0]
path = f"/api/ferry/kafka/clients/{target}"
answers["close by kmon"] = call("kmon", "secret", "DELETE", path)[0]
answers["close by guest"] = call("guest", "guest", "DELETE", path)[0]
deadline = time.monotonic() + 10
while target in client_ids("py-closed") and time.monotonic() < deadline:
    time.sleep(0.1)
answers["closed still listed"] = target in client_ids("py-closed")
answers["close again"] = call("guest", "guest", "DELETE", path)[0]
producer.close()
print(json.dumps(answers))
