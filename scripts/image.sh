#!/usr/bin/env bash
# Builds Ferry's container image from a ferry binary built on this machine, with no container
# registry: the runtime base is Debian made with debootstrap from the machine's own apt mirror,
# once, cached as a tarball under $HOME/.cache/ferry/image/ and imported into the engine.
# The image is deploy/container/Containerfile's target "prebuilt" (docs/operations.md, "The
# container image").
#
# Usage:
#   scripts/image.sh build BINARY [TAG]   build TAG (default localhost/ferry:VERSION, VERSION
#                                         from Cargo.toml) from BINARY, e.g. target/release/ferry
#   scripts/image.sh base                 make and import the Debian base only
#   scripts/image.sh engine ARGS...       run the container engine with ARGS and the options
#                                         this machine needs (what the tests use)
#
# Environment:
#   FERRY_CONTAINER_ENGINE   podman or docker (default: podman if installed, else docker)
#   FERRY_DEBIAN_MIRROR      the mirror debootstrap uses (default: the one apt's sources name)
#   FERRY_IMAGE_CACHE        where the base tarball is kept (default $HOME/.cache/ferry/image)
#   FERRY_IMAGE_STRIP=1      strip BINARY's debug information in the image (a debug build's
#                            is hundreds of MiB); the line tables of a release build are kept
#                            otherwise, for backtraces
#   FERRY_FDB_CLIENT         libfdb_c.so to ship beside a binary built with --features fdb
#                            (FoundationDB's client package installs /usr/lib/libfdb_c.so)
#
# Needs root for debootstrap (or sudo), debootstrap and podman or docker; scripts/setup.sh
# installs them.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
# The base's release: the one this machine runs, whose glibc, OpenSSL and zlib a binary built
# here was linked against.
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
# What the binary loads at run time beside glibc (`ldd ferry`), and the CA certificates for
# TLS to external brokers; the Containerfile installs them itself on a registry's base.
packages=libssl3,zlib1g,ca-certificates
cache=${FERRY_IMAGE_CACHE:-$HOME/.cache/ferry/image}
base_tar=$cache/debian-$suite-minbase.tar
base_tag=localhost/ferry-base:$suite

log() { echo "image.sh: $*" >&2; }
die() { echo "image.sh: error: $*" >&2; exit 1; }

as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "'$*' needs root; run as root or install sudo"
  fi
}

engine_name() {
  if [[ -n ${FERRY_CONTAINER_ENGINE:-} ]]; then
    echo "$FERRY_CONTAINER_ENGINE"
  elif command -v podman >/dev/null 2>&1; then
    echo podman
  elif command -v docker >/dev/null 2>&1; then
    echo docker
  else
    die "neither podman nor docker is installed (scripts/setup.sh installs podman)"
  fi
}

# The engine with the options this machine needs. crun, podman's default runtime, refuses a
# hybrid cgroup hierarchy (v1 controllers with a v2 mount beside them, as on this kind of
# machine: "cgroups in hybrid mode not supported"); runc runs there.
engine() {
  local name
  name=$(engine_name)
  if [[ $name == podman && -d /sys/fs/cgroup/unified ]] && command -v runc >/dev/null 2>&1; then
    "$name" --runtime runc "$@"
  else
    "$name" "$@"
  fi
}

# The Debian mirror apt uses here for $suite: one-line sources first, then deb822 ones.
mirror() {
  if [[ -n ${FERRY_DEBIAN_MIRROR:-} ]]; then
    echo "$FERRY_DEBIAN_MIRROR"
    return
  fi
  local uri
  uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
    | awk -v s="$suite" '$1 == "deb" { i = 2; if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                                         if ($(i + 1) == s) { print $i; exit } }')
  if [[ -z $uri ]]; then
    uri=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null \
      | awk -v s="$suite" '/^$/ { u = "" } /^URIs:/ { u = $2 }
                           /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s && u != "") { print u; exit } }')
  fi
  echo "${uri:-http://deb.debian.org/debian}"
}

