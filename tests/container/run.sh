#!/usr/bin/env bash
# The container stage: builds the image with deploy/build-image.sh, then runs
# tests/container/container_test.py: the alert rules (promtool), the
# Kubernetes manifests (Debian's kubectl, offline), two pods of the image as
# the DaemonSet describes them (podman, host network, loopback addresses, a
# real etcd, mutual TLS) moving 1 GiB, a real Prometheus scraping them for the
# rules and every dashboard panel, and the drain on SIGTERM and in preStop.
# Prints the image's size and "container: N passed, N failed".
#
# podman runs here with runc and cgroupfs (crun refuses hosts whose cgroups
# are v1 only, and there is no systemd to manage them) and without default
# rlimits (some cannot be set in such sandboxes), from a configuration and an
# image store of this run's own: nothing of the host's podman is touched. A
# host that cannot run containers fails the stage, saying why.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$root"
fail() {
  echo "container: $*"
  echo "container: 0 passed, 1 failed"
  exit 1
}
[ "$(id -u)" -eq 0 ] || fail "needs root (podman, mmdebstrap)"
deploy/install-deps.sh test </dev/null || fail "installing packages failed"

work=$(mktemp -d /tmp/xferd-container.XXXXXX)
export CONTAINERS_CONF=$work/containers.conf CONTAINERS_STORAGE_CONF=$work/storage.conf
cat >"$CONTAINERS_CONF" <<CONF
[containers]
default_ulimits = []
log_driver = "k8s-file"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "$work/libpod"
CONF
cat >"$CONTAINERS_STORAGE_CONF" <<CONF
[storage]
driver = "overlay"
graphroot = "$work/storage"
runroot = "$work/storage-run"
CONF
cleanup() {
  podman rm -a -f -t 0 >/dev/null 2>&1
  podman rmi -a -f >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

# Debian's kubectl: kubernetes-client, or, where a kubectl package from
# elsewhere owns /usr/bin/kubectl (deploy/install-deps.sh leaves it), the
# same package unpacked here.
kubectl=/usr/bin/kubectl
if ! dpkg-query -S /usr/bin/kubectl 2>/dev/null | grep -q '^kubernetes-client:'; then
  (cd "$work" && { apt-get download -q kubernetes-client >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get download -q kubernetes-client >/dev/null; }; } &&
    dpkg-deb -x kubernetes-client_*.deb kubernetes-client) ||
    fail "cannot get Debian's kubernetes-client"
  kubectl=$work/kubernetes-client/usr/bin/kubectl
fi
echo "kubectl: $("$kubectl" version --client --short 2>/dev/null || "$kubectl" version --client)"

start=$SECONDS
image_ok=()
if deploy/build-image.sh 2>&1 | tee "$work/build-image.log"; then
  image_ok=(--image-ok)
  echo "image built in $((SECONDS - start)) s"
else
  echo "deploy/build-image.sh failed"
fi
version=$(sed -n 's/^XFERD_VERSION = "\(.*\)"$/\1/p' version.bzl)
/usr/bin/python3 tests/container/container_test.py --root "$root" --work "$work" \
  --image "localhost/xferd:$version" --kubectl "$kubectl" "${image_ok[@]}"
