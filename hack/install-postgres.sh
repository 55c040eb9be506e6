#!/usr/bin/env bash
# Installs PostgreSQL (Debian's postgresql package, 15 on bookworm) for the
# history store tests, which start private clusters from its binaries
# (internal/pgtest). Nothing is started or enabled here. Without the binaries
# those tests skip, saying so; CI must not skip them, so hack/test.sh runs this.
set -o errexit -o nounset -o pipefail

if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || [[ -n "${POSTGRES_BIN:-}" ]]; then
  exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
  echo "PostgreSQL is not installed and this is not root: run 'sudo apt-get install -y postgresql'" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
# The package starts a cluster of its own; the tests do not use it.
if command -v pg_ctlcluster >/dev/null; then
  for cluster in /etc/postgresql/*/main; do
    [[ -d "${cluster}" ]] || continue
    version="$(basename "$(dirname "${cluster}")")"
    pg_ctlcluster "${version}" main stop 2>/dev/null || true
  done
fi
