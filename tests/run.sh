#!/usr/bin/env bash
# Runs every xferd test on a Debian 12 machine, installing what is missing
# first (apt, only when something is missing). It starts with
# tests/lint/standalone.sh (no build): the repository refers to nothing
# outside itself. Then, each test in the build that checks the most:
#   1. asan: bazel test --config=asan //...   unit tests, the transport
#                         conformance suite (TCP here; verbs skips without a
#                         device), the C++ and Python integration suites over
#                         TCP on loopback, every binary (daemons included)
#                         under AddressSanitizer, LeakSanitizer and UBSan (gcc,
#                         DCHECKs on); benches and tools built the same way;
#                         first, tests/lint/layering_test.sh checks that Bazel
#                         refuses dependencies against the layering;
#   2. opt: what runs no C++ of ours or tests the package (tagged no_asan:
#                         installed_wheel_test, the Python client's own tests
#                         and mypy --strict), in --config=opt, the build the
#                         .deb ships and every later stage runs;
#   3. tests/softroce/run.sh   the integration suites over real verbs
#                         (Soft-RoCE) in a qemu VM, in the background beside
#      tsan: bazel test --config=tsan //...   unit and transport conformance
#                         tests under ThreadSanitizer (see .bazelrc), and
#      tests/fuzz/run.sh   every libFuzzer target (clang) for a bounded time;
#   4. tests/faults/run.sh     faults between daemons in network namespaces
#                         (tc netem, link down, partitions, SIGKILL, SIGTERM,
#                         a full disk), in a qemu VM for its netem, in the
#                         background beside
#      tests/deploy/run.sh    the .deb, its unit (systemd-analyze verify),
#                         configuration and Python package, and
#      tests/container/run.sh   the container image, the Kubernetes
#                         manifests, alert rules and dashboard (podman,
#                         kubectl, promtool, a real Prometheus);
#   5. //tests/load       32 clients x 200 mixed transfers across three
#                         daemons over TCP, alone (prints throughput, latency
#                         and memory).
# A stage in the background prints its output and time when it ends.
# One unsanitized configuration, opt, serves stage 2 and the VM, deploy,
# container and load stages: a plain (fastbuild) build of everything besides
# would cost a fresh machine a quarter of the run and test nothing the ASan
# build does not.
# Every runner prints its own summary (Bazel, gtest, pytest); the last line
# tallies the stages. Exits non-zero when anything failed.
#
# XFERD_SKIP_SANITIZERS=1 runs stage 1 in --config=opt instead and skips
# tsan and fuzz; XFERD_SKIP_VM=1 skips softroce and faults (for a quick
# local run; CI runs all).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"

say() { printf '\n[tests/run.sh] %s\n' "$*"; }

say "installing what is missing"
deploy/install-deps.sh test </dev/null || { echo "tests/run.sh: installing packages failed"; exit 1; }
tests/softroce/install_deps.sh </dev/null || { echo "tests/run.sh: installing VM packages failed"; exit 1; }

passed=0 failed=0 failures=()
tally() { # name exit-status seconds
  if [ "$2" -eq 0 ]; then
    passed=$((passed + 1))
    say "stage $1: ok ($3 s)"
  else
    failed=$((failed + 1))
    failures+=("$1")
    say "stage $1: FAILED ($3 s)"
  fi
}
stage() {
  local name=$1 start=$SECONDS rc=0
  shift
  say "stage: $name"
  "$@" </dev/null || rc=$?
  tally "$name" "$rc" "$((SECONDS - start))"
}
# One stage at a time can run beside the next ones: its output is kept in a
# file and printed, with its own time, by background_stage_wait.
bg_name='' bg_pid='' bg_dir=''
background_stage() { # name start-seconds command...
  bg_name=$1
  local start=$2
  shift 2
  bg_dir=$(mktemp -d)
  say "stage: $bg_name (in the background; its output follows when it ends)"
  (
    rc=0
    "$@" </dev/null >"$bg_dir/log" 2>&1 || rc=$?
    echo "$rc $((SECONDS - start))" >"$bg_dir/result"
  ) &
  bg_pid=$!
}
background_stage_wait() {
  [ -n "$bg_pid" ] || return 0
  wait "$bg_pid"
  local rc=1 seconds='?'
  read -r rc seconds <"$bg_dir/result"
  say "stage: $bg_name (output of the background run)"
  cat "$bg_dir/log"
  tally "$bg_name" "$rc" "$seconds"
  rm -rf "$bg_dir"
  bg_pid=''
}

stage "standalone" tests/lint/standalone.sh
sanitize=1
[ "${XFERD_SKIP_SANITIZERS:-0}" != 1 ] || sanitize=0
# Both run even if the first fails; either failing fails the stage.
layering_and_tests() { # bazel test arguments...
  local rc=0
  tests/lint/layering_test.sh || rc=1
  bazel test "$@" //... --test_output=errors || rc=1
  return "$rc"
}
if [ "$sanitize" = 1 ]; then
  stage "asan" layering_and_tests --config=asan
  stage "opt" bazel test --config=opt --build_tests_only --test_tag_filters=no_asan //... \
    --test_output=errors
else
  say "skipping the sanitizer and fuzzing stages (XFERD_SKIP_SANITIZERS=1)"
  stage "opt" layering_and_tests --config=opt
fi
# The VM stages wait for part of their time (the Soft-RoCE guest's C++ suites
# kept 1.2 of the 2 cores busy; the fault tests 0.64: netem delays,
# partitions outlasting timeouts, drains), so each runs in the background
# beside stages that only compute, ahead of them for the CPU (nice -5 as
# root), and the others take the cycles it leaves (docs/testing.md has the
# figures). Both run the opt build,
# named by its physical path and built first (Bazel runs one command at a
# time).
vm=1 vm_bin='' prio=()
[ "$(id -u)" -ne 0 ] || prio=(nice -n -5)
if [ "${XFERD_SKIP_VM:-0}" = 1 ]; then
  vm=0
  say "skipping the VM stages: softroce, faults (XFERD_SKIP_VM=1)"
else
  start=$SECONDS
  say "building the VM stages' binaries (opt)"
  if ! { tests/softroce/run.sh --build-only &&
    bazel build --config=opt //tests/faults:faults_test &&
    vm_bin=$(bazel info --config=opt bazel-bin 2>/dev/null); } </dev/null; then
    tally "softroce" 1 "$((SECONDS - start))"
    tally "faults" 1 "$((SECONDS - start))"
    vm=0
  fi
fi
beside() { # name command...: a VM stage in the background
  [ "$vm" = 1 ] || return 0
  background_stage "$1" "$SECONDS" env XFERD_BAZEL_BIN="$vm_bin" "${prio[@]}" "${@:2}"
}
beside "softroce" tests/softroce/run.sh --no-build
if [ "$sanitize" = 1 ]; then
  # Tests only, and under TSan most are filtered out (no_tsan) with their daemons.
  stage "tsan" bazel test --config=tsan --build_tests_only //... --test_output=errors
  stage "fuzz" tests/fuzz/run.sh
fi
background_stage_wait
beside "faults" tests/faults/run.sh --no-build
stage "deploy" tests/deploy/run.sh
stage "container" tests/container/run.sh
background_stage_wait
# Alone, so that its figures are not skewed by other work on the cores.
stage "load" bazel test --config=opt //tests/load:load_test --test_output=all

[ ${#failures[@]} -eq 0 ] || echo "tests/run.sh: failed stages: ${failures[*]}"
echo "tests/run.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
