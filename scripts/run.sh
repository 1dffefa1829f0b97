#!/usr/bin/env bash
# The quick start: installs what building the daemon needs (scripts/setup.sh --run), then
# runs it with the shipped configuration: embedded engine, data in ./data, the standard
# ports (AMQP 5672, Kafka 9092, management 15672, metrics 9464). Stop it with Ctrl-C
# (SIGINT) or SIGTERM.
#
# On a machine where another process holds one of those ports — often a RabbitMQ on 5672
# and 15672 — the daemon moves that listener to the next free port and prints which
# (`ferry run --move-taken-ports`), instead of stopping at "address in use". A deployment
# chooses its ports in its configuration file (or FERRY__ variables) instead, and
# `ferry validate` warns about ports in use.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --run
exec cargo run --release -- run --config config/ferry.toml --move-taken-ports
