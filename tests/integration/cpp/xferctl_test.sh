#!/bin/bash
# xferctl end to end: two real daemons on loopback, driven only through the
# xferctl binary as an operator or a script would. Checks JSON and human
# output, the transport shown, exit codes (0 ok, 1 failure, 2 usage) and the
# bytes that moved (compared with cmp in the SHM files of both regions).
set -euo pipefail

XFERD="$PWD/daemon/xferd"
XFERCTL="$PWD/client/cpp/xferctl"
PY=/usr/bin/python3
DIR=$(mktemp -d /tmp/xfc.XXXXXX)
PIDS=()

# On any exit: daemons still running get SIGTERM (so they remove their SHM
# files) and up to 5 s, then SIGKILL.
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

# json FILE EXPR: evaluates a Python expression over the JSON document `d`.
json() { "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$@"; }

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
  printf -v "${name}_ADDR" %s "$(json "$DIR/$name.ready" 'd["grpc_address"]')"
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
[ "$(json "$O" 'd["transport"]')" = $T_KIND ] || fail "connect: $(cat "$O")"
expect_exit 0 "$O" "$E" -- "${A[@]}" peers
grep -Eq "^b +127\\.0\\.0\\.1:[0-9]+ +$T +connected" "$O" || fail "peers: $(cat "$O")"

# --- regions: SHM on both sides, so the test can fill and read the bytes.
SRC_SIZE=$((1048576 + 77))
expect_exit 0 "$O" "$E" -- "${A[@]}" --json regions register src "$SRC_SIZE" --backing shm
SRC_SHM=$(json "$O" 'd["shm_path"]')
expect_exit 0 "$O" "$E" -- "${B[@]}" regions register dst 2MiB --backing shm --remote-write --json
DST_SHM=$(json "$O" 'd["shm_path"]')
[ "$(json "$O" 'd["access"]["remote_write"]')" = True ] || fail "register: $(cat "$O")"
head -c "$SRC_SIZE" /dev/urandom | dd of="$SRC_SHM" conv=notrunc status=none
expect_exit 0 "$O" "$E" -- "${A[@]}" regions
grep -Eq "^src +1\\.00 MiB +shm +- +$T" "$O" || fail "regions: $(cat "$O")"

# --- a multi-slice odd-sized write with --json: state, transport, bytes.
LEN=1000003
expect_exit 0 "$O" "$E" -- "${A[@]}" write src b dst --length "$LEN" --src-offset 5 \
  --dst-offset 4099 --slice 64KiB --json
[ "$(json "$O" 'd["state"]')" = TRANSFER_STATE_DONE ] || fail "write state: $(cat "$O")"
[ "$(json "$O" 'd["transport"]')" = $T_KIND ] || fail "write transport: $(cat "$O")"
[ "$(json "$O" 'int(d["bytes_done"])')" = "$LEN" ] || fail "write bytes: $(cat "$O")"
[ "$(json "$O" 'd["slices"]')" = 16 ] || fail "write slices: $(cat "$O")"
cmp -n "$LEN" "$SRC_SHM" "$DST_SHM" 5 4099 || fail "destination bytes differ"
FIRST_ID=$(json "$O" 'd["id"]')

# --- without --json and without a terminal: one final line, no bar. Without
# --length, the rest of the source from --src-offset (here exactly 1 MiB).
expect_exit 0 "$O" "$E" -- "${A[@]}" write src b dst --src-offset 77 --dst-offset 1MiB
[ "$(wc -l <"$O")" -eq 1 ] || fail "write printed more than one line: $(cat -A "$O")"
grep -Eq '^wrote 1\.00 MiB in [0-9.]+(us|ms|s) \([0-9.]+ [kMG]?B/s\) over '"$T"': transfer [0-9]+ done$' \
  "$O" || fail "write summary: $(cat "$O")"
if grep -q $'\r' "$O" "$E"; then fail "progress bar drawn without a terminal"; fi
cmp -n 1048576 "$SRC_SHM" "$DST_SHM" 77 1048576 || fail "second write: bytes differ"

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

# --- regions watch --json: SUBSCRIBED, then LANDED for a write, then DEREGISTERED.
"$XFERCTL" "${B[@]}" regions watch dst --json >"$DIR/watch" 2>"$DIR/watch.err" &
WATCH_PID=$!
for _ in $(seq 200); do [ -s "$DIR/watch" ] && break; sleep 0.05; done
grep -q KIND_SUBSCRIBED "$DIR/watch" || fail "no SUBSCRIBED event: $(cat "$DIR/watch.err")"
expect_exit 0 "$O" "$E" -- "${A[@]}" write src b dst --length 4097 --dst-offset 77 --json
cmp -n 4097 "$SRC_SHM" "$DST_SHM" 0 77 || fail "watched write: bytes differ"
WATCHED_ID=$(json "$O" 'd["id"]')
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
  json "$O" 'type(d).__name__' >/dev/null || fail "$cmd --json: $(cat "$O")"
done

# --- usage errors: exit 2, before any connection.
expect_exit 2 "$O" "$E" -- "${A[@]}" write src b
expect_exit 2 "$O" "$E" -- "${A[@]}" write src b dst --length 12xyz
expect_exit 2 "$O" "$E" -- "${A[@]}" regions register r 1MiB --backing tape
expect_exit 2 "$O" "$E" -- "${A[@]}" frobnicate
expect_exit 2 "$O" "$E" -- --target unix:/nonexistent.sock
expect_exit 0 "$O" "$E" -- --help
grep -q 'write' "$O" || fail "--help does not list the commands"

stop "$a_PID" a
stop "$b_PID" b
echo PASS
