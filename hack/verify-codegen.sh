#!/usr/bin/env bash
# Fails when the committed generated code (zz_generated.*.go, pkg/generated:
# OpenAPI definitions and the history clientset, listers and informers;
# hack/api-rules-violations.list) differs from what
# hack/update-codegen.sh produces. The generator runs in a copy of the tree so
# that the checkout, which others may be editing, is never written to.
# Needs no network beyond the Go module proxy.
#
# Env: VERIFY_CODEGEN_KEEP, a path that does not exist yet: the regenerated
#      copy is moved there instead of removed (hack/verify-codegen-selftest.sh
#      compares an edited tree with it rather than running the generators a
#      second time).
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"

TMP_DIR="$(mktemp -d "${TMPDIR:-/tmp}/verify-codegen.XXXXXX")"
cleanup() {
    # The Go module cache marks its files read-only; the copy holds none, but
    # chmod first so a partial run can always be removed.
    chmod -R u+w "${TMP_DIR}" 2>/dev/null || true
    rm -rf "${TMP_DIR}"
}
trap cleanup EXIT

COPY="${TMP_DIR}/src"
mkdir -p "${COPY}"

# list_files prints, NUL-separated and relative to the root, the files that
# make up the tree: what git tracks plus untracked files it does not ignore,
# or without git, everything but build output and local data.
list_files() {
    if git -C "${REPO_ROOT}" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git -C "${REPO_ROOT}" ls-files -z --cached --others --exclude-standard
    else
        (cd "${REPO_ROOT}" && find . \
            \( -path ./.git -o -path ./_output -o -path ./.event-apiserver -o -path ./hack/tools/bin \) -prune \
            -o -type f ! -name '*.test' ! -name '*.prof' -printf '%P\0')
    fi
}

# Files git still lists but that were deleted in the work tree are skipped.
list_files | (cd "${REPO_ROOT}" && while IFS= read -r -d '' f; do
    [[ -e "${f}" ]] && printf '%s\0' "${f}"
done) | (cd "${REPO_ROOT}" && tar --null -T - -cf -) | (cd "${COPY}" && tar -xf -)

log "Running hack/update-codegen.sh in ${COPY}"
if ! bash "${COPY}/hack/update-codegen.sh" >"${TMP_DIR}/update-codegen.log" 2>&1; then
    cat "${TMP_DIR}/update-codegen.log" >&2
    fail "hack/update-codegen.sh failed in the copy"
fi

# shellcheck source=lib/codegen.sh
source "${REPO_ROOT}/hack/lib/codegen.sh"
status=0
codegen::diff "${REPO_ROOT}" "${COPY}" checkout || status=$?
if [[ -n "${VERIFY_CODEGEN_KEEP:-}" ]]; then
    mv "${COPY}" "${VERIFY_CODEGEN_KEEP}"
fi
if [[ "${status}" -ne 0 ]]; then
    fail "Generated files are out of date (diff above: checkout → generated). Run hack/update-codegen.sh."
fi
log "Generated files are up to date."
