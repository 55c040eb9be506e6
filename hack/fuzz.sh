#!/usr/bin/env bash
# Runs every Go fuzz target (func Fuzz*) in the module's packages for a
# bounded time each, one after another (go test -fuzz takes one target at a
# time). A failing input is written under the package's testdata/fuzz/ by go
# test, replayed by every later plain `go test`, and fails this script.
#
# Env:
#   FUZZ_TIME      time per target, a go test -fuzztime value (default 20s;
#                  "500x" runs 500 inputs)
#   FUZZ_PACKAGES  packages to search (default ./pkg/...)
#   FUZZ_MATCH     only targets whose name matches this regexp (default all)
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

# deadline_flake LOG: the run failed only by the coordinator's deadline.
deadline_flake() {
  grep -q '^    context deadline exceeded$' "$1" &&
    ! grep -qE 'Failing input written to|panic:|^ +[a-z_]+_test\.go:[0-9]+:' "$1"
}

# go test -list prints each package's matching tests, then "ok <package>".
targets=()
pending=()
while read -r first second _; do
  case "${first}" in
    Fuzz*) pending+=("${first}") ;;
    ok)
      for t in "${pending[@]:-}"; do
        [[ -n "${t}" ]] && targets+=("${second} ${t}")
      done
      pending=()
      ;;
  esac
# shellcheck disable=SC2086 # packages may be several patterns
done < <(go test -list '^Fuzz' ${packages})

ran=0
for entry in "${targets[@]:-}"; do
  [[ -z "${entry}" ]] && continue
  pkg="${entry% *}"
  target="${entry#* }"
  [[ "${target}" =~ ${match} ]] || continue
  for attempt in 1 2; do
    log "fuzzing ${pkg} ${target} for ${fuzz_time}"
    out="$(mktemp)"
    if go test "${pkg}" -run '^$' -fuzz "^${target}\$" -fuzztime "${fuzz_time}" 2>&1 | tee "${out}"; then
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
