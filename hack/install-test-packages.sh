#!/usr/bin/env bash
# Installs the Debian packages the integration tests run against, in one apt
# transaction:
#   postgresql  the history store's shared database (15 on bookworm); the tests
#               start private clusters from its binaries (internal/pgtest).
#   containerd  a real container runtime (with runc) that TestImage imports and
#               runs the image with, as kind and kubelets do, and the
#               real-cluster tier's kubelet runs its pods on.
#   containernetworking-plugins, iptables, conntrack, iproute2
#               the real-cluster tier's pod network (the CNI bridge,
#               host-local and loopback plugins), kube-proxy's iptables mode
#               and the node's dummy interface (internal/cluster).
#   nginx, libnginx-mod-http-js
#               the front door (deploy/door) that TestFrontDoor runs in front
#               of kube-apiserver and event-apiserver; njs is its identity code.
#   chromium, chromium-driver, fonts-dejavu-core
#               the headless browser TestTimelineWeb drives (through the
#               DevTools protocol, with chromedp) to test kubectl timeline
#               --web's page, and a font its screenshots are drawn with.
# Nothing is started or enabled here. Without them those tests fall back or
# skip, saying so; CI must not, so hack/test.sh runs this.
set -o errexit -o nounset -o pipefail

missing=()
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || [[ -n "${POSTGRES_BIN:-}" ]] || missing+=(postgresql)
command -v containerd >/dev/null || missing+=(containerd)
[[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null || missing+=(iptables)
command -v conntrack >/dev/null || missing+=(conntrack)
command -v ip >/dev/null || missing+=(iproute2)
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || missing+=(nginx)
[[ -f /usr/lib/nginx/modules/ngx_http_js_module.so ]] || missing+=(libnginx-mod-http-js)
command -v chromium >/dev/null || missing+=(chromium)
command -v chromedriver >/dev/null || missing+=(chromium-driver)
[[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]] || missing+=(fonts-dejavu-core)
[[ ${#missing[@]} -gt 0 ]] || exit 0

if [[ "$(id -u)" != 0 ]]; then
  echo "Missing test packages and this is not root: run 'sudo apt-get install -y ${missing[*]}'" >&2
  exit 1
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian's postgresql package starts a default cluster where an init system
# runs; the tests start their own, so stop it.
if command -v pg_ctlcluster >/dev/null; then
  for cluster in /etc/postgresql/*/main; do
    [[ -d "${cluster}" ]] || continue
    version="$(basename "$(dirname "${cluster}")")"
    pg_ctlcluster "${version}" main stop 2>/dev/null || true
  done
fi
# Debian's nginx package starts a default server on port 80 where an init
# system runs; the tests start their own.
if [[ -x /etc/init.d/nginx ]]; then
  /etc/init.d/nginx stop >/dev/null 2>&1 || true
fi
