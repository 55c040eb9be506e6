#!/usr/bin/env bash
# What hack/verify-codegen.sh compares, shared with its self-test.

# codegen::generated_files TREE prints the generated files under TREE, one per
# line, relative to TREE.
codegen::generated_files() {
    (cd "$1" && {
        find . \( -path ./.git -o -path ./_output \) -prune -o -type f -name 'zz_generated.*.go' -printf '%P\n'
        # pkg/generated holds only generated code (OpenAPI definitions, the
        # history clientset, listers and informers) beside its
        # staticcheck.conf.
        if [[ -d pkg/generated ]]; then
            find pkg/generated -type f -name '*.go'
        fi
        if [[ -f hack/api-rules-violations.list ]]; then
            echo hack/api-rules-violations.list
        fi
    })
}

# codegen::diff TREE GENERATED LABEL prints a unified diff (LABEL/<file> ->
# generated/<file>) of every generated file that TREE and the regenerated
# tree GENERATED do not hold alike, a file only one of them has included, and
# returns 1 when there is any.
codegen::diff() {
    local tree="$1" generated="$2" label="$3" f have want status=0
    while IFS= read -r f; do
        have="${tree}/${f}"
        want="${generated}/${f}"
        [[ -e "${have}" ]] || have=/dev/null
        [[ -e "${want}" ]] || want=/dev/null
        if ! diff -u --label "${label}/${f}" --label "generated/${f}" "${have}" "${want}"; then
            status=1
        fi
    done < <({ codegen::generated_files "${tree}"; codegen::generated_files "${generated}"; } | sort -u)
    return "${status}"
}
