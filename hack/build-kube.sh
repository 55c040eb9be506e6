#!/usr/bin/env bash
# Builds the reference Kubernetes binaries at the version hack/tools/go.mod
# pins (v1.36.3) into _output/bin/, and prints their paths: kube-apiserver and
# kubectl for the integration tier, and kubelet, kube-proxy, kube-scheduler,
# kube-controller-manager and kubeadm for the real-cluster tier (test/cluster).
# The version is stamped at link time the way Kubernetes' own build does
# (hack/lib/version.sh); without it the binaries report
# v0.0.0-master+$Format:%H$ and kubectl cannot parse the server version.
#
# Cached: when a binary already exists and reports the pinned version, it is
# not rebuilt. The targets missing are built by one go build, so the packages
# they share compile once. A cold build of all seven takes over ten minutes
# on 2 cores; kubelet and the others add a few minutes to kube-apiserver's.
#
# Usage: hack/build-kube.sh [TARGET...]   (default: all seven)
# Env:   FORCE=1 rebuilds regardless of the cache.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"

TOOLS_DIR="${REPO_ROOT}/hack/tools"
# The version comes from the tools module's go.mod, the single place it is pinned.
KUBE_VERSION="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3} $1 == "k8s.io/kubernetes" && $2 ~ /^v/ {print $2}' "${TOOLS_DIR}/go.mod" | head -n1)"
[[ "${KUBE_VERSION}" =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || fail "cannot read k8s.io/kubernetes version from ${TOOLS_DIR}/go.mod (got '${KUBE_VERSION}')"
KUBE_MAJOR="${BASH_REMATCH[1]}"
KUBE_MINOR="${BASH_REMATCH[2]}"

declare -A PKG=(
  [kube-apiserver]=k8s.io/kubernetes/cmd/kube-apiserver
  [kubectl]=k8s.io/kubernetes/cmd/kubectl
  [kubelet]=k8s.io/kubernetes/cmd/kubelet
  [kube-proxy]=k8s.io/kubernetes/cmd/kube-proxy
  [kube-scheduler]=k8s.io/kubernetes/cmd/kube-scheduler
  [kube-controller-manager]=k8s.io/kubernetes/cmd/kube-controller-manager
  [kubeadm]=k8s.io/kubernetes/cmd/kubeadm
)
ALL=(kube-apiserver kubectl kubelet kube-proxy kube-scheduler kube-controller-manager kubeadm)

# version_ok NAME: the binary exists and reports KUBE_VERSION.
version_ok() {
  local bin="${OUT_BIN}/$1" out
  [[ -x "${bin}" ]] || return 1
  case "$1" in
    kube-apiserver|kubelet|kube-proxy|kube-scheduler|kube-controller-manager)
                    out="$("${bin}" --version 2>/dev/null)" || return 1
                    [[ "${out}" == "Kubernetes ${KUBE_VERSION}" ]] ;;
    kubeadm)        out="$("${bin}" version -o short 2>/dev/null)" || return 1
                    [[ "${out}" == "${KUBE_VERSION}" ]] ;;
    kubectl)        out="$("${bin}" version --client 2>/dev/null)" || return 1
                    grep -qx "Client Version: ${KUBE_VERSION}" <<<"${out}" ;;
  esac
}

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${ALL[@]}")
for t in "${targets[@]}"; do
  [[ -n "${PKG[$t]:-}" ]] || fail "unknown target '$t' (want one of ${ALL[*]})"
done

with_lock build-kube

todo=()
for t in "${targets[@]}"; do
  if [[ "${FORCE:-}" == 1 ]] || ! version_ok "$t"; then
    todo+=("$t")
  fi
done

if [[ ${#todo[@]} -gt 0 ]]; then
  export GOWORK=off CGO_ENABLED="${CGO_ENABLED:-0}"
  cd "${TOOLS_DIR}"
  # buildDate: the module's publication time, so rebuilds are reproducible.
  BUILD_DATE="$(go list -m -f '{{if .Time}}{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}{{end}}' k8s.io/kubernetes)"
  [[ -n "${BUILD_DATE}" ]] || BUILD_DATE="1970-01-01T00:00:00Z"
  ldflags=(-s -w)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=(
      "-X ${p}.gitVersion=${KUBE_VERSION}"
      "-X ${p}.gitMajor=${KUBE_MAJOR}"
      "-X ${p}.gitMinor=${KUBE_MINOR}"
      "-X ${p}.gitTreeState=clean"
      "-X ${p}.buildDate=${BUILD_DATE}"
    )
  done
  pkgs=()
  for t in "${todo[@]}"; do pkgs+=("${PKG[$t]}"); done

  tmp="$(mktemp -d "${OUT_BIN}/.build-kube.XXXXXX")"
  trap 'rm -rf "${tmp}"' EXIT
  log "building ${todo[*]} ${KUBE_VERSION} (cold: several minutes)"
  start=${SECONDS}
  # One go build for all targets so the shared packages compile once.
  go build -trimpath -ldflags "${ldflags[*]}" -o "${tmp}/" "${pkgs[@]}"
  for t in "${todo[@]}"; do
    mv -f "${tmp}/${t}" "${OUT_BIN}/${t}"
    version_ok "$t" || fail "${OUT_BIN}/${t} does not report ${KUBE_VERSION} after the build"
  done
  log "built ${todo[*]} in $((SECONDS - start))s"
fi

for t in "${targets[@]}"; do
  echo "${OUT_BIN}/${t}"
done
