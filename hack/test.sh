#!/usr/bin/env bash
# Runs the whole test suite the way CI does: installs what the tests need
# (an etcd binary, kube-apiserver and kubectl v1.36.3, all built from the Go
# module proxy and cached under _output/bin), runs the verify scripts, then
# every Go test. go test's summary is printed last.
#
# Env: GO_TEST_FLAGS adds flags to go test (e.g. -run, -v).
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${REPO_ROOT}"

log "Building test dependencies"
bash hack/build-etcd.sh >/dev/null
bash hack/build-kube.sh >/dev/null
bash hack/install-postgres.sh

log "Verifying"
for verify in hack/verify-*.sh; do
  case "${verify}" in
    *-selftest.sh) ;;
    *) log "${verify}"; bash "${verify}" ;;
  esac
done
bash hack/verify-codegen-selftest.sh

log "Fuzzing the decode, convert and validate path (bounded)"
FUZZ_TIME="${FUZZ_TIME:-15s}" bash hack/fuzz.sh

log "Running go test"
# shellcheck disable=SC2086
go test -count=1 -timeout 45m ${GO_TEST_FLAGS:-} ./... 2>&1 | tee "${REPO_ROOT}/_output/go-test.log"
