#!/usr/bin/env bash
# Inside the Soft-RoCE VM: a second device rxe1 on dummy1 (10.9.10.1/24),
# beside the harness's rxe0 on dummy0. Returns once rxe1's port is ACTIVE
# with GID[1] = ::ffff:10.9.10.1 (RoCE v2), or fails saying what it saw.
# Used by suite_guest.sh (the multi-NIC suite) and tests/bench's multi-NIC
# guest.
set -uo pipefail
ip link add dummy1 type dummy &&
  ip addr add 10.9.10.1/24 dev dummy1 &&
  ip link set dummy1 up &&
  rdma link add rxe1 type rxe netdev dummy1 || exit 1
for _ in $(seq 1 100); do
  if grep -q ACTIVE /sys/class/infiniband/rxe1/ports/1/state 2>/dev/null &&
    [ "$(cat /sys/class/infiniband/rxe1/ports/1/gids/1 2>/dev/null)" = \
      "0000:0000:0000:0000:0000:ffff:0a09:0a01" ]; then
    echo "soft-roce: $(rdma link show rxe1/1)"
    exit 0
  fi
  sleep 0.1
done
echo "rxe1 did not come up: $(rdma link show 2>&1)"
exit 1
