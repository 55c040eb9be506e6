#!/usr/bin/env bash
# Builds the container images the real-cluster tier (internal/cluster,
# test/cluster) imports into containerd with `ctr images import`, since no
# registry is reachable. Into _output/image/, each one static binary on no
# base image under the upstream reference kubeadm v1.36 and the overlays use:
#   pause.tar                    registry.k8s.io/pause:3.10.2, containerd's
#                                sandbox image (hack/pause)
#   etcd.tar                     registry.k8s.io/etcd:3.6.8-0 (_output/bin/etcd)
#   coredns.tar                  registry.k8s.io/coredns/coredns:v1.15.0
#   kube-apiserver.tar, kube-controller-manager.tar, kube-scheduler.tar
#                                registry.k8s.io/<name>:v1.36.3, kubeadm's
#                                static pods
#   postgres.tar                 docker.io/library/postgres:17, the image
#                                deploy/components/postgres names, made of
#                                Debian's PostgreSQL server (hack/postgresimage)
# and event-apiserver.tar, the project's image (hack/build-image.sh).
# Builds etcd, CoreDNS and the Kubernetes commands first where they are not
# built (all cached). Writing the archives takes seconds.
set -o errexit -o nounset -o pipefail

# shellcheck source=lib/init.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/init.sh"
# shellcheck source=lib/version.sh
source "${REPO_ROOT}/hack/lib/version.sh"
cd "${REPO_ROOT}"

out="${REPO_ROOT}/_output/image"
mkdir -p "${out}"
etcd="$(bash hack/build-etcd.sh)"
coredns="$(bash hack/build-coredns.sh)"
bash hack/build-kube.sh kube-apiserver kube-controller-manager kube-scheduler >/dev/null
etcd_version="$("${etcd}" --version | awk '/^etcd Version:/ {print $3}')"
kube_version="$("${OUT_BIN}/kube-apiserver" --version | awk '{print $2}')"
coredns_version="$("${coredns}" -version | sed -n 's/^CoreDNS-//p')"

CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -buildid=" -o "${out}/pause" ./hack/pause
images=(
  "--image=pause.tar=registry.k8s.io/pause:3.10.2=${out}/pause=/pause"
  "--image=etcd.tar=registry.k8s.io/etcd:${etcd_version}-0=${etcd}=/usr/local/bin/etcd"
  "--image=coredns.tar=registry.k8s.io/coredns/coredns:v${coredns_version}=${coredns}=/coredns"
)
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  images+=("--image=${c}.tar=registry.k8s.io/${c}:${kube_version}=${OUT_BIN}/${c}=/usr/local/bin/${c}")
done
log "Writing the cluster images into ${out}"
go run ./hack/clusterimages --arch="$(go env GOARCH)" --created="${EA_BUILD_EPOCH}" --output-dir="${out}" "${images[@]}"
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "-s -w -buildid=" -o "${out}/postgres-entrypoint" ./hack/postgres-entrypoint
pg_dir="$(dirname "$(dirname "$(ls -d /usr/lib/postgresql/*/bin/postgres | sort -V | tail -1)")")"
[[ -d "${pg_dir}" ]] || fail "no PostgreSQL server in /usr/lib/postgresql (hack/install-test-packages.sh installs it)"
go run ./hack/postgresimage --arch="$(go env GOARCH)" --created="${EA_BUILD_EPOCH}" --output="${out}/postgres.tar" \
  --entrypoint="${out}/postgres-entrypoint" --pg-dir="${pg_dir}" --share-dir="/usr/share/postgresql/$(basename "${pg_dir}")" \
  --reference="docker.io/library/postgres:17"
bash hack/build-image.sh
