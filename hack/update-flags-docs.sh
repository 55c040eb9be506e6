#!/usr/bin/env bash
# Regenerates docs/flags.md, the reference of event-apiserver's flags, from
# the command's own flag definitions (hack/flagsdoc), as metrics-server keeps
# docs/command-line-flags.txt. hack/verify-flags-docs.sh checks that the
# committed file matches.
#
# Usage: hack/update-flags-docs.sh [OUT], OUT docs/flags.md by default.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
out="$(realpath -m "${1:-${REPO_ROOT}/docs/flags.md}")"
cd "${REPO_ROOT}"

tmp="$(mktemp)"
trap 'rm -f "${tmp}"' EXIT
# Written only once generated whole, so a failed run leaves OUT as it was.
go run ./hack/flagsdoc >"${tmp}"
cat "${tmp}" >"${out}"
log "${out#"${REPO_ROOT}/"} regenerated."
