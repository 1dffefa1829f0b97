#!/usr/bin/env bash
# Runs Ferry's whole test suite, after making sure the machine has what it needs.
# Extra arguments go to cargo nextest (e.g. a test name filter).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec cargo nextest run --workspace --all-targets "$@"
