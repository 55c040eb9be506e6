#!/usr/bin/env bash
# Runs the whole test suite the way CI does, tier by tier, and prints how long
# each phase took at the end:
#   deps         Debian test packages (apt-get, as root); etcd, kube-apiserver
#                and kubectl v1.36.3 built from the Go module proxy into
#                _output/bin (instant when cached). The builds run in the
#                background: only the integration tier needs them.
#   verify       gofmt, go vet, staticcheck, generated code (hack/verify-*.sh).
#   fuzz         the decode, convert and validate path, bounded (hack/fuzz.sh).
#   unit         go test -race ./pkg/... ./internal/... ./cmd/...: no binaries,
#                no child processes; under -short, tests that start servers
#                skip themselves (they run in the integration tier).
#   integration  ./test/...: real etcd, kube-apiserver, kubectl and the server
#                (test/integration, and the load tool's smoke test in test/load).
#                First the concurrency-heavy tests with the race detector (the
#                server built with -race too), then the rest without it. In
#                each run the tests that must have the machine to themselves
#                (write storms, CPU and memory measurements) run one by one
#                first, then the others in parallel.
# The logs of the go test runs are in _output/go-test-*.log.
#
# Env: GO_TEST_FLAGS adds flags to every go test (e.g. -run, -v).
#      INTEGRATION_PARALLEL is go test -parallel for the integration runs
#      (default 4 on any number of cores: the tests mostly wait on processes,
#      TTLs and polls). The two runs are not overlapped: a test kept serial
#      would then share the cores after all.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${REPO_ROOT}"
OUT="${REPO_ROOT}/_output"

phases=()
suite_start=${SECONDS}
# timed NAME CMD...: runs CMD, recording its wall time under NAME.
timed() {
  local name="$1" start=${SECONDS}
  shift
  log "${name}"
  "$@"
  phases+=("$(printf '%5ds  %s' $((SECONDS - start)) "${name}")")
}
report() {
  local status=$?
  [[ ${#phases[@]} -gt 0 ]] || return "${status}"
  log "Wall time by phase (total $((SECONDS - suite_start))s$([[ ${status} == 0 ]] || echo ", FAILED"))"
  printf '    %s\n' "${phases[@]}" >&2
  return "${status}"
}
trap report EXIT

# --- deps
timed "Debian test packages" bash hack/install-test-packages.sh
log "Building etcd, kube-apiserver and kubectl in the background (log: _output/build-deps.log)"
deps_start=${SECONDS}
(bash hack/build-etcd.sh && bash hack/build-kube.sh) >"${OUT}/build-deps.log" 2>&1 &
deps_pid=$!

# --- verify
verify() {
  local v
  for v in hack/verify-*.sh; do
    case "${v}" in
      # The self-test runs verify-codegen.sh on an unmodified copy of the
      # tree, which is the check itself, so it is not run a second time.
      *-codegen.sh) ;;
      *) log "${v}"; bash "${v}" ;;
    esac
  done
}
timed "Verifying" verify

# --- fuzz
timed "Fuzzing the decode, convert and validate path (bounded)" env FUZZ_TIME="${FUZZ_TIME:-15s}" bash hack/fuzz.sh

# --- unit
unit() {
  # shellcheck disable=SC2086
  go test -race -short -count=1 -timeout 10m ${GO_TEST_FLAGS:-} ./pkg/... ./internal/... ./cmd/... 2>&1 |
    tee "${OUT}/go-test-unit.log"
}
timed "Unit tests, with the race detector" unit

# --- integration
wait_deps() {
  if ! wait "${deps_pid}"; then
    cat "${OUT}/build-deps.log" >&2
    fail "building the test dependencies failed (log above)"
  fi
  log "test dependencies were ready $((SECONDS - deps_start))s after the build started"
}
timed "Waiting for etcd, kube-apiserver and kubectl" wait_deps

# The concurrency-heavy tests (watch, storm, etcd outages), where the race
# detector finds most; the server is built with it too, into _output/bin/race.
RACE_INTEGRATION_TESTS='^(TestWatch.*|TestStorm.*|TestEtcdKilledUnderLoad|TestConsistentListFromCache|TestInformerRestartWithoutRelist|TestHostileReporters)$'
parallel="${INTEGRATION_PARALLEL:-4}"
integration_race() {
  # shellcheck disable=SC2086
  EVENT_APISERVER_RACE=1 go test -race -count=1 -parallel "${parallel}" -timeout 30m -run "${RACE_INTEGRATION_TESTS}" \
    ${GO_TEST_FLAGS:-} ./test/... 2>&1 | tee "${OUT}/go-test-race.log"
}
integration() {
  # shellcheck disable=SC2086
  go test -count=1 -parallel "${parallel}" -timeout 30m -skip "${RACE_INTEGRATION_TESTS}" \
    ${GO_TEST_FLAGS:-} ./test/... 2>&1 | tee "${OUT}/go-test-integration.log"
}
timed "Concurrency-heavy integration tests, with the race detector" integration_race
timed "Integration tests" integration
