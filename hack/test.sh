#!/usr/bin/env bash
# Runs the whole test suite the way CI does, tier by tier, and prints how long
# each phase took at the end:
#   deps         Debian test packages (apt-get, as root).
#   vet          gofmt and go vet (hack/verify-gofmt.sh, hack/verify-govet.sh).
#                go vet compiles every dependency of the module: the plain
#                build that everything after it but the race build reuses
#                (see "One plain build" below).
#   kube         etcd and the Kubernetes v1.36.3 commands (kube-apiserver,
#                kubectl, and the kubelet, kube-proxy, scheduler,
#                controller-manager and kubeadm of the real-cluster tier),
#                krew, which checks the plugin's manifest, helm, which
#                lints and renders the chart (TestHelm*), and the
#                OpenTelemetry Collector of TestOTelCollectorFeed (the
#                collector builder, hack/build-otelcol.sh), built from the
#                Go module proxy into _output/bin (instant when cached), in
#                the background from here on: only the integration tiers
#                need them, and the phases beside it compile other trees.
#   verify       staticcheck and generated code (the other hack/verify-*.sh).
#   fuzz         the decode, convert and validate path, bounded (hack/fuzz.sh).
#   unit         go test -race ./pkg/... ./internal/... ./cmd/...: no binaries,
#                no child processes; under -short, tests that start servers
#                skip themselves (they run in the integration tier).
#   alerts       test/alerts, a Go module of its own: the PrometheusRules of
#                deploy/components/monitoring and the chart (rendered with the
#                helm built above) under Prometheus's own rule parser and
#                evaluator, over synthetic series. Its own module because
#                github.com/prometheus/prometheus needs k8s.io v0.37, so
#                little of its dependency graph is in the root module's
#                build: from an empty build cache it compiled in 214 CPU-s
#                (167 user, 47 system; its modules already downloaded), and
#                its two tests then take about 6 s.
#   integration  ./test/... but test/cluster: real etcd, kube-apiserver, kubectl
#                and the server (test/integration, and the load tool's smoke
#                test in test/load).
#                First the concurrency-heavy tests with the race detector (the
#                server built with -race too), then the rest without it. In
#                each run the tests that must have the machine to themselves
#                (write storms, CPU and memory measurements) run one by one
#                first, then the others in parallel.
#   cluster      test/cluster, the real-kubelet tier: a one-node Kubernetes
#                v1.36.3 cluster (internal/cluster: kubeadm, a kubelet on
#                containerd, kube-proxy, CoreDNS) on this machine, as root,
#                after everything else so that it has the machine alone. Its
#                CoreDNS and images are built in the background phase above
#                (hack/build-cluster-images.sh). TestGuideInstall runs
#                docs/aggregated.md's install blocks on it (several minutes,
#                two of them an events etcd outage).
# The logs of the go test runs are in _output/go-test-*.log.
#
# Env: GO_TEST_FLAGS adds flags to every go test (e.g. -run, -v).
#      INTEGRATION_PARALLEL is go test -parallel for the integration runs
#      (default 6 on any number of cores: the tests mostly wait on processes,
#      TTLs and polls; at 4 the plain run's parallel phase kept 3.9 tests
#      running on average while using under one core of two). The two runs
#      are not overlapped: a test kept serial would then share the cores
#      after all.
#      INTEGRATION_PACKAGES is go test -p for the integration runs' parallel
#      phase: how many test packages run side by side, each with up to
#      INTEGRATION_PARALLEL tests (default 2).
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${REPO_ROOT}"
OUT="${REPO_ROOT}/_output"

