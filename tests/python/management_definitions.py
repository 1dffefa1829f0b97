#!/usr/bin/env python3
"""Definitions from a real RabbitMQ into Ferry, with clients the project did not write.

    management_definitions.py RABBIT_HTTP FERRY_HTTP FERRY_AMQP_PORT PREFIX WORKDIR

RABBIT_HTTP is the suite's RabbitMQ management API (guest/guest), FERRY_HTTP Ferry's
(guest/guest, an administrator on loopback). On RabbitMQ, through its HTTP API (Python's
urllib): declare an exchange, a queue with arguments, bindings, a user with permissions and
topic permissions and a user without permissions, all named PREFIX-*; export RabbitMQ's
definitions, keep the PREFIX-* items (and a vhost PREFIX-vh with a queue, made there), and
import them into Ferry. Then require Ferry's export to hold the same users (hash and tags),
permissions, topic permissions, queues, exchanges and bindings, and the vhost with its
queue; log in to Ferry's AMQP front with pika as the imported users (the
one with permissions opens "/", the one without is refused); drive Ferry with RabbitMQ's
own rabbitmqadmin (downloaded from RABBIT_HTTP/cli/rabbitmqadmin into WORKDIR): declare a
user, a permission, a vhost and a delayed-message exchange, list them, delete the vhost,
export and import; and send bad
input — malformed JSON, an unknown field, a bad regex (beside a new vhost, which must not
appear), a missing vhost, deleting a configured vhost, a delayed-message exchange without
x-delayed-type, a non-administrator, a wrong
password — requiring a 4xx naming the reason and Ferry's definitions unchanged.
Prints "ok" when everything held.
"""

import base64
import json
import os
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request

import pika

RABBIT, FERRY, AMQP_PORT, PREFIX, WORKDIR = sys.argv[1:6]
PASSWORD = "s3cret-" + PREFIX


