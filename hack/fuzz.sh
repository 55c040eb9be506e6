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
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${REPO_ROOT}"

fuzz_time="${FUZZ_TIME:-20s}"
packages="${FUZZ_PACKAGES:-./pkg/...}"
match="${FUZZ_MATCH:-.}"

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
  log "fuzzing ${pkg} ${target} for ${fuzz_time}"
  go test "${pkg}" -run '^$' -fuzz "^${target}\$" -fuzztime "${fuzz_time}"
  ran=$((ran + 1))
done
[[ "${ran}" -gt 0 ]] || fail "no fuzz targets matched ${match} in ${packages}"
log "fuzzed ${ran} targets, ${fuzz_time} each: no failures."
