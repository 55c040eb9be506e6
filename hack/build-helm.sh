#!/usr/bin/env bash
# Builds helm v3, at the version hack/helm/go.mod pins, into _output/bin/helm
# and prints its path. The chart tests (test/integration/deploy, TestHelm*) run it
# to lint and render deploy/helm/event-apiserver. The version is stamped at
# link time the way helm's own Makefile does; without it `helm version`
# reports only "v3.22" and charts' kubeVersion checks see no patch level.
#
# Cached: a stamp file next to the binary records the pinned version and the
# hash of the module's go.mod, go.sum and tools.go; when it matches, nothing
# is rebuilt.
#
# Env: FORCE=1 rebuilds regardless of the stamp.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"

SRC="${REPO_ROOT}/hack/helm"
BIN="${OUT_BIN}/helm"
STAMP="${OUT_BIN}/.helm.stamp"

HELM_VERSION="$(awk '$1 == "require" && $2 == "helm.sh/helm/v3" {print $3}' "${SRC}/go.mod")"
[[ "${HELM_VERSION}" =~ ^v3\. ]] || fail "cannot read helm.sh/helm/v3 version from ${SRC}/go.mod (got '${HELM_VERSION}')"
want="helm=${HELM_VERSION} src=$(sha256_of "${SRC}/go.mod" "${SRC}/go.sum" "${SRC}/tools.go")"

fresh() { [[ -x "${BIN}" && -f "${STAMP}" && "$(<"${STAMP}")" == "${want}" ]]; }

if [[ "${FORCE:-}" == 1 ]] || ! fresh; then
  with_lock build-helm
  # Someone else may have built it while we waited for the lock.
  if [[ "${FORCE:-}" == 1 ]] || ! fresh; then
    export GOWORK=off CGO_ENABLED="${CGO_ENABLED:-0}"
    cd "${SRC}"
    # helm's default capabilities (what `helm template` renders against
    # without --kube-version) follow the k8s.io modules it is built with,
    # as its Makefile sets them.
    k8s="$(go list -m -f '{{.Version}}' k8s.io/client-go)"
    [[ "${k8s}" =~ ^v0\.([0-9]+)\. ]] || fail "cannot read helm's k8s.io/client-go version (got '${k8s}')"
    k8s_minor="${BASH_REMATCH[1]}"
    pkg=helm.sh/helm/v3
    ldflags=(-s -w
      "-X ${pkg}/internal/version.version=${HELM_VERSION}"
      "-X ${pkg}/internal/version.gitTreeState=clean"
      "-X ${pkg}/pkg/lint/rules.k8sVersionMajor=1"
      "-X ${pkg}/pkg/lint/rules.k8sVersionMinor=${k8s_minor}"
      "-X ${pkg}/pkg/chartutil.k8sVersionMajor=1"
      "-X ${pkg}/pkg/chartutil.k8sVersionMinor=${k8s_minor}"
    )
    tmp="$(mktemp -d "${OUT_BIN}/.build-helm.XXXXXX")"
    trap 'rm -rf "${tmp}"' EXIT
    log "building helm ${HELM_VERSION}"
    start=${SECONDS}
    go build -trimpath -ldflags "${ldflags[*]}" -o "${tmp}/helm" "${pkg}/cmd/helm"
    out="$("${tmp}/helm" version --template '{{.Version}}')" || fail "built helm does not run: ${out}"
    [[ "${out}" == "${HELM_VERSION}" ]] || fail "built helm reports ${out}, want ${HELM_VERSION}"
    mv -f "${tmp}/helm" "${BIN}"
    echo "${want}" > "${STAMP}"
    log "built helm ${HELM_VERSION} in $((SECONDS - start))s"
  fi
fi

echo "${BIN}"
