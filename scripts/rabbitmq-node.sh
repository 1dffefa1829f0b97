#!/usr/bin/env bash
# A private RabbitMQ node for tests and benchmarks, kept apart from any RabbitMQ the machine
# runs: its own node name, AMQP port, distribution port, epmd (on its own port, so the
# machine's epmd is never used) and HOME (so its own Erlang cookie), with its data (mnesia),
# logs and pid files under a directory the caller gives. Listens on 127.0.0.1 only; the
# shovel plugin is enabled (a benchmark compares Ferry with Shovel), and the management,
# Prometheus and stream plugins on ports of the node's own (tests compare Ferry's management
# API and metric names with RabbitMQ's, import definitions exported from this node, and
# speak the stream protocol to it).
#
#   scripts/rabbitmq-node.sh start DIR [--owner PID] [--tls CERTS [--tls-client-certs optional]]
#                                                      start a node in DIR; print its AMQP URI
#   scripts/rabbitmq-node.sh stop DIR                  stop it (and its epmd); idempotent
#   scripts/rabbitmq-node.sh uri DIR                   print its AMQP URI (guest/guest, vhost /)
#   scripts/rabbitmq-node.sh amqps-uri DIR             print its amqps URI (a node started with --tls)
#   scripts/rabbitmq-node.sh http-uri DIR              print its management API's base URL (http://127.0.0.1:PORT)
#   scripts/rabbitmq-node.sh prometheus-uri DIR        print its Prometheus endpoint (http://127.0.0.1:PORT/metrics)
#   scripts/rabbitmq-node.sh stream-addr DIR           print its stream protocol listener (127.0.0.1:PORT)
#   scripts/rabbitmq-node.sh ctl DIR ARGS...           rabbitmqctl ARGS against it
#   scripts/rabbitmq-node.sh pids DIR                  print the PIDs of its live processes
#
# With --owner PID, a watcher stops the node when process PID ends (a test process that
# is killed cannot stop its node itself). Every process is stopped by its PID, never by name.
# With --tls CERTS, the node also has a TLS listener (TLS 1.2 and 1.3) with the server
# certificate CERTS/server.pem, its key CERTS/server.key and the CA CERTS/ca.pem, and
# requires every TLS client to present a certificate signed by that CA
# (ssl_options.verify = verify_peer, fail_if_no_peer_cert = true); with
# --tls-client-certs optional it checks a certificate a client presents but lets clients
# without one in (fail_if_no_peer_cert = false). The caller makes the
# files (the tests generate them when they run); no key is kept in the repository.
# Needs Debian's rabbitmq-server package (scripts/setup.sh installs it).
set -euo pipefail

RABBITMQ_BIN=${RABBITMQ_BIN:-/usr/lib/rabbitmq/bin}
# Test ports are chosen below the kernel's ephemeral range, where outgoing connections take
# theirs; the distribution port leaves room above it for rabbitmqctl's own (+1..+10).
FIRST_PORT=20000
LAST_PORT=30000

die() { echo "rabbitmq-node.sh: $*" >&2; exit 1; }

usage() { sed -n '10,18s/^#   //p' "$0" >&2; exit 2; }

# A loopback port nothing listens on, from FIRST_PORT..LAST_PORT; $1 more ports after it
# must be free too (rabbitmqctl's range).
free_port() {
  local span=${1:-0} port i taken
  for _ in $(seq 200); do
    port=$((FIRST_PORT + RANDOM % (LAST_PORT - FIRST_PORT - span)))
    taken=0
    for i in $(seq 0 "$span"); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$((port + i))") 2>/dev/null; then taken=1; break; fi
    done
    ((taken)) || { echo "$port"; return; }
  done
  die "no free loopback port in $FIRST_PORT..$LAST_PORT"
}

# The node's environment, written once by `start` and read by every other command.
load_env() {
  [[ -f "$DIR/node.env" ]] || die "no node in '$DIR' (start one with: $0 start $DIR)"
  set -a
  # shellcheck source=/dev/null
  . "$DIR/node.env"
  set +a
}

ctl() { "$RABBITMQ_BIN/rabbitmqctl" "$@"; }

alive() { [[ -n "${1:-}" ]] && kill -0 "$1" 2>/dev/null; }

pid_in() { [[ -s "$1" ]] && cat "$1" || true; }

# Ports are picked free but taken only when the node binds them, so another process can
# take one in between: a start that fails on a taken port tries again with new ports.
START_ATTEMPTS=3

start() {
  local attempt
  for attempt in $(seq "$START_ATTEMPTS"); do
    start_once "$@" && return 0
    grep -q eaddrinuse "$DIR/log/server.log" 2>/dev/null || break
    echo "rabbitmq-node.sh: a port was taken meanwhile (attempt $attempt of $START_ATTEMPTS); trying new ports" >&2
  done
  die "the node in '$DIR' did not start"
}

