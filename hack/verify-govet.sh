#!/usr/bin/env bash
# Fails on any go vet finding in the module's packages, tests included.
# hack/tools/ has its own go.mod, so ./... does not reach it.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${REPO_ROOT}"

go vet ./...
log "go vet: no findings."
