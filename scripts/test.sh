#!/usr/bin/env bash
# Runs Ferry's whole test suite, after making sure the machine has what it needs.
# Extra arguments go to cargo nextest (e.g. a test name filter).
#
# --soak (first argument) runs only the full mixed crash harness instead (tests/crash/:
# every kind of client at once, more than 20 kill -9s), with its figures printed; the
# default suite runs a small one.
#
# The suite owns its services: a private RabbitMQ node (scripts/rabbitmq-node.sh) is started
# for the run, named to the tests in FERRY_TEST_RABBITMQ_DIR, and always stopped afterwards.
# Compiled code goes to CARGO_TARGET_DIR, by default $HOME/.cache/ferry/target, outside the
# clone, so every clone on the machine reuses what another one built.
set -euo pipefail
cd "$(dirname "$0")/.."

nextest=(--workspace --all-targets)
if [[ "${1:-}" == "--soak" ]]; then
  shift
  export FERRY_SOAK=1
  nextest=(--profile soak --no-capture --test crash)
fi
scripts/setup.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/ferry/target}"

node_dir=$(mktemp -d -t ferry-rabbitmq.XXXXXX)
stop_node() {
  scripts/rabbitmq-node.sh stop "$node_dir" || echo "test.sh: could not stop the RabbitMQ node in $node_dir" >&2
  rm -rf "$node_dir"
}
trap stop_node EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# The node stops itself too if this script is killed before its trap runs.
scripts/rabbitmq-node.sh start "$node_dir" --owner $$ >/dev/null
export FERRY_TEST_RABBITMQ_DIR="$node_dir"

cargo nextest run "${nextest[@]}" "$@"
