#!/usr/bin/env bash
# Runs inside the Soft-RoCE VM (started by run.sh): every suite over verbs,
# one after the other, each from what Bazel built on the host. A suite that
# fails does not stop the others; the last line tallies them.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
bin=${XFERD_BAZEL_BIN:-$PWD/bazel-bin}  # run.sh passes its build's

export XFERD_TEST_TRANSPORT=verbs TEST_WORKSPACE=xferd
# Stress tests of transport-independent logic already run over TCP in stage 1.
export XFERD_SKIP_STRESS=1
export TEST_TMPDIR=/tmp/xferd-softroce-tests
mkdir -p "$TEST_TMPDIR"

passed=0 failed=0 failures=()
run() {
  local name=$1 start=$SECONDS
  shift
  echo "==== $name"
  if "$@"; then
    passed=$((passed + 1))
    echo "==== $name: ok ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1))
    failures+=("$name")
    echo "==== $name: FAILED ($((SECONDS - start)) s)"
  fi
}
# A Bazel test binary, with the runfiles environment Bazel would give it.
bazel_test() {
  local target=$1
  shift
  RUNFILES_DIR="$bin/$target.runfiles" TEST_SRCDIR="$bin/$target.runfiles" "$bin/$target" "$@"
}
xferctl_test() {
  (cd "$bin/tests/integration/cpp/xferctl_test.runfiles/xferd" &&
    bash tests/integration/cpp/xferctl_test.sh)
}

echo "soft-roce: $(rdma link show 2>/dev/null | head -n 1)"
run device_discovery bazel_test tests/unit/transport/device_test
run transport_conformance bazel_test tests/transport/transport_conformance_test
run memory_windows bazel_test tests/transport/verbs_windows_test
run cpp_client_integration bazel_test tests/integration/cpp/client_integration_test
run cpp_blocks_integration bazel_test tests/integration/cpp/blocks_integration_test
run cpp_ring_integration bazel_test tests/integration/cpp/ring_integration_test
run xferctl_end_to_end xferctl_test
# The Python suites in one process (verbs_suites.py says why); pytest's
# summary names any test that failed.
run python_suites bazel_test tests/integration/python/verbs_suites
# Load over verbs, scaled to Soft-RoCE's ~50 MB/s (TCP runs the full size).
XFERD_LOAD_CLIENTS=8 XFERD_LOAD_TRANSFERS=25 run load bazel_test tests/load/load_test

# Debian's kernel has the tls module (the CI host's may not): every encrypted
# TCP lane must run TLS in it both ways there (OpenSSL's send offload and the
# daemon's receive), still carry no plaintext, interoperate with peers whose
# records OpenSSL does, and break cleanly on a non-data record.
if modprobe tls && grep -qw tls /proc/sys/net/ipv4/tcp_available_ulp; then
  XFERD_EXPECT_KERNEL_TLS=1 run tcp_kernel_tls bazel_test tests/transport/tcp_tls_test
else
  failed=$((failed + 1))
  failures+=("kernel_tls_module")
fi

# Last, so every suite above runs with one device: two veth cables with an
# rxe device on each end (rxe_wire.sh says how), for the multi-NIC suite.
if bash tests/softroce/rxe_wire.sh 1 && bash tests/softroce/rxe_wire.sh 2; then
  XFERD_RXE_WIRE=$PWD/tests/softroce/rxe_wire.sh \
    run python_multi_nic_test bazel_test tests/integration/python/multi_nic_test
else
  failed=$((failed + 1))
  failures+=("second_rxe_device")
fi

[ ${#failures[@]} -eq 0 ] || echo "softroce: failed suites: ${failures[*]}"
echo "softroce: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
