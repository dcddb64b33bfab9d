#!/bin/bash
# xferctl end to end: two real daemons on loopback, driven only through the
# xferctl binary as an operator or a script would. Checks JSON and human
# output, the transport shown, exit codes (0 ok, 1 failure, 2 usage) and the
# bytes that moved (compared with cmp in the SHM regions' memory, which the
# daemons' local sockets hand over).
set -euo pipefail

XFERD="$PWD/daemon/xferd"
XFERCTL="$PWD/client/cpp/xferctl"
PY=/usr/bin/python3
DIR=$(mktemp -d /tmp/xfc.XXXXXX)
PIDS=()

# On any exit: daemons still running get SIGTERM (so they remove their
# sockets) and up to 5 s, then SIGKILL.
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for _ in $(seq 50); do
    local alive=0
    for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ "$alive" -eq 0 ] && break
    sleep 0.1
  done
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  rm -rf "$DIR"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  for log in "$DIR"/*.log; do echo "--- $log" >&2; tail -n 30 "$log" >&2; done
  exit 1
}

# json FILE FILTER: the jq filter's value over the JSON document in FILE
# (strings bare). jq, not a Python start per check: this runs some 20 times,
# and in the Soft-RoCE VM's software emulation every process start is slow.
json() { jq -r "$2" "$1"; }

# shm OP DAEMON REGION: an SHM region's memory, from DAEMON's local socket
# (its sealed memfd, mapped): OP dump writes it to stdout, load fills it from
# stdin (from offset 0), zero clears it. The request is encoded by hand:
# LocalRequest{open_region{region}} (proto/xferd/v1/local.proto).
read -r -d '' SHM_PY <<'EOF2' || true
import mmap, os, signal, socket, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # cmp may stop reading a dump early
path, op, name = sys.argv[1:]
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(path)
inner = bytes([0x0a, len(name)]) + name.encode()
s.send(bytes([0x1a, len(inner)]) + inner)
_, fds, _, _ = socket.recv_fds(s, 65536, 4)
assert len(fds) == 1, f"no memory for region {name}"
m = mmap.mmap(fds[0], os.fstat(fds[0]).st_size)
if op == "dump":
    sys.stdout.buffer.write(m)
elif op == "load":
    data = sys.stdin.buffer.read()
    m[:len(data)] = data
else:
    m[:] = bytes(len(m))
EOF2
shm() { "$PY" -c "$SHM_PY" "$DIR/$2.sock.local" "$1" "$3"; }

# start NAME: starts a daemon, waits for its ready file, sets <NAME>_PID/_ADDR.
# The transport under test (tcp unless the Soft-RoCE suite says verbs).
T=${XFERD_TEST_TRANSPORT:-tcp}
T_KIND=TRANSPORT_KIND_${T^^}
RDMA_ARGS=()
[ "$T" = verbs ] && RDMA_ARGS=(--require-rdma)

start() {
  local name=$1
  : >"$DIR/empty.toml"
  "$XFERD" --config "$DIR/empty.toml" --node-id "$name" --listen 127.0.0.1:0 \
    --unix-socket "$DIR/$name.sock" --ready-file "$DIR/$name.ready" --transport "$T" \
    "${RDMA_ARGS[@]}" >"$DIR/$name.log" 2>&1 &
  local pid=$!
  PIDS+=("$pid")
  for _ in $(seq 200); do
    [ -s "$DIR/$name.ready" ] && break
    kill -0 "$pid" 2>/dev/null || fail "$name exited before it was ready"
    sleep 0.05
  done
  [ -s "$DIR/$name.ready" ] || fail "$name not ready in 10s"
  printf -v "${name}_PID" %s "$pid"
  printf -v "${name}_ADDR" %s "$(json "$DIR/$name.ready" '.grpc_address')"
}

# stop PID NAME: SIGTERM, and the daemon must exit 0.
stop() {
  kill -TERM "$1"
  local code=0
  wait "$1" || code=$?
  local running=() pid
  for pid in "${PIDS[@]}"; do [ "$pid" = "$1" ] || running+=("$pid"); done
  PIDS=("${running[@]}")  # reaped: its pid may be reused
  [ "$code" -eq 0 ] || fail "$2 exited $code after SIGTERM"
}

# expect_exit CODE OUT ERR -- ARGS...: runs xferctl, checks its exit code.
expect_exit() {
  local want=$1 out=$2 err=$3
  shift 4
  local code=0
  "$XFERCTL" "$@" >"$out" 2>"$err" || code=$?
  [ "$code" -eq "$want" ] || fail "xferctl $* exited $code, want $want: $(cat "$err")"
}

start a
start b
A=(--target "unix:$DIR/a.sock")
B=(--target "$b_ADDR")
O="$DIR/out" E="$DIR/err"

# --- node and peers: the transport is always visible.
expect_exit 0 "$O" "$E" -- "${A[@]}" info
grep -Eq "^transport +$T" "$O" || fail "info does not show the transport: $(cat "$O")"
expect_exit 0 "$O" "$E" -- "${A[@]}" peers connect "$b_ADDR" --json
[ "$(json "$O" '.transport')" = $T_KIND ] || fail "connect: $(cat "$O")"
expect_exit 0 "$O" "$E" -- "${A[@]}" peers
grep -Eq "^b +127\\.0\\.0\\.1:[0-9]+ +$T +connected" "$O" || fail "peers: $(cat "$O")"

# --- regions: SHM on both sides, so the test can fill and read the bytes.
SRC_SIZE=$((1048576 + 77))
expect_exit 0 "$O" "$E" -- "${A[@]}" --json regions register src "$SRC_SIZE" --backing shm
SRC_SHM="a src"
expect_exit 0 "$O" "$E" -- "${B[@]}" regions register dst 2MiB --backing shm --remote-write --json
DST_SHM="b dst"
[ "$(json "$O" '.access.remote_write')" = true ] || fail "register: $(cat "$O")"
head -c "$SRC_SIZE" /dev/urandom | shm load $SRC_SHM
expect_exit 0 "$O" "$E" -- "${A[@]}" regions
grep -Eq "^src +1\\.00 MiB +shm +- +$T" "$O" || fail "regions: $(cat "$O")"

# --- a multi-slice odd-sized write with --json: state, transport, bytes.
LEN=1000003
expect_exit 0 "$O" "$E" -- "${A[@]}" write src b dst --length "$LEN" --src-offset 5 \
  --dst-offset 4099 --slice 64KiB --json
[ "$(json "$O" '.state')" = TRANSFER_STATE_DONE ] || fail "write state: $(cat "$O")"
[ "$(json "$O" '.transport')" = $T_KIND ] || fail "write transport: $(cat "$O")"
[ "$(json "$O" '.bytes_done | tonumber')" = "$LEN" ] || fail "write bytes: $(cat "$O")"
[ "$(json "$O" '.slices')" = 16 ] || fail "write slices: $(cat "$O")"
[ "$(json "$O" '.priority')" = PRIORITY_NORMAL ] || fail "write class: $(cat "$O")"
cmp -n "$LEN" <(shm dump $SRC_SHM) <(shm dump $DST_SHM) 5 4099 || fail "destination bytes differ"
FIRST_ID=$(json "$O" '.id')

# --- without --json and without a terminal: one final line, no bar. Without
# --length, the rest of the source from --src-offset (here exactly 1 MiB).
expect_exit 0 "$O" "$E" -- "${A[@]}" write src b dst --src-offset 77 --dst-offset 1MiB
[ "$(wc -l <"$O")" -eq 1 ] || fail "write printed more than one line: $(cat -A "$O")"
grep -Eq '^wrote 1\.00 MiB in [0-9.]+(us|ms|s) \([0-9.]+ [kMG]?B/s\) over '"$T"': transfer [0-9]+ done$' \
  "$O" || fail "write summary: $(cat "$O")"
if grep -q $'\r' "$O" "$E"; then fail "progress bar drawn without a terminal"; fi
cmp -n 1048576 <(shm dump $SRC_SHM) <(shm dump $DST_SHM) 77 1048576 ||
  fail "second write: bytes differ"

expect_exit 0 "$O" "$E" -- "${A[@]}" transfers --all
grep -Eq "^ +$FIRST_ID +done +$T +src\+5 +b +dst\+4099" "$O" || fail "transfers: $(cat "$O")"
expect_exit 0 "$O" "$E" -- "${A[@]}" transfer "$FIRST_ID"
grep -Eq "^transport +$T\$" "$O" || fail "transfer: $(cat "$O")"

# --- failures: exit 1 and "xferctl: CODE: message" on stderr.
expect_exit 1 "$O" "$E" -- "${A[@]}" write nope b dst --length 10
grep -Eq "^xferctl: NOT_FOUND: source region 'nope' is not registered" "$E" || fail "$(cat "$E")"
expect_exit 1 "$O" "$E" -- "${A[@]}" write src b nope --length 10
grep -Eq "^xferctl: NOT_FOUND: destination region 'nope' on peer 'b'" "$E" || fail "$(cat "$E")"
expect_exit 1 "$O" "$E" -- "${A[@]}" write src b dst --length 10 --dst-offset 2MiB
grep -q '^xferctl: OUT_OF_RANGE: ' "$E" || fail "$(cat "$E")"
expect_exit 1 "$O" "$E" -- "${A[@]}" regions register src 1MiB
grep -q '^xferctl: ALREADY_EXISTS: ' "$E" || fail "$(cat "$E")"
expect_exit 1 "$O" "$E" -- "${A[@]}" cancel 424242
grep -q '^xferctl: NOT_FOUND: ' "$E" || fail "$(cat "$E")"

# --- regions acl: a, left out of dst's ACL, cannot write it; open again, it can.
expect_exit 0 "$O" "$E" -- "${B[@]}" regions acl dst --allow someone-else
grep -q '^region dst: allowed peers someone-else$' "$O" || fail "acl: $(cat "$O")"
expect_exit 1 "$O" "$E" -- "${A[@]}" write src b dst --length 10
grep -q "^xferctl: PERMISSION_DENIED: .*node 'a' is not in the ACL" "$E" || fail "$(cat "$E")"
expect_exit 1 "$O" "$E" -- "${B[@]}" regions acl dst
grep -q '^xferctl: INVALID_ARGUMENT: give the peers' "$E" || fail "$(cat "$E")"
expect_exit 0 "$O" "$E" -- "${B[@]}" regions acl dst --any
grep -q '^region dst: any authenticated peer$' "$O" || fail "acl --any: $(cat "$O")"
expect_exit 0 "$O" "$E" -- "${A[@]}" write src b dst --length 10

# --- many blocks. check_blocks LIST SRC_DAEMON SRC DST_DAEMON DST: every
# block of LIST ("src dst length" lines) is byte for byte in region DST, and
# every byte of DST outside the blocks is still zero (nothing landed elsewhere).
check_blocks() {
  shm dump "$2" "$3" >"$DIR/check.src"
  shm dump "$4" "$5" >"$DIR/check.dst"
  "$PY" - "$1" "$DIR/check.src" "$DIR/check.dst" <<'EOF2'
import sys
lines = [l.split("#")[0].split() for l in open(sys.argv[1])]
blocks = [tuple(int(x) for x in l) for l in lines if l]
src, dst = open(sys.argv[2], "rb").read(), open(sys.argv[3], "rb").read()
for i, (s, d, n) in enumerate(blocks):
    assert src[s:s + n] == dst[d:d + n], f"block {i} ({s} {d} {n}) differs"
end = 0
for _, d, n in sorted(blocks, key=lambda b: b[1]) + [(0, len(dst), 0)]:
    gap = dst[end:d]
    assert gap.count(0) == len(gap), f"bytes in [{end}, {d}) outside the blocks changed"
    end = max(end, d + n)
print(f"{len(blocks)} blocks, {sum(n for _, _, n in blocks)} bytes verified")
EOF2
}
# `shm zero` clears a destination before a transfer, so a check proves it.

# A text block file: comments, a blank line, a unit, the source's last byte.
cat >"$DIR/blocks.txt" <<'EOF2'
# src_offset dst_offset length
0 1048576 4096
5000 0 1000

65536 4096 64KiB
1000000 200000 48653   # up to the last byte of src
300000 900000 1
EOF2
sed 's/64KiB/65536/' "$DIR/blocks.txt" >"$DIR/blocks.list"
shm zero $DST_SHM
expect_exit 0 "$O" "$E" -- "${A[@]}" write src b dst --blocks "$DIR/blocks.txt" --json
[ "$(json "$O" '.state')" = TRANSFER_STATE_DONE ] || fail "block write: $(cat "$O")"
[ "$(json "$O" '.blocks | tonumber')" = 5 ] || fail "block write blocks: $(cat "$O")"
[ "$(json "$O" '.bytes_done | tonumber')" = $((4096 + 1000 + 65536 + 48653 + 1)) ] ||
  fail "block write bytes: $(cat "$O")"
check_blocks "$DIR/blocks.list" $SRC_SHM $DST_SHM >/dev/null || fail "block write bytes differ"

# The binary form on stdin: 300 blocks of 512 bytes, scattered.
"$PY" - "$SRC_SIZE" "$DIR/blocks.bin" "$DIR/bin.list" <<'EOF2'
import struct, sys
size = int(sys.argv[1])
blocks = [((k * 7919 * 13) % (size - 512), k * 4096 + k % 7, 512) for k in range(300)]
with open(sys.argv[2], "wb") as f:
    f.write(b"XFERBLK1" + b"".join(struct.pack("<3Q", *b) for b in blocks))
with open(sys.argv[3], "w") as f:
    f.writelines(f"{s} {d} {n}\n" for s, d, n in blocks)
EOF2
shm zero $DST_SHM
expect_exit 0 "$O" "$E" -- "${A[@]}" write src b dst --blocks - <"$DIR/blocks.bin"
grep -Eq '^wrote 150\.00 KiB \(300 blocks\) in .* over '"$T"': transfer [0-9]+ done$' "$O" ||
  fail "binary block write: $(cat "$O")"
check_blocks "$DIR/bin.list" $SRC_SHM $DST_SHM >/dev/null || fail "binary blocks differ"

# Strided runs, two of them, one after the other.
shm zero $DST_SHM
expect_exit 0 "$O" "$E" -- "${A[@]}" write src b dst --strided 0,0,4KiB,8KiB,4KiB,16 \
  --strided 131072,1MiB,100,1000,200,50 --priority critical --json
[ "$(json "$O" '.blocks | tonumber')" = 66 ] || fail "strided write: $(cat "$O")"
[ "$(json "$O" '.priority')" = PRIORITY_CRITICAL ] || fail "strided write class: $(cat "$O")"
{ for k in $(seq 0 15); do echo "$((k * 8192)) $((k * 4096)) 4096"; done
  for k in $(seq 0 49); do echo "$((131072 + k * 1000)) $((1048576 + k * 200)) 100"; done
} >"$DIR/strided.list"
check_blocks "$DIR/strided.list" $SRC_SHM $DST_SHM >/dev/null || fail "strided blocks differ"

# Prepared layouts: pages of src here, pages of dst on b, written by index.
expect_exit 0 "$O" "$E" -- "${A[@]}" layouts prepare src-pages src --block-length 4KiB --count 256
grep -q '^prepared layout src-pages: 256 blocks of 4.00 KiB in region src$' "$O" || fail "$(cat "$O")"
expect_exit 0 "$O" "$E" -- "${A[@]}" layouts prepare dst-pages dst --peer b --block-length 4KiB \
  --count 512 --json
[ "$(json "$O" '.blocks | tonumber')" = 512 ] || fail "prepare on peer: $(cat "$O")"
expect_exit 0 "$O" "$E" -- "${A[@]}" layouts --json
[ "$(json "$O" '[.layouts[].name] | sort | join(" ")')" = "dst-pages src-pages" ] ||
  fail "layouts --json: $(cat "$O")"
expect_exit 0 "$O" "$E" -- "${A[@]}" layouts
grep -Eq '^dst-pages +b +dst +4\.00 KiB +512$' "$O" || fail "layouts: $(cat "$O")"
: >"$DIR/indices.txt" && : >"$DIR/layout.list"
for k in $(seq 0 99); do
  si=$(((k * 37) % 256)) di=$(((k * 101) % 512))
  echo "$si $di" >>"$DIR/indices.txt"
  echo "$((si * 4096)) $((di * 4096)) 4096" >>"$DIR/layout.list"
done
shm zero $DST_SHM
expect_exit 0 "$O" "$E" -- "${A[@]}" write src b dst --layout src-pages:dst-pages \
  --indices "$DIR/indices.txt" --json
[ "$(json "$O" '.blocks | tonumber')" = 100 ] || fail "layout write: $(cat "$O")"
check_blocks "$DIR/layout.list" $SRC_SHM $DST_SHM >/dev/null || fail "layout blocks differ"

# --- a region that keeps landed ranges, and a watcher that asks for them.
expect_exit 0 "$O" "$E" -- "${B[@]}" regions register kept 1MiB --backing shm --remote-write \
  --landed-ranges --json
[ "$(json "$O" '.landed_ranges')" = true ] || fail "register --landed-ranges: $(cat "$O")"
KEPT_SHM="b kept"
expect_exit 1 "$O" "$E" -- "${B[@]}" regions watch dst --ranges
grep -q "^xferctl: FAILED_PRECONDITION: .*register it with landed_ranges" "$E" || fail "$(cat "$E")"
"$XFERCTL" "${B[@]}" regions watch kept --ranges --json >"$DIR/kwatch" 2>"$DIR/kwatch.err" &
KWATCH_PID=$!
for _ in $(seq 200); do [ -s "$DIR/kwatch" ] && break; sleep 0.05; done
grep -q KIND_SUBSCRIBED "$DIR/kwatch" || fail "no SUBSCRIBED event: $(cat "$DIR/kwatch.err")"
expect_exit 0 "$O" "$E" -- "${A[@]}" write src b kept --strided 0,0,4KiB,8KiB,8KiB,4 \
  --strided 100000,4096,100,100,100,3 --json
KEPT_ID=$(json "$O" '.id')
printf '%s\n' "0 0 4096" "8192 8192 4096" "16384 16384 4096" "24576 24576 4096" \
  "100000 4096 100" "100100 4196 100" "100200 4296 100" >"$DIR/kept.list"
check_blocks "$DIR/kept.list" $SRC_SHM $KEPT_SHM >/dev/null || fail "kept blocks differ"
expect_exit 0 "$O" "$E" -- "${B[@]}" regions deregister kept
wait "$KWATCH_PID" || fail "regions watch --ranges failed: $(cat "$DIR/kwatch.err")"
"$PY" - "$DIR/kwatch" "$KEPT_ID" <<'EOF2' || fail "watched ranges: $(cat "$DIR/kwatch")"
import base64, json, struct, sys
events = [json.loads(line) for line in open(sys.argv[1])]
landed = [e for e in events if e["kind"] == "KIND_LANDED"]
assert len(landed) == 1 and landed[0]["source_transfer_id"] == sys.argv[2], events
unpack = lambda b: list(struct.unpack(f"<{len(b) // 8}Q", b))
offsets = unpack(base64.b64decode(landed[0]["range_offsets"]))
lengths = unpack(base64.b64decode(landed[0]["range_lengths"]))
# By offset: the three 100-byte blocks at 4096 join the page before them.
assert list(zip(offsets, lengths)) == [(0, 4396), (8192, 4096), (16384, 4096),
                                       (24576, 4096)], (offsets, lengths)
assert landed[0]["ranges_missing"] is False and int(landed[0]["blocks"]) == 7, landed[0]
EOF2

# --- reads (pull): b's rsrc allows remote reads; a reads into its rdst.
expect_exit 0 "$O" "$E" -- "${B[@]}" regions register rsrc 1MiB --backing shm --remote-read --json
RSRC_SHM="b rsrc"
head -c 1048576 /dev/urandom | shm load $RSRC_SHM
expect_exit 0 "$O" "$E" -- "${A[@]}" regions register rdst 1MiB --backing shm --json
RDST_SHM="a rdst"
printf '%s\n' "0 1000 4096" "500000 0 1000" "1040000 1040000 8576" "4096 300000 65536" \
  >"$DIR/read.list"
expect_exit 0 "$O" "$E" -- "${A[@]}" read b rsrc rdst --blocks "$DIR/read.list" --json
[ "$(json "$O" '.direction')" = DIRECTION_READ ] || fail "block read: $(cat "$O")"
[ "$(json "$O" '.blocks | tonumber')" = 4 ] || fail "block read blocks: $(cat "$O")"
check_blocks "$DIR/read.list" $RSRC_SHM $RDST_SHM >/dev/null || fail "block read differs"
shm zero $RDST_SHM
expect_exit 0 "$O" "$E" -- "${A[@]}" read b rsrc rdst --strided 1,3,333,1000,700,999
grep -Eq '^read [0-9.]+ KiB \(999 blocks\) in .* over '"$T"': transfer [0-9]+ done$' "$O" ||
  fail "strided read: $(cat "$O")"
for k in $(seq 0 998); do echo "$((1 + k * 1000)) $((3 + k * 700)) 333"; done >"$DIR/sread.list"
check_blocks "$DIR/sread.list" $RSRC_SHM $RDST_SHM >/dev/null || fail "strided read differs"
shm zero $RDST_SHM
expect_exit 0 "$O" "$E" -- "${A[@]}" read b rsrc rdst --src-offset 7 --dst-offset 9 --length 300001
echo "7 9 300001" >"$DIR/plain.list"
check_blocks "$DIR/plain.list" $RSRC_SHM $RDST_SHM >/dev/null || fail "plain read differs"

# --- verified: checksums saved by --checksums-out, a restore checked against
# them with --expected-checksums, and one that no longer matches.
expect_exit 0 "$O" "$E" -- "${A[@]}" write src b dst --length 64KiB --slice 4KiB --verify \
  --checksums-out "$DIR/wsums" --json
[ "$(json "$O" '.verify')" = true ] || fail "verified write: $(cat "$O")"
[ "$(stat -c %s "$DIR/wsums")" = 128 ] || fail "16 slices, 8 bytes each: $(stat -c %s "$DIR/wsums")"
shm zero $RDST_SHM
expect_exit 0 "$O" "$E" -- "${A[@]}" read b rsrc rdst --length 256KiB --slice 64KiB --verify \
  --checksums-out "$DIR/rsums"
[ "$(stat -c %s "$DIR/rsums")" = 32 ] || fail "4 slices: $(stat -c %s "$DIR/rsums")"
echo "0 0 262144" >"$DIR/verified.list"
check_blocks "$DIR/verified.list" $RSRC_SHM $RDST_SHM >/dev/null || fail "verified read differs"
expect_exit 0 "$O" "$E" -- "${A[@]}" read b rsrc rdst --length 256KiB --slice 64KiB \
  --expected-checksums "$DIR/rsums" --json
[ "$(json "$O" '.state')" = TRANSFER_STATE_DONE ] || fail "restore: $(cat "$O")"
head -c 70000 /dev/urandom | shm load $RSRC_SHM  # the source's slices 0 and 1 change
expect_exit 1 "$O" "$E" -- "${A[@]}" read b rsrc rdst --length 256KiB --slice 64KiB \
  --expected-checksums - <"$DIR/rsums"
grep -q "^xferctl: DATA_LOSS: verify: block #0 .*expected_checksums\[0\] is .*; 2 of 4 blocks differ" \
  "$E" || fail "altered restore: $(cat "$E")"
head -c 7 "$DIR/rsums" >"$DIR/short"
expect_exit 1 "$O" "$E" -- "${A[@]}" read b rsrc rdst --length 256KiB --expected-checksums "$DIR/short"
grep -qF "xferctl: INVALID_ARGUMENT: checksums file '$DIR/short' holds 7 bytes" "$E" ||
  fail "short checksums file: $(cat "$E")"
expect_exit 2 "$O" "$E" -- "${A[@]}" write src b dst --length 4KiB --checksums-out "$DIR/x"
expect_exit 2 "$O" "$E" -- "${A[@]}" write src b dst --length 4KiB --verify --no-wait \
  --checksums-out "$DIR/x"

# On a terminal (script gives one) the bar counts blocks as well as bytes.
# 64 MiB, so the read is still running when its reply comes back (a bar is
# drawn only for a transfer that has not ended by then).
expect_exit 0 "$O" "$E" -- "${B[@]}" regions register big 64MiB --remote-read
expect_exit 0 "$O" "$E" -- "${A[@]}" regions register bigdst 64MiB
script -qec "$XFERCTL --target unix:$DIR/a.sock read b big bigdst --strided 0,0,4KiB,4KiB,4KiB,16384" \
  /dev/null >"$DIR/tty" || fail "read on a terminal: $(cat "$DIR/tty")"
grep -q '16384/16384 blocks' "$DIR/tty" || fail "no block count on the bar: $(cat -A "$DIR/tty")"
grep -q 'read 64.00 MiB (16384 blocks) in' "$DIR/tty" || fail "tty summary: $(cat -A "$DIR/tty")"

# --- bad many-block input: the line, the block or the option is named; exit 1.
printf '%s\n' "0 0 4096" "# fine" "4096 8192" >"$DIR/bad.txt"
expect_exit 1 "$O" "$E" -- "${A[@]}" write src b dst --blocks "$DIR/bad.txt"
grep -qF "xferctl: INVALID_ARGUMENT: block file '$DIR/bad.txt' line 3: expected 'src_offset dst_offset length', got 2 fields" \
  "$E" || fail "bad block line: $(cat "$E")"
printf '%s\n' "0 0 4096" "0 4096 4096" "0 2097152 1" >"$DIR/far.txt"
expect_exit 1 "$O" "$E" -- "${A[@]}" write src b dst --blocks "$DIR/far.txt"
grep -q "^xferctl: OUT_OF_RANGE: block #2: " "$E" || fail "block out of range: $(cat "$E")"
expect_exit 1 "$O" "$E" -- "${A[@]}" write src b dst --blocks "$DIR/blocks.txt" --strided 0,0,1,1,1,1
grep -q "give exactly one of --blocks" "$E" || fail "two forms: $(cat "$E")"
expect_exit 1 "$O" "$E" -- "${A[@]}" write src b dst --strided 0,0,4096
grep -q "^xferctl: INVALID_ARGUMENT: --strided '0,0,4096': expected 6 fields" "$E" || fail "$(cat "$E")"
expect_exit 1 "$O" "$E" -- "${A[@]}" write src b dst --blocks "$DIR/blocks.txt" --length 10
grep -q "do not go with --blocks" "$E" || fail "blocks and --length: $(cat "$E")"
expect_exit 1 "$O" "$E" -- "${A[@]}" read b rsrc rdst --blocks "$DIR/no-such-file"
grep -q "^xferctl: NOT_FOUND: cannot open file '$DIR/no-such-file'" "$E" || fail "$(cat "$E")"
expect_exit 1 "$O" "$E" -- "${A[@]}" read b dst rdst --length 10
grep -q "^xferctl: PERMISSION_DENIED: " "$E" || fail "read without remote_read: $(cat "$E")"
expect_exit 1 "$O" "$E" -- "${A[@]}" layouts prepare p src --block-length 4KiB
grep -q "give either --count" "$E" || fail "prepare without blocks: $(cat "$E")"
expect_exit 0 "$O" "$E" -- "${A[@]}" layouts delete src-pages
grep -q '^deleted layout src-pages$' "$O" || fail "$(cat "$O")"
expect_exit 1 "$O" "$E" -- "${A[@]}" layouts delete src-pages
grep -q '^xferctl: NOT_FOUND: ' "$E" || fail "delete twice: $(cat "$E")"

# --- regions watch --json: SUBSCRIBED, then LANDED for a write, then DEREGISTERED.
"$XFERCTL" "${B[@]}" regions watch dst --json >"$DIR/watch" 2>"$DIR/watch.err" &
WATCH_PID=$!
for _ in $(seq 200); do [ -s "$DIR/watch" ] && break; sleep 0.05; done
grep -q KIND_SUBSCRIBED "$DIR/watch" || fail "no SUBSCRIBED event: $(cat "$DIR/watch.err")"
expect_exit 0 "$O" "$E" -- "${A[@]}" write src b dst --length 4097 --dst-offset 77 --json
cmp -n 4097 <(shm dump $SRC_SHM) <(shm dump $DST_SHM) 0 77 || fail "watched write: bytes differ"
WATCHED_ID=$(json "$O" '.id')
expect_exit 0 "$O" "$E" -- "${B[@]}" regions deregister dst
code=0
wait "$WATCH_PID" || code=$?
[ "$code" -eq 0 ] || fail "regions watch exited $code: $(cat "$DIR/watch.err")"
"$PY" - "$DIR/watch" "$WATCHED_ID" <<'EOF' || fail "watch events: $(cat "$DIR/watch")"
import json, sys
events = [json.loads(line) for line in open(sys.argv[1])]
kinds = [e["kind"] for e in events]
assert kinds == ["KIND_SUBSCRIBED", "KIND_LANDED", "KIND_DEREGISTERED"], kinds
landed = events[1]
assert (int(landed["offset"]), int(landed["length"])) == (77, 4097), landed
assert landed["source_node"] == "a" and landed["source_transfer_id"] == sys.argv[2], landed
EOF

# --- every command's --json is one parsable document.
for cmd in info stats regions peers "transfers --all" "transfer $FIRST_ID"; do
  # shellcheck disable=SC2086
  expect_exit 0 "$O" "$E" -- "${A[@]}" $cmd --json
  jq -es 'length == 1' "$O" >/dev/null || fail "$cmd --json: $(cat "$O")"
done

# --- usage errors: exit 2, before any connection.
expect_exit 2 "$O" "$E" -- "${A[@]}" write src b
expect_exit 2 "$O" "$E" -- "${A[@]}" write src b dst --length 12xyz
expect_exit 2 "$O" "$E" -- "${A[@]}" regions register r 1MiB --backing tape
expect_exit 2 "$O" "$E" -- "${A[@]}" write src b dst --priority urgent
grep -q 'priority' "$E" || fail "an unknown class: $(cat "$E")"
expect_exit 2 "$O" "$E" -- "${A[@]}" frobnicate
expect_exit 2 "$O" "$E" -- --target unix:/nonexistent.sock
expect_exit 0 "$O" "$E" -- --help
grep -q 'write' "$O" || fail "--help does not list the commands"

stop "$a_PID" a
stop "$b_PID" b
echo PASS
