#!/usr/bin/env bash
# xferd in one command, on a fresh Debian 12 machine: installs what is
# missing, builds, starts two daemons on loopback, registers a 1 GiB shared-
# memory region on each, fills the source from Python (in place, no copies),
# moves it to the other daemon with xferctl's live progress bar, verifies
# every byte, prints the throughput and the transport used, and stops both.
#
#   deploy/quickstart.sh                 (XFERD_QUICKSTART_SIZE=256MiB for less)
#
# The transport is chosen as in production (transport = auto): verbs on a
# host with a working RDMA device, else TCP, and the output says which.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$root"
SIZE=${XFERD_QUICKSTART_SIZE:-1GiB}

step() { printf '\n==> %s\n' "$*"; }

step "installing what is missing"
deploy/install-deps.sh build </dev/null

step "building (optimized)"
bazel build --config=opt //daemon:xferd //client/cpp:xferctl //client/python:xferd_zip
BIN=$(bazel info --config=opt bazel-bin 2>/dev/null)
XFERD=$BIN/daemon/xferd
export PYTHONPATH=$BIN/client/python/xferd.zip

work=$(mktemp -d /tmp/xferd-quickstart.XXXXXX)
pids=()
stop_daemons() {
  local pid
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}
trap 'stop_daemons; rm -rf "$work"' EXIT

step "starting daemons a and b on loopback"
: >"$work/empty.toml"
for node in a b; do
  "$XFERD" --config "$work/empty.toml" --node-id "$node" --listen 127.0.0.1:0 \
    --unix-socket "$work/$node.sock" --ready-file "$work/$node.ready" \
    --data-listen 127.0.0.1:0 >"$work/$node.log" 2>&1 &
  pids+=($!)
done
for node in a b; do
  for _ in $(seq 100); do [ -s "$work/$node.ready" ] && break; sleep 0.1; done
  [ -s "$work/$node.ready" ] || { echo "daemon $node did not start:"; cat "$work/$node.log"; exit 1; }
done
B_ADDR=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["grpc_address"])' \
  "$work/b.ready")
xferctl() { "$BIN/client/cpp/xferctl" "$@"; }
A=(--target "unix:$work/a.sock")
B=(--target "unix:$work/b.sock")
xferctl "${A[@]}" info | sed -n '1p;/^transport/p'

step "registering $SIZE regions: src on a, dst on b (remote writes allowed)"
xferctl "${A[@]}" regions register src "$SIZE" --backing shm
xferctl "${B[@]}" regions register dst "$SIZE" --backing shm --remote-write

step "filling src from Python, in place in the shared memory"
/usr/bin/python3 - "$work" <<'PY'
import hashlib, os, struct, sys, time
import xferd
work = sys.argv[1]
with xferd.Client(f"unix:{work}/a.sock") as a:
    buf = a.region("src").buffer
    block, mib = os.urandom(1 << 20), 1 << 20
    start = time.monotonic()
    for i in range(0, len(buf), mib):
        n = min(mib, len(buf) - i)
        buf[i:i + n] = block[:n]
        buf[i:i + 8] = struct.pack("<Q", i // mib)  # every MiB differs
    digest = hashlib.sha256(buf).hexdigest()
    open(f"{work}/src.sha256", "w").write(digest)
    print(f"filled {len(buf) >> 20} MiB in {time.monotonic() - start:.1f} s, sha256 {digest[:16]}...")
PY

step "connecting a to b"
xferctl "${A[@]}" peers connect "$B_ADDR"

step "writing src (on a) into dst (on b)"
xferctl "${A[@]}" write src b dst

step "verifying every byte on b"
/usr/bin/python3 - "$work" <<'PY'
import hashlib, sys
import xferd
work = sys.argv[1]
expected = open(f"{work}/src.sha256").read()
with xferd.Client(f"unix:{work}/b.sock") as b:
    got = hashlib.sha256(b.region("dst").buffer).hexdigest()
if got != expected:
    sys.exit(f"MISMATCH: dst sha256 {got} != src sha256 {expected}")
print(f"verified: dst on b is byte-for-byte src on a (sha256 {got[:16]}...)")
PY

step "stopping the daemons"
stop_daemons
echo "done. Next: README.md (Running it for real), xferctl --help, client/python/README.md"
