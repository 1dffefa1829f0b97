#!/usr/bin/env bash
# Runs librdkafka's own test suite (tests/ of librdkafka 2.12.1, the version the rdkafka
# crate builds) against a Ferry daemon of this checkout, one test at a time, the way
# upstream runs it against an existing cluster: a test.conf naming the broker, then
# `TESTS=NNNN ./run-test.sh` in the tests directory. See docs/kafka.md, "librdkafka's test
# suite", for what passes and why the rest does not.
#
#   scripts/librdkafka-tests.sh [--quick]      the tests of scripts/librdkafka-tests.allow
#   scripts/librdkafka-tests.sh --ci           the allow-list's lines marked [ci]
#   scripts/librdkafka-tests.sh --all          every test that needs a broker (a re-survey)
#   scripts/librdkafka-tests.sh NNNN[/SCENARIO]...   these tests only
#   scripts/librdkafka-tests.sh --build        only build the suite and ferry
#
# The suite (C and C++ tests) is built once from the rdkafka-sys crate's copy of librdkafka
# in the cargo registry, copied to $FERRY_LIBRDKAFKA_TESTS (default
# $HOME/.cache/ferry/librdkafka-tests) and reused by later runs; the registry is never
# written. The daemon is `cargo build --bin ferry` (CARGO_TARGET_DIR, default
# $HOME/.cache/ferry/target), or FERRY_BIN, run with config/ferry.toml, every listener moved
# to a free loopback port and a fresh store in a temporary directory; auto-created topics
# get 4 partitions, as in upstream's test clusters. It is stopped by its PID at the end.
# Scenarios, each on a daemon of its own: NNNN (default), NNNN/noautocreate (upstream's
# scenario: kafka.auto_create_topics = false), NNNN/sasl (a SASL_PLAINTEXT listener, the
# tests log in as guest with SCRAM-SHA-256), NNNN/consumer (the tests' consumers use the
# consumer group protocol of KIP-848: TEST_CONSUMER_GROUP_PROTOCOL=consumer, as upstream's
# CI runs them against Kafka 4). Tests calling Kafka's kafka-topics.sh or
# kafka-acls.sh get stand-ins (scripts/librdkafka-kafka-tools.py) through KAFKA_PATH.
# Each test runs with `-L` (the number's mock-cluster sub-tests are left out) under
# `timeout $TEST_TIMEOUT` (default 300 s; longer where the allow-list says timeout=N), its
# own time limits stretched where the allow-list says multiplier=N;
# not in upstream's quick mode unless TEST_QUICK=1.
#
# Prints PASS/FAIL/SKIP per test and exits 1 when a test of the allow-list fails (--all:
# also lists the tests outside the allow-list that now pass). Logs (each test's output, the
# daemon's) are kept in a directory printed at the end when something failed (KEEP_LOGS=1:
# always). Upstream's SUBTESTS=... selects sub-tests of a test.
# Environment: TEST_TIMEOUT, TEST_QUICK, TEST_KAFKA_VERSION (default 2.8.0, the Kafka release
# Ferry's ApiVersions table matches), FERRY_BIN, FERRY_LIBRDKAFKA_TESTS, CARGO_TARGET_DIR,
# KEEP_LOGS, SUBTESTS.
set -euo pipefail
cd "$(dirname "$0")/.."

LIBRDKAFKA_VERSION=2.12.1
RDKAFKA_SYS=rdkafka-sys-4.10.0+$LIBRDKAFKA_VERSION
CACHE=${FERRY_LIBRDKAFKA_TESTS:-$HOME/.cache/ferry/librdkafka-tests}
BUILD=$CACHE/librdkafka-$LIBRDKAFKA_VERSION
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/ferry/target}
ALLOW=scripts/librdkafka-tests.allow
TEST_TIMEOUT=${TEST_TIMEOUT:-300}
# TEST_QUICK=1: test-runner -Q (upstream's `make quick`), which also drops every sub-test
# not marked quick, so that many tests pass having checked nothing.
QUICK_FLAG=
[[ ${TEST_QUICK:-0} != 1 ]] || QUICK_FLAG=-Q
export TEST_KAFKA_VERSION=${TEST_KAFKA_VERSION:-2.8.0}
# Optional dependencies: OpenSSL (SSL, SASL SCRAM), zlib and zstd (gzip and zstd codecs),
# lz4 built in; no Cyrus SASL (GSSAPI) and no libcurl (OIDC), which the tests here never use.
CONFIGURE_OPTIONS=(--enable-ssl --enable-zlib --enable-zstd --disable-lz4-ext
  --disable-gssapi --disable-curl)
