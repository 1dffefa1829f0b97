# Sourced by the benchmark scripts (scripts/bench-*.sh), not run: their work directory, the
# cleanup of what they started, and free loopback ports.
#
#   bench_setup NAME   make $work (a temporary directory named after NAME) and clear
#                      $daemon_pid; at exit, stop the daemon of $daemon_pid and the RabbitMQ
#                      node in $work/rabbitmq (each by its PID) and remove $work
#   free_port          print a loopback port nothing listens on

bench_setup() {
  work=$(mktemp -d -t "ferry-$1.XXXXXX")
  daemon_pid=
  trap bench_cleanup EXIT
}

bench_cleanup() {
  [[ -n "$daemon_pid" ]] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null || true
  scripts/rabbitmq-node.sh stop "$work/rabbitmq" || true
  rm -rf "$work"
}

# Below the kernel's ephemeral range, where outgoing connections take their ports.
free_port() {
  local port
  while :; do
    port=$((30000 + RANDOM % 2000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
  done
}
