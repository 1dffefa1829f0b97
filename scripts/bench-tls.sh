#!/usr/bin/env bash
# What TLS costs, measured on this machine: `ferry bench amqp` over amqp and amqps and
# `ferry bench kafka` over a PLAINTEXT and an SSL listener of one `ferry run` (fresh store
# for every bench, loopback ports, server CPU per message from --broker-pid), and the same
# `ferry bench amqp` against a private RabbitMQ node (quorum queue, as in bench-ab.sh) over
# its amqp and amqps listeners, in interleaved rounds whose plaintext/TLS order alternates.
#
#   scripts/bench-tls.sh [FERRY_BIN] [ROUNDS]
#
# FERRY_BIN defaults to target/release/ferry (CARGO_TARGET_DIR's when set); it is both the
# daemon and the bench client. A throwaway CA, server certificate (127.0.0.1, localhost)
# and client certificate (RabbitMQ's TLS listener requires one) are made with openssl in a
# temporary directory, removed at the end with everything else. Prints every figure the
# benches print, labelled; stops what it started by PID.
set -euo pipefail
cd "$(dirname "$0")/.."
[[ "${1:-}" != -* ]] || { sed -n '8,8s/^#   //p' "$0" >&2; exit 2; }
bin=$(realpath "${1:-${CARGO_TARGET_DIR:-target}/release/ferry}") rounds=${2:-3}
[[ -x "$bin" ]] || { echo "bench-tls.sh: $bin is not an executable (cargo build --release)" >&2; exit 2; }
MESSAGES=${MESSAGES:-100000}
RECORDS=${RECORDS:-100000}

source scripts/bench-lib.sh
bench_setup bench-tls

# A private CA, a server certificate for localhost and 127.0.0.1, a client certificate.
certs=$work/certs
mkdir -p "$certs"
make_certs() {
  local ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
  openssl req -x509 "${ec[@]}" -days 2 -subj "/CN=Ferry bench CA" \
    -keyout "$certs/ca.key" -out "$certs/ca.pem"
  local who
  for who in server client; do
    openssl req "${ec[@]}" -subj "/CN=$who" -keyout "$certs/$who.key" -out "$certs/$who.csr"
  done
  openssl x509 -req -in "$certs/server.csr" -CA "$certs/ca.pem" -CAkey "$certs/ca.key" \
    -CAcreateserial -days 2 -out "$certs/server.pem" \
    -extfile <(printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n')
  openssl x509 -req -in "$certs/client.csr" -CA "$certs/ca.pem" -CAkey "$certs/ca.key" \
    -CAcreateserial -days 2 -out "$certs/client.pem" \
    -extfile <(printf 'extendedKeyUsage=clientAuth\n')
}
make_certs 2>"$work/openssl.log" || { cat "$work/openssl.log" >&2; exit 1; }

scripts/rabbitmq-node.sh start "$work/rabbitmq" --owner $$ --tls "$certs" >/dev/null
rabbit_amqp=$(scripts/rabbitmq-node.sh uri "$work/rabbitmq")
rabbit_amqps=$(scripts/rabbitmq-node.sh amqps-uri "$work/rabbitmq")
beam=$(scripts/rabbitmq-node.sh pids "$work/rabbitmq" | sed -n 1p)


# Starts `ferry run` on a fresh store with plaintext and TLS listeners of both fronts on
# free loopback ports (TLS without client certificates: tls.verify_peer's default, none).
start_daemon() {
  rm -rf "$work/store"
  amqp_port=$(free_port) amqps_port=$(free_port) kafka_port=$(free_port) ssl_port=$(free_port)
  FERRY__AMQP__LISTEN=127.0.0.1:$amqp_port FERRY__AMQP__TLS_LISTEN=127.0.0.1:$amqps_port \
    FERRY__KAFKA__LISTEN=127.0.0.1:$kafka_port FERRY__KAFKA__LISTENERS=SSL://127.0.0.1:$ssl_port \
    FERRY__TLS__CERT_FILE="$certs/server.pem" FERRY__TLS__KEY_FILE="$certs/server.key" \
    FERRY__METRICS__LISTEN=127.0.0.1:0 FERRY__STORE__PATH="$work/store" RUST_LOG=warn \
    "$bin" run --config config/ferry.toml >"$work/daemon.log" 2>&1 &
  daemon_pid=$!
  local port up
  for _ in $(seq 200); do
    up=1
    for port in "$amqp_port" "$amqps_port" "$kafka_port" "$ssl_port"; do
      (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { up=0; break; }
    done
    ((up)) && return
    sleep 0.05
  done
  cat "$work/daemon.log" >&2
  echo "bench-tls.sh: ferry run did not listen" >&2
  exit 1
}

stop_daemon() {
  kill "$daemon_pid" && wait "$daemon_pid" 2>/dev/null || true
  daemon_pid=
}

label() { sed "s/^/[$1] /"; }

# bench amqp against URI ($2) with the extra flags after it, labelled $1.
bench_amqp() {
  local what=$1 uri=$2
  shift 2
  "$bin" bench amqp --uri "$uri" --messages "$MESSAGES" --latency-messages 2000 "$@" |
    label "$what"
}

ferry_amqp() { # plain|tls ROUND
  start_daemon
  if [[ $1 == plain ]]; then
    bench_amqp "round $2 ferry amqp" "amqp://guest:guest@127.0.0.1:$amqp_port/%2f" \
      --broker-pid "$daemon_pid"
  else
    bench_amqp "round $2 ferry amqps" "amqps://guest:guest@127.0.0.1:$amqps_port/%2f" \
      --ca-file "$certs/ca.pem" --broker-pid "$daemon_pid"
  fi
  stop_daemon
}

ferry_kafka() { # plain|tls ROUND
  start_daemon
  if [[ $1 == plain ]]; then
    "$bin" bench kafka --bootstrap "127.0.0.1:$kafka_port" --records "$RECORDS" \
      --latency-seconds 5 --broker-pid "$daemon_pid" | label "round $2 ferry kafka PLAINTEXT"
  else
    "$bin" bench kafka --bootstrap "127.0.0.1:$ssl_port" --records "$RECORDS" \
      --latency-seconds 5 --broker-pid "$daemon_pid" \
      --property security.protocol=SSL --property "ssl.ca.location=$certs/ca.pem" |
      label "round $2 ferry kafka SSL"
  fi
  stop_daemon
}

rabbitmq_amqp() { # plain|tls ROUND
  if [[ $1 == plain ]]; then
    bench_amqp "round $2 rabbitmq amqp" "$rabbit_amqp" --queue-type quorum --broker-pid "$beam"
  else
    # The node's TLS listener requires a client certificate (fail_if_no_peer_cert).
    bench_amqp "round $2 rabbitmq amqps" "$rabbit_amqps" \
      --queue-type quorum --broker-pid "$beam" --ca-file "$certs/ca.pem" \
      --cert-file "$certs/client.pem" --key-file "$certs/client.key"
  fi
}

echo "bench-tls: $bin, $rounds round(s), $MESSAGES AMQP messages, $RECORDS Kafka records"
for round in $(seq "$rounds"); do
  # Odd rounds measure plaintext first, even rounds TLS first.
  if ((round % 2)); then order=(plain tls); else order=(tls plain); fi
  for side in "${order[@]}"; do ferry_amqp "$side" "$round"; done
  for side in "${order[@]}"; do ferry_kafka "$side" "$round"; done
  for side in "${order[@]}"; do rabbitmq_amqp "$side" "$round"; done
done
