#!/usr/bin/env bash
# Makes the web UI's screenshots (one PNG per main page, the topic and group pages, and the
# overview in a 700 px window) with the driver of the browser test (tests/daemon/ui.rs): a
# `ferry run` on free loopback ports over a throwaway store, queues and a little traffic
# from pika and kafka-python, Debian's chromedriver, and the `screenshots` command of
# tests/python/ui_browser.py.
#
#   scripts/ui-screenshots.sh [OUT_DIR]      (default: docs/ui)
#
# Needs what scripts/setup.sh installs (chromium, chromium-driver, selenium, pika). Every
# process it starts runs in a session of its own and is stopped by its ID when it ends.
set -euo pipefail
cd "$(dirname "$0")/.."

out=${1:-docs/ui}
# Upper bound on each wait (Ferry's start, chromedriver's start).
WAIT_S=60

die() { echo "ui-screenshots.sh: $*" >&2; exit 1; }

work=$(mktemp -d)
started=()
cleanup() {
  for pid in "${started[@]}"; do
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

# Runs "$@" in the background in a session of its own (so its children go with it).
spawn() {
  setsid "$@" >>"$work/log" 2>&1 &
  started+=("$!")
  disown
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Waits until "$@" succeeds, up to WAIT_S seconds.
wait_for() {
  local what=$1; shift
  for _ in $(seq $((WAIT_S * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  cat "$work/log" >&2
  die "$what did not happen within $WAIT_S s"
}

cargo build --quiet --bin ferry
ferry=${CARGO_TARGET_DIR:-target}/debug/ferry

amqp=$(free_port) kafka=$(free_port) metrics=$(free_port) management=$(free_port)
spawn env FERRY__AMQP__LISTEN="127.0.0.1:$amqp" FERRY__KAFKA__LISTEN="127.0.0.1:$kafka" \
  FERRY__METRICS__LISTEN="127.0.0.1:$metrics" FERRY__MANAGEMENT__LISTEN="127.0.0.1:$management" \
  FERRY__STORE__PATH="$work/data" "$ferry" run --config config/ferry.toml
wait_for "Ferry's start" curl -sf "http://127.0.0.1:$metrics/healthz"

# Two routes for the Routes pages, added at runtime: 'audit-to-kafka' copies exchange
# 'events' to the Kafka topic 'audit'; 'billing-ledger' carries exchange 'billing' to
# exchange 'ledger', where no queue takes its messages, so they are dead-lettered.
route() {
  curl -sf -u guest:guest -X PUT -H 'content-type: application/json' -d "$2" \
    "http://127.0.0.1:$management/api/ferry/routes/$1" >/dev/null || die "cannot add route $1"
}
route audit-to-kafka '{"from": {"amqp_exchange": "events"}, "to": [{"kafka_topic": "audit"}], "retry_max_ms": 500}'
route billing-ledger '{"from": {"amqp_exchange": "billing"}, "to": [{"amqp_exchange": "ledger"}], "max_attempts": 1, "retry_max_ms": 500}'

# Traffic for the pages: 'orders' published and consumed with acks (the rate charts),
# 'invoices' filling up (depths), an idle second connection, three invoices for the
# billing route's dead letters; bounded to 5 minutes.
cat >"$work/traffic.py" <<'EOF'
import sys, time
import pika

def connect(name):
    parameters = pika.URLParameters(sys.argv[1])
    parameters.client_properties = {"connection_name": name}
    return pika.BlockingConnection(parameters)

idle = connect("billing-worker")
connection = connect("orders-service")
channel = connection.channel()
for queue in ("orders", "invoices", "audit-log"):
    channel.queue_declare(queue, durable=True)
channel.exchange_declare("events", "topic", durable=True)
channel.queue_bind("audit-log", "events", "#")
channel.exchange_declare("billing", "topic", durable=True)
channel.exchange_declare("ledger", "direct", durable=True)
connection.sleep(3)  # the routes bind their queues to the exchanges
for n in range(3):
    channel.basic_publish("billing", "invoice", f'{{"invoice": {n}, "ledger": "eu-1"}}'.encode())
for n in range(42):
    channel.basic_publish("", "invoices", f'{{"invoice": {n}, "amount": {n * 7 % 100}.50}}'.encode())
channel.basic_qos(prefetch_count=5)
channel.basic_consume("orders", lambda ch, method, _props, _body: ch.basic_ack(method.delivery_tag))
deadline = time.monotonic() + 300
n = 0
while time.monotonic() < deadline:
    n += 1
    channel.basic_publish("", "orders", f'{{"order": {n}}}'.encode())
    if n % 10 == 0:
        channel.basic_publish("events", "order.created", f'{{"order": {n}}}'.encode())
    connection.sleep(0.05)
EOF
spawn python3 "$work/traffic.py" "amqp://guest:guest@127.0.0.1:$amqp/%2f"

# Kafka traffic for the Kafka page: 'payments' produced, the group 'billing' consuming and
# committing part of it (so it shows a lag).
cat >"$work/kafka_traffic.py" <<'EOF'
import sys
from kafka import KafkaConsumer, KafkaProducer

producer = KafkaProducer(bootstrap_servers=sys.argv[1])
for n in range(120):
    producer.send("payments", key=str(n % 7).encode(), value=f'{{"payment": {n}}}'.encode())
producer.flush(timeout=30)
consumer = KafkaConsumer("payments", bootstrap_servers=sys.argv[1], group_id="billing",
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         max_poll_records=80, consumer_timeout_ms=20000)
consumer.poll(timeout_ms=10000, max_records=80)
consumer.commit()
consumer.close()
EOF
timeout 120 python3 "$work/kafka_traffic.py" "127.0.0.1:$kafka" >>"$work/log" 2>&1 ||
  { cat "$work/log" >&2; die "the Kafka traffic failed"; }

# A producer that stays connected (the Connections page's Kafka clients, the Overview's
# Kafka rate): a payment every half second, with a header; bounded to 5 minutes.
cat >"$work/kafka_producer.py" <<'EOF'
import sys, time
from kafka import KafkaProducer

producer = KafkaProducer(bootstrap_servers=sys.argv[1], client_id="payments-api")
deadline = time.monotonic() + 300
n = 120
while time.monotonic() < deadline:
    producer.send("payments", key=str(n % 7).encode(), value=f'{{"payment": {n}, "amount": {n * 3 % 50}.25}}'.encode(),
                  headers=[("source", b"checkout")])
    producer.flush()
    n += 1
    time.sleep(0.5)
EOF
spawn python3 "$work/kafka_producer.py" "127.0.0.1:$kafka"

driver_port=$(free_port)
spawn chromedriver --port="$driver_port"
wait_for "chromedriver's readiness" curl -sf "http://127.0.0.1:$driver_port/status"

# A failure's screenshot goes where it outlives this script's directory.
artifacts="${TMPDIR:-/tmp}/ferry-ui-screenshots-$$"
python3 tests/python/ui_browser.py --webdriver "http://127.0.0.1:$driver_port" \
  --ui "http://127.0.0.1:$management/" --user guest --password guest --artifacts "$artifacts" \
  screenshots --queue invoices --route billing-ledger --kafka-topic payments --kafka-group billing --out "$out" || { cat "$work/log" >&2; exit 1; }
echo "ui-screenshots.sh: wrote $(ls "$out"/*.png | tr '\n' ' ')"
