#!/usr/bin/env bash
# The fleet benchmark (docs/benchmarks.md, "A fleet's hub"): a hub on
# PostgreSQL capturing member clusters, each a real kube-apiserver, writing
# Events at a fixed rate each. One command:
#
#   hack/bench-fleet.sh                       # 10 members x 100 Events/s, 60 s
#   hack/bench-fleet.sh 10x100,10x200 90      # stages MEMBERSxRATE, seconds each
#   hack/bench-fleet.sh 10x100:120,10x200:60  # a stage's own seconds after the colon
#
# EVENT_APISERVER_FLEET_BENCH_WRITES is how the members' Events are written: etcd (the
# default) straight into each member's etcd as its kube-apiserver stores a create, api
# through each member's API (a create's CPU on the member); the hub captures each member
# through its kube-apiserver either way. EVENT_APISERVER_FLEET_BENCH_ETCDS (default 1) is
# how many etcds the members share, each member under its own --etcd-prefix;
# EVENT_APISERVER_FLEET_BENCH_MEMBERS_NICE (e.g. 10) runs the members' kube-apiservers,
# etcds and writers at that niceness, so that the hub and PostgreSQL get the CPU first, as
# on machines of their own; EVENT_APISERVER_FLEET_BENCH_HOURLY=off drops the hourly counts'
# trigger (what it costs PostgreSQL). Results are the test's
# "stage ..." log lines (the whole log in _output/bench-fleet.log). Run it alone on the machine (it takes the
# integration tests' exclusive lock; other benchmarks should not run).
set -euo pipefail
cd "$(dirname "$0")/.."
stages=${1:-10x100}
seconds=${2:-60}
log=_output/bench-fleet.log
mkdir -p _output
echo "load before: $(cat /proc/loadavg)"
EVENT_APISERVER_FLEET_BENCH=1 \
EVENT_APISERVER_FLEET_BENCH_STAGES="$stages" \
EVENT_APISERVER_FLEET_BENCH_SECONDS="$seconds" \
  go test -count=1 -timeout 0 -run '^TestFleetCaptureBench$' -v ./test/integration/history/ >"$log" 2>&1 && rc=0 || rc=$?
grep -E '^\s+fleet_bench_test.go:|^(--- |ok|FAIL)' "$log" || true
echo "full log: $log; exit $rc"
exit "$rc"
