#!/usr/bin/env bash
# Fuzzes Ferry's decoders with cargo-fuzz (libFuzzer): the targets in fuzz/fuzz_targets/,
# their corpora in fuzz/corpus/TARGET/ and the inputs that once failed in
# fuzz/regressions/TARGET/ (docs/fuzzing.md says what each target feeds).
#
#   scripts/fuzz.sh --smoke             build every target, run each over its corpus and then
#                                       SMOKE_SECONDS (default 12) of new inputs; fails on any
#                                       crash, timeout or over-allocation
#   scripts/fuzz.sh TARGET [SECONDS]    run one target SECONDS (default 600); new inputs are
#                                       added to its corpus, a failing input is kept in
#                                       fuzz/artifacts/TARGET/
#   scripts/fuzz.sh cmin TARGET         minimize TARGET's corpus in place
#   scripts/fuzz.sh seeds               write the seed inputs (fuzz/examples/seeds.rs), then
#                                       minimize every corpus
#
# Every run has the same limits: inputs up to 64 KiB, a 10 s timeout per input, 512 MB of
# RSS and no single allocation above 64 MB (so a length field that drives an allocation is
# a failure). Builds go to $HOME/.cache/ferry/fuzz-target (FUZZ_TARGET_DIR), never to the
# main build's target directory. Needs the nightly toolchain; installs it and cargo-fuzz
# when missing (quiet when present). One libFuzzer process at a time.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(amqp_frames kafka_requests sasl stored_records config stream_frames amqp10_messages)
SMOKE_SECONDS=${SMOKE_SECONDS:-12}
LIMITS=(-max_len=65536 -timeout=10 -rss_limit_mb=512 -malloc_limit_mb=64)
# ASan's defaults keep 256 MB of freed memory in quarantine and every distinct allocation
# stack: a recursive decoder (amqp10_messages) then passes the RSS limit with a live heap of
# 26 MB. A smaller quarantine and 16-frame stacks keep the limit about the target's own use.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=64:malloc_context_size=16"
export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-$HOME/.cache/ferry/fuzz-target}
# cc (C dependencies: zstd, lz4, jemalloc, librdkafka's) would build C with
# -fsanitize=address too under -Zsanitizer=address; librdkafka's configure script then
# cannot link its zstd check. Only Ferry's Rust code is the fuzzing subject.
export CFLAGS="${CFLAGS:+$CFLAGS }-fno-sanitize=address"
export CXXFLAGS="${CXXFLAGS:+$CXXFLAGS }-fno-sanitize=address"

log() { echo "fuzz.sh: $*" >&2; }
die() { log "$*"; exit 1; }
usage() { sed -n '6,14s/^#   //p' "$0" >&2; exit 2; }

# Installs the nightly toolchain and cargo-fuzz when missing; prints nothing otherwise.
ensure_tools() {
  if ! rustup toolchain list | grep -q '^nightly'; then
    log "installing the nightly toolchain"
    rustup toolchain install nightly --profile minimal >/dev/null
  fi
  if ! cargo fuzz --version >/dev/null 2>&1; then
    log "installing cargo-fuzz"
    cargo install --locked --quiet cargo-fuzz
  fi
}

is_target() {
  local t
  for t in "${TARGETS[@]}"; do [[ $t == "$1" ]] && return 0; done
  return 1
}

fuzz() { (cd fuzz && cargo +nightly fuzz "$@"); }

build_all() {
  local start=$SECONDS
  fuzz build >/dev/null
  log "built ${#TARGETS[@]} targets in $((SECONDS - start)) s"
}

# Runs TARGET over CORPUS_DIRS and its regressions for SECONDS; new inputs go to the
# first directory.
run_target() {
  local target=$1 seconds=$2
  shift 2
  local dirs=("$@")
  [[ -d fuzz/regressions/$target ]] && dirs+=("regressions/$target")
  fuzz run "$target" "${dirs[@]}" -- "${LIMITS[@]}" -max_total_time="$seconds" -print_final_stats=1
}

smoke() {
  local work target start=$SECONDS
  work=$(mktemp -d -t ferry-fuzz.XXXXXX)
  # shellcheck disable=SC2064 # expand now: the directory of this run
  trap "rm -rf '$work'" EXIT
  build_all
  for target in "${TARGETS[@]}"; do
    mkdir -p "$work/$target"
    log "$target: its corpus, then ${SMOKE_SECONDS} s of new inputs"
    # New inputs go to the scratch directory: the smoke never changes the repository.
    run_target "$target" "$SMOKE_SECONDS" "$work/$target" "corpus/$target" \
      >"$work/$target.log" 2>&1 || {
      tail -n 40 "$work/$target.log" >&2
      die "$target failed; the input is in fuzz/artifacts/$target/"
    }
    grep -E '^stat::number_of_executed_units' "$work/$target.log" | sed "s/^/fuzz.sh: $target: /" >&2 || true
  done
  log "smoke passed in $((SECONDS - start)) s"
}

# Minimizes TARGET's corpus (built by build_all): its seeds, and of the other inputs only
# as many as cover the code edges the seeds do not (libFuzzer's set-cover merge).
cmin() {
  local target=$1 host merged
  host=$(rustc +nightly -vV | sed -n 's/^host: //p')
  merged=$(mktemp -d -t ferry-fuzz-cmin.XXXXXX)
  chmod 755 "$merged"
  find "fuzz/corpus/$target" -name 'seed-*' -exec cp {} "$merged/" \;
  "$CARGO_TARGET_DIR/$host/release/$target" -set_cover_merge=1 -use_counters=0 "${LIMITS[@]}" \
    "$merged" "fuzz/corpus/$target" >/dev/null 2>&1
  rm -rf "fuzz/corpus/$target"
  mv "$merged" "fuzz/corpus/$target"
  log "$target: $(find "fuzz/corpus/$target" -type f | wc -l) inputs," \
    "$(du -s --apparent-size -h "fuzz/corpus/$target" | cut -f1)"
}

seeds() {
  (cd fuzz && cargo run --quiet --example seeds)
  build_all
  local target
  for target in "${TARGETS[@]}"; do cmin "$target"; done
}

main() {
  [[ $# -ge 1 ]] || usage
  ensure_tools
  case $1 in
    --smoke) smoke ;;
    cmin) [[ $# -eq 2 ]] && is_target "$2" || usage; build_all; cmin "$2" ;;
    seeds) seeds ;;
    -h|--help) usage ;;
    *)
      is_target "$1" || die "unknown target '$1' (one of ${TARGETS[*]})"
      mkdir -p "fuzz/corpus/$1"
      run_target "$1" "${2:-600}" "corpus/$1"
      ;;
  esac
}

main "$@"
