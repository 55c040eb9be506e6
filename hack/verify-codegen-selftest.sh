#!/usr/bin/env bash
# Proves hack/verify-codegen.sh catches drift: in a copy of the tree, a hand
# edit of a generated file must make it fail, and the unmodified copy must
# pass. The checkout itself is never written to.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
EDITED_FILE="pkg/apis/core/zz_generated.deepcopy.go"

TMP_DIR="$(mktemp -d "${TMPDIR:-/tmp}/verify-codegen-selftest.XXXXXX")"
cleanup() {
    chmod -R u+w "${TMP_DIR}" 2>/dev/null || true
    rm -rf "${TMP_DIR}"
}
trap cleanup EXIT

# copy_tree copies the files git knows about (tracked, or untracked and not
# ignored) to $1, without .git, so the copy's verify-codegen.sh also
# exercises its no-git path.
copy_tree() {
    mkdir -p "$1"
    git -C "${REPO_ROOT}" ls-files -z --cached --others --exclude-standard \
        | (cd "${REPO_ROOT}" && while IFS= read -r -d '' f; do
            [[ -e "${f}" ]] && printf '%s\0' "${f}"
        done) \
        | (cd "${REPO_ROOT}" && tar --null -T - -cf -) \
        | (cd "$1" && tar -xf -)
}

# Both copies are made first and checked side by side: the generators are
# mostly single-threaded, so two runs take little more than one.
EDITED="${TMP_DIR}/edited"
copy_tree "${EDITED}"
[[ -f "${EDITED}/${EDITED_FILE}" ]] || fail "${EDITED_FILE} is missing from the copy"
echo "// a hand edit that update-codegen.sh would not produce" >>"${EDITED}/${EDITED_FILE}"
CLEAN="${TMP_DIR}/clean"
copy_tree "${CLEAN}"

# Side by side on a cold build cache, both copies would compile the
# generators at the same time (a go command does not wait for another's
# compile of the same package). So they are compiled once first, from where
# and as kube_codegen.sh installs them: go list -export compiles a package
# as go install does (the same build cache entries) without linking it.
CODEGEN_VERSION="$(cd "${REPO_ROOT}" && go list -m -f '{{.Version}}' k8s.io/code-generator)"
(cd "${REPO_ROOT}" && go mod download "k8s.io/code-generator@${CODEGEN_VERSION}")
log "compiling the code generators"
(cd "$(go env GOMODCACHE)/k8s.io/code-generator@${CODEGEN_VERSION}" &&
    GO111MODULE=on go list -export -f '{{.Export}}' \
    k8s.io/code-generator/cmd/conversion-gen k8s.io/code-generator/cmd/deepcopy-gen \
    k8s.io/code-generator/cmd/defaulter-gen k8s.io/code-generator/cmd/validation-gen \
    k8s.io/kube-openapi/cmd/openapi-gen >/dev/null)

log "verify-codegen.sh on an edited copy (must fail) and an unmodified copy (must pass)"
bash "${EDITED}/hack/verify-codegen.sh" >"${TMP_DIR}/edited.log" 2>&1 &
edited_pid=$!
clean_status=0
bash "${CLEAN}/hack/verify-codegen.sh" >"${TMP_DIR}/clean.log" 2>&1 || clean_status=$?
edited_status=0
wait "${edited_pid}" || edited_status=$?

# The unmodified copy is the checkout's own check (hack/test.sh relies on it
# and does not run verify-codegen.sh a second time), so it is judged first.
if [[ "${clean_status}" -ne 0 ]]; then
    cat "${TMP_DIR}/clean.log" >&2
    fail "verify-codegen.sh failed on an unmodified copy of the checkout: generated code out of date (diff above), or the check is broken"
fi
log "ok: the unmodified copy passed"

if [[ "${edited_status}" -eq 0 ]]; then
    cat "${TMP_DIR}/edited.log" >&2
    fail "verify-codegen.sh passed after a hand edit of ${EDITED_FILE}"
fi
# It must fail for the edit, not for some other reason.
grep -q -- "^+++ generated/${EDITED_FILE}" "${TMP_DIR}/edited.log" \
    || { cat "${TMP_DIR}/edited.log" >&2; fail "verify-codegen.sh failed without a diff of ${EDITED_FILE}"; }
grep -q -- "^-// a hand edit that update-codegen.sh would not produce" "${TMP_DIR}/edited.log" \
    || { cat "${TMP_DIR}/edited.log" >&2; fail "the diff does not show the hand edit"; }
log "ok: the edited copy failed with a diff of ${EDITED_FILE}"
