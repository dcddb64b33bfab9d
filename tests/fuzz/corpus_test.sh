#!/usr/bin/env bash
# Runs every seed of a fuzz target's corpus through it once (the target is a
# replay program outside --config=fuzz, libFuzzer's binary under it).
# Usage: corpus_test.sh TARGET CORPUS_DIR
set -euo pipefail
target=$1 corpus=$2
seeds=$(find -L "$corpus" -type f | wc -l)
[ "$seeds" -gt 0 ] || { echo "no seeds in $corpus"; exit 1; }
# libFuzzer runs each input of a directory once with -runs=0; the replay
# program ignores flags.
"$target" -runs=0 "$corpus"
echo "$(basename "$target"): $seeds seeds, no crash"
