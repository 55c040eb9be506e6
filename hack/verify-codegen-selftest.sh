#!/usr/bin/env bash
# Proves hack/verify-codegen.sh catches drift: an unmodified copy of the tree
# must pass it, and a copy with a hand edit of generated files (a
# zz_generated file beside its types, and one under pkg/generated) must fail
# its comparison with those edits' diffs. The checkout itself is never
# written to.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
EDITED_FILES=(pkg/apis/core/zz_generated.deepcopy.go pkg/generated/clientset/versioned/typed/history/v1alpha1/eventrecord.go)

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

# The generators run once, through an unmodified copy's own
# verify-codegen.sh, which must pass and keeps what it generated; the edited
# copy is then compared with that by verify-codegen.sh's own comparison
# (hack/lib/codegen.sh). update-codegen.sh removes every generated file before
# the generators write it, so a second run over the edited copy would
# generate the same bytes: it cost as much as the first and proved nothing more.
CLEAN="${TMP_DIR}/clean"
copy_tree "${CLEAN}"
GENERATED="${TMP_DIR}/generated"
log "verify-codegen.sh on an unmodified copy (must pass)"
if ! VERIFY_CODEGEN_KEEP="${GENERATED}" bash "${CLEAN}/hack/verify-codegen.sh" >"${TMP_DIR}/clean.log" 2>&1; then
    cat "${TMP_DIR}/clean.log" >&2
    fail "verify-codegen.sh failed on an unmodified copy of the checkout: generated code out of date (diff above), or the check is broken"
fi
log "ok: the unmodified copy passed"

EDITED="${TMP_DIR}/edited"
copy_tree "${EDITED}"
EDIT="// a hand edit that update-codegen.sh would not produce"
for f in "${EDITED_FILES[@]}"; do
    [[ -f "${EDITED}/${f}" ]] || fail "${f} is missing from the copy"
    echo "${EDIT}" >>"${EDITED}/${f}"
done
# shellcheck source=lib/codegen.sh
source "${REPO_ROOT}/hack/lib/codegen.sh"
if codegen::diff "${EDITED}" "${GENERATED}" checkout >"${TMP_DIR}/edited.log"; then
    fail "verify-codegen.sh's comparison passed after hand edits of ${EDITED_FILES[*]}"
fi
# It must fail for the edits, not for some other reason.
for f in "${EDITED_FILES[@]}"; do
    grep -q -- "^+++ generated/${f}" "${TMP_DIR}/edited.log" \
        || { cat "${TMP_DIR}/edited.log" >&2; fail "the comparison failed without a diff of ${f}"; }
done
[[ "$(grep -c -- "^-${EDIT}" "${TMP_DIR}/edited.log")" == "${#EDITED_FILES[@]}" ]] \
    || { cat "${TMP_DIR}/edited.log" >&2; fail "the diff does not show each hand edit"; }
[[ "$(grep -c '^+++ generated/' "${TMP_DIR}/edited.log")" == "${#EDITED_FILES[@]}" ]] \
    || { cat "${TMP_DIR}/edited.log" >&2; fail "the comparison reported files other than ${EDITED_FILES[*]}"; }
log "ok: the edited copy failed with a diff of each of ${EDITED_FILES[*]}"
