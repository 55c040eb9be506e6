#!/usr/bin/env bash
# Fails on any staticcheck finding in the module's packages, tests included.
# Which checks run, and why some are off, is in staticcheck.conf at the
# repository root. hack/tools/ has its own go.mod, so ./... does not reach it.
#
# staticcheck is installed from the Go module proxy at a pinned version into
# _output/bin, once: the binary is reused while it reports that version.
#
# Env: STATICCHECK_VERSION overrides the pinned version.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${REPO_ROOT}"

# v0.8.x is the first release line that type-checks go1.26 code.
STATICCHECK_VERSION="${STATICCHECK_VERSION:-v0.8.2}"
BIN="${OUT_BIN}/staticcheck"

# `staticcheck -version` prints e.g. "staticcheck 2026.2.2 (0.8.2)".
fresh() { [[ -x "${BIN}" ]] && "${BIN}" -version 2>/dev/null | grep -qF "(${STATICCHECK_VERSION#v})"; }

if ! fresh; then
  with_lock install-staticcheck
  if ! fresh; then
    log "installing staticcheck ${STATICCHECK_VERSION}"
    GOBIN="${OUT_BIN}" GOWORK=off go install "honnef.co/go/tools/cmd/staticcheck@${STATICCHECK_VERSION}"
    fresh || fail "installed staticcheck does not report ${STATICCHECK_VERSION}: $("${BIN}" -version 2>&1)"
  fi
fi

"${BIN}" ./...
log "staticcheck ${STATICCHECK_VERSION}: no findings."
