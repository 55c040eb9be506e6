#!/usr/bin/env bash
# Builds CoreDNS, the cluster DNS of the real-cluster tier (test/cluster), at
# the version hack/coredns/go.mod pins, with only the plugins its Corefile
# uses (hack/coredns/main.go), into _output/bin/coredns, and prints its path.
#
# Cached: a stamp file next to the binary records the hash of the module's
# go.mod, go.sum and main.go; when it matches, nothing is rebuilt.
#
# Env: FORCE=1 rebuilds regardless of the stamp.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"

SRC="${REPO_ROOT}/hack/coredns"
BIN="${OUT_BIN}/coredns"
STAMP="${OUT_BIN}/.coredns.stamp"

COREDNS_VERSION="$(awk '$1 == "require" && $2 == "github.com/coredns/coredns" {print $3}' "${SRC}/go.mod")"
[[ "${COREDNS_VERSION}" =~ ^v1\. ]] || fail "cannot read github.com/coredns/coredns version from ${SRC}/go.mod (got '${COREDNS_VERSION}')"
want="coredns=${COREDNS_VERSION} src=$(sha256_of "${SRC}/go.mod" "${SRC}/go.sum" "${SRC}/main.go")"

fresh() { [[ -x "${BIN}" && -f "${STAMP}" && "$(<"${STAMP}")" == "${want}" ]]; }

if [[ "${FORCE:-}" == 1 ]] || ! fresh; then
  with_lock build-coredns
  # Someone else may have built it while we waited for the lock.
  if [[ "${FORCE:-}" == 1 ]] || ! fresh; then
    export GOWORK=off CGO_ENABLED="${CGO_ENABLED:-0}"
    cd "${SRC}"
    tmp="$(mktemp -d "${OUT_BIN}/.build-coredns.XXXXXX")"
    trap 'rm -rf "${tmp}"' EXIT
    log "building CoreDNS ${COREDNS_VERSION}"
    start=${SECONDS}
    go build -trimpath -ldflags "-s -w" -o "${tmp}/coredns" .
    out="$("${tmp}/coredns" -version)" || fail "built CoreDNS does not run: ${out}"
    grep -q "^CoreDNS-${COREDNS_VERSION#v}\$" <<<"${out}" || fail "built CoreDNS reports an unexpected version: ${out}"
    plugins="$("${tmp}/coredns" -plugins)"
    grep -qw kubernetes <<<"${plugins}" || fail "built CoreDNS lacks the kubernetes plugin: ${plugins}"
    mv -f "${tmp}/coredns" "${BIN}"
    echo "${want}" > "${STAMP}"
    log "built CoreDNS ${COREDNS_VERSION} in $((SECONDS - start))s"
  fi
fi

echo "${BIN}"
