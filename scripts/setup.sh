#!/usr/bin/env bash
# Installs what a fresh Debian machine needs to build and test Ferry; with --run, only what
# building and running the daemon needs (scripts/run.sh, the quick start).
#
# Idempotent and quiet: when everything is present it prints nothing and touches nothing;
# apt-get update runs only when a package is missing. Works as root; otherwise uses sudo
# when it is available.
set -euo pipefail

# libclang-dev: bindgen for `cargo check --features fdb`.
# amqp-tools, kcat: command-line AMQP and Kafka clients for interoperability tests.
# make: builds jemalloc (the daemon's allocator, tikv-jemalloc-sys).
# rabbitmq-server: the private RabbitMQ node the tests start (scripts/rabbitmq-node.sh).
# libssl-dev, pkg-config: librdkafka (rdkafka's `ssl` feature) built with OpenSSL: it builds
# TLS and SASL SCRAM only against OpenSSL (Kafka front tests, external Kafka clusters).
# curl: the HTTPS test of the metrics endpoint.
# openssl: the throwaway CA and certificates of scripts/bench-tls.sh.
# chromium, chromium-driver: the headless browser and its WebDriver server that the web UI
# test (tests/daemon/ui.rs) and scripts/ui-screenshots.sh drive.
# g++, zlib1g-dev, libzstd-dev, rapidjson-dev: scripts/librdkafka-tests.sh builds librdkafka's
# own test suite (C and C++ tests, gzip and zstd codecs; RapidJSON checks statistics JSON).
# podman, runc, debootstrap: the container image test (tests/daemon/image.rs) builds the image
# with scripts/image.sh on a Debian base debootstrap makes, and runs it; runc because crun,
# podman's default runtime, refuses a hybrid cgroup hierarchy.
APT_PACKAGES=(libclang-dev amqp-tools kcat make rabbitmq-server libssl-dev pkg-config curl openssl
  chromium chromium-driver g++ zlib1g-dev libzstd-dev rapidjson-dev podman runc debootstrap)
# Python clients for interoperability tests, and the module each one provides.
# selenium: the WebDriver client that drives Chromium through the web UI.
# confluent-kafka: librdkafka's admin API from Python (tests/python/kafka_admin.py,
# tests/python/kafka_scram_credentials.py).
# kubernetes-validate: the Kubernetes API's JSON schemas, offline, against which
# tests/daemon/deploy_config.rs checks the manifests `kubectl kustomize` renders.
# python-qpid-proton: Qpid Proton, AMQP 1.0's reference implementation, against which
# tests/amqp10/ checks Ferry's AMQP 1.0 message codec.
declare -A PIP_MODULES=([pika]=pika [kafka-python]=kafka [selenium]=selenium
  [confluent-kafka]=confluent_kafka [kubernetes-validate]=kubernetes_validate
  [python-qpid-proton]=proton)
# What `cargo build --release` of the daemon needs: make (jemalloc), libssl-dev and
# pkg-config (librdkafka, which `ferry bench` and the bridge's Kafka endpoints link).
RUN_PACKAGES=(make libssl-dev pkg-config)
run_only=false
if [[ ${1:-} == --run ]]; then
  run_only=true
  APT_PACKAGES=("${RUN_PACKAGES[@]}")
  PIP_MODULES=()
fi

log() { echo "setup.sh: $*"; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    echo "setup.sh: '$*' needs root; run as root or install sudo" >&2
    return 1
  fi
}

command -v cargo >/dev/null 2>&1 || { echo "setup.sh: cargo not found; install Rust from https://rustup.rs" >&2; exit 1; }
if ! $run_only; then
  command -v python3 >/dev/null 2>&1 || APT_PACKAGES+=(python3)
  python3 -m pip --version >/dev/null 2>&1 || APT_PACKAGES+=(python3-pip)
fi

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  log "installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  if [[ " ${missing[*]} " == *" rabbitmq-server "* ]]; then
    # Only the package's programs are needed: the tests run private nodes. The machine-wide
    # node that installing it starts would hold port 5672, Ferry's own AMQP default.
    if command -v systemctl >/dev/null 2>&1 && systemctl is-enabled --quiet rabbitmq-server 2>/dev/null; then
      log "stopping and disabling the rabbitmq-server service the package started"
      as_root systemctl disable --now --quiet rabbitmq-server
    elif command -v service >/dev/null 2>&1 && service rabbitmq-server status >/dev/null 2>&1; then
      log "stopping the rabbitmq-server service the package started"
      as_root service rabbitmq-server stop >/dev/null
    fi
  fi
fi

pip_missing=()
for pkg in "${!PIP_MODULES[@]}"; do
  python3 -c "import ${PIP_MODULES[$pkg]}" 2>/dev/null || pip_missing+=("$pkg")
done
if ((${#pip_missing[@]})); then
  log "installing Python packages ${pip_missing[*]}"
  pip_args=(install --quiet --disable-pip-version-check)
  # Debian's system Python refuses pip installs (PEP 668) unless told to go ahead.
  if python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")))'; then
    pip_args+=(--break-system-packages)
  fi
  PIP_ROOT_USER_ACTION=ignore python3 -m pip "${pip_args[@]}" "${pip_missing[@]}"
fi

# kubectl renders the kustomizations for that check; it comes with the machine (Debian's own
# kubernetes-client is too old for their `labels:`), so it is only reported when missing.
if ! $run_only && ! command -v kubectl >/dev/null 2>&1; then
  log "kubectl not found: the Kubernetes manifest tests will fail (install kubectl 1.27 or later)"
fi

if ! $run_only && ! cargo nextest --version >/dev/null 2>&1; then
  log "installing cargo-nextest"
  cargo install --locked --quiet cargo-nextest
fi