# Makes the base tarball once; later calls find it in the cache.
make_base_tar() {
  [[ -f $base_tar ]] && return
  command -v debootstrap >/dev/null 2>&1 || die "debootstrap is not installed (scripts/setup.sh installs it)"
  mkdir -p "$cache"
  local root url started
  root=$(mktemp -d "$cache/rootfs.XXXXXX")
  url=$(mirror)
  started=$SECONDS
  log "making the Debian $suite base with debootstrap from $url (about a minute, once)"
  if ! as_root debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$url" \
    >"$cache/debootstrap.log" 2>&1; then
    as_root rm -rf "$root"
    tail -n 20 "$cache/debootstrap.log" >&2
    die "debootstrap of Debian $suite from $url failed (log: $cache/debootstrap.log); is the mirror reachable? set FERRY_DEBIAN_MIRROR to another one"
  fi
  # The image's / is this directory: mktemp made it 0700, which would lock uid 10001 out.
  as_root chmod 0755 "$root"
  # Package files and lists the image does not need; apt-get update fetches lists again.
  as_root rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/debootstrap
  as_root tar --numeric-owner -C "$root" -cf "$base_tar.part" .
  as_root rm -rf "$root"
  mv "$base_tar.part" "$base_tar"
  log "base made in $((SECONDS - started)) s: $base_tar"
}

# Makes the base if needed and imports it into the engine unless it is there already.
base() {
  mkdir -p "$cache"
  # One maker at a time: two builds started together share the first one's base.
  exec 9>"$cache/.lock"
  flock 9
  make_base_tar
  if ! engine image inspect "$base_tag" >/dev/null 2>&1; then
    log "importing $base_tar as $base_tag"
    engine import "$base_tar" "$base_tag" >/dev/null
  fi
  flock -u 9
}

build() {
  local binary=${1:?usage: scripts/image.sh build BINARY [TAG]}
  local version tag
  version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$repo/Cargo.toml" | head -n 1)
  tag=${2:-localhost/ferry:$version}
  [[ -x $binary ]] || die "'$binary' is not an executable ferry binary"
  base

  # The build context: the files the Containerfile copies, and the binary in prebuilt/bin.
  # Beside the cache rather than in /tmp, which others on the machine may clean.
  # (A global: the EXIT trap runs after this function's locals are gone.)
  context=$(mktemp -d "$cache/context.XXXXXX")
  trap 'rm -rf "$context"' EXIT
  mkdir -p "$context/prebuilt/bin" "$context/deploy/container"
  if [[ ${FERRY_IMAGE_STRIP:-0} == 1 ]]; then
    objcopy --strip-debug "$binary" "$context/prebuilt/bin/ferry"
  else
    cp "$binary" "$context/prebuilt/bin/ferry"
  fi
  if [[ -n ${FERRY_FDB_CLIENT:-} ]]; then
    mkdir -p "$context/prebuilt/lib"
    cp "$FERRY_FDB_CLIENT" "$context/prebuilt/lib/libfdb_c.so"
  fi
  cp "$repo/deploy/container/ferry.toml" "$repo/deploy/container/healthcheck" "$context/deploy/container/"

  local args=(build -f "$repo/deploy/container/Containerfile" -t "$tag"
    --target prebuilt --build-arg RUNTIME_BASE="$base_tag")
  # HEALTHCHECK, STOPSIGNAL's record and the like exist only in Docker's image format;
  # podman builds OCI images unless told otherwise, and would drop the health check. Without
  # intermediate images the build commits once: with the vfs storage driver every commit
  # copies the whole file system.
  [[ $(engine_name) == podman ]] && args+=(--format docker --pull=never --layers=false)
  local started=$SECONDS
  log "building $tag from $binary"
  engine "${args[@]}" "$context" >&2
  log "built $tag in $((SECONDS - started)) s"
  echo "$tag"
}

case ${1:-} in
  build) shift; build "$@" ;;
  base) base ;;
  engine) shift; engine "$@" ;;
  *) sed -n '8,13p' "$0" >&2; exit 2 ;;
esac
