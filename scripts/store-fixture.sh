#!/usr/bin/env bash
# Makes a store fixture for the upgrade test (tests/daemon/upgrade.rs): runs the given
# ferry binary on a fresh store, writes known content through real clients (pika,
# confluent-kafka, the management API), stops it with SIGTERM and packs its data directory
# as OUT (a .tar.gz). Run it with each release's binary and keep the file in
# tests/daemon/data/, so every later Ferry is tested against the stores earlier ones left.
#
#   scripts/store-fixture.sh BIN OUT.tar.gz
#
# The content (the test checks each item):
# - user fixture-user / fixture-pass, tag management, full permissions on vhost /;
# - durable topic exchange fixture.x bound to durable queue fixture.q with fixture.#;
# - 100 persistent messages in fixture.q: body m0..m99, header n = i, content type
#   text/plain, published to fixture.x with routing key fixture.old;
# - Kafka topic fixture.t, 3 partitions, retention.ms 86400000: 60 records r0..r59, key
#   k(i % 6), header n = i, in partition i % 3;
# - consumer group fixture.g with offset 10 committed on each partition.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -eq 2 ]] || { sed -n '8p' "$0" >&2; exit 2; }
bin=$(realpath "$1")
out=$(realpath -m "$2")

work=$(mktemp -d)
pid=
cleanup() {
  [[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
amqp=$(free_port) kafka=$(free_port) metrics=$(free_port) management=$(free_port)
FERRY__AMQP__LISTEN=127.0.0.1:$amqp FERRY__KAFKA__LISTEN=127.0.0.1:$kafka \
  FERRY__METRICS__LISTEN=127.0.0.1:$metrics FERRY__MANAGEMENT__LISTEN=127.0.0.1:$management \
  FERRY__STORE__PATH=$work/data "$bin" run --config config/ferry.toml >"$work/log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$metrics/healthz" >/dev/null && break
  sleep 0.2
done
curl -sf "http://127.0.0.1:$metrics/healthz" >/dev/null || { cat "$work/log" >&2; exit 1; }

python3 - "$amqp" "$kafka" "$management" <<'EOF'
import sys, time, pika, requests
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

amqp, kafka, management = sys.argv[1:4]
api = f"http://127.0.0.1:{management}/api"
auth = ("guest", "guest")
r = requests.put(f"{api}/users/fixture-user", json={"password": "fixture-pass", "tags": "management"}, auth=auth)
assert r.status_code in (201, 204), r.text
r = requests.put(f"{api}/permissions/%2f/fixture-user", json={"configure": ".*", "write": ".*", "read": ".*"}, auth=auth)
assert r.status_code in (201, 204), r.text

c = pika.BlockingConnection(pika.URLParameters(f"amqp://guest:guest@127.0.0.1:{amqp}/%2f"))
ch = c.channel()
ch.confirm_delivery()
ch.exchange_declare("fixture.x", "topic", durable=True)
ch.queue_declare("fixture.q", durable=True)
ch.queue_bind("fixture.q", "fixture.x", "fixture.#")
for i in range(100):
    props = pika.BasicProperties(delivery_mode=2, content_type="text/plain", headers={"n": i})
    ch.basic_publish("fixture.x", "fixture.old", f"m{i}".encode(), props)
c.close()

bootstrap = {"bootstrap.servers": f"127.0.0.1:{kafka}"}
topic = NewTopic("fixture.t", 3, 1, config={"retention.ms": "86400000"})
admin = AdminClient(bootstrap)
for f in admin.create_topics([topic]).values():
    f.result(30)
p = Producer({**bootstrap, "acks": "all", "enable.idempotence": True})
for i in range(60):
    p.produce("fixture.t", key=f"k{i % 6}", value=f"r{i}", partition=i % 3, headers=[("n", str(i).encode())])
assert p.flush(30) == 0
consumer = Consumer({**bootstrap, "group.id": "fixture.g", "enable.auto.commit": False})
consumer.commit(offsets=[TopicPartition("fixture.t", p, 10) for p in range(3)], asynchronous=False)
consumer.close()
EOF

kill -TERM "$pid"
wait "$pid" || { cat "$work/log" >&2; exit 1; }
pid=
tar -C "$work" -czf "$out" data
echo "store-fixture.sh: wrote $out ($("$bin" --version))"
