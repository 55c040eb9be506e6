#!/usr/bin/env bash
# Builds etcd from the go.etcd.io/etcd/server/v3 version the root go.mod pins
# (hack/etcd is a main calling etcdmain.Main) into _output/bin/etcd and prints
# its path. Tests that need etcd as a separate process use this binary.
#
# Cached: a stamp file next to the binary records the etcd version and the
# hash of hack/etcd/main.go; when both match, nothing is rebuilt.
#
# Env: FORCE=1 rebuilds regardless of the stamp.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"

BIN="${OUT_BIN}/etcd"
STAMP="${OUT_BIN}/.etcd.stamp"

# Read the version straight from go.mod (fast; `go list -m` would load the
# whole module graph). The root go.mod has no replace for etcd.
ETCD_VERSION="$(awk '($1 == "go.etcd.io/etcd/server/v3") {print $2; exit} ($1 == "require" && $2 == "go.etcd.io/etcd/server/v3") {print $3; exit}' "${REPO_ROOT}/go.mod")"
[[ "${ETCD_VERSION}" =~ ^v3\. ]] || fail "cannot read go.etcd.io/etcd/server/v3 version from ${REPO_ROOT}/go.mod (got '${ETCD_VERSION}')"
want="etcd=${ETCD_VERSION} main=$(sha256_of "${REPO_ROOT}/hack/etcd/main.go")"

fresh() { [[ -x "${BIN}" && -f "${STAMP}" && "$(<"${STAMP}")" == "${want}" ]]; }

if [[ "${FORCE:-}" == 1 ]] || ! fresh; then
  with_lock build-etcd
  # Someone else may have built it while we waited for the lock.
  if [[ "${FORCE:-}" == 1 ]] || ! fresh; then
    export GOWORK=off CGO_ENABLED="${CGO_ENABLED:-0}"
    cd "${REPO_ROOT}"
    tmp="$(mktemp -d "${OUT_BIN}/.build-etcd.XXXXXX")"
    trap 'rm -rf "${tmp}"' EXIT
    log "building etcd ${ETCD_VERSION}"
    start=${SECONDS}
    go build -trimpath -ldflags "-s -w" -o "${tmp}/etcd" ./hack/etcd
    out="$("${tmp}/etcd" --version)" || fail "built etcd does not run: ${out}"
    grep -q "^etcd Version: ${ETCD_VERSION#v}\$" <<<"${out}" || fail "built etcd reports an unexpected version: ${out}"
    mv -f "${tmp}/etcd" "${BIN}"
    echo "${want}" > "${STAMP}"
    log "built etcd ${ETCD_VERSION} in $((SECONDS - start))s"
  fi
fi

echo "${BIN}"
