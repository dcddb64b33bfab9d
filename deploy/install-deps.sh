#!/usr/bin/env bash
# Installs the Debian 12 packages xferd needs to build, run and test, but only
# those missing: a machine that has them all makes no apt call at all.
# Usage: deploy/install-deps.sh [build|image|test|all]   (default: all)
set -euo pipefail

# Build and run: Bazel (offline, Debian's bazel-bootstrap), gRPC/protobuf,
# Abseil, spdlog/fmt, toml++, CLI11, libsystemd, rdma-core's libibverbs,
# prometheus-cpp's core (the metric families and their text format), GNU
# libmicrohttpd with GnuTLS and zlib (the /metrics HTTP(S) server, gzip), ISA-L
# (the CRC-64 of verified transfers), pip
# (the Python client's wheel is installed with it).
BUILD_PACKAGES=(
  bazel-bootstrap pkg-config g++
  protobuf-compiler protobuf-compiler-grpc libgrpc++-dev libprotobuf-dev
  libabsl-dev libspdlog-dev libfmt-dev libtomlplusplus-dev libcli11-dev libsystemd-dev
  libibverbs-dev ibverbs-providers
  prometheus-cpp-dev libmicrohttpd-dev libgnutls28-dev zlib1g-dev libisal-dev
  python3-grpcio python3-protobuf python3-pip
)
# Tests and benchmarks: gtest, pytest, iperf3 and qperf (the benchmarks' references),
# systemd-analyze (the unit is verified), dpkg-deb/objdump (the package) and
# prometheus-client (an independent parser of the /metrics exposition), numpy
# (the Python client's many-block tests and README example), etcd and etcdctl
# (the cluster directory's tests run a real etcd), venv (the wheel is tested
# in a fresh one) and mypy (the client is checked with --strict); jq (the
# xferctl test reads its JSON output); xxHash (a checksum the checksum
# benchmark measures beside the daemon's);
# clang and its sanitizer/libFuzzer runtimes (libclang-rt-14-dev, which clang
# does not depend on) for the fuzz targets. gcc's ASan, TSan and UBSan
# runtimes come with g++ (libgcc-12-dev).
TEST_PACKAGES=(
  libgtest-dev libgmock-dev libbenchmark-dev python3-pytest iperf3 qperf openssl
  systemd binutils python3-prometheus-client python3-numpy clang libclang-rt-14-dev
  etcd-server etcd-client python3-venv python3-mypy jq libxxhash-dev
)
# The container image (deploy/build-image.sh): mmdebstrap builds its root file
# system, podman imports and runs it, with runc (crun cannot run on hosts
# whose cgroups are v1 only).
IMAGE_PACKAGES=(mmdebstrap podman runc)
# The container stage (tests/container/run.sh): Prometheus and promtool for
# the alert rules and the dashboard's queries, and Debian's kubectl
# (kubernetes-client) for the manifests. A kubectl package from elsewhere
# owning /usr/bin/kubectl conflicts with it: then it is left alone, and the
# stage unpacks Debian's kubectl for itself (tests/container/run.sh).
CONTAINER_TEST_PACKAGES=(prometheus python3-yaml)
if ! dpkg-query -S /usr/bin/kubectl >/dev/null 2>&1 ||
  dpkg-query -S /usr/bin/kubectl 2>/dev/null | grep -q '^kubernetes-client:'; then
  CONTAINER_TEST_PACKAGES+=(kubernetes-client)
fi

case "${1:-all}" in
  build) wanted=("${BUILD_PACKAGES[@]}") ;;
  image) wanted=("${IMAGE_PACKAGES[@]}") ;;
  test | all)
    wanted=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}" "${IMAGE_PACKAGES[@]}"
      "${CONTAINER_TEST_PACKAGES[@]}")
    ;;
  *) echo "usage: $0 [build|image|test|all]" >&2; exit 2 ;;
esac

missing=()
for pkg in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q </dev/null
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