def call(base, method, path, body=None, user="guest", password="guest", raw=None):
    """(status, parsed JSON or text) of one request."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(base + path, data=data, method=method)
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    request.add_header("Authorization", "Basic " + token)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text


def ok(result, *statuses):
    status, body = result
    assert status in statuses, f"expected {statuses}, got {status}: {body}"
    return body


def q(name):
    return urllib.parse.quote(name, safe="")


def mine(definitions):
    """The PREFIX-* part of a definitions document, in a comparable order."""
    named = lambda items, key: sorted(
        (i for i in items if i[key].startswith(PREFIX)), key=lambda i: json.dumps(i, sort_keys=True)
    )
    return {
        "users": [
            {"name": u["name"], "password_hash": u["password_hash"], "tags": sorted(u["tags"])}
            for u in named(definitions["users"], "name")
        ],
        "permissions": named(definitions["permissions"], "user"),
        "topic_permissions": named(definitions["topic_permissions"], "user"),
        "queues": named(definitions["queues"], "name"),
        "exchanges": named(definitions["exchanges"], "name"),
        "bindings": named(definitions["bindings"], "source"),
    }


# 1. The topology and users on RabbitMQ.
x, queue, dlq, app, idle = (f"{PREFIX}-{n}" for n in ("x", "q", "dlq", "app", "idle"))
ok(call(RABBIT, "PUT", f"/api/exchanges/%2f/{q(x)}", {"type": "topic", "durable": True}), 201, 204)
ok(call(RABBIT, "PUT", f"/api/queues/%2f/{q(dlq)}", {"durable": True}), 201, 204)
ok(call(RABBIT, "PUT", f"/api/queues/%2f/{q(queue)}", {"durable": True, "arguments": {
    "x-max-priority": 5, "x-message-ttl": 60000, "x-dead-letter-exchange": "amq.direct",
    "x-dead-letter-routing-key": dlq}}), 201, 204)
ok(call(RABBIT, "POST", f"/api/bindings/%2f/e/{q(x)}/q/{q(queue)}", {"routing_key": "order.*"}), 201)
ok(call(RABBIT, "POST", f"/api/bindings/%2f/e/{q(x)}/e/amq.fanout", {"routing_key": "all"}), 201)
ok(call(RABBIT, "PUT", f"/api/users/{q(app)}", {"password": PASSWORD, "tags": "management"}), 201, 204)
ok(call(RABBIT, "PUT", f"/api/users/{q(idle)}", {"password": PASSWORD, "tags": ""}), 201, 204)
ok(call(RABBIT, "PUT", f"/api/permissions/%2f/{q(app)}",
        {"configure": f"^{PREFIX}-app-", "write": ".*", "read": f"^{PREFIX}"}), 201, 204)
ok(call(RABBIT, "PUT", f"/api/topic-permissions/%2f/{q(app)}",
        {"exchange": x, "write": "^order\\.", "read": ".*"}), 201, 204)
vh, vq = f"{PREFIX}-vh", f"{PREFIX}-vq"
ok(call(RABBIT, "PUT", f"/api/vhosts/{q(vh)}", {"description": "orders of " + PREFIX, "tags": "eu,prod"}), 201, 204)
ok(call(RABBIT, "PUT", f"/api/queues/{q(vh)}/{q(vq)}", {"durable": True}), 201, 204)
ok(call(RABBIT, "PUT", f"/api/permissions/{q(vh)}/{q(app)}", {"configure": ".*", "write": ".*", "read": ".*"}), 201, 204)

# 2. RabbitMQ's export, this test's part, into Ferry.
exported = ok(call(RABBIT, "GET", "/api/definitions"), 200)
keep = mine(exported)
document = dict(exported)
for field in ("users", "permissions", "topic_permissions", "queues", "exchanges", "bindings"):
    key = {"users": "name", "permissions": "user", "topic_permissions": "user",
           "queues": "name", "exchanges": "name", "bindings": "source"}[field]
    document[field] = [i for i in exported[field] if i[key].startswith(PREFIX)]
document["vhosts"] = [{"name": "/"}] + [v for v in exported["vhosts"] if v["name"] == vh]
document["parameters"], document["policies"] = [], []
ok(call(FERRY, "POST", "/api/definitions", document), 201, 204)
assert mine(ok(call(FERRY, "GET", "/api/definitions"), 200)) == keep, (
    mine(ok(call(FERRY, "GET", "/api/definitions"), 200)), keep)
assert ok(call(FERRY, "GET", f"/api/queues/%2f/{q(queue)}"), 200)["arguments"]["x-max-priority"] == 5
# RabbitMQ 3.10 exports a vhost by its name only: Ferry makes it, with the queue in it.
ok(call(FERRY, "GET", f"/api/vhosts/{q(vh)}"), 200)
assert ok(call(FERRY, "GET", f"/api/queues/{q(vh)}/{q(vq)}"), 200)["durable"] is True

# 3. The imported users on Ferry's AMQP front.
params = lambda user: pika.ConnectionParameters(
    "127.0.0.1", int(AMQP_PORT), "/", pika.PlainCredentials(user, PASSWORD),
    connection_attempts=1, socket_timeout=10)
connection = pika.BlockingConnection(params(app))
channel = connection.channel()
channel.queue_declare(f"{PREFIX}-app-own", durable=True)
connection.close()
try:
    pika.BlockingConnection(params(idle))
    raise AssertionError("a user without permissions on / opened it")
except (pika.exceptions.ProbableAccessDeniedError, pika.exceptions.ConnectionClosedByBroker) as e:
    assert "530" in str(e) or "NOT_ALLOWED" in str(e) or "access" in str(e).lower(), e

# 4. rabbitmqadmin, as the RabbitMQ team ships it, against Ferry.
admin = os.path.join(WORKDIR, "rabbitmqadmin")
with urllib.request.urlopen(RABBIT + "/cli/rabbitmqadmin", timeout=30) as response:
    open(admin, "wb").write(response.read())
port = urllib.parse.urlparse(FERRY).port


def rabbitmqadmin(*args):
    out = subprocess.run([sys.executable, admin, "-H", "127.0.0.1", "-P", str(port), "-u", "guest",
                          "-p", "guest", "-f", "raw_json", *args],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"rabbitmqadmin {args}: {out.stdout} {out.stderr}"
    return out.stdout


cli_user = f"{PREFIX}-cli"
rabbitmqadmin("declare", "user", f"name={cli_user}", f"password={PASSWORD}", "tags=monitoring")
rabbitmqadmin("declare", "permission", "vhost=/", f"user={cli_user}", "configure=", "write=.*", "read=.*")
assert cli_user in [u["name"] for u in json.loads(rabbitmqadmin("list", "users"))]
assert {"user": cli_user, "vhost": "/", "configure": "", "write": ".*", "read": ".*"} in json.loads(
    rabbitmqadmin("list", "permissions"))
cli_vhost = f"{PREFIX}-cli-vh"
rabbitmqadmin("declare", "vhost", f"name={cli_vhost}")
assert cli_vhost in [v["name"] for v in json.loads(rabbitmqadmin("list", "vhosts"))]
rabbitmqadmin("delete", "vhost", f"name={cli_vhost}")
assert cli_vhost not in [v["name"] for v in json.loads(rabbitmqadmin("list", "vhosts"))]
# A delayed-message exchange, declared as the plugin's users declare one; the export and
# import below carry it.
delayed = f"{PREFIX}-later"
rabbitmqadmin("declare", "exchange", f"name={delayed}", "type=x-delayed-message", "durable=true",
              'arguments={"x-delayed-type": "topic"}')
listed = {x["name"]: x for x in json.loads(rabbitmqadmin("list", "exchanges"))}
assert listed[delayed]["type"] == "x-delayed-message", listed[delayed]
assert listed[delayed]["arguments"] == {"x-delayed-type": "topic"}, listed[delayed]
saved = os.path.join(WORKDIR, "ferry-definitions.json")
rabbitmqadmin("export", saved)
before = ok(call(FERRY, "GET", "/api/definitions"), 200)
assert json.load(open(saved)) == before
rabbitmqadmin("import", saved)
assert ok(call(FERRY, "GET", "/api/definitions"), 200) == before

# 5. Bad input: a 4xx naming the reason, nothing changed.
def refused(status, needle, method, path, body=None, raw=None, user="guest", password="guest"):
    got, answer = call(FERRY, method, path, body, user, password, raw)
    assert got == status, f"{method} {path}: expected {status}, got {got}: {answer}"
    assert needle in json.dumps(answer), f"{needle!r} not in {answer}"
    assert ok(call(FERRY, "GET", "/api/definitions"), 200) == before, "a refused request changed something"


new_user = {"name": f"{PREFIX}-new", "password_hash": "", "tags": []}
refused(400, "not valid JSON", "POST", "/api/definitions", raw=b"{\"users\": [")
refused(400, "quues", "POST", "/api/definitions", {"users": [new_user], "quues": []})
refused(400, "permissions[0].configure", "POST", "/api/definitions", {
    "users": [new_user],
    "permissions": [{"user": new_user["name"], "vhost": "/", "configure": "(", "write": "", "read": ""}]})
refused(400, "permissions[0].configure", "POST", "/api/definitions", {
    "users": [new_user], "vhosts": [{"name": f"{PREFIX}-not-made"}],
    "permissions": [{"user": new_user["name"], "vhost": "/", "configure": "(", "write": "", "read": ""}]})
refused(400, "vhost 'nowhere'", "POST", "/api/definitions", {"users": [new_user], "queues": [
    {"name": "q", "vhost": "nowhere", "durable": True, "auto_delete": False, "arguments": {}}]})
refused(400, "amqp.vhosts", "DELETE", "/api/vhosts/%2F")
refused(400, "configure", "PUT", f"/api/permissions/%2f/{q(app)}",
        {"configure": "[", "write": ".*", "read": ".*"})
refused(400, "tags", "PUT", f"/api/users/{q(PREFIX)}-x", {"password": "p"})
refused(400, "x-delayed-type", "PUT", f"/api/exchanges/%2f/{q(PREFIX)}-no-type",
        {"type": "x-delayed-message", "durable": True})
refused(401, "Not administrator user", "PUT", f"/api/users/{q(PREFIX)}-y",
        {"password": "p", "tags": ""}, user=cli_user, password=PASSWORD)
refused(401, "Login failed", "POST", "/api/definitions", {"users": [new_user]}, password="wrong")
print("ok")
