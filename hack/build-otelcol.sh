#!/usr/bin/env bash
# Builds the OpenTelemetry Collector of TestOTelCollectorFeed into
# _output/bin/otelcol and prints its path. The collector builder (ocb), at
# the version hack/otelcol/go.mod pins, generates the collector's module from
# hack/otelcol/builder-config.yaml into _output/otelcol and compiles it.
#
# The checksum database this machine reaches knows none of the collector's
# v0.148.0 modules, so they are exempt from it (GONOSUMDB) and pinned instead
# by hack/otelcol/collector.sum, the generated module's go.sum: it is copied in
# before the builder runs go mod tidy, so a module whose content changed fails
# the build, and a tidy that needs an entry the file lacks fails too.
# UPDATE_SUM=1 rewrites collector.sum after a change of builder-config.yaml.
#
# Cached: a stamp file next to the binary records the hash of the builder's
# go.mod and go.sum, builder-config.yaml and collector.sum; when it matches,
# nothing is rebuilt.
#
# Env: FORCE=1 rebuilds regardless of the stamp.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"

SRC="${REPO_ROOT}/hack/otelcol"
GEN="${REPO_ROOT}/_output/otelcol"
BIN="${OUT_BIN}/otelcol"
STAMP="${OUT_BIN}/.otelcol.stamp"
SUM="${SRC}/collector.sum"

BUILDER_VERSION="$(awk '$1 == "require" && $2 == "go.opentelemetry.io/collector/cmd/builder" {print $3}' "${SRC}/go.mod")"
[[ "${BUILDER_VERSION}" =~ ^v0\. ]] || fail "cannot read go.opentelemetry.io/collector/cmd/builder version from ${SRC}/go.mod (got '${BUILDER_VERSION}')"
[[ -f "${SUM}" || "${UPDATE_SUM:-}" == 1 ]] || fail "${SUM} is missing: run with UPDATE_SUM=1 to write it"
want() { echo "builder=${BUILDER_VERSION} src=$(sha256_of "${SRC}/go.mod" "${SRC}/go.sum" "${SRC}/builder-config.yaml" "${SUM}")"; }

fresh() { [[ -x "${BIN}" && -f "${STAMP}" && "$(<"${STAMP}")" == "$(want)" ]]; }

if [[ "${FORCE:-}" == 1 || "${UPDATE_SUM:-}" == 1 ]] || ! fresh; then
  with_lock build-otelcol
  # Someone else may have built it while we waited for the lock.
  if [[ "${FORCE:-}" == 1 || "${UPDATE_SUM:-}" == 1 ]] || ! fresh; then
    export GOWORK=off CGO_ENABLED="${CGO_ENABLED:-0}"
    export GONOSUMDB="github.com/open-telemetry/opentelemetry-collector-contrib,go.opentelemetry.io/collector${GONOSUMDB:+,${GONOSUMDB}}"
    rm -rf "${GEN}"
    mkdir -p "${GEN}"
    if [[ "${UPDATE_SUM:-}" != 1 ]]; then
      cp "${SUM}" "${GEN}/go.sum"
    fi
    cd "${SRC}"
    log "building the OpenTelemetry Collector with the collector builder ${BUILDER_VERSION}"
    start=${SECONDS}
    # output_path in builder-config.yaml is ../../_output/otelcol, relative
    # to hack/otelcol.
    go run go.opentelemetry.io/collector/cmd/builder --config builder-config.yaml >"${GEN}.log" 2>&1 ||
      { cat "${GEN}.log" >&2; fail "the collector builder failed (log above)"; }
    if [[ "${UPDATE_SUM:-}" == 1 ]]; then
      cp "${GEN}/go.sum" "${SUM}"
      log "wrote ${SUM}"
    elif ! cmp -s "${SUM}" "${GEN}/go.sum"; then
      diff "${SUM}" "${GEN}/go.sum" >&2 || true
      fail "go mod tidy changed the pinned collector.sum (diff above); rerun with UPDATE_SUM=1 if builder-config.yaml changed"
    fi
    out="$("${GEN}/otelcol" components)" || fail "built collector does not run: ${out}"
    for component in k8sobjects file; do
      grep -q "name: ${component}\$" <<<"${out}" || fail "built collector lacks the ${component} component: ${out}"
    done
    mv -f "${GEN}/otelcol" "${BIN}"
    want > "${STAMP}"
    log "built the OpenTelemetry Collector in $((SECONDS - start))s"
  fi
fi

echo "${BIN}"
