#!/usr/bin/env bash
# Builds krew (as _output/bin/kubectl-krew, the name kubectl finds it by) and
# validate-krew-manifest, the krew-index's own check of a plugin manifest, at
# the version hack/krew/go.mod pins, and prints their paths. The plugin's
# test (TestTimelineKrewManifest) validates and installs the manifest that
# hack/build-plugin.sh renders with them.
#
# The binaries are built without krew's version stamp: krew then counts as a
# development build and never runs its upgrade check, which would call
# GitHub's API (tests send nothing beyond loopback).
#
# Cached: a stamp file records the krew version; when it matches, nothing is
# rebuilt.
#
# Env: FORCE=1 rebuilds regardless of the stamp.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"

KREW_DIR="${REPO_ROOT}/hack/krew"
STAMP="${OUT_BIN}/.krew.stamp"
KREW_VERSION="$(awk '$1 == "require" && $2 == "sigs.k8s.io/krew" {print $3}' "${KREW_DIR}/go.mod")"
[[ "${KREW_VERSION}" =~ ^v[0-9] ]] || fail "cannot read sigs.k8s.io/krew version from ${KREW_DIR}/go.mod (got '${KREW_VERSION}')"
want="krew=${KREW_VERSION}"

fresh() {
  [[ -x "${OUT_BIN}/kubectl-krew" && -x "${OUT_BIN}/validate-krew-manifest" && -f "${STAMP}" && "$(<"${STAMP}")" == "${want}" ]]
}

if [[ "${FORCE:-}" == 1 ]] || ! fresh; then
  with_lock build-krew
  # Someone else may have built it while we waited for the lock.
  if [[ "${FORCE:-}" == 1 ]] || ! fresh; then
    export GOWORK=off CGO_ENABLED="${CGO_ENABLED:-0}"
    cd "${KREW_DIR}"
    tmp="$(mktemp -d "${OUT_BIN}/.build-krew.XXXXXX")"
    trap 'rm -rf "${tmp}"' EXIT
    log "building krew ${KREW_VERSION}"
    start=${SECONDS}
    go build -trimpath -ldflags "-s -w" -o "${tmp}/" sigs.k8s.io/krew/cmd/krew sigs.k8s.io/krew/cmd/validate-krew-manifest
    mv -f "${tmp}/krew" "${OUT_BIN}/kubectl-krew"
    mv -f "${tmp}/validate-krew-manifest" "${OUT_BIN}/validate-krew-manifest"
    echo "${want}" > "${STAMP}"
    log "built krew in $((SECONDS - start))s"
  fi
fi

echo "${OUT_BIN}/kubectl-krew"
echo "${OUT_BIN}/validate-krew-manifest"
