#!/usr/bin/env bash
# The Soft-RoCE suite: real verbs (rdma_rxe) in one qemu VM boot. Runs the
# device discovery test, the transport conformance suite, the memory-window
# test (region keys bound to their link), the C++ and Python
# integration suites (block lists and reads included) and the kill/restart
# fault test with every daemon on the verbs transport (require_rdma: no
# silent TCP), then the multi-device suite on a second rxe device, each test runner printing its own summary, then a final
# "softroce: N passed, N failed" line.
#
#   tests/softroce/run.sh            install what is missing, build, run
#   tests/softroce/run.sh --no-build run what is already built
#   tests/softroce/run.sh --build-only install what is missing, build
# XFERD_BAZEL_BIN: Bazel's bin directory holding the build (default: bazel
# info --config=opt).
#
# Exit status: 0 when every suite passed; 1 when one failed; 125 when the VM
# gave no result (see vm_run.sh).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$root"

TARGETS=(
  //daemon:xferd
  //client/cpp:xferctl
  //tests/unit/transport:device_test
  //tests/transport:transport_conformance_test
  //tests/transport:verbs_windows_test
  //tests/transport:tcp_tls_test
  //tests/integration/cpp:client_integration_test
  //tests/integration/cpp:blocks_integration_test
  //tests/integration/cpp:ring_integration_test
  //tests/integration/cpp:xferctl_test
  //tests/integration/python:verbs_suites
  //tests/integration/python:multi_nic_test
  //tests/load:load_test
)

# The optimised build (--config=opt), the one the .deb ships: under TCG the
# guest runs every instruction in software (the conformance suite: 73 s
# against 98 s unoptimised).
if [ "${1:-}" != "--no-build" ]; then
  tests/softroce/install_deps.sh
  bazel build --config=opt "${TARGETS[@]}"
fi
[ "${1:-}" != "--build-only" ] || exit 0
# The guest sees the host root read-only, Bazel's outputs included.
export XFERD_BAZEL_BIN=${XFERD_BAZEL_BIN:-$(bazel info --config=opt bazel-bin 2>/dev/null)}
exec tests/softroce/vm_run.sh -t "${XFERD_SOFTROCE_TIMEOUT:-1500}" -e XFERD_BAZEL_BIN \
  -- tests/softroce/suite_guest.sh
