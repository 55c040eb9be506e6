#!/usr/bin/env bash
# Version of the checkout, for ldflags and the image tag. Source it after
# init.sh; it sets:
#   EA_VERSION          git describe --tags --always --dirty; with no tag, a
#                       Go pseudo-version v0.0.0-<commit time>-<sha12>[-dirty]
#   EA_GIT_COMMIT       full commit hash
#   EA_GIT_TREE_STATE   clean or dirty
#   EA_BUILD_EPOCH      SOURCE_DATE_EPOCH, else the commit time: fixed, so
#                       builds of one commit are identical
#   EA_BUILD_DATE       the same in RFC 3339
#   EA_LDFLAGS          -X flags for pkg/version
# EVENT_APISERVER_VERSION overrides EA_VERSION (e.g. for a release build).

ea_version::set() {
  local describe
  EA_GIT_COMMIT="$(git -C "${REPO_ROOT}" rev-parse HEAD)"
  EA_GIT_TREE_STATE=clean
  if ! git -C "${REPO_ROOT}" diff --quiet HEAD -- 2>/dev/null; then
    EA_GIT_TREE_STATE=dirty
  fi
  EA_BUILD_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "${REPO_ROOT}" show -s --format=%ct HEAD)}"
  EA_BUILD_DATE="$(date -u -d "@${EA_BUILD_EPOCH}" +%Y-%m-%dT%H:%M:%SZ)"

  describe="$(git -C "${REPO_ROOT}" describe --tags --always --dirty)"
  if [[ "${describe}" =~ ^v[0-9]+\.[0-9]+\.[0-9]+ ]]; then
    EA_VERSION="${describe}"
  else
    # No release tag yet: a pseudo-version sorts by commit time and is
    # valid semver, like Go's for untagged modules.
    EA_VERSION="v0.0.0-$(date -u -d "@$(git -C "${REPO_ROOT}" show -s --format=%ct HEAD)" +%Y%m%d%H%M%S)-${EA_GIT_COMMIT:0:12}"
    if [[ "${EA_GIT_TREE_STATE}" == dirty ]]; then
      EA_VERSION+="-dirty"
    fi
  fi
  EA_VERSION="${EVENT_APISERVER_VERSION:-${EA_VERSION}}"

  local pkg=github.com/eventapiserver/event-apiserver/pkg/version
  EA_LDFLAGS="-X ${pkg}.version=${EA_VERSION} -X ${pkg}.gitCommit=${EA_GIT_COMMIT} -X ${pkg}.gitTreeState=${EA_GIT_TREE_STATE} -X ${pkg}.buildDate=${EA_BUILD_DATE}"
}

ea_version::set
