#!/usr/bin/env bash
# Before/after benchmark of two `ferry` binaries on this machine, interleaved round by round
# so both see the same machine: `ferry bench amqp` and `ferry bench kafka` against each
# binary's `ferry run` (fresh store, loopback ports, server CPU per message from
# --broker-pid), then `ferry bench bridge` run by each binary (its bridge runs in the bench
# process) between two queues of a private RabbitMQ node, with RabbitMQ's Shovel and a
# RabbitMQ quorum queue measured in the same rounds for reference; then `ferry bench stage`
# of each binary. For each daemon it also prints the bytes it wrote to disk during the AMQP
# bench (`/proc/PID/io` write_bytes, per message published), the size of its data
# directory once the bench's queue is empty again, and its threads' voluntary context
# switches per message over the AMQP bench (publish, consume and the latency phase).
#
#   scripts/bench-ab.sh BEFORE_BIN AFTER_BIN [ROUNDS]
#
# The bench clients are AFTER_BIN's (same client for both daemons). Each daemon runs with
# config/ferry.toml and its listeners moved to free loopback ports; BEFORE_CONFIG and
# AFTER_CONFIG name another config file for a side (a binary older than a key of the
# shipped config refuses it: give it its own commit's config/ferry.toml). Prints every
# figure the benches print, labelled; stops what it started by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 2 ]] || { sed -n '9,9s/^#   //p' "$0" >&2; exit 2; }
before=$(realpath "$1") after=$(realpath "$2") rounds=${3:-3}
MESSAGES=${MESSAGES:-100000}
RECORDS=${RECORDS:-100000}

source scripts/bench-lib.sh
bench_setup bench-ab
uri=$(scripts/rabbitmq-node.sh start "$work/rabbitmq" --owner $$)
beam=$(scripts/rabbitmq-node.sh pids "$work/rabbitmq" | sed -n 1p)


# A listener key the config file names: its environment override moves it to a free
# loopback port (a config without the key, an older binary's, gets no override).
extra_listeners() {
  local config=$1
  grep -q '^\[management\]' "$config" && echo "FERRY__MANAGEMENT__LISTEN=127.0.0.1:0"
  true
}

# Starts `BIN run` with CONFIG on a fresh store with its listeners on free loopback ports.
start_daemon() {
  local bin=$1 config=$2
  rm -rf "$work/store"
  amqp_port=$(free_port) kafka_port=$(free_port)
  # shellcheck disable=SC2046 # one NAME=VALUE word per listener
  env FERRY__AMQP__LISTEN=127.0.0.1:$amqp_port FERRY__KAFKA__LISTEN=127.0.0.1:$kafka_port \
    FERRY__METRICS__LISTEN=127.0.0.1:0 FERRY__STORE__PATH="$work/store" RUST_LOG=warn \
    $(extra_listeners "$config") "$bin" run --config "$config" >"$work/daemon.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 200); do
    (exec 3<>"/dev/tcp/127.0.0.1/$amqp_port") 2>/dev/null &&
      (exec 3<>"/dev/tcp/127.0.0.1/$kafka_port") 2>/dev/null && return
    sleep 0.05
  done
  cat "$work/daemon.log" >&2
  echo "bench-ab.sh: $bin did not listen" >&2
  exit 1
}

# Bytes the process has written to storage (`/proc/PID/io` write_bytes).
written() { sed -n 's/^write_bytes: //p' "/proc/$1/io"; }

# Voluntary context switches of the process's live threads, summed: how often its threads
# went to sleep to wait for another (a thread that ended takes its count with it).
switches() {
  cat /proc/"$1"/task/*/status 2>/dev/null |
    awk '/^voluntary_ctxt_switches/ { n += $2 } END { print n + 0 }'
}

stop_daemon() {
  kill "$daemon_pid" && wait "$daemon_pid" 2>/dev/null || true
  daemon_pid=
}

label() { sed "s/^/[$1] /"; }

for round in $(seq "$rounds"); do
  for side in before after; do
    bin=${!side}
    if [[ $side == before ]]; then config=${BEFORE_CONFIG:-config/ferry.toml}; else config=${AFTER_CONFIG:-config/ferry.toml}; fi
    start_daemon "$bin" "$config"
    written_before=$(written "$daemon_pid") switched_before=$(switches "$daemon_pid")
    "$after" bench amqp --uri "amqp://guest:guest@127.0.0.1:$amqp_port/%2f" \
      --messages "$MESSAGES" --latency-messages 2000 --broker-pid "$daemon_pid" |
      label "round $round $side amqp"
    written_after=$(written "$daemon_pid") switched_after=$(switches "$daemon_pid")
    echo "disk written during the amqp bench: $((written_after - written_before)) bytes," \
      "$(((written_after - written_before) / (MESSAGES + 2000))) per message;" \
      "data directory $(du -sb "$work/store" | cut -f1) bytes;" \
      "voluntary context switches per message $(awk "BEGIN { printf \"%.2f\", ($switched_after - $switched_before) / ($MESSAGES + 2000) }")" |
      label "round $round $side disk"
    "$after" bench kafka --bootstrap "127.0.0.1:$kafka_port" --records "$RECORDS" \
      --latency-seconds 5 --broker-pid "$daemon_pid" | label "round $round $side kafka"
    stop_daemon
  done
  "$after" bench amqp --uri "$uri" --messages "$MESSAGES" --latency-messages 2000 \
    --queue-type quorum --broker-pid "$beam" | label "round $round rabbitmq-quorum amqp"
  for side in before after; do
    bin=${!side}
    # Shovel is measured once per round, with AFTER_BIN's bench.
    if [[ $side == after ]]; then
      shovel=(--rabbitmqctl "scripts/rabbitmq-node.sh ctl $work/rabbitmq")
    else
      shovel=(--no-shovel)
    fi
    "$bin" bench bridge --uri "$uri" --messages "$MESSAGES" --queue-type quorum \
      --broker-pid "$beam" "${shovel[@]}" | label "round $round $side bridge"
  done
  for side in before after; do
    bin=${!side}
    rm -rf "$work/stage-bench"
    "$bin" bench stage --path "$work/stage-bench" | label "round $round $side stage"
  done
done
