#!/usr/bin/env bash
# Builds event-apiserver's container image from the checkout, offline: a
# static binary (CGO_ENABLED=0) with the version in its ldflags, the build
# machine's CA bundle (Debian's ca-certificates) and a nonroot (65532)
# passwd/group, on no base image. Writes
#   _output/image/event-apiserver.tar   docker-archive + OCI layout, for
#                                       docker/podman load, kind load
#                                       image-archive, ctr import
#   _output/image/reference             the image reference, name:tag
# and prints the reference.
#
# Env: IMAGE_NAME (default event-apiserver), IMAGE_TAG (default the
# version), GOARCH (default the host's), SOURCE_DATE_EPOCH (default the
# commit time), EVENT_APISERVER_VERSION (default from git describe).
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
# shellcheck source=lib/version.sh
source "${REPO_ROOT}/hack/lib/version.sh"
cd "${REPO_ROOT}"

out="${REPO_ROOT}/_output/image"
mkdir -p "${out}"
arch="${GOARCH:-$(go env GOARCH)}"
name="${IMAGE_NAME:-event-apiserver}"
tag="${IMAGE_TAG:-${EA_VERSION}}"
ca="${CA_CERTIFICATES:-/etc/ssl/certs/ca-certificates.crt}"
[[ -r "${ca}" ]] || fail "${ca} not found: apt-get install -y ca-certificates"

log "Building static event-apiserver ${EA_VERSION} (linux/${arch})"
# -trimpath and -buildvcs=false keep paths and VCS stamps out, so one
# commit builds the same bytes anywhere; the version comes from ldflags.
CGO_ENABLED=0 GOOS=linux GOARCH="${arch}" go build -trimpath -buildvcs=false \
  -ldflags "-s -w -buildid= ${EA_LDFLAGS}" \
  -o "${out}/event-apiserver" ./cmd/event-apiserver

log "Writing ${out}/event-apiserver.tar"
go run ./hack/imagebuild \
  --binary="${out}/event-apiserver" \
  --ca-certificates="${ca}" \
  --output="${out}/event-apiserver.tar" \
  --name="${name}" --tag="${tag}" --arch="${arch}" \
  --created="${EA_BUILD_EPOCH}" \
  --revision="${EA_GIT_COMMIT}" >"${out}/reference"
cat "${out}/reference"
