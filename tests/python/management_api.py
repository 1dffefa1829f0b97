"""Drives Ferry's management API with clients Ferry did not write: RabbitMQ's own
rabbitmqadmin (downloaded from the test's private RabbitMQ node), Python's requests, and pika.
Where the answer's shape matters, the same request goes to the RabbitMQ node too and the
keys Ferry's answer must have are compared. Prints OK when every check passed.

usage: management_api.py FERRY_HTTP FERRY_AMQP RABBIT_HTTP RABBIT_AMQP RABBITMQADMIN
"""
import json, subprocess, sys, urllib.parse
import pika, requests

ferry_http, ferry_amqp, rabbit_http, rabbit_amqp, admin = sys.argv[1:6]
AUTH = ("guest", "guest")
port = urllib.parse.urlparse(ferry_http).port


def rabbitmqadmin(*args):
    out = subprocess.run([sys.executable, admin, "-H", "127.0.0.1", "-P", str(port),
                          "-u", "guest", "-p", "guest", "-f", "raw_json", *args],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, (args, out.stdout, out.stderr)
    return out.stdout


def publish(uri, queue, bodies):
    """Publishes `bodies` to `queue` (declared durable); returns the open connection."""
    c = pika.BlockingConnection(pika.URLParameters(uri))
    ch = c.channel()
    ch.queue_declare(queue, durable=True)
    for b in bodies:
        ch.basic_publish("", queue, b)
    return c


def same_keys(path, ferry_value, rabbit_value, keys):
    for k in keys:
        assert k in ferry_value, (path, k, ferry_value)
        assert k in rabbit_value, (path, k, rabbit_value)
        assert type(ferry_value[k]) is type(rabbit_value[k]), (path, k, ferry_value[k], rabbit_value[k])


# Declare, bind, publish through rabbitmqadmin; publish more with pika.
rabbitmqadmin("declare", "queue", "name=mq", "durable=true")
rabbitmqadmin("declare", "exchange", "name=mx", "type=fanout")
rabbitmqadmin("declare", "binding", "source=mx", "destination=mq", "routing_key=rk")
rabbitmqadmin("publish", "exchange=mx", "routing_key=rk", "payload=hello")
publish(ferry_amqp, "mq", [b"m0", b"m1"]).close()
# Open until RabbitMQ has sampled it: a channel's publishes reach the queue's message_stats
# only through the channel's statistics, emitted every 5 s while it lives.
rabbit_publisher = publish(rabbit_amqp, "mq-compare", [b"m0"])

queues = json.loads(rabbitmqadmin("list", "queues"))
mq = next(q for q in queues if q["name"] == "mq")
assert (mq["messages"], mq["messages_ready"], mq["messages_unacknowledged"]) == (3, 3, 0), mq
assert mq["message_stats"]["publish"] == 3, mq
QUEUE_KEYS = ["name", "vhost", "durable", "auto_delete", "exclusive", "arguments", "type",
              "state", "consumers", "messages", "messages_ready", "messages_unacknowledged",
              "messages_details", "message_stats"]
# RabbitMQ fills a new queue's statistics (and its state) in over its 5 s sampling
# interval, later on a busy node: wait until every compared key is there.
for _ in range(60):
    rabbit_q = requests.get(f"{rabbit_http}/api/queues/%2F/mq-compare", auth=AUTH).json()
    if all(k in rabbit_q for k in QUEUE_KEYS):
        break
    rabbit_publisher.sleep(1)
rabbit_publisher.close()
ferry_q = requests.get(f"{ferry_http}/api/queues/%2F/mq", auth=AUTH).json()
same_keys("queue", ferry_q, rabbit_q, QUEUE_KEYS)
same_keys("queue.message_stats", ferry_q["message_stats"], rabbit_q["message_stats"],
          ["publish", "publish_details"])
for path in ["/api/overview", "/api/whoami", "/api/vhosts", "/api/exchanges", "/api/bindings/%2F"]:
    f = requests.get(ferry_http + path, auth=AUTH).json()
    r = requests.get(rabbit_http + path, auth=AUTH).json()
    assert type(f) is type(r), path
    if isinstance(f, list):
        f, r = f[0], r[0]
    same_keys(path, f, r, [k for k in r if k in ("name", "tags", "vhost", "type", "durable",
                                                   "source", "destination", "routing_key",
                                                   "properties_key", "management_version",
                                                   "rabbitmq_version", "cluster_name", "node",
                                                   "object_totals", "queue_totals")
                                or (k == "message_stats" and path == "/api/overview")])

bindings = json.loads(rabbitmqadmin("list", "bindings"))
assert any(b["source"] == "mx" and b["destination"] == "mq" and b["routing_key"] == "rk"
           for b in bindings), bindings

got = json.loads(rabbitmqadmin("get", "queue=mq", "count=2", "ackmode=ack_requeue_true"))
assert [m["payload"] for m in got] == ["hello", "m0"], got
got = requests.post(f"{ferry_http}/api/queues/%2F/mq/get", auth=AUTH,
                    json={"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"}).json()
assert got[0]["payload"] == "hello" and got[0]["redelivered"] is True, got
assert requests.get(f"{ferry_http}/api/queues/%2F/mq", auth=AUTH).json()["messages"] == 2

# Bad input: refused with the field named, nothing changed.
r = requests.put(f"{ferry_http}/api/queues/%2F/mq-bad", auth=AUTH, json={"durable": "yes"})
assert r.status_code == 400 and "durable" in r.json()["reason"], r.text
r = requests.put(f"{ferry_http}/api/queues/%2F/mq-bad", auth=AUTH, json={"durable": True, "colour": 1})
assert r.status_code == 400 and "colour" in r.json()["reason"], r.text
r = requests.put(f"{ferry_http}/api/queues/%2F/mq-bad", auth=AUTH, data="{bad")
assert r.status_code == 400 and r.json()["error"] == "bad_request", r.text
assert requests.get(f"{ferry_http}/api/queues/%2F/mq-bad", auth=AUTH).status_code == 404
for base in (ferry_http, rabbit_http):
    r = requests.get(f"{base}/api/queues/%2F/no-such-queue", auth=AUTH)
    assert (r.status_code, r.json()) == (404, {"error": "Object Not Found", "reason": "Not Found"}), r.text
    r = requests.get(f"{base}/api/overview", auth=("guest", "wrong"))
    assert (r.status_code, r.json()) == (401, {"error": "not_authorized", "reason": "Login failed"}), r.text

rabbitmqadmin("purge", "queue", "name=mq")
assert requests.get(f"{ferry_http}/api/queues/%2F/mq", auth=AUTH).json()["messages"] == 0

# A connection closed through the API: pika sees 320 with the reason.
c = pika.BlockingConnection(pika.URLParameters(ferry_amqp))
ch = c.channel()
conns = json.loads(rabbitmqadmin("list", "connections"))
assert len(conns) == 1 and conns[0]["user"] == "guest", conns
assert requests.get(f"{ferry_http}/api/channels", auth=AUTH).json()[0]["number"] == 1
name = urllib.parse.quote(conns[0]["name"], safe="")
r = requests.delete(f"{ferry_http}/api/connections/{name}", auth=AUTH, headers={"X-Reason": "bye now"})
assert r.status_code == 204, r.text
try:
    c.process_data_events(time_limit=5)
    raise AssertionError("the connection was not closed")
except pika.exceptions.ConnectionClosedByBroker as e:
    assert (e.reply_code, e.reply_text) == (320, "CONNECTION_FORCED - bye now"), e

assert requests.get(f"{ferry_http}/api/aliveness-test/%2F", auth=AUTH).json() == {"status": "ok"}
rabbitmqadmin("delete", "binding", "source=mx", "destination_type=queue", "destination=mq", "properties_key=rk")
rabbitmqadmin("delete", "queue", "name=mq")
rabbitmqadmin("delete", "exchange", "name=mx")
assert requests.get(f"{ferry_http}/api/queues/%2F/mq", auth=AUTH).status_code == 404
print("OK")