phases=()
suite_start=${SECONDS}
# children_cpu sets CPU to the user+system CPU seconds of this shell's
# waited-for children so far. bash's times must run in this shell, not in a
# command substitution's subshell, which would count its own. A phase's CPU
# beside its wall time says whether it kept both cores busy. bash reaps the
# background build when it ends, so its CPU is counted in the phase during
# which it ended, not in the one that waits for it.
CPU=0
children_cpu() {
  local line
  times >"${OUT}/.times"
  line="$(tail -n 1 "${OUT}/.times")"
  CPU="$(awk '{ t = 0; for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); t += a[1] * 60 + a[2] } printf "%d\n", t }' <<<"${line}")"
}
# timed NAME CMD...: runs CMD, recording its wall and CPU time under NAME.
timed() {
  local name="$1" start=${SECONDS} cpu_start
  children_cpu
  cpu_start=${CPU}
  shift
  log "${name}"
  "$@"
  children_cpu
  phases+=("$(printf '%5ds %6ds  %s' $((SECONDS - start)) $((CPU - cpu_start)) "${name}")")
}
report() {
  local status=$?
  [[ ${#phases[@]} -gt 0 ]] || return "${status}"
  children_cpu
  log "Wall and CPU time by phase (total $((SECONDS - suite_start))s, CPU ${CPU}s$([[ ${status} == 0 ]] || echo ", FAILED"))"
  printf '     wall    cpu\n' >&2
  printf '    %s\n' "${phases[@]}" >&2
  return "${status}"
}
trap report EXIT

# One plain build. A package compiled once is reused by every later go
# command whose flags give it the same action ID; CGO_ENABLED and -trimpath
# are part of that ID. hack/build-etcd.sh, hack/build-kube.sh and
# hack/build-image.sh (TestImage) build static binaries, CGO_ENABLED=0 and
# -trimpath (the image's bytes must not depend on where it was built), so
# every plain go command here does the same: go vet's compiles then serve
# the etcd and kube builds (kube's module resolves the same versions as ours
# for every module both use), the integration test binaries, the server
# the tests start and the image. The race detector needs cgo: the race
# phases set CGO_ENABLED=1 and share one race build among themselves. The
# fuzzing build recompiles only the packages it instruments and those that
# import them (hack/fuzz.sh), and takes the rest from the plain build.
export CGO_ENABLED=0
GOFLAGS="$(go env GOFLAGS)"
[[ " ${GOFLAGS} " == *" -trimpath "* ]] || GOFLAGS="${GOFLAGS:+${GOFLAGS} }-trimpath"
export GOFLAGS
# Compiles keep their DWARF: without it (-gcflags=all=-dwarf=false
# -ldflags=-w) a cold go vet ./... took 857 against 877 CPU-s, the unit
# tier's race links no less (within the noise of 109-132 CPU-s), and the
# whole suite from an empty build cache 3682 CPU-s (a fresh machine's had
# taken 3634 with them). On these VMs 30% of a compile's CPU is system
# time; perf's kernel samples point at page-table work (faults, zeroing,
# unmapping) for the compiler's own heap, which DWARF hardly changes.

# The toolchain's own garbage collector: the compiler, linker, vet and
# staticcheck are Go programs, and at GOGC=400 a cold build of client-go took
# 11% less CPU than at the default 100 (239 against 269 CPU-s on an idle
# machine, though not less wall time; the whole suite's CPU did not visibly
# drop), for a larger heap this machine has room for. Only the tools get it:
# the integration tiers run their tests, and the servers those start,
# without it (see integration below), so that their memory and CPU figures
# are the defaults'.
export GOGC="${GOGC:-400}"

# The race detector's runtime sleeps a second before a process exits, to let
# goroutines still running race with the exit (GORACE atexit_sleep_ms, 1000
# by default). Every race-built test binary and server paid it: 10 s of the
# unit tier's 110. A race between a test's last goroutines and its exit is
# not one this suite looks for.
export GORACE="atexit_sleep_ms=0${GORACE:+ ${GORACE}}"

# --- deps
timed "Debian test packages" bash hack/install-test-packages.sh

# --- vet
vet() {
  bash hack/verify-gofmt.sh
  bash hack/verify-govet.sh
}
timed "Verifying: gofmt, go vet" vet

# Two go commands compiling the same package at once both do the work, so
# the kube build starts only now that go vet has compiled what it shares,
# and beside it run phases that compile other trees (the generators,
# staticcheck's own analysis, the fuzzing and race builds).
log "Building etcd, the Kubernetes commands, krew, helm, the OpenTelemetry Collector, CoreDNS and the cluster images in the background (log: _output/build-deps.log)"
deps_start=${SECONDS}
(bash hack/build-etcd.sh && bash hack/build-kube.sh && bash hack/build-krew.sh && bash hack/build-helm.sh && bash hack/build-otelcol.sh && bash hack/build-cluster-images.sh) >"${OUT}/build-deps.log" 2>&1 &
deps_pid=$!

# --- verify
verify() {
  local v
  for v in hack/verify-*.sh; do
    case "${v}" in
      # Run in the vet phase above.
      *-gofmt.sh|*-govet.sh) ;;
      # The self-test runs verify-codegen.sh on an unmodified copy of the
      # tree, which is the check itself, so it is not run a second time.
      *-codegen.sh) ;;
      *) log "${v}"; bash "${v}" ;;
    esac
  done
}
timed "Verifying: staticcheck, generated code" verify

# --- fuzz
# 10 s a target, 40 s in all, on both cores: every run repeats it, and the
# corpus it grows stays in $GOCACHE/fuzz for the next run on the machine.
# A longer search is FUZZ_TIME=10m bash hack/fuzz.sh.
timed "Fuzzing the decode, convert and validate path (bounded)" env FUZZ_TIME="${FUZZ_TIME:-10s}" bash hack/fuzz.sh

