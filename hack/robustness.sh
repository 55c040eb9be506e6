#!/usr/bin/env bash
# The long robustness run (issue 40): seeded traffic against two
# event-apiserver replicas over a three-member etcd while replicas and etcd
# members are killed (the leader too), members partitioned from their peers
# and from the servers, and etcd compacted and defragmented; then every
# operation and watch event is checked against etcd's own history. The
# short run of the same test is in the integration tier (hack/test.sh).
#
# Usage: hack/robustness.sh [--duration=30m] [--seed=N] [--writers=N] [--extra-watchers=N] [--faults=KIND,...]
#   --duration=D  how long traffic and faults run (default 30m)
#   --seed=N      rerun a seed a report printed (default: from the clock)
#   --writers=N   concurrent writers, up to 100, about 8 writes a second each
#                 on an idle machine (default 56: a 1-minute run with 32 on a
#                 busy 2-core machine checked 20,840 watch events, so 56 aims
#                 at 10^6 in 30 minutes; the short run in hack/test.sh has 3)
#   --extra-watchers=N  informers on all namespaces beside the run's four,
#                 up to 20 (default 4: a 30-minute run on a busy 2-core
#                 machine with none checked 426,929 watch events, about
#                 half of them on the two all-namespace watchers; each
#                 more adds one etcd revision's worth, so 4 aim past 10^6)
#   --faults=...  only these fault kinds (default all; see faultKinds in
#                 test/robustness/cluster_test.go)
#
# Needs _output/bin/etcd, kube-apiserver and kubectl (hack/build-etcd.sh,
# hack/build-kube.sh). Prints the report (operations by kind, watch events
# checked, faults by kind, violations with their seed and minimal history);
# the full log is in _output/robustness-<seed or date>.log.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${REPO_ROOT}"

duration=30m
seed=0
writers=56
extra_watchers=4
faults=""
for arg in "$@"; do
  case "${arg}" in
    --duration=*) duration="${arg#--duration=}" ;;
    --seed=*) seed="${arg#--seed=}" ;;
    --writers=*) writers="${arg#--writers=}" ;;
    --extra-watchers=*) extra_watchers="${arg#--extra-watchers=}" ;;
    --faults=*) faults="${arg#--faults=}" ;;
    *) fail "unknown argument ${arg} (usage: hack/robustness.sh [--duration=30m] [--seed=N] [--writers=N] [--extra-watchers=N] [--faults=KIND,...])" ;;
  esac
done
for bin in etcd kube-apiserver kubectl; do
  [[ -x "${OUT_BIN}/${bin}" ]] || fail "_output/bin/${bin} is missing: run hack/build-etcd.sh and hack/build-kube.sh"
done

# go test's -timeout must cover the traffic plus start-up, settling and
# checking; fault recovery is bounded by the testbed's start timeouts.
[[ "${duration}" =~ ^[0-9]+m$ ]] || fail "--duration must be whole minutes, like 30m (got ${duration})"
timeout="$(( ${duration%m} + 20 ))m"

log_file="${REPO_ROOT}/_output/robustness-$([[ ${seed} != 0 ]] && echo "seed${seed}" || date +%Y%m%d-%H%M%S).log"
log "Robustness run for ${duration} (seed ${seed/#0/from the clock}), log ${log_file}"
export CGO_ENABLED="${CGO_ENABLED:-0}" GOFLAGS="${GOFLAGS:--trimpath}"
start=${SECONDS}
status=0
go test -count=1 -timeout "${timeout}" -run '^TestRobustness$' -v ./test/robustness \
  -args -seed="${seed}" -robustness-duration="${duration}" -writers="${writers}" -extra-watchers="${extra_watchers}" -faults="${faults}" >"${log_file}" 2>&1 || status=$?
sed -n '/robustness report/,/^--- /p' "${log_file}"
grep -E '^\s+robustness_test.go:[0-9]+: seed ' "${log_file}" || true
log "Robustness run done in $((SECONDS - start))s, exit ${status}; log ${log_file}"
exit "${status}"
