#!/bin/bash
# Guest half of selftest.sh: runs inside the Soft-RoCE VM (via vm_run.sh) and prints raw
# tool output between "=== BEGIN <name>" / "=== END <name> rc=<status>" markers.
# selftest.sh parses and judges the output on the host; this script only runs things.
set -uo pipefail

dev=${XFERD_RDMA_DEV:-rxe0}
gidx=${XFERD_RDMA_GID_INDEX:-1}
ip=${XFERD_RDMA_IP:-10.9.9.1}

section() { # name command...: run one step between markers
  local name=$1 rc
  shift
  echo "=== BEGIN $name"
  "$@"
  rc=$?
  echo "=== END $name rc=$rc"
}

# Waits (up to 30 s) until a TCP port is listening: perftest exchanges QP info over TCP,
# and a client that starts before its server fails at once. Polling beats a fixed sleep:
# under TCG the server's start-up time varies a lot with host load.
wait_listen() {
  local port=$1 _
  for _ in $(seq 1 300); do
    [[ -n $(ss -Hltn "sport = :$port") ]] && return 0
    sleep 0.1
  done
  echo "port $port never started listening" >&2
  return 1
}

# Runs a perftest server in the background and its client against it (same rxe device:
# RC loopback through rxe0 / dummy0). Prints the client's output; the server's follows.
perftest_pair() { # port tool args...
  local port=$1 tool=$2 spid src crc
  shift 2
  timeout 120 "$tool" "$@" -p "$port" >"/tmp/$tool.server.log" 2>&1 &
  spid=$!
  wait_listen "$port" || { kill "$spid" 2>/dev/null; cat "/tmp/$tool.server.log"; return 1; }
  timeout 120 "$tool" "$@" -p "$port" "$ip"
  crc=$?
  wait "$spid"
  src=$?
  echo "--- server ($tool, rc=$src):"
  cat "/tmp/$tool.server.log"
  ((crc == 0 && src == 0))
}

section ibv_devinfo ibv_devinfo -d "$dev"
section ibv_devinfo_v bash -c "ibv_devinfo -v -d $dev | grep -E 'GID\\[|state:|link_layer:'"
section ib_write_bw perftest_pair 18515 ib_write_bw -d "$dev" -x "$gidx" -s 65536 -n 2000 -F
section ib_write_lat perftest_pair 18516 ib_write_lat -d "$dev" -x "$gidx" -s 4096 -F
