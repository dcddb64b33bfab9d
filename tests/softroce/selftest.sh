#!/bin/bash
# Smoke test of the Soft-RoCE VM harness (vm_run.sh). About 40 s on an idle 2-core host, 6 boots:
#
#   1. RDMA boot: ibv_devinfo shows rxe0 PORT_ACTIVE with GID[1] = ::ffff:10.9.9.1 (RoCE v2);
#      ib_write_bw and ib_write_lat server+client in one boot (selftest_guest.sh) report
#      figures, which are printed.
#   2. Plumbing boot (--no-rdma): a non-zero exit status reaches the host; -e variables;
#      the working directory (under /tmp, so it is auto-shared) is kept; stdout and stderr
#      arrive in order; the root is read-only; HOME, the work dir and --rw dirs are writable.
#      A missing command gives 127.
#   3. Two concurrent runs keep their own output and exit statuses.
#   4. A timeout yields 125 and leaves no qemu running.
#
# Prints "N passed, N failed" last; exits 1 on any failure.
#   tests/softroce/selftest.sh            (extra vm_run.sh options: SELFTEST_VM_ARGS)
# Single-quoted $... below is meant literally or for the guest's bash to expand:
# shellcheck disable=SC2016
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
vm_run=$here/vm_run.sh
read -r -a extra_args <<<"${SELFTEST_VM_ARGS:-}"

