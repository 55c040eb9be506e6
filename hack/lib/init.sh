#!/usr/bin/env bash
# Shared helpers for hack/*.sh. Source it; it sets:
#   REPO_ROOT  the repository root (absolute, symlinks resolved)
#   OUT_BIN    _output/bin under REPO_ROOT (created)
# and defines log / fail / with_lock.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
OUT_BIN="${REPO_ROOT}/_output/bin"
mkdir -p "${OUT_BIN}"

log() { echo "+++ [$(date +'%H:%M:%S')] $*" >&2; }
fail() { echo "!!! $*" >&2; exit 1; }

# with_lock NAME: serialise concurrent runs of the same build (several test
# packages may try to build the same binary at once). Holds an flock on
# _output/.NAME.lock until the calling script exits. No-op without flock.
with_lock() {
  local lock="${REPO_ROOT}/_output/.$1.lock"
  if command -v flock >/dev/null 2>&1; then
    exec {__hack_lock_fd}>"${lock}"
    flock "${__hack_lock_fd}"
  fi
}

# sha256_of FILE...: one digest over the given files' contents.
sha256_of() {
  cat "$@" | sha256sum | cut -d' ' -f1
}
