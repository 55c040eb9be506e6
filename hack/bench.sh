#!/usr/bin/env bash
# Side-by-side benchmark: every event-load workload against kube-apiserver
# v1.36.3 in its default configuration (A: Events watch cache off) and with
# --watch-cache-sizes=events#1000 (B: cache on), and against event-apiserver
# (C), in rounds A/B/C/A/B/C..., each server on a fresh etcd of its own, plus
# the etcd ceiling (the create workload written straight to etcd). Prints the
# table of medians and writes it, the raw results and the describe chart to
# the output directory.
#
# Usage: hack/bench.sh [--profile] [event-load bench flags...]
#   --profile      also take CPU profiles of every server during each
#                  workload (one extra, uncounted round) and summarise them
#                  with `go tool pprof -top` (flat and -cum) into
#                  <out-dir>/profiles/
#   --out-dir=DIR  results (default _output/bench/<date>-<time>)
#   --chart=FILE   also write the describe chart to FILE
#                  (docs/benchmarks-describe.svg for the docs)
#   --events=N --rounds=N --servers=A,B,C --clients=N --duration=D ...
#                  see `_output/bin/event-load bench --help`
#
# Through the front door (docs/front-door.md; needs nginx with njs):
#   hack/bench.sh --servers=A,E,D --workloads=recorder,describe
# D is event-apiserver and E kube-apiserver behind the same nginx door
# (deploy/door, E without its Event routes); the table's door section sets
# E against A (what the door costs) and D against E.
#
# Defaults: 3 rounds of A, B, C; stores of 1k and 10k Events; 8 clients;
# 3s per create variant, recorder and watch; 100 selector watchers and 2
# all-namespace watchers at 200 Events/s. Bigger: --events=100000 --rounds=5.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${REPO_ROOT}"

profile=0
out_dir="_output/bench/$(date +%Y%m%d-%H%M%S)"
args=()
for arg in "$@"; do
  case "${arg}" in
    --profile) profile=1 ;;
    --out-dir=*) out_dir="${arg#--out-dir=}" ;;
    *) args+=("${arg}") ;;
  esac
done
mkdir -p "${out_dir}"
if [[ ${profile} == 1 ]]; then
  args+=("--profile-dir=${out_dir}/profiles")
fi

log "Building etcd, kube-apiserver, event-apiserver and event-load"
etcd="$(bash hack/build-etcd.sh)"
kube_apiserver="$(bash hack/build-kube.sh kube-apiserver)"
go build -o "${OUT_BIN}/event-apiserver" ./cmd/event-apiserver
go build -o "${OUT_BIN}/event-load" ./test/load/event-load

{
  echo "command: hack/bench.sh $*"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "nproc: $(nproc)"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "memory: $(free -m | awk '/^Mem:/ {print $2 " MiB total, " $7 " MiB available"}')"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "kernel: $(uname -r)"
  echo "go: $(go env GOVERSION)"
} > "${out_dir}/machine.txt"
cat "${out_dir}/machine.txt" >&2

log "Running the benchmark into ${out_dir}"
start=${SECONDS}
"${OUT_BIN}/event-load" bench \
  --etcd-binary="${etcd}" \
  --kube-apiserver-binary="${kube_apiserver}" \
  --event-apiserver-binary="${OUT_BIN}/event-apiserver" \
  --out-dir="${out_dir}" \
  "${args[@]}" | tee "${out_dir}/output.txt"
elapsed=$((SECONDS - start))

echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >> "${out_dir}/machine.txt"
echo "benchmark took: ${elapsed}s" >> "${out_dir}/machine.txt"

if [[ ${profile} == 1 && -d "${out_dir}/profiles" ]]; then
  for p in "${out_dir}"/profiles/*.pprof; do
    [[ -e "${p}" ]] || continue
    # Go's profiles carry their symbols; the binary adds only source lines.
    binary=()
    [[ "$(basename "${p}")" == C-* ]] && binary=("${OUT_BIN}/event-apiserver")
    {
      echo "### by own time (flat)"
      go tool pprof -top -nodecount=40 "${binary[@]}" "${p}" 2>&1
      echo
      echo "### by cumulative time"
      go tool pprof -top -cum -nodecount=80 "${binary[@]}" "${p}" 2>&1
    } > "${p%.pprof}.top.txt" || true
  done
  log "CPU profiles: ${out_dir}/profiles/*.top.txt"
fi
log "Done in ${elapsed}s (load now: $(cut -d' ' -f1-3 /proc/loadavg)); results in ${out_dir}"