# Headers the build needs (scripts/setup.sh installs them); RapidJSON is only for tests
# (0053, 0098, 0101, 0110 check statistics JSON with it and skip without it).
HEADERS=(openssl/ssl.h zlib.h zstd.h rapidjson/schema.h)
# Tests that skip unless the client authenticates with SASL: they run against a
# SASL_PLAINTEXT listener as the shipped guest user (NNNN/sasl).
SASL_TESTS=(0135 0142)
SASL_MECHANISM=SCRAM-SHA-256

die() { echo "librdkafka-tests.sh: $*" >&2; exit 2; }
log() { echo "librdkafka-tests.sh: $*" >&2; }

usage() { sed -n '8,12s/^#   //p' "$0" >&2; exit 2; }

# The librdkafka source of the rdkafka-sys crate in the cargo registry (fetched when the
# registry does not hold it yet: Cargo.lock names this version).
registry_source() {
  local dir
  dir=$(compgen -G "$HOME/.cargo/registry/src/index.crates.io-*/$RDKAFKA_SYS/librdkafka" | head -n 1 || true)
  if [[ -z "$dir" ]]; then
    log "fetching $RDKAFKA_SYS into the cargo registry"
    cargo fetch --locked >&2
    dir=$(compgen -G "$HOME/.cargo/registry/src/index.crates.io-*/$RDKAFKA_SYS/librdkafka" | head -n 1 || true)
  fi
  [[ -n "$dir" ]] || die "$RDKAFKA_SYS is not in the cargo registry"
  echo "$dir"
}

# Builds librdkafka and its test-runner (C and C++ tests) in $BUILD, a copy of the registry
# source, unless a build with the same source and options is already there.
build_suite() {
  local src stamp started
  src=$(registry_source)
  stamp="$src ${CONFIGURE_OPTIONS[*]} ${HEADERS[*]}"
  # One build at a time: another run may be building the suite in the same cache now (it
  # would remove the tree under this one); the lock is let go once the suite is there.
  mkdir -p "$CACHE"
  exec 9>"$CACHE/.lock"
  flock 9
  if [[ -x "$BUILD/tests/test-runner" && "$(cat "$BUILD/.ferry-built" 2>/dev/null)" == "$stamp" ]]; then
    flock -u 9
    return
  fi
  local tool header
  for tool in make gcc g++ timeout; do
    command -v "$tool" >/dev/null || die "$tool not found; run scripts/setup.sh"
  done
  for header in "${HEADERS[@]}"; do
    echo "#include <$header>" | g++ -E -x c++ - >/dev/null 2>&1 ||
      die "<$header> not found; run scripts/setup.sh"
  done
  log "building librdkafka $LIBRDKAFKA_VERSION and its tests in $BUILD (a few minutes)"
  started=$SECONDS
  rm -rf "$BUILD"
  cp -a "$src" "$BUILD"
  chmod -R u+w "$BUILD"
  if ! (cd "$BUILD" && ./configure --no-download "${CONFIGURE_OPTIONS[@]}" &&
    make -j2 libs && make -j2 -C tests build) >"$CACHE/build.log" 2>&1; then
    tail -n 40 "$CACHE/build.log" >&2
    die "the build failed (log: $CACHE/build.log); scripts/setup.sh installs its dependencies"
  fi
  echo "$stamp" >"$BUILD/.ferry-built"
  flock -u 9
  log "built in $((SECONDS - started)) s"
}

build_ferry() {
  if [[ -n "${FERRY_BIN:-}" ]]; then
    FERRY=$(realpath "$FERRY_BIN")
    [[ -x "$FERRY" ]] || die "FERRY_BIN=$FERRY_BIN is not an executable"
    return
  fi
  log "cargo build --bin ferry (CARGO_TARGET_DIR=$CARGO_TARGET_DIR; waits while another build holds the lock)"
  timeout 3600 cargo build --quiet --bin ferry >&2 || die "cargo build --bin ferry failed"
  FERRY=$CARGO_TARGET_DIR/debug/ferry
}