# --- unit
unit() {
  # shellcheck disable=SC2086
  CGO_ENABLED=1 go test -race -short -count=1 -timeout 10m ${GO_TEST_FLAGS:-} ./pkg/... ./internal/... ./cmd/... 2>&1 |
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
timed "Waiting for etcd, the Kubernetes commands, the collector and the cluster images" wait_deps

# --- alerts
alerts() {
  # shellcheck disable=SC2086
  (cd test/alerts && go vet ./... && go test -count=1 ${GO_TEST_FLAGS:-} ./... 2>&1 | tee "${OUT}/go-test-alerts.log")
}
timed "Alert rules under Prometheus's rule evaluator" alerts

# The concurrency-heavy tests (watch, storm, etcd outages), where the race
# detector finds most; the server is built with it too, into _output/bin/race.
RACE_INTEGRATION_TESTS='^(TestWatch.*|TestStorm.*|TestEtcdKilledUnderLoad|TestConsistentListFromCache|TestInformerRestartWithoutRelist|TestHostileReporters)$'
parallel="${INTEGRATION_PARALLEL:-6}"
packages="${INTEGRATION_PACKAGES:-2}"
# The integration runs first build the server where the tests look for it
# (testbed.ServerBinary), which the tests' own go build then finds in the
# build cache. go test itself keeps GOGC for its compiles and links, and
# runs the test binaries through -exec without it: they, and the servers
# they start, measure memory and CPU with the runtime's defaults.
without_gogc=(-exec 'env -u GOGC')
# The tests that must have the machine to themselves, each serial and
# framework.Exclusive. Go runs a package's serial tests alone within it, but
# go test runs several packages' binaries side by side, so this package runs
# first and alone in each run; the lock framework.Exclusive takes keeps
# them alone in any other go test too, by making the others wait.
exclusive_pkg=./test/integration/storm
# Every other test package but the real-kubelet tier's, which runs alone
# below.
mapfile -t integration_pkgs < <(go list ./test/... | grep -v -e '/test/cluster$' -e '/test/integration/storm$')
# packages_with_tests REGEX PKG...: the packages among PKG with a top-level
# test whose name matches REGEX, read from their test files (gofmt starts
# every `func TestX(` at a line's beginning). go test builds, links and runs
# a test binary for every package it is given, whether or not -run selects
# a test in it; the race run gives it only these.
packages_with_tests() {
  local regex="$1" pkg dir names
  shift
  while read -r pkg dir; do
    names="$(cat "${dir}"/*_test.go 2>/dev/null | sed -nE 's/^func (Test[A-Za-z0-9_]*)\(.*/\1/p')"
    if grep -qE "${regex}" <<<"${names}"; then
      echo "${pkg}"
    fi
  done < <(go list -f '{{.ImportPath}} {{.Dir}}' "$@")
}
# race_test and plain_test ARGS...: the two runs' go test, on the packages
# and with the flags in ARGS. Each run is two go tests, the exclusive
# package's then the others'; a failure in one does not stop the next, so
# that one failing test hides no other, and the integration tier fails
# once all four have run.
race_test() {
  # shellcheck disable=SC2086
  CGO_ENABLED=1 EVENT_APISERVER_RACE=1 go test -race "${without_gogc[@]}" -count=1 -timeout 30m \
    -run "${RACE_INTEGRATION_TESTS}" ${GO_TEST_FLAGS:-} "$@" 2>&1 | tee -a "${OUT}/go-test-race.log"
}
plain_test() {
  # shellcheck disable=SC2086
  go test "${without_gogc[@]}" -count=1 -timeout 30m -skip "${RACE_INTEGRATION_TESTS}" \
    ${GO_TEST_FLAGS:-} "$@" 2>&1 | tee -a "${OUT}/go-test-integration.log"
}
integration_failed=0
integration_race_exclusive() {
  : >"${OUT}/go-test-race.log"
  CGO_ENABLED=1 go build -race -o "${OUT_BIN}/race/event-apiserver" ./cmd/event-apiserver
  race_test "${exclusive_pkg}" || integration_failed=1
}
integration_race() {
  local race_pkgs
  mapfile -t race_pkgs < <(packages_with_tests "${RACE_INTEGRATION_TESTS}" "${integration_pkgs[@]}")
  [[ ${#race_pkgs[@]} -gt 0 ]] || return 0
  race_test -p "${packages}" -parallel "${parallel}" "${race_pkgs[@]}" || integration_failed=1
}
integration_exclusive() {
  : >"${OUT}/go-test-integration.log"
  go build -o "${OUT_BIN}/event-apiserver" ./cmd/event-apiserver
  bash hack/build-plugin.sh >/dev/null
  plain_test "${exclusive_pkg}" || integration_failed=1
}
integration() {
  plain_test -p "${packages}" -parallel "${parallel}" "${integration_pkgs[@]}" || integration_failed=1
}
cluster() {
  if [[ "$(id -u)" != 0 ]]; then
    # The tests skip themselves too; CI runs as root.
    log "not root: the real-kubelet tier (test/cluster) needs root and is skipped"
  fi
  # shellcheck disable=SC2086
  go test "${without_gogc[@]}" -count=1 -timeout 40m ${GO_TEST_FLAGS:-} ./test/cluster/ 2>&1 |
    tee "${OUT}/go-test-cluster.log"
}
timed "Integration tests that need the machine alone, with the race detector" integration_race_exclusive
timed "Concurrency-heavy integration tests, with the race detector" integration_race
timed "Integration tests that need the machine alone" integration_exclusive
timed "Integration tests" integration
[[ "${integration_failed}" == 0 ]] || fail "integration tests failed (logs: _output/go-test-race.log, _output/go-test-integration.log)"
timed "The real-kubelet cluster tier" cluster
