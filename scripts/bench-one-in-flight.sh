#!/usr/bin/env bash
# One publish in flight and prefetch 1, Ferry against RabbitMQ on this machine, interleaved
# round by round: `ferry bench amqp --confirm-window 1 --prefetch 1` (one publish waiting
# for its confirm at a time, then one consumer acknowledging each delivery) against BIN's
# `ferry run` (config/ferry.toml, fresh store, listeners on free loopback ports) and against
# a quorum queue of a private RabbitMQ node, with each server's CPU per message
# (--broker-pid). docs/benchmarks.md, "One publish in flight and prefetch 1".
#
#   scripts/bench-one-in-flight.sh BIN [ROUNDS]
#
# MESSAGES (default 5000) sets the messages per phase. Stops what it started by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { sed -n '9,9s/^#   //p' "$0" >&2; exit 2; }
bin=$(realpath "$1") rounds=${2:-3}
MESSAGES=${MESSAGES:-5000}

source scripts/bench-lib.sh
bench_setup bench-one
uri=$(scripts/rabbitmq-node.sh start "$work/rabbitmq" --owner $$)
beam=$(scripts/rabbitmq-node.sh pids "$work/rabbitmq" | sed -n 1p)


phases=(--messages "$MESSAGES" --confirm-window 1 --prefetch 1 --latency-messages 1000)
for round in $(seq "$rounds"); do
  rm -rf "$work/store"
  amqp_port=$(free_port) kafka_port=$(free_port)
  env FERRY__AMQP__LISTEN="127.0.0.1:$amqp_port" FERRY__KAFKA__LISTEN="127.0.0.1:$kafka_port" \
    FERRY__METRICS__LISTEN=127.0.0.1:0 FERRY__MANAGEMENT__LISTEN=127.0.0.1:0 \
    FERRY__STORE__PATH="$work/store" RUST_LOG=warn \
    "$bin" run --config config/ferry.toml >"$work/daemon.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$amqp_port") 2>/dev/null && break
    sleep 0.05
  done
  "$bin" bench amqp --uri "amqp://guest:guest@127.0.0.1:$amqp_port/%2f" "${phases[@]}" \
    --broker-pid "$daemon_pid" | sed "s/^/[round $round ferry] /"
  kill "$daemon_pid" && wait "$daemon_pid" 2>/dev/null || true
  daemon_pid=
  "$bin" bench amqp --uri "$uri" "${phases[@]}" --queue-type quorum --broker-pid "$beam" |
    sed "s/^/[round $round rabbitmq-quorum] /"
done