# One start of the node; returns 1 (the node stopped again) when it does not come up.
start_once() {
  local owner="" certs="" client_certs=required fail_if_no_peer_cert
  while (($#)); do
    case "$1" in
      --owner) owner=${2:?--owner needs a PID}; shift 2 ;;
      --tls) certs=${2:?--tls needs a directory}; shift 2 ;;
      --tls-client-certs) client_certs=${2:?--tls-client-certs needs required or optional}; shift 2 ;;
      *) usage ;;
    esac
  done
  case "$client_certs" in
    required) fail_if_no_peer_cert=true ;;
    optional) fail_if_no_peer_cert=false ;;
    *) die "--tls-client-certs $client_certs: expected required or optional" ;;
  esac
  if [[ -n "$certs" ]]; then
    local f
    for f in ca.pem server.pem server.key; do
      [[ -r "$certs/$f" ]] || die "--tls $certs: $certs/$f is missing"
    done
    certs=$(cd "$certs" && pwd)
  fi
  [[ -x "$RABBITMQ_BIN/rabbitmq-server" ]] ||
    die "$RABBITMQ_BIN/rabbitmq-server not found; run scripts/setup.sh (it installs rabbitmq-server)"
  command -v epmd >/dev/null || die "epmd not found; run scripts/setup.sh (it installs rabbitmq-server)"
  [[ ! -f "$DIR/node.env" ]] || die "'$DIR' already holds a node; stop it first"
  mkdir -p "$DIR"/{home,mnesia,log}
  DIR=$(cd "$DIR" && pwd)

  local amqp amqps="" dist epmd_port name http prometheus stream
  epmd_port=$(free_port)
  amqp=$(free_port)
  http=$(free_port)
  prometheus=$(free_port)
  stream=$(free_port)
  [[ -z "$certs" ]] || amqps=$(free_port)
  dist=$(free_port 10)
  name="ferry-test-$$-$RANDOM@localhost"
  rm -f "$DIR/home/.erlang.cookie"
  head -c 32 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' >"$DIR/home/.erlang.cookie"
  chmod 400 "$DIR/home/.erlang.cookie"
  cat >"$DIR/rabbitmq.conf" <<EOF
listeners.tcp.1 = 127.0.0.1:$amqp
log.file.level = info
management.tcp.ip = 127.0.0.1
management.tcp.port = $http
prometheus.tcp.ip = 127.0.0.1
prometheus.tcp.port = $prometheus
stream.listeners.tcp.1 = 127.0.0.1:$stream
stream.advertised_host = 127.0.0.1
EOF
  if [[ -n "$certs" ]]; then
    cat >>"$DIR/rabbitmq.conf" <<EOF
listeners.ssl.1 = 127.0.0.1:$amqps
ssl_options.cacertfile = $certs/ca.pem
ssl_options.certfile = $certs/server.pem
ssl_options.keyfile = $certs/server.key
ssl_options.verify = verify_peer
ssl_options.fail_if_no_peer_cert = $fail_if_no_peer_cert
ssl_options.versions.1 = tlsv1.3
ssl_options.versions.2 = tlsv1.2
EOF
  fi
  echo '[rabbitmq_shovel,rabbitmq_management,rabbitmq_prometheus,rabbitmq_stream].' >"$DIR/enabled_plugins"
  # Replaces /etc/rabbitmq/rabbitmq-env.conf, which belongs to the machine's node.
  : >"$DIR/rabbitmq-env.conf"
  local dist_args="-kernel inet_dist_use_interface {127,0,0,1}"
  cat >"$DIR/node.env" <<EOF
