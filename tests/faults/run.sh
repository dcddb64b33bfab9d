#!/usr/bin/env bash
# Fault tests (faults_test.py) in a qemu VM: they need root, network
# namespaces and tc netem, which the Debian kernel booted by
# tests/softroce/vm_run.sh has (the host's may not). The daemons use the TCP
# transport between the namespaces; no RDMA device is set up.
#
#   tests/faults/run.sh            install what is missing, build, run
#   tests/faults/run.sh --no-build run what is already built
# The daemons are the optimised build (--config=opt), the one the .deb ships.
# XFERD_BAZEL_BIN: Bazel's bin directory holding it (default: bazel info).
#
# Exit status: pytest's (0 when every test passed); 125 when the VM gave no
# result (see vm_run.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$root"

if [ "${1:-}" != "--no-build" ]; then
  tests/softroce/install_deps.sh
  bazel build --config=opt //tests/faults:faults_test
fi
bin=${XFERD_BAZEL_BIN:-$(bazel info --config=opt bazel-bin 2>/dev/null)}
runfiles=$bin/tests/faults/faults_test.runfiles
# TEST_TMPDIR: the guest's own tmpfs (its root is the host's, read-only).
exec tests/softroce/vm_run.sh --no-rdma -t "${XFERD_FAULTS_TIMEOUT:-900}" \
  -e XFERD_TEST_TRANSPORT=tcp -e TEST_WORKSPACE=xferd -e TEST_TMPDIR=/tmp/xferd-faults \
  -e RUNFILES_DIR="$runfiles" -e TEST_SRCDIR="$runfiles" \
  -- bash -c 'mkdir -p "$TEST_TMPDIR" && exec "$0" -s "$@"' "$bin/tests/faults/faults_test" ${XFERD_FAULTS_ARGS:-}
