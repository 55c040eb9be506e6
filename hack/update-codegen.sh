#!/usr/bin/env bash
# Regenerates deepcopy, conversion and OpenAPI code, and the history group's
# clientset, listers and informers, with k8s.io/code-generator at the version
# go.mod pins. Generated files are committed; verify-codegen.sh checks that
# they match.
set -o errexit -o nounset -o pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "${REPO_ROOT}"

CODEGEN_VERSION="$(go list -m -f '{{.Version}}' k8s.io/code-generator)"
go mod download "k8s.io/code-generator@${CODEGEN_VERSION}"
CODEGEN_PKG="$(go env GOMODCACHE)/k8s.io/code-generator@${CODEGEN_VERSION}"

# Keep the generator binaries out of the user's GOPATH/bin.
export GOBIN="${REPO_ROOT}/_output/bin"
mkdir -p "${GOBIN}"

# shellcheck source=/dev/null
source "${CODEGEN_PKG}/kube_codegen.sh"

MODULE="github.com/eventapiserver/event-apiserver"
BOILERPLATE="${REPO_ROOT}/hack/boilerplate.go.txt"

# gen_helpers runs every generator over a whole tree, and pkg/apis/core and
# pkg/apis/events hold versioned packages whose conversions it cannot write
# (below), so it gets only pkg/apis/history: deepcopy for both history
# packages, and conversions for history.eventapiserver.io/v1alpha1, which
# carries an events.k8s.io/v1 Event whose conversion lives in
# pkg/apis/events/v1. gen_helpers also installs deepcopy-gen and
# conversion-gen into GOBIN.
kube::codegen::gen_helpers \
    --boilerplate "${BOILERPLATE}" \
    --extra-peer-dir "${MODULE}/pkg/apis/events/v1" \
    "${REPO_ROOT}/pkg/apis/history"

rm -f "${REPO_ROOT}/pkg/apis/core/zz_generated.deepcopy.go"
"${GOBIN}/deepcopy-gen" \
    --output-file zz_generated.deepcopy.go \
    --go-header-file "${BOILERPLATE}" \
    "${MODULE}/pkg/apis/core"

# The served versions' conversions are generated here rather than by
# gen_helpers because k8s.io/api/core/v1 has types named like metav1's (List,
# Preconditions): with metav1 as a base peer, conversion-gen pairs them and
# emits code that does not compile. Event's metav1 fields are the same Go
# types on both sides, so no metav1 conversion is needed.
rm -f "${REPO_ROOT}/pkg/apis/core/v1/zz_generated.conversion.go" \
    "${REPO_ROOT}/pkg/apis/events/v1/zz_generated.conversion.go" \
    "${REPO_ROOT}/pkg/apis/events/v1beta1/zz_generated.conversion.go"
"${GOBIN}/conversion-gen" \
    --output-file zz_generated.conversion.go \
    --go-header-file "${BOILERPLATE}" \
    --base-peer-dirs "k8s.io/apimachinery/pkg/conversion,k8s.io/apimachinery/pkg/runtime" \
    --extra-peer-dirs "${MODULE}/pkg/apis/core/v1" \
    "${MODULE}/pkg/apis/core/v1" \
    "${MODULE}/pkg/apis/events/v1" \
    "${MODULE}/pkg/apis/events/v1beta1"

# The served types are k8s.io/api's, so their OpenAPI definitions are
# generated from there (kube_codegen.sh adds the apimachinery packages).
kube::codegen::gen_openapi \
    --boilerplate "${BOILERPLATE}" \
    --output-dir "${REPO_ROOT}/pkg/generated/openapi" \
    --output-pkg "${MODULE}/pkg/generated/openapi" \
    --extra-pkgs "k8s.io/api/core/v1" \
    --extra-pkgs "k8s.io/api/events/v1" \
    --extra-pkgs "k8s.io/apimachinery/pkg/apis/meta/v1" \
    --extra-pkgs "k8s.io/apimachinery/pkg/util/intstr" \
    --report-filename "${REPO_ROOT}/hack/api-rules-violations.list" \
    --output-model-name-file zz_generated.model_name.go \
    ${UPDATE_API_KNOWN_VIOLATIONS:+"--update-report"} \
    "${REPO_ROOT}/pkg"

# A typed clientset, listers and informers for history.eventapiserver.io, as
# sample-apiserver ships for its group; the plugin and the tests use them.
# eventrecords are read-only (+genclient:onlyVerbs=get,list,watch), so there
# are no apply configurations: nothing could send one.
kube::codegen::gen_client \
    --with-watch \
    --boilerplate "${BOILERPLATE}" \
    --output-dir "${REPO_ROOT}/pkg/generated" \
    --output-pkg "${MODULE}/pkg/generated" \
    "${REPO_ROOT}/pkg/apis"
