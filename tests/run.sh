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
#   3. tsan: bazel test --config=tsan //...   unit and transport conformance
#                         tests under ThreadSanitizer (see .bazelrc);
#   4. tests/fuzz/run.sh   every libFuzzer target (clang) for a bounded time;
#   5. //tests/load       32 clients x 200 mixed transfers across three
#                         daemons over TCP, alone (prints throughput, latency
#                         and memory);
#   6. tests/deploy/run.sh    the .deb, its unit (systemd-analyze verify),
#                         configuration and Python package; then
#      tests/container/run.sh   the container image, the Kubernetes
#                         manifests, alert rules and dashboard (podman,
#                         kubectl, promtool, a real Prometheus);
#   7. tests/faults/run.sh     faults between daemons in network namespaces
#                         (tc netem, link down, partitions, SIGKILL, SIGTERM,
#                         a full disk), in a qemu VM for its netem; mostly
#                         waiting, so it runs in the background beside 6 and
#                         its output and time follow 6's;
#   8. tests/softroce/run.sh   the integration suites over real verbs
#                         (Soft-RoCE) in a qemu VM.
# One unsanitized configuration, opt, serves stages 2 and 5-8: a plain
# (fastbuild) build of everything besides would cost a fresh machine a
# quarter of the run and test nothing the ASan build does not.
# Every runner prints its own summary (Bazel, gtest, pytest); the last line
# tallies the stages. Exits non-zero when anything failed.
#
# XFERD_SKIP_SANITIZERS=1 runs stage 1 in --config=opt instead and skips
# 3-4; XFERD_SKIP_VM=1 skips 7 and 8 (for a quick local run; CI runs all).
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
  # Tests only, and under TSan most are filtered out (no_tsan) with their daemons.
  stage "tsan" bazel test --config=tsan --build_tests_only //... --test_output=errors
  stage "fuzz" tests/fuzz/run.sh
else
  say "skipping the sanitizer and fuzzing stages (XFERD_SKIP_SANITIZERS=1)"
  stage "opt" layering_and_tests --config=opt
fi
stage "load" bazel test --config=opt //tests/load:load_test --test_output=all
# The fault tests spend most of their time waiting (netem delays, partitions
# outlasting timeouts, drains: their VM averaged 0.64 of a core), so it runs
# beside deploy, ahead of it for the CPU (nice -5 as root): they keep their
# timing, and deploy takes the cycles they leave. They run from the opt
# build, named by its physical path.
faults_beside_deploy() {
  local start=$SECONDS bin prio=()
  [ "$(id -u)" -ne 0 ] || prio=(nice -n -5)
  if tests/softroce/install_deps.sh </dev/null &&
    bazel build --config=opt //tests/faults:faults_test </dev/null &&
    bin=$(bazel info --config=opt bazel-bin 2>/dev/null); then
    background_stage "faults" "$start" env XFERD_BAZEL_BIN="$bin" "${prio[@]}" tests/faults/run.sh --no-build
  else
    tally "faults" 1 "$((SECONDS - start))"
  fi
  stage "deploy" tests/deploy/run.sh
  background_stage_wait
}
if [ "${XFERD_SKIP_VM:-0}" = 1 ]; then
  stage "deploy" tests/deploy/run.sh
  stage "container" tests/container/run.sh
  say "skipping the VM stages: softroce, faults (XFERD_SKIP_VM=1)"
else
  faults_beside_deploy
  stage "container" tests/container/run.sh
  stage "softroce" tests/softroce/run.sh
fi

[ ${#failures[@]} -eq 0 ] || echo "tests/run.sh: failed stages: ${failures[*]}"
echo "tests/run.sh: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
