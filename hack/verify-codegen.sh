#!/usr/bin/env bash
# Fails when the committed generated code (zz_generated.*.go,
# pkg/generated/openapi, hack/api-rules-violations.list) differs from what
# hack/update-codegen.sh produces. The generator runs in a copy of the tree so
# that the checkout, which others may be editing, is never written to.
# Needs no network beyond the Go module proxy.
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

# generated_files prints the generated files under a tree, one per line.
generated_files() {
    (cd "$1" && {
        find . \( -path ./.git -o -path ./_output \) -prune -o -type f -name 'zz_generated.*.go' -printf '%P\n'
        if [[ -d pkg/generated/openapi ]]; then
            find pkg/generated/openapi -type f
        fi
        if [[ -f hack/api-rules-violations.list ]]; then
            echo hack/api-rules-violations.list
        fi
    })
}

status=0
while IFS= read -r f; do
    want="${COPY}/${f}"
    have="${REPO_ROOT}/${f}"
    [[ -e "${want}" ]] || want=/dev/null
    [[ -e "${have}" ]] || have=/dev/null
    if ! diff -u --label "checkout/${f}" --label "generated/${f}" "${have}" "${want}"; then
        status=1
    fi
done < <({ generated_files "${REPO_ROOT}"; generated_files "${COPY}"; } | sort -u)

if [[ "${status}" -ne 0 ]]; then
    fail "Generated files are out of date (diff above: checkout → generated). Run hack/update-codegen.sh."
fi
log "Generated files are up to date."
