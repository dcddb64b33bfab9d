#!/usr/bin/env bash
# Inside the Soft-RoCE VM: rxe devices joined by veth "cables", beside the
# harness's rxe0. Cable N has rxe(2N-1) on cNa (10.9.1N.1) and rxe(2N) on
# cNb (10.9.1N.2): a queue pair on one end and one on the other exchange
# real packets over the veth, so `tc` on cNa holds its device's traffic and
# `ip link set cNa down` pulls the cable (both ports go DOWN). Every cable
# device reports the veth's 10 Gb/s (rxe0 on its dummy reports 2.5).
#
#   rxe_wire.sh N          lay cable N (1-9) and create its two devices;
#                          returns once both ports are ACTIVE with
#                          GID[1] = ::ffff:<address>
#   rxe_wire.sh routes N   put back the routes and neighbours that taking
#                          cNa or cNb down removed (idempotent)
#
# Why the routing: both addresses belong to this one kernel, which would
# deliver between them through lo, where rxe finds no device of its own and
# drops the packet (and a queue pair joined to its own device never leaves
# rxe at all). So the local table is consulted after rules that send each
# end's address out of the other end, and packets arriving on the cable are
# delivered locally (accept_local). Neighbours are static: ARP between two
# local addresses is not answered.
# Used by suite_guest.sh (the multi-NIC suite) and tests/bench's multi-NIC
# guest.
set -uo pipefail

routes() {  # cable number
  local n=$1 mac_a mac_b
  mac_a=$(cat "/sys/class/net/c${n}a/address") && mac_b=$(cat "/sys/class/net/c${n}b/address") &&
    ip neigh replace "10.9.1$n.2" lladdr "$mac_b" dev "c${n}a" nud permanent &&
    ip neigh replace "10.9.1$n.1" lladdr "$mac_a" dev "c${n}b" nud permanent &&
    ip route replace "10.9.1$n.2" dev "c${n}a" src "10.9.1$n.1" table "1${n}1" &&
    ip route replace "10.9.1$n.1" dev "c${n}b" src "10.9.1$n.2" table "1${n}2"
}

usage="usage: rxe_wire.sh [routes] N (cable 1-9)"
if [ "${1:-}" = routes ]; then
  [[ ${2:-} =~ ^[1-9]$ ]] || { echo "$usage"; exit 2; }
  routes "$2"
  exit
fi
[[ ${1:-} =~ ^[1-9]$ ]] || { echo "$usage"; exit 2; }
n=$1 a=c${1}a b=c${1}b rxe_a=rxe$((2 * $1 - 1)) rxe_b=rxe$((2 * $1))

# Once per VM: the local table after the cables' rules. And a deep receive
# backlog: RoCE expects a lossless fabric, and a veth hands each packet to
# the receiving CPU's backlog, which drops beyond netdev_max_backlog (1,000
# by default): one burst of READ responses overflows it, and each lost
# packet costs a retransmission timeout.
if ! ip rule show pref 1000 | grep -q .; then
  ip rule add pref 1000 lookup local && ip rule del pref 0 lookup local &&
    sysctl -qw net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
      net.core.netdev_max_backlog=100000 || exit 1
fi
ip link add "$a" type veth peer name "$b" &&
  ip addr add "10.9.1$n.1/32" dev "$a" &&
  ip addr add "10.9.1$n.2/32" dev "$b" &&
  sysctl -qw "net.ipv4.conf.$a.accept_local=1" "net.ipv4.conf.$b.accept_local=1" \
    "net.ipv4.conf.$a.rp_filter=0" "net.ipv4.conf.$b.rp_filter=0" &&
  ip link set "$a" up && ip link set "$b" up &&
  ip rule add pref "1${n}1" iif "$a" lookup local &&
  ip rule add pref "1${n}2" iif "$b" lookup local &&
  ip rule add pref "2${n}1" to "10.9.1$n.2" lookup "1${n}1" &&
  ip rule add pref "2${n}2" to "10.9.1$n.1" lookup "1${n}2" &&
  routes "$n" &&
  rdma link add "$rxe_a" type rxe netdev "$a" &&
  rdma link add "$rxe_b" type rxe netdev "$b" || exit 1

ready() {  # device, the last octet of its address
  grep -q ACTIVE "/sys/class/infiniband/$1/ports/1/state" 2>/dev/null &&
    [ "$(cat "/sys/class/infiniband/$1/ports/1/gids/1" 2>/dev/null)" = \
      "$(printf '0000:0000:0000:0000:0000:ffff:0a09:%02x%02x' "1$n" "$2")" ]
}
for _ in $(seq 1 100); do
  if ready "$rxe_a" 1 && ready "$rxe_b" 2; then
    echo "soft-roce: $(rdma link show "$rxe_a/1"); $(rdma link show "$rxe_b/1")"
    exit 0
  fi
  sleep 0.1
done
echo "cable $n's $rxe_a/$rxe_b did not come up: $(rdma link show 2>&1)"
exit 1