HOME='$DIR/home'
ERL_EPMD_PORT='$epmd_port'
ERL_EPMD_ADDRESS='127.0.0.1'
RABBITMQ_NODENAME='$name'
RABBITMQ_USE_LONGNAME='false'
RABBITMQ_NODE_IP_ADDRESS='127.0.0.1'
RABBITMQ_NODE_PORT='$amqp'
RABBITMQ_DIST_PORT='$dist'
RABBITMQ_CTL_DIST_PORT_MIN='$((dist + 1))'
RABBITMQ_CTL_DIST_PORT_MAX='$((dist + 10))'
RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS='$dist_args'
RABBITMQ_CTL_ERL_ARGS='$dist_args'
RABBITMQ_CONF_ENV_FILE='$DIR/rabbitmq-env.conf'
RABBITMQ_CONFIG_FILE='$DIR/rabbitmq.conf'
RABBITMQ_ADVANCED_CONFIG_FILE='$DIR/advanced.config'
RABBITMQ_ENABLED_PLUGINS_FILE='$DIR/enabled_plugins'
RABBITMQ_MNESIA_BASE='$DIR/mnesia'
RABBITMQ_LOG_BASE='$DIR/log'
RABBITMQ_PID_FILE='$DIR/rabbitmq.pid'
AMQP_URI='amqp://guest:guest@127.0.0.1:$amqp/%2f'
AMQPS_PORT='$amqps'
HTTP_URI='http://127.0.0.1:$http'
PROMETHEUS_URI='http://127.0.0.1:$prometheus/metrics'
STREAM_ADDR='127.0.0.1:$stream'
EOF
  load_env

  # Our own epmd, in the foreground of a background job so its PID is ours to stop.
  setsid epmd -port "$ERL_EPMD_PORT" -address 127.0.0.1 </dev/null >"$DIR/log/epmd.log" 2>&1 &
  echo $! >"$DIR/epmd.pid"
  setsid "$RABBITMQ_BIN/rabbitmq-server" </dev/null >"$DIR/log/server.log" 2>&1 &
  echo $! >"$DIR/server.pid"
  if ! ctl wait --timeout 120 "$RABBITMQ_PID_FILE" >"$DIR/log/wait.log" 2>&1; then
    tail -n 30 "$DIR/log/server.log" "$DIR/log/wait.log" >&2 || true
    stop
    rm -rf "$DIR/mnesia"
    return 1
  fi
  if [[ -n "$owner" ]]; then
    # Stops the node once its owner is gone; stopped itself (by PID) by `stop`.
    setsid bash -c 'while kill -0 "$1" 2>/dev/null; do sleep 1; done; exec "$2" stop "$3"' \
      watcher "$owner" "$(cd "$(dirname "$0")" && pwd)/$(basename "$0")" "$DIR" \
      </dev/null >"$DIR/log/watcher.log" 2>&1 &
    echo $! >"$DIR/watcher.pid"
  fi
  echo "$AMQP_URI"
}

# Waits up to $2 seconds for process $1 to end.
wait_gone() {
  local pid=$1 tenths=$(($2 * 10))
  while alive "$pid" && ((tenths-- > 0)); do sleep 0.1; done
  ! alive "$pid"
}

stop() {
  [[ -f "$DIR/node.env" ]] || return 0
  load_env
  local beam server epmd_pid watcher
  beam=$(pid_in "$RABBITMQ_PID_FILE")
  server=$(pid_in "$DIR/server.pid")
  epmd_pid=$(pid_in "$DIR/epmd.pid")
  watcher=$(pid_in "$DIR/watcher.pid")
  # The watcher execs `stop` when the owner is gone: it must not kill itself.
  if alive "$watcher" && [[ "$watcher" != "$$" ]]; then
    kill "$watcher" 2>/dev/null || true
  fi
  if alive "$beam"; then
    ctl stop "$RABBITMQ_PID_FILE" >>"$DIR/log/stop.log" 2>&1 || true
    wait_gone "$beam" 30 || { kill -KILL "$beam" 2>/dev/null || true; wait_gone "$beam" 10 || true; }
  fi
  if alive "$server"; then
    kill -TERM "$server" 2>/dev/null || true
    wait_gone "$server" 10 || kill -KILL "$server" 2>/dev/null || true
  fi
  if alive "$epmd_pid"; then
    kill -TERM "$epmd_pid" 2>/dev/null || true
    wait_gone "$epmd_pid" 10 || kill -KILL "$epmd_pid" 2>/dev/null || true
  fi
  rm -f "$DIR/node.env" "$DIR/server.pid" "$DIR/epmd.pid" "$DIR/watcher.pid" "$RABBITMQ_PID_FILE"
}

pids() {
  load_env
  local pid
  for pid in $(pid_in "$RABBITMQ_PID_FILE") $(pid_in "$DIR/server.pid") \
    $(pid_in "$DIR/epmd.pid") $(pid_in "$DIR/watcher.pid"); do
    if alive "$pid"; then echo "$pid"; fi
  done
}

command=${1:-}
DIR=${2:-}
[[ -n "$command" && -n "$DIR" ]] || usage
shift 2
case "$command" in
  start) start "$@" ;;
  stop) stop ;;
  uri) load_env; echo "$AMQP_URI" ;;
  amqps-uri)
    load_env
    [[ -n "${AMQPS_PORT:-}" ]] || die "the node in '$DIR' has no TLS listener (start it with --tls)"
    echo "amqps://guest:guest@127.0.0.1:$AMQPS_PORT/%2f" ;;
  http-uri) load_env; echo "$HTTP_URI" ;;
  prometheus-uri) load_env; echo "$PROMETHEUS_URI" ;;
  stream-addr) load_env; echo "$STREAM_ADDR" ;;
  ctl) load_env; ctl "$@" ;;
  pids) pids ;;
  *) usage ;;
esac