passed=0 failed=0
pass() { passed=$((passed + 1)); printf 'PASS: %s\n' "$1"; }
fail() { failed=$((failed + 1)); printf 'FAIL: %s\n' "$1"; }
check() { # description command...
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
section() { printf '\n##### %s\n' "$*"; }

tmp=$(mktemp -d /tmp/xferd-softroce-selftest.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# Runs vm_run.sh, streaming its stdout to ours and keeping a copy; stderr (progress) as is.
# Sets vm_rc and vm_out (file).
vm() {
  local name=$1
  shift
  vm_out=$tmp/$name.out
  vm_rc=0
  "$vm_run" "${extra_args[@]}" "$@" 2>"$tmp/$name.err" | tee "$vm_out" || vm_rc=${PIPESTATUS[0]}
  sed 's/^/  | /' "$tmp/$name.err" >&2
}

# Text between "=== BEGIN name" and "=== END name rc=N" in file $2.
block() { sed -n "/^=== BEGIN $1\$/,/^=== END $1 rc=/p" "$2"; }
block_rc() { sed -n "s/^=== END $1 rc=\\([0-9]*\\)\$/\\1/p" "$2"; }

# --- 1. RDMA ----------------------------------------------------------------------------
section "1. Soft-RoCE: ibv_devinfo, ib_write_bw, ib_write_lat"
vm rdma -C "$here" -- bash ./selftest_guest.sh
check "RDMA boot: vm_run.sh exit status 0 (got $vm_rc)" test "$vm_rc" = 0

devinfo=$(block ibv_devinfo "$vm_out")
check "ibv_devinfo lists rxe0" grep -q 'hca_id:[[:space:]]*rxe0' <<<"$devinfo"
check "rxe0 port 1 is PORT_ACTIVE" grep -q 'state:[[:space:]]*PORT_ACTIVE' <<<"$devinfo"
check "rxe0 link layer is Ethernet (RoCE)" grep -q 'link_layer:[[:space:]]*Ethernet' <<<"$devinfo"
check "GID[1] is the IPv4-mapped RoCE v2 GID ::ffff:10.9.9.1" \
  grep -qE 'GID\[ *1\]:[[:space:]]*::ffff:10\.9\.9\.1, RoCE v2' <(block ibv_devinfo_v "$vm_out")

# Result lines: "65536 2000 <peak> <average> <msgrate>" (MB/s) and
# "4096 1000 <min> <max> <typical> <avg> <stdev> <p99> <p99.9>" (usec); the client's comes first.
bw=$(block ib_write_bw "$vm_out" | awk '$1 == 65536 && $2 == 2000 { print $4; exit }')
check "ib_write_bw server and client succeeded (rc=$(block_rc ib_write_bw "$vm_out"))" \
  test "$(block_rc ib_write_bw "$vm_out")" = 0
check "ib_write_bw reports a bandwidth: ${bw:-none} MB/s" \
  awk -v v="${bw:-0}" 'BEGIN { exit !(v > 0) }'
lat=$(block ib_write_lat "$vm_out" | awk '$1 == 4096 && $2 == 1000 { print $5; exit }')
check "ib_write_lat server and client succeeded (rc=$(block_rc ib_write_lat "$vm_out"))" \
  test "$(block_rc ib_write_lat "$vm_out")" = 0
check "ib_write_lat reports a latency: ${lat:-none} usec typical" \
  awk -v v="${lat:-0}" 'BEGIN { exit !(v > 0) }'

# --- 2. plumbing ------------------------------------------------------------------------
section "2. exit status, environment, cwd, output order, file system"
mkdir -p "$tmp/cwd" "$tmp/results"
echo "host-file-content" >"$tmp/cwd/input.txt"
script='
echo "line 1 stdout"
echo "line 2 stderr" >&2
echo "line 3 stdout"
echo "token=$SELFTEST_TOKEN"
echo "spaced=$SELFTEST_SPACED"
echo "cwd=$PWD"
echo "input=$(cat input.txt)"
echo "home=$HOME pydontwrite=$PYTHONDONTWRITEBYTECODE"
if touch /usr/.xferd-selftest 2>/dev/null; then echo "rootfs=writable"; else echo "rootfs=readonly"; fi
touch "$HOME/x" && echo "home=writable"
echo from-guest >"$SELFTEST_RESULTS/result.txt" && echo "rw-share=ok"
echo "$PWD" >"$XFERD_VM_WORK/cwd.txt" && echo "workdir=ok"
exit 7'
vm plumbing --no-rdma -C "$tmp/cwd" --rw "$tmp/results" \
  -e SELFTEST_TOKEN=abc123 -e 'SELFTEST_SPACED=a b  $c' -e SELFTEST_RESULTS="$tmp/results" \
  -- bash -c "$script"
check "exit status 7 of the guest command reaches the host (got $vm_rc)" test "$vm_rc" = 7
check "stdout and stderr arrive in order" \
  diff <(grep '^line ' "$vm_out") <(printf 'line %s\n' '1 stdout' '2 stderr' '3 stdout')
check "-e NAME=VALUE is passed" grep -qx 'token=abc123' "$vm_out"
check "-e keeps spaces and \$ literally" grep -qxF 'spaced=a b  $c' "$vm_out"
check "working directory is preserved (under /tmp: auto read-only share)" grep -qxF "cwd=$tmp/cwd" "$vm_out"
check "host files in the working directory are readable" grep -qx 'input=host-file-content' "$vm_out"
check "HOME=/tmp/home and PYTHONDONTWRITEBYTECODE=1" grep -qx 'home=/tmp/home pydontwrite=1' "$vm_out"
check "the guest root is read-only" grep -qx 'rootfs=readonly' "$vm_out"
check "HOME is writable" grep -qx 'home=writable' "$vm_out"
check "--rw share: guest writes reach the host" grep -qx 'from-guest' "$tmp/results/result.txt"
run_dir=$(sed -n 's/.*run dir \([^ ]*\)$/\1/p' "$tmp/plumbing.err" | head -n1)
check "XFERD_VM_WORK is the host run dir and writable" grep -qxF "$tmp/cwd" "${run_dir:-/nonexistent}/cwd.txt"

vm notfound --no-rdma -- /nonexistent/command
check "a missing command gives 127 (got $vm_rc)" test "$vm_rc" = 127

# --- 3. concurrency ---------------------------------------------------------------------
section "3. two concurrent runs"
declare -A conc_pid=()
for n in 3 4; do
  "$vm_run" "${extra_args[@]}" -q --no-rdma -e "N=$n" -- bash -c 'for i in 1 2 3; do echo "run-$N-$i"; done; exit "$N"' \
    >"$tmp/conc$n.out" 2>"$tmp/conc$n.err" &
  conc_pid[$n]=$!
done
conc_rc3=0 conc_rc4=0
wait "${conc_pid[3]}" || conc_rc3=$?
wait "${conc_pid[4]}" || conc_rc4=$?
cat "$tmp/conc3.out" "$tmp/conc4.out" "$tmp/conc3.err" "$tmp/conc4.err"
check "concurrent run A: exit 3 (got $conc_rc3)" test "$conc_rc3" = 3
check "concurrent run B: exit 4 (got $conc_rc4)" test "$conc_rc4" = 4
check "concurrent run A: exactly its own output" diff "$tmp/conc3.out" <(printf 'run-3-%s\n' 1 2 3)
check "concurrent run B: exactly its own output" diff "$tmp/conc4.out" <(printf 'run-4-%s\n' 1 2 3)

# --- 4. timeout -------------------------------------------------------------------------
section "4. timeout"
vm timeout --no-rdma -t 2 -- sleep 100
check "timeout gives 125 (got $vm_rc)" test "$vm_rc" = 125
check "timeout is reported" grep -q 'no exit status within 2s' "$tmp/timeout.err"
run_dir=$(sed -n 's/.*run dir \([^ ]*\)$/\1/p' "$tmp/timeout.err" | head -n1)
qpid=$(cat "${run_dir:-/nonexistent}/qemu.pid" 2>/dev/null || echo 0)
check "the timed-out qemu (pid $qpid) is gone" \
  bash -c '[[ $1 != 0 ]] && ! [[ -d /proc/$1 && $(cat /proc/$1/comm) == qemu* ]]' _ "$qpid"

# --- summary ----------------------------------------------------------------------------
section "summary"
echo "ib_write_bw -s 65536 -n 2000: ${bw:-n/a} MB/s average"
echo "ib_write_lat -s 4096: ${lat:-n/a} usec typical"
echo "$passed passed, $failed failed"
((failed == 0))
