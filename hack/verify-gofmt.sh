#!/usr/bin/env bash
# Fails when any Go file of the module is not gofmt-formatted, printing the
# diff. Files are those git tracks plus untracked ones it does not ignore, so
# new files are checked before they are committed. hack/tools/ is a separate
# module with its own checks.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${REPO_ROOT}"

files=()
while IFS= read -r -d '' f; do
    [[ "${f}" == hack/tools/* ]] && continue
    # Listed by git but deleted in the work tree.
    [[ -e "${f}" ]] || continue
    files+=("${f}")
done < <(git ls-files -z --cached --others --exclude-standard -- '*.go')

if [[ "${#files[@]}" -eq 0 ]]; then
    fail "No Go files found."
fi

unformatted="$(gofmt -l -- "${files[@]}")"
if [[ -n "${unformatted}" ]]; then
    mapfile -t bad <<<"${unformatted}"
    gofmt -d -- "${bad[@]}" >&2
    fail "Not gofmt-formatted (diff above). Run: gofmt -w <file>"
fi
log "gofmt: ${#files[@]} files formatted."
