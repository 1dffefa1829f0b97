#!/usr/bin/env bash
# Runs the Ferry daemon with the shipped configuration: embedded engine, data in ./data,
# metrics on 0.0.0.0:9464. Stop it with Ctrl-C (SIGINT) or SIGTERM.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo run --release -- run --config config/ferry.toml
