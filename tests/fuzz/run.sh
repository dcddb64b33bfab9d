#!/usr/bin/env bash
# Builds every libFuzzer target (tests/fuzz/BUILD, --config=fuzz: clang with
# ASan and UBSan) and fuzzes each for XFERD_FUZZ_SECONDS (default 30), as many
# at once as there are cores (XFERD_FUZZ_JOBS): each target runs alone on its
# core for its whole time, so it gets the executions it would get run one by
# one, in a fraction of the wall time (eight targets on two cores: two
# minutes). Each starts from its seed corpus (tests/fuzz/corpus/<target>/,
# read-only here) plus what it finds, in a scratch directory. Prints
# libFuzzer's final statistics per target; fails if any target crashes,
# leaks, times out or trips a check, and leaves the input that did in
# $XFERD_FUZZ_ARTIFACTS (default: a temporary directory) to add to the corpus
# as a regression seed once fixed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$root"
seconds=${XFERD_FUZZ_SECONDS:-30}
artifacts=${XFERD_FUZZ_ARTIFACTS:-$(mktemp -d /tmp/xferd-fuzz.XXXXXX)}
mkdir -p "$artifacts"

mapfile -t targets < <(bazel query --noshow_progress 'attr(tags, "fuzz_target", //tests/fuzz:all)' 2>/dev/null)
[ ${#targets[@]} -gt 0 ] || { echo "tests/fuzz/run.sh: no fuzz targets found"; exit 1; }
bazel build --config=fuzz "${targets[@]}" || { echo "tests/fuzz/run.sh: build failed"; exit 1; }
bin=$(bazel info --config=fuzz bazel-bin 2>/dev/null)

jobs=${XFERD_FUZZ_JOBS:-$(nproc)}
# One target: its output goes to $artifacts/<name>.log, its verdict to
# $artifacts/<name>.rc, read back in target order once all have run.
fuzz_one() {
  local name=$1 work scratch rc=0
  work=$(mktemp -d "$artifacts/$name.corpus.XXXXXX")
  # Scratch files of a target (security_input_fuzzer's directory tree): libFuzzer
  # ends with _Exit, so a target cannot remove them itself.
  scratch=$(mktemp -d "$artifacts/$name.tmp.XXXXXX")
  # -timeout: one input taking this long is a hang; -rss_limit_mb: a leak or
  # an allocation a peer controls.
  TEST_TMPDIR=$scratch "$bin/tests/fuzz/$name" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 \
    -rss_limit_mb=2048 -artifact_prefix="$artifacts/$name-" \
    "$work" "tests/fuzz/corpus/$name" 2>"$artifacts/$name.log" || rc=$?
  echo "$rc" >"$artifacts/$name.rc"
  rm -rf "$work" "$scratch"
}

echo "tests/fuzz/run.sh: ${#targets[@]} targets, ${seconds}s each, $jobs at a time"
running=0
for label in "${targets[@]}"; do
  name=${label##*:}
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  echo "==> $name: fuzzing for ${seconds}s from $(find -L "tests/fuzz/corpus/$name" -type f | wc -l) seeds"
  fuzz_one "$name" &
  running=$((running + 1))
done
wait

failed=()
for label in "${targets[@]}"; do
  name=${label##*:}
  echo "==> $name"
  if [ "$(cat "$artifacts/$name.rc" 2>/dev/null)" = 0 ]; then
    grep -E '^(stat::|Done|INFO: Seed|#[0-9]+.*DONE)' "$artifacts/$name.log"
  else
    failed+=("$name")
    tail -n 60 "$artifacts/$name.log"
    echo "==> $name FAILED; the input is in $artifacts/$name-*"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "tests/fuzz/run.sh: crashes in ${failed[*]} (inputs and logs in $artifacts)"
  exit 1
fi
echo "tests/fuzz/run.sh: ${#targets[@]} targets fuzzed ${seconds}s each, no crash"
