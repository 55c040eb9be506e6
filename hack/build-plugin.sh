#!/usr/bin/env bash
# Builds kubectl-timeline, the kubectl plugin (cmd/kubectl-timeline).
#
#   hack/build-plugin.sh
#       _output/bin/kubectl-timeline for this machine. Put it on PATH and
#       kubectl finds it: kubectl timeline pod/web-0.
#   hack/build-plugin.sh --release VERSION [URI_BASE]
#       A release for krew in PLUGIN_OUT (default _output/plugin/VERSION):
#       kubectl-timeline_<os>_<arch>.tar.gz for each of PLUGIN_PLATFORMS
#       (the binary and LICENSE, reproducible: same sources, same bytes), and
#       timeline.yaml, plugins/timeline.yaml rendered with VERSION, URI_BASE
#       (default: https://github.com/eventapiserver/event-apiserver/releases/download/VERSION)
#       and each archive's sha256, listing only the platforms built.
#
# Env: PLUGIN_PLATFORMS  os/arch list, default every platform the manifest
#                        lists: "linux/amd64 linux/arm64 darwin/amd64
#                        darwin/arm64 windows/amd64" (each a cross build of
#                        client-go: minutes on 2 cores when cold).
#      PLUGIN_OUT        where the release goes.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
cd "${REPO_ROOT}"
export GOWORK=off CGO_ENABLED=0

if [[ $# -eq 0 ]]; then
  go build -trimpath -o "${OUT_BIN}/kubectl-timeline" ./cmd/kubectl-timeline
  echo "${OUT_BIN}/kubectl-timeline"
  exit 0
fi

[[ "$1" == --release && ( $# -eq 2 || $# -eq 3 ) ]] || fail "usage: hack/build-plugin.sh [--release VERSION [URI_BASE]]"
VERSION="$2"
# krew wants a semantic version with its v.
[[ "${VERSION}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || fail "VERSION must be a semantic version like v0.1.0 (got '${VERSION}')"
URI_BASE="${3:-https://github.com/eventapiserver/event-apiserver/releases/download/${VERSION}}"
URI_BASE="${URI_BASE%/}"
OUT="${PLUGIN_OUT:-${REPO_ROOT}/_output/plugin/${VERSION}}"
PLATFORMS="${PLUGIN_PLATFORMS:-linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64}"
mkdir -p "${OUT}"
# A failed build leaves no half-made staging directory behind.
trap 'rm -rf "${OUT}"/.stage.*' EXIT

declare -A SHA=()
for platform in ${PLATFORMS}; do
  os="${platform%/*}" arch="${platform#*/}"
  grep -q "SHA256_${os}_${arch}}" plugins/timeline.yaml || fail "plugins/timeline.yaml has no platform ${os}/${arch}"
  exe=kubectl-timeline
  [[ "${os}" == windows ]] && exe=kubectl-timeline.exe
  stage="$(mktemp -d "${OUT}/.stage.XXXXXX")"
  log "building kubectl-timeline for ${os}/${arch}"
  GOOS="${os}" GOARCH="${arch}" go build -trimpath -ldflags "-s -w" -o "${stage}/${exe}" ./cmd/kubectl-timeline
  cp LICENSE "${stage}/LICENSE"
  archive="${OUT}/kubectl-timeline_${os}_${arch}.tar.gz"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "${stage}" -cf - "${exe}" LICENSE | gzip -n -9 >"${archive}"
  rm -rf "${stage}"
  SHA["${os}_${arch}"]="$(sha256sum "${archive}" | cut -d' ' -f1)"
done

# Render: the template's comments go, each platform block whose digest is
# known stays with its placeholders filled, the others go.
shas=""
for k in "${!SHA[@]}"; do shas+="${k}=${SHA[${k}]} "; done
awk -v version="${VERSION}" -v uri="${URI_BASE}" -v shas="${shas}" '
  BEGIN {
    n = split(shas, pairs, " ")
    for (i = 1; i <= n; i++) { split(pairs[i], kv, "="); sha[kv[1]] = kv[2] }
    print "# Rendered by hack/build-plugin.sh from plugins/timeline.yaml."
  }
  function fill(line,   key) {
    gsub(/\$\{VERSION\}/, version, line)
    gsub(/\$\{URI_BASE\}/, uri, line)
    if (match(line, /\$\{SHA256_[a-z0-9]+_[a-z0-9]+\}/)) {
      key = substr(line, RSTART + 9, RLENGTH - 10)
      line = substr(line, 1, RSTART - 1) sha[key] substr(line, RSTART + RLENGTH)
    }
    return line
  }
  function flush(   i) {
    if (nblock > 0 && blockkey in sha) for (i = 1; i <= nblock; i++) print fill(block[i])
    nblock = 0; blockkey = ""
  }
  /^#/ { next }
  /^  - selector:/ { flush(); inplatforms = 1 }
  inplatforms {
    block[++nblock] = $0
    if (match($0, /\$\{SHA256_[a-z0-9]+_[a-z0-9]+\}/)) blockkey = substr($0, RSTART + 9, RLENGTH - 10)
    next
  }
  { print fill($0) }
  END { flush() }
' plugins/timeline.yaml >"${OUT}/timeline.yaml"
if grep -n '\${' "${OUT}/timeline.yaml" >&2; then
  fail "${OUT}/timeline.yaml still has placeholders (above)"
fi
log "release ${VERSION}: ${OUT}/timeline.yaml and ${#SHA[@]} archive(s); publish the archives at ${URI_BASE}/"
echo "${OUT}/timeline.yaml"
