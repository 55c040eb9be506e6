#!/usr/bin/env bash
# Regenerates docs/flags.md, the reference of event-apiserver's flags, from
# the command's own flag definitions (hack/flagsdoc), as metrics-server keeps
# docs/command-line-flags.txt. hack/verify-flags-docs.sh checks that the
# committed file matches.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${REPO_ROOT}"

tmp="$(mktemp)"
trap 'rm -f "${tmp}"' EXIT
# Written only once generated whole, so a failed run leaves the file as it was.
go run ./hack/flagsdoc >"${tmp}"
cat "${tmp}" >docs/flags.md
log "docs/flags.md regenerated."
