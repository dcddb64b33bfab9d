#!/usr/bin/env bash
# Runs every xferd test on a Debian 12 machine, installing what is missing
# first (apt, only when something is missing). It starts with
# tests/lint/standalone.sh (no build): the repository refers to nothing
# outside itself. Then:
#   1. bazel test //...   unit tests, the transport conformance suite (TCP
#                         here; verbs skips without a device), and the C++ and
#                         Python integration suites over TCP on loopback (the
#                         Python ones also against the pip-installed wheel,
#                         installed_wheel_test, and mypy --strict on the
#                         client); first, tests/lint/layering_test.sh checks that Bazel
#                         refuses dependencies against the layering;
#   2. bazel test --config=asan //...   the same under AddressSanitizer,
#                         LeakSanitizer and UBSan (gcc; daemons included;
#                         not installed_wheel_test nor the Python client's
#                         own tests, which run no C++: see .bazelrc);
#   3. bazel test --config=tsan //...   the same under ThreadSanitizer (unit
#                         and transport conformance tests; see .bazelrc);
#   4. tests/fuzz/run.sh   every libFuzzer target (clang) for a bounded time;
#   5. //tests/load       32 clients x 200 mixed transfers across three
#                         daemons over TCP, alone (prints throughput, latency
#                         and memory);
#   6. tests/deploy/run.sh    the .deb, its unit (systemd-analyze verify),
#                         configuration and Python package;
#   7. tests/softroce/run.sh   the same suites as 1 over real verbs
#                         (Soft-RoCE) in a qemu VM;
#   8. tests/faults/run.sh     faults between daemons in network namespaces
#                         (tc netem, link down, partitions, SIGKILL, SIGTERM,
#                         a full disk), in a qemu VM for its netem.
# Every runner prints its own summary (Bazel, gtest, pytest); the last line
# tallies the stages. Exits non-zero when anything failed.
#
# XFERD_SKIP_SANITIZERS=1 skips stages 2-4 and XFERD_SKIP_VM=1 stages 7 and 8
# (for a quick local run; CI runs all).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

say() { printf '\n[tests/run.sh] %s\n' "$*"; }

say "installing what is missing"
deploy/install-deps.sh test </dev/null || { echo "tests/run.sh: installing packages failed"; exit 1; }
tests/softroce/install_deps.sh </dev/null || { echo "tests/run.sh: installing VM packages failed"; exit 1; }

passed=0 failed=0 failures=()
stage() {
  local name=$1 start=$SECONDS
  shift
  say "stage: $name"
  if "$@" </dev/null; then
    passed=$((passed + 1))
    say "stage $name: ok ($((SECONDS - start)) s)"
  else
    failed=$((failed + 1))
    failures+=("$name")
    say "stage $name: FAILED ($((SECONDS - start)) s)"
  fi
}

stage "standalone" tests/lint/standalone.sh
# Both run even if the first fails; either failing fails the stage.
layering_and_tests() {
  local rc=0
  tests/lint/layering_test.sh || rc=1
  bazel test //... --test_output=errors || rc=1
  return "$rc"
}
stage "bazel test //..." layering_and_tests
if [ "${XFERD_SKIP_SANITIZERS:-0}" = 1 ]; then
  say "skipping the sanitizer and fuzzing stages (XFERD_SKIP_SANITIZERS=1)"
else
  # Tests only: the stage-1 build already compiled the benches and tools,
  # and under TSan most tests are filtered out (no_tsan) with their daemons.
  stage "asan" bazel test --config=asan --build_tests_only //... --test_output=errors
  stage "tsan" bazel test --config=tsan --build_tests_only //... --test_output=errors
  stage "fuzz" tests/fuzz/run.sh
fi
stage "load" bazel test //tests/load:load_test --test_output=all
stage "deploy" tests/deploy/run.sh
if [ "${XFERD_SKIP_VM:-0}" = 1 ]; then
  say "skipping the VM stages: softroce, faults (XFERD_SKIP_VM=1)"
else
  stage "softroce" tests/softroce/run.sh
  stage "faults" tests/faults/run.sh
fi

[ ${#failures[@]} -eq 0 ] || echo "tests/run.sh: failed stages: ${failures[*]}"
echo "tests/run.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
