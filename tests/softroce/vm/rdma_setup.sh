#!/bin/bash
# Runs inside the guest (from stage2.sh): brings up a Soft-RoCE device and waits until it
# is usable.
#
#   lo up; dummy0 = 10.9.9.1/24; rxe0 on dummy0; port 1 ACTIVE; GID[1] = ::ffff:10.9.9.1
#
# Why dummy0 and not lo or a NIC: the VM has no NIC (-nic none), and rdma_cm binds an
# address on lo to no device at all (id->verbs == NULL), so rdma_cm code needs an IP on a
# real netdev; a dummy device is enough. GID index 1 is the IPv4-mapped RoCE v2 GID
# (index 0 is the IPv6 link-local one): use `ib_write_bw -x 1`, `ibv_rc_pingpong -g 1`.
# 10.9.9.0/24 exists only inside this guest; nothing leaves the VM.
set -euo pipefail

dev=rxe0 netdev=dummy0 ip=10.9.9.1 prefix=24
t0=$(cut -d' ' -f1 /proc/uptime)
step() { printf '[rdma_setup] %s $ %s\n' "$(cut -d' ' -f1 /proc/uptime)" "$*"; "$@"; }

# Every process start costs ~0.1 s under TCG (exec + dynamic linking over 9p), so the
# steps are batched into few commands.
# crc32_generic: rdma_rxe needs the crc32 shash. It is autoloaded via request_module()
# since /init uses switch_root, but loading it explicitly takes that off the critical
# path. rdma_ucm provides /dev/infiniband/rdma_cm for librdmacm. dummy creates dummy0
# itself (numdummies defaults to 1); it is created explicitly if that ever changes.
step modprobe -a dummy crc32_generic rdma_rxe rdma_ucm
[[ -e /sys/class/net/$netdev ]] || step ip link add "$netdev" type dummy
step ip -batch - <<EOF
link set lo up
addr add $ip/$prefix dev $netdev
link set $netdev up
EOF
step rdma link add "$dev" type rxe netdev "$netdev"

# The port and the IPv4 GID come up asynchronously (netdev events -> GID cache work queue).
port=/sys/class/infiniband/$dev/ports/1
IFS=. read -r a b c d <<<"$ip"
want_gid=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
for _ in $(seq 1 300); do
  state=$(cat "$port/state" 2>/dev/null || true)
  gid=$(cat "$port/gids/1" 2>/dev/null || true)
  if [[ $state == *ACTIVE* && $gid == "$want_gid" ]]; then
    printf '[rdma_setup] %s port 1 %s, GID[1] %s, ready after %ss\n' "$dev" "$state" "$gid" \
      "$(awk -v t0="$t0" '{ printf "%.2f", $1 - t0 }' /proc/uptime)"
    exit 0
  fi
  sleep 0.1
done
echo "[rdma_setup] timed out: $dev port state '${state:-}' GID[1] '${gid:-}' (want ACTIVE, $want_gid)" >&2
rdma link show >&2 || true
dmesg | tail -n 30 >&2 || true
exit 1