# Every broker test of the suite, one line each, `NNNN` or `NNNN/SCENARIO`, from the test
# table of tests/test.c: entries flagged neither TEST_F_LOCAL (mock cluster or no broker)
# nor TEST_F_MANUAL, by number and scenario.
broker_tests() {
  awk '/^ *_TEST\(/ { entry = ""; open = 1 }
       open { entry = entry $0
              if (gsub(/\(/, "(", entry) == gsub(/\)/, ")", entry)) { print entry; open = 0 } }' \
    "$BUILD/tests/test.c" |
    grep -v -e TEST_F_LOCAL -e TEST_F_MANUAL |
    sed -E 's/^ *_TEST\(([0-9]{4})_[^,)]*.*/\1 &/' |
    while read -r number entry; do
      if [[ "$entry" =~ \.scenario\ =\ \"([a-z0-9,]*)\" ]]; then
        local scenario
        for scenario in ${BASH_REMATCH[1]//,/ }; do
          if [[ $scenario == default ]]; then echo "$number"; elif [[ $scenario != ak23 ]]; then echo "$number/$scenario"; fi
        done
      else
        echo "$number"
      fi
    done | sed -E "s@^($(IFS='|'; echo "${SASL_TESTS[*]}"))\$@\\1/sasl@" | sort -u
}

# The tests of the allow-list (with --ci, only its lines marked [ci]).
allowed_tests() {
  local ci=$1
  if [[ $ci == 1 ]]; then
    awk '/^[0-9]{4}/ && /#.*\[ci\][[:space:]]*$/ { print $1 }' "$ALLOW"
  else
    awk '/^[0-9]{4}/ { print $1 }' "$ALLOW"
  fi
}

# The allow-list's multiplier=N for test $1 (1 without): librdkafka's
# test.timeout.multiplier, which stretches the test's own time limits as upstream's CI does
# (3 there, with CI set) for a test whose sub-tests together outlast its limit.
test_multiplier() {
  awk -v spec="$1" '
    $1 == spec { for (i = 2; i <= NF && $i != "#"; i++) if ($i ~ /^multiplier=[0-9]+$/) m = substr($i, 12) + 0 }
    END { print (m > 0) ? m : 1 }' "$ALLOW"
}

# Seconds test $1 may run: TEST_TIMEOUT, or the allow-list's timeout=N for it if longer.
test_timeout() {
  awk -v spec="$1" -v floor="$TEST_TIMEOUT" '
    $1 == spec { for (i = 2; i <= NF && $i != "#"; i++) if ($i ~ /^timeout=[0-9]+$/) t = substr($i, 9) + 0 }
    END { print (t > floor) ? t : floor }' "$ALLOW"
}

# A loopback port nothing listens on, below the kernel's ephemeral range.
free_port() {
  local port
  for _ in $(seq 200); do
    port=$((30000 + RANDOM % 2000))
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
  done
  die "no free loopback port in 30000..32000"
}

DAEMON_PID=
KAFKA_PORT=

# Starts Ferry for scenario $1 on a fresh store and writes the tests' test.conf:
# default (as upstream's: auto-create on, 4 partitions), noautocreate (auto-create off),
# sasl (the Kafka listener is SASL_PLAINTEXT; the tests log in as guest, and logins last
# 10 s: kafka.connections_max_reauth_ms).
start_daemon() {
  local scenario=$1 auto_create=true amqp_port listen
  [[ $scenario == noautocreate ]] && auto_create=false
  rm -rf "$WORK/store"
  amqp_port=$(free_port)
  KAFKA_PORT=$(free_port)
  listen=(FERRY__KAFKA__LISTEN=127.0.0.1:$KAFKA_PORT)
  # SASL logins last 10 s (KIP-368): librdkafka re-authenticates on its connections, as
  # 0142 needs, and every other test of this scenario does so while it runs.
  [[ $scenario != sasl ]] ||
    listen=(FERRY__KAFKA__LISTEN= FERRY__KAFKA__LISTENERS=SASL_PLAINTEXT://127.0.0.1:$KAFKA_PORT
      FERRY__KAFKA__CONNECTIONS_MAX_REAUTH_MS=10000)
  env "${listen[@]}" FERRY__AMQP__LISTEN=127.0.0.1:$amqp_port \
    FERRY__METRICS__LISTEN=127.0.0.1:0 FERRY__MANAGEMENT__LISTEN=127.0.0.1:0 \
    FERRY__STORE__PATH="$WORK/store" FERRY__KAFKA__DEFAULT_PARTITIONS=4 \
    FERRY__KAFKA__AUTO_CREATE_TOPICS=$auto_create \
    "$FERRY" run --config config/ferry.toml >>"$WORK/ferry-$scenario.log" 2>&1 &
  DAEMON_PID=$!
  for _ in $(seq 300); do
    kill -0 "$DAEMON_PID" 2>/dev/null || break
    if (exec 3<>"/dev/tcp/127.0.0.1/$KAFKA_PORT") 2>/dev/null; then
      printf 'bootstrap.servers=127.0.0.1:%s\n' "$KAFKA_PORT" >"$WORK/test.conf"
      [[ $scenario != sasl ]] || printf '%s\n' security.protocol=SASL_PLAINTEXT \
        "sasl.mechanism=$SASL_MECHANISM" sasl.username=guest sasl.password=guest >>"$WORK/test.conf"
      return
    fi
    sleep 0.1
  done
  tail -n 30 "$WORK/ferry-$scenario.log" >&2
  die "ferry did not listen on 127.0.0.1:$KAFKA_PORT"
}

stop_daemon() {
  [[ -n "$DAEMON_PID" ]] || return 0
  kill -TERM "$DAEMON_PID" 2>/dev/null || true
  for _ in $(seq 150); do kill -0 "$DAEMON_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$DAEMON_PID" 2>/dev/null || true
  wait "$DAEMON_PID" 2>/dev/null || true
  DAEMON_PID=
}

cleanup() {
  stop_daemon
  if [[ -n "${WORK:-}" ]]; then
    rm -rf "$WORK/store"
    if [[ ${KEEP_WORK:-0} == 1 || ${KEEP_LOGS:-0} == 1 ]]; then
      log "logs: $WORK"
    else
      rm -rf "$WORK"
    fi
  fi
}

# The test-runner's summary rows for the log $1: "NAME STATE REASON", one per entry.
summary_rows() {
  sed -E 's/\x1b\[[0-9;]*m//g' "$1" |
    awk -F'|' '/^\|/ && NF >= 5 && $3 ~ /(PASSED|FAILED|SKIPPED|RUNNING)/ {
      gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $3); gsub(/^ +| +$/, "", $5)
      if ($2 != "<MAIN>") print $2 "\t" $3 "\t" $5 }'
}

# The first failure the test-runner log $1 reports, "FILE:LINE: MESSAGE" (a failing test
# aborts the test-runner, so there is often no summary table).
failure() {
  sed -E 's/\x1b\[[0-9;]*m//g' "$1" |
    awk '/^### Test ".*" failed at / {
      where = $0; sub(/.* failed at /, "", where); sub(/ at [A-Z][a-z][a-z] [A-Z].*/, "", where)
      if ((getline message) > 0) { sub(/[[:space:]]+$/, "", message); print where ": " message } else print where
      exit }' || true # awk's early exit may cut sed off (SIGPIPE): not a failure of the runner
}

