#!/usr/bin/env bash
# Fails when docs/flags.md differs from what hack/update-flags-docs.sh
# generates from the command's flag definitions, printing the diff: a flag
# added, removed or reworded without the reference following.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"

generated="$(mktemp)"
trap 'rm -f "${generated}"' EXIT
bash "${REPO_ROOT}/hack/update-flags-docs.sh" "${generated}"
if ! diff -u "${REPO_ROOT}/docs/flags.md" "${generated}" >&2; then
    fail "docs/flags.md is out of date with the command's flags (diff above). Run: hack/update-flags-docs.sh"
fi
log "docs/flags.md matches the command's flags."
