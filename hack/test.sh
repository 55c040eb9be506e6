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
bash hack/install-test-packages.sh

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

# Tiers: the unit tests first, with the race detector (they need no
# binaries); then the concurrency-heavy integration tests (watch, storm, etcd
# outages) with the race detector, the server binary built with -race too;
# then the rest of the integration tests without it.
RACE_INTEGRATION_TESTS='^(TestWatch.*|TestStorm.*|TestEtcdKilledUnderLoad|TestConsistentListFromCache|TestInformerRestartWithoutRelist|TestHostileReporters)$'

log "Unit tests, with the race detector"
# shellcheck disable=SC2086
go test -race -count=1 -timeout 20m ${GO_TEST_FLAGS:-} ./pkg/... ./internal/... ./cmd/... 2>&1 | tee "${REPO_ROOT}/_output/go-test-unit.log"

log "Concurrency-heavy integration tests, with the race detector"
# shellcheck disable=SC2086
EVENT_APISERVER_RACE=1 go test -race -count=1 -timeout 30m -run "${RACE_INTEGRATION_TESTS}" ${GO_TEST_FLAGS:-} ./test/... 2>&1 | tee "${REPO_ROOT}/_output/go-test-race.log"
# The race-built server must not be reused by the tier below.
rm -f "${REPO_ROOT}/_output/bin/event-apiserver"

log "Integration tests"
# shellcheck disable=SC2086
go test -count=1 -timeout 45m -skip "${RACE_INTEGRATION_TESTS}" ${GO_TEST_FLAGS:-} ./test/... 2>&1 | tee "${REPO_ROOT}/_output/go-test.log"