# $WORK/kafka/bin: kafka-topics.sh and kafka-acls.sh for the tests that call Kafka's shell
# tools (KAFKA_PATH), done by scripts/librdkafka-kafka-tools.py over the Kafka protocol.
kafka_tools() {
  local tool
  mkdir -p "$WORK/kafka/bin"
  for tool in kafka-topics.sh kafka-acls.sh; do
    printf '#!/bin/sh\nexec python3 %q %s "$@"\n' "$PWD/scripts/librdkafka-kafka-tools.py" "$tool" \
      >"$WORK/kafka/bin/$tool"
    chmod +x "$WORK/kafka/bin/$tool"
  done
}

# Runs test $1 (NNNN or NNNN/SCENARIO); appends "TEST RESULT SECONDS REASON" to $RESULTS.
run_one() {
  local spec=$1 number scenario daemon logf rc=0 started result reason rows limit conf
  number=${spec%%/*}
  daemon=default
  [[ $spec == */* ]] && daemon=${spec#*/}
  scenario=$daemon
  [[ $scenario != sasl && $scenario != consumer ]] || scenario=default
  local protocol=classic
  [[ $daemon != consumer ]] || protocol=consumer
  logf="$WORK/${spec//\//-}.log"
  limit=$(test_timeout "$spec")
  conf="$WORK/test-${spec//\//-}.conf"
  { cat "$WORK/test.conf"; echo "test.timeout.multiplier=$(test_multiplier "$spec")"; } >"$conf"
  started=$SECONDS
  (cd "$BUILD/tests" && TESTS=$number TEST_SCENARIO=$scenario RDKAFKA_TEST_CONF="$conf" \
    TEST_CONSUMER_GROUP_PROTOCOL=$protocol \
    KAFKA_PATH="$WORK/kafka" ZK_ADDRESS=127.0.0.1:$KAFKA_PORT BROKERS=127.0.0.1:$KAFKA_PORT \
    timeout --kill-after=10 "$limit" ./run-test.sh -p1 -L $QUICK_FLAG bare) \
    >"$logf" 2>&1 || rc=$?
  rows=$(summary_rows "$logf")
  if ((rc == 124 || rc == 137)); then
    result=FAIL reason="timed out after ${limit}s"
  elif ((rc != 0)); then
    result=FAIL
    reason=$(failure "$logf")
    [[ -n "$reason" ]] || reason=$(awk -F'\t' '$2 == "FAILED" || $2 == "RUNNING" { print $1 ": " $3; exit }' <<<"$rows")
    [[ -n "$reason" ]] || reason="exit code $rc"
  elif [[ -n "$rows" ]] && ! awk -F'\t' '$2 == "PASSED" { found = 1 } END { exit !found }' <<<"$rows"; then
    result=SKIP
    # -L skips the number's local entries "due to negative test flags": another reason first.
    reason=$(awk -F'\t' '$2 == "SKIPPED" { if ($3 !~ /negative test flags/) { print $1 ": " $3; exit }
                                           if (first == "") first = $1 ": " $3 }
                         END { if (first != "") print first }' <<<"$rows" | head -n 1)
  elif [[ -z "$rows" ]]; then
    result=SKIP reason="no broker test with this number in scenario $scenario"
  else
    result=PASS reason=""
  fi
  if ! kill -0 "$DAEMON_PID" 2>/dev/null; then
    result=FAIL reason="ferry exited (see ferry-$daemon.log); $reason"
    wait "$DAEMON_PID" 2>/dev/null || true
    DAEMON_PID=
    start_daemon "$daemon"
  fi
  printf '%s\t%s\t%s\t%s\n' "$spec" "$result" "$((SECONDS - started))" "$reason" >>"$RESULTS"
  printf '%-18s %-4s %4ss  %s\n' "$spec" "$result" "$((SECONDS - started))" "$reason"
}

