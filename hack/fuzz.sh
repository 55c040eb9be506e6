#!/usr/bin/env bash
# Runs every Go fuzz target (func Fuzz*) in the module's packages for a
# bounded time each, one after another (a fuzzing run takes one target at a
# time). A failing input is written under the package's testdata/fuzz/,
# replayed by every later plain `go test`, and fails this script.
#
# Each package's test binary is built once, with the fuzzing instrumentation,
# and run for each of its targets the way go test -fuzz runs it: from the
# package's directory, with go test's own corpus cache (-test.fuzzcachedir,
# $GOCACHE/fuzz/<package>). A go test -fuzz per target would link the same
# binary again each time, which cost more than the fuzzing.
#
# The instrumentation is the compiler flag go test -fuzz adds (-d=libfuzzer),
# given here only to the packages a body goes through (FUZZ_INSTRUMENT): this
# module, apimachinery's decoders, meta types and validation, the generated
# protobuf code of the two Event versions and the JSON reader. go test -fuzz
# gives it to every package linked, about 600, so none of them could come
# from the plain build the suite has already made; the coverage it adds there
# (gRPC, etcd's client, the apiserver's handlers) guides nothing these
# targets reach. Beside a plain build already made, building the fuzzing
# binary took 67 CPU-s (35 s on 2 cores) this way, 282 (145 s) with
# go test -c -fuzz.
#
# Env:
#   FUZZ_TIME        time per target, a go test -fuzztime value (default 20s;
#                    "500x" runs 500 inputs)
#   FUZZ_PACKAGES    packages to search (default ./pkg/...)
#   FUZZ_MATCH       only targets whose name matches this regexp (default all)
#   FUZZ_INSTRUMENT  package patterns to instrument (default above)
#
# A run that ends with nothing but "context deadline exceeded" and wrote no
# failing input is Go's fuzzing coordinator racing its own -fuzztime deadline
# on a loaded machine (golang/go#51484), not a finding: the target is run
# once more, and only a second such run, or any real finding, fails.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${REPO_ROOT}"

fuzz_time="${FUZZ_TIME:-20s}"
packages="${FUZZ_PACKAGES:-./pkg/...}"
match="${FUZZ_MATCH:-.}"
instrument="${FUZZ_INSTRUMENT:-$(go list -m)/... k8s.io/apimachinery/... k8s.io/api/core/v1 k8s.io/api/events/v1 sigs.k8s.io/json/...}"
gcflags=()
for pattern in ${instrument}; do
  gcflags+=("-gcflags=${pattern}=-d=libfuzzer")
done

# deadline_flake LOG: the run failed only by the coordinator's deadline.
deadline_flake() {
  grep -q '^    context deadline exceeded$' "$1" &&
    ! grep -qE 'Failing input written to|panic:|^ +[a-z_]+_test\.go:[0-9]+:' "$1"
}

# The targets are read from the packages' _test.go files: `go test -list`
# would build and link every package's test binary just to name them, which
# cost more than the fuzzing itself.
targets=()
# shellcheck disable=SC2086 # packages may be several patterns
while read -r pkg dir; do
  for f in "${dir}"/*_test.go; do
    [[ -e "${f}" ]] || continue
    while read -r target; do
      targets+=("${pkg} ${dir} ${target}")
    done < <(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*\*testing\.F).*/\1/p' "${f}")
  done
done < <(go list -f '{{.ImportPath}} {{.Dir}}' ${packages})

bin_dir="$(mktemp -d)"
trap 'rm -rf "${bin_dir}"' EXIT
fuzz_cache="$(go env GOCACHE)/fuzz"
declare -A built=()

ran=0
for entry in "${targets[@]:-}"; do
  [[ -z "${entry}" ]] && continue
  read -r pkg dir target <<<"${entry}"
  [[ "${target}" =~ ${match} ]] || continue
  bin="${bin_dir}/${pkg//\//_}.test"
  if [[ -z "${built[${pkg}]:-}" ]]; then
    log "building ${pkg}'s tests with the fuzzing instrumentation"
    go test -c "${gcflags[@]}" -o "${bin}" "${pkg}"
    built[${pkg}]=1
  fi
  for attempt in 1 2; do
    log "fuzzing ${pkg} ${target} for ${fuzz_time}"
    out="$(mktemp)"
    if (cd "${dir}" && "${bin}" -test.paniconexit0 -test.timeout=10m -test.run='^$' -test.fuzz="^${target}\$" \
        -test.fuzztime="${fuzz_time}" -test.fuzzcachedir="${fuzz_cache}/${pkg}") 2>&1 | tee "${out}"; then
      rm -f "${out}"
      break
    fi
    if [[ "${attempt}" == 1 ]] && deadline_flake "${out}"; then
      log "${target}: the fuzzing coordinator's deadline race (no failing input written); once more"
      rm -f "${out}"
      continue
    fi
    rm -f "${out}"
    fail "fuzzing ${pkg} ${target} failed"
  done
  ran=$((ran + 1))
done
[[ "${ran}" -gt 0 ]] || fail "no fuzz targets matched ${match} in ${packages}"
log "fuzzed ${ran} targets, ${fuzz_time} each: no failures."