# Runs the tests $@ (default scenario first, then each other scenario on its own daemon).
run_tests() {
  local scenario spec
  for scenario in default noautocreate sasl consumer; do
    local batch=()
    for spec in "$@"; do
      if [[ $scenario == default && $spec != */* ]] || [[ $spec == */"$scenario" ]]; then batch+=("$spec"); fi
    done
    ((${#batch[@]})) || continue
    start_daemon "$scenario"
    log "scenario $scenario: ${#batch[@]} tests against ferry on 127.0.0.1:$KAFKA_PORT (pid $DAEMON_PID)"
    for spec in "${batch[@]}"; do run_one "$spec"; done
    stop_daemon
  done
}

# Prints the totals; returns 1 when a test of the allow-list failed.
report() {
  local allowed=$1 spec result seconds reason failed=0 newly=()
  echo
  printf 'PASS %d  FAIL %d  SKIP %d  (%d tests, %d s)\n' \
    "$(grep -c $'\tPASS\t' "$RESULTS" || true)" "$(grep -c $'\tFAIL\t' "$RESULTS" || true)" \
    "$(grep -c $'\tSKIP\t' "$RESULTS" || true)" "$(wc -l <"$RESULTS")" "$((SECONDS - RUN_STARTED))"
  while IFS=$'\t' read -r spec result seconds reason; do
    if grep -qx "$spec" <<<"$allowed"; then
      [[ $result == PASS ]] || { echo "allow-listed test $spec: $result $reason"; failed=1; }
    elif [[ $result == PASS ]]; then
      newly+=("$spec")
    fi
  done <"$RESULTS"
  ((${#newly[@]} == 0)) || echo "passing, not in $ALLOW: ${newly[*]}"
  return "$failed"
}

main() {
  local mode=quick specs=() selected allowed
  while (($#)); do
    case "$1" in
      --quick) mode=quick ;;
      --ci) mode=ci ;;
      --all) mode=all ;;
      --build) mode=build ;;
      -h | --help) usage ;;
      [0-9][0-9][0-9][0-9] | [0-9][0-9][0-9][0-9]/[a-z]*) mode=list specs+=("$1") ;;
      *) usage ;;
    esac
    shift
  done
  build_suite
  build_ferry
  [[ $mode != build ]] || return 0
  allowed=$(allowed_tests 0)
  case "$mode" in
    quick) selected=$allowed ;;
    ci) selected=$(allowed_tests 1) ;;
    all) selected=$(broker_tests) ;;
    list) selected=$(printf '%s\n' "${specs[@]}") ;;
  esac
  WORK=$(mktemp -d -t ferry-librdkafka-tests.XXXXXX)
  trap cleanup EXIT
  RESULTS=$WORK/results.tsv
  : >"$RESULTS"
  kafka_tools
  rm -f "$BUILD"/tests/stats_*.json  # what tests wrote on earlier runs
  RUN_STARTED=$SECONDS
  # shellcheck disable=SC2086 # one word per test
  run_tests $selected
  if grep -q $'\tFAIL\t' "$RESULTS"; then KEEP_WORK=1; fi
  report "$allowed"
}

main "$@"
