"""The cluster directory on a real etcd (Debian's etcd-server, started here on
free loopback ports): what daemons publish and under which keys, a duplicate
node id refused at start-up, keys gone at SIGTERM and, after SIGKILL, within
the lease TTL, two prefixes on one etcd kept apart, a lost lease replaced by a
new one, and etcd stopped and restarted while known peers keep moving bytes.

Each test starts its own daemons under its own prefix; etcd is shared by the
module. What etcd holds is read with etcdctl, not through xferd.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, Iterator

import pytest

import certs
import pytest_main
import xferd
from daemons import Cluster, Daemon, daemon_binary
from etcd import Etcd
from testlib import WAIT_S, fill, sha, wait_until

MiB = 1 << 20
TTL_S = 2  # the smallest lease_ttl the config accepts: fast crash detection
_prefixes = itertools.count()


@pytest.fixture(scope="module")
def etcd() -> Iterator[Etcd]:
    with Etcd() as e:
        yield e


@pytest.fixture
def prefix() -> str:
    return f"/xferd-test-{next(_prefixes)}/"


def run_xferctl(daemon: Daemon, *args: str) -> str:
    """Runs the xferctl of this test's runfiles against `daemon`; its stdout."""
    binary = os.path.join(os.environ["TEST_SRCDIR"], os.environ.get("TEST_WORKSPACE", "xferd"),
                          "client", "cpp", "xferctl")
    return subprocess.run([binary, "--target", daemon.target, *args], check=True,
                          capture_output=True, text=True).stdout


def _short_dir() -> str:
    """A directory short enough for a unix socket path."""
    return tempfile.mkdtemp(prefix="xf", dir="/tmp")


def cluster_config(etcd: Etcd, prefix: str, ttl_s: int = TTL_S) -> str:
    return f'[cluster]\netcd = ["{etcd.endpoint}"]\nprefix = "{prefix}"\nlease_ttl = "{ttl_s}s"\n'


def directory_cluster(etcd: Etcd, prefix: str, names=("a", "b"), **kwargs: object) -> Cluster:
    return Cluster(names, config_extra=cluster_config(etcd, prefix), **kwargs)


def keys(etcd: Etcd, prefix: str) -> Dict[str, dict]:
    return {k: json.loads(v) for k, v in etcd.get_prefix(prefix).items()}


def test_directory_holds_nodes_and_region_descriptions(etcd: Etcd, prefix: str) -> None:
    with directory_cluster(etcd, prefix) as cluster:
        a, b = cluster["a"], cluster["b"]
        held = keys(etcd, prefix)
        assert set(held) == {prefix + "nodes/a", prefix + "nodes/b"}
        node_a = held[prefix + "nodes/a"]
        assert node_a["nodeId"] == "a"
        assert node_a["address"] == a.address
        assert node_a["transport"] == "TRANSPORT_KIND_TCP"
        assert node_a["version"]
        assert int(node_a["lease"]) != int(held[prefix + "nodes/b"]["lease"])

        ca = a.client()
        ca.register_region("kv", MiB, backing="shm", remote_write=True, allowed_peers=["b"])
        ca.register_region("scratch", 2 * MiB)
        region_key = prefix + "regions/a/kv"
        wait_until("kv published", lambda: region_key in keys(etcd, prefix), timeout=5)
        kv = keys(etcd, prefix)[region_key]
        # The public description, and nothing else: no address, rkey or token.
        assert kv == {"nodeId": "a", "name": "kv", "size": str(MiB),
                      "backing": "REGION_BACKING_SHM", "access": {"remoteWrite": True},
                      "allowedPeers": ["b"]}

        # The same directory through the client API, from the other daemon.
        cb = b.client()
        nodes = {n.node_id: n for n in cb.nodes()}
        assert set(nodes) == {"a", "b"}
        assert nodes["b"].state == "self" and nodes["a"].state == "live"
        assert nodes["a"].address == a.address and nodes["a"].transport == "tcp"
        assert sorted(r.name for r in nodes["a"].regions) == ["kv", "scratch"]
        found = cb.find_region("kv")
        assert [(r.node_id, r.size, r.backing, r.remote_write, r.allowed_peers)
                for r in found] == [("a", MiB, "shm", True, ("b",))]
        with pytest.raises(xferd.NotFound, match="no live daemon under cluster prefix "
                           f"{prefix} publishes a region named 'nope'"):
            cb.find_region("nope")
        info = cb.node_info()
        assert info.directory_enabled and info.directory_connected

        # xferctl nodes, as a table and as JSON.
        table = run_xferctl(b, "nodes").splitlines()
        assert table[0].split() == ["NODE", "ADDRESS", "TRANSPORT", "STATE", "REGIONS"]
        assert table[1].split()[:4] == ["a", a.address, "tcp", "live"]
        assert "kv (1.00 MiB)" in table[1] and "scratch (2.00 MiB)" in table[1]
        assert table[2].split() == ["b", b.address, "tcp", "self", "-"]
        listed = json.loads(run_xferctl(b, "nodes", "--json"))
        assert [(n["node"]["node_id"], n["state"]) for n in listed["nodes"]] == [
            ("a", "live"), ("b", "self")]
        assert "connected to etcd " + etcd.endpoint in run_xferctl(b, "info")

        ca.deregister_region("kv")
        wait_until("kv removed", lambda: region_key not in keys(etcd, prefix), timeout=5)
        assert prefix + "regions/a/scratch" in keys(etcd, prefix)

        # SIGTERM: b's keys are deleted as it leaves, not when its lease expires.
        b.stop()
        assert prefix + "nodes/b" not in keys(etcd, prefix)
        assert [n.node_id for n in ca.nodes()] == ["a"]


def test_duplicate_live_node_id_is_refused_at_start(etcd: Etcd, prefix: str) -> None:
    with directory_cluster(etcd, prefix, names=("a",)) as first:
        shm = tempfile.mkdtemp(prefix="xferd-test-", dir="/dev/shm")
        try:
            second = Daemon("a", _short_dir(), shm, daemon_binary(),
                            config_extra=cluster_config(etcd, prefix))
            with pytest.raises(AssertionError) as refused:
                second.start()
        finally:
            shutil.rmtree(shm, ignore_errors=True)
        assert second.proc.returncode == 1
        assert ("cannot start: the cluster directory: node id 'a' is already taken in the "
                f"cluster directory by a live daemon at {first['a'].address} (etcd key "
                f"{prefix}nodes/a, under its lease): stop that daemon, or give this one another "
                "node_id") in str(refused.value)
        # The first one is untouched, and still listed.
        assert keys(etcd, prefix)[prefix + "nodes/a"]["address"] == first["a"].address
        assert [n.address for n in first["a"].client().nodes()] == [first["a"].address]


def test_killed_daemon_vanishes_within_the_lease_ttl(etcd: Etcd, prefix: str) -> None:
    with directory_cluster(etcd, prefix) as cluster:
        cluster["b"].kill()
        killed_at = time.monotonic()
        wait_until("b's key expired", lambda: prefix + "nodes/b" not in keys(etcd, prefix),
                   timeout=TTL_S + 3)
        # etcd expires leases on its own clock, checked every 500 ms.
        assert time.monotonic() - killed_at <= TTL_S + 2
        assert [n.node_id for n in cluster["a"].client().nodes()] == ["a"]
        # A restart under the same id (new address) joins again at once.
        cluster["b"].port = 0
        cluster["b"].start()
        assert keys(etcd, prefix)[prefix + "nodes/b"]["address"] == cluster["b"].address


def test_two_prefixes_on_one_etcd_are_kept_apart(etcd: Etcd, prefix: str) -> None:
    other = prefix.rstrip("/") + "-other/"
    with directory_cluster(etcd, prefix, names=("a",)) as one, \
            directory_cluster(etcd, other, names=("a", "z")) as two:
        # The same node id lives once in each prefix.
        assert [n.node_id for n in one["a"].client().nodes()] == ["a"]
        assert [n.node_id for n in two["a"].client().nodes()] == ["a", "z"]
        assert set(keys(etcd, prefix)) == {prefix + "nodes/a"}


def test_lost_lease_is_replaced_and_everything_republished(etcd: Etcd, prefix: str) -> None:
    with directory_cluster(etcd, prefix, names=("a",)) as cluster:
        c = cluster["a"].client()
        c.register_region("r", MiB)
        wait_until("r published", lambda: prefix + "regions/a/r" in keys(etcd, prefix), timeout=5)
        old = int(keys(etcd, prefix)[prefix + "nodes/a"]["lease"])
        etcd.ctl("lease", "revoke", format(old, "x"))
        assert keys(etcd, prefix) == {}

        def republished() -> bool:
            held = keys(etcd, prefix)
            return (prefix + "regions/a/r" in held and
                    int(held.get(prefix + "nodes/a", {}).get("lease", old)) != old)

        wait_until("a back under a new lease", republished, timeout=TTL_S + 3)
        assert c.node_info().directory_connected


def test_etcd_down_known_peers_keep_working(etcd: Etcd, prefix: str) -> None:
    with directory_cluster(etcd, prefix) as cluster:
        a, b = cluster["a"].client(), cluster["b"].client()
        a.connect_peer(cluster["b"].address)
        src = a.register_region("src", MiB, backing="shm")
        dst = b.register_region("dst", MiB, backing="shm", remote_write=True)
        etcd.stop()
        try:
            wait_until("a sees etcd gone", lambda: not a.node_info().directory_connected,
                       timeout=TTL_S + 5)
            with pytest.raises(xferd.Unavailable, match=r"etcd \(cluster.etcd = "
                               f"{etcd.endpoint}\\) did not answer"):
                a.nodes()
            # A node that needs a lookup does.
            with pytest.raises(xferd.Unavailable, match=r"etcd \(cluster.etcd = "):
                a.write("src", "c", "dst", MiB)
            # Transfers to a known peer do not need etcd.
            for seed in range(3):
                digest = sha(fill(src, seed=seed))
                assert a.write("src", "b", "dst", MiB).wait(WAIT_S).state == "done"
                assert sha(dst.buffer) == digest
        finally:
            etcd.start()
        wait_until("a reconnected", lambda: a.node_info().directory_connected, timeout=10)
        assert {n.node_id for n in b.nodes()} == {"a", "b"}
        assert prefix + "regions/b/dst" in keys(etcd, prefix)


def test_writes_and_connects_by_node_id(etcd: Etcd, prefix: str) -> None:
    with directory_cluster(etcd, prefix, names=("a", "b", "c")) as cluster:
        a, b, c = (cluster[n].client() for n in ("a", "b", "c"))
        src = a.register_region("src", MiB, backing="shm")
        dst = b.register_region("dst", MiB, backing="shm", remote_write=True)
        assert a.peers() == []
        # A write to a node never connected: looked up and connected on first use.
        digest = sha(fill(src, seed=11))
        assert a.write("src", "b", "dst", MiB).wait(WAIT_S).state == "done"
        assert sha(dst.buffer) == digest
        assert [(p.node_id, p.address) for p in a.peers()] == [("b", cluster["b"].address)]
        # ConnectPeer by node id.
        peer = c.connect_peer("b")
        assert (peer.node_id, peer.state) == ("b", "connected")
        # A node id the directory does not have.
        with pytest.raises(xferd.NotFound, match="no peer 'ghost' .*no live daemon 'ghost' is in "
                           f"the cluster directory \\(etcd key {prefix}nodes/ghost\\)"):
            a.write("src", "ghost", "dst", MiB)

        # b restarts on another address: the next write finds it there.
        old_address = cluster["b"].address
        cluster["b"].stop()
        cluster["b"].start()
        assert cluster["b"].address != old_address
        b = cluster["b"].client()
        dst = b.register_region("dst", MiB, backing="shm", remote_write=True)
        digest = sha(fill(src, seed=12))
        assert a.write("src", "b", "dst", MiB).wait(WAIT_S).state == "done"
        assert sha(dst.buffer) == digest
        assert [(p.node_id, p.address) for p in a.peers()] == [("b", cluster["b"].address)]


def test_peer_whose_lease_expires_is_marked_gone(etcd: Etcd, prefix: str) -> None:
    with directory_cluster(etcd, prefix) as cluster:
        a, b = cluster["a"].client(), cluster["b"].client()
        a.register_region("big", 256 * MiB)
        b.register_region("big", 256 * MiB, remote_write=True)
        src = a.register_region("src", MiB, backing="shm")
        dst = b.register_region("dst", MiB, backing="shm", remote_write=True)
        assert a.write("src", "b", "dst", MiB).wait(WAIT_S).state == "done"
        # Resolved now, so the write below needs nothing from b to start.
        assert a.write("big", "b", "big", MiB).wait(WAIT_S).state == "done"
        # b hangs: its lanes stall (TCP would wait tcp_user_timeout, 10 s) and
        # its lease expires; a hears of it from the watch and fails the write.
        cluster["b"].pause()
        try:
            stalled = a.write("big", "b", "big", 256 * MiB)
            paused_at = time.monotonic()
            with pytest.raises(xferd.Unavailable) as gone:
                stalled.wait(WAIT_S)
            took = time.monotonic() - paused_at
        finally:
            cluster["b"].resume()
        assert str(gone.value) == ("UNAVAILABLE: peer 'b' went away: it left the cluster "
                                   "directory (it stopped, or its etcd lease expired: it crashed, "
                                   "hung or lost etcd)")
        assert a.transfer(stalled.id).state == "failed"
        assert took < TTL_S + 4, took  # the lease, etcd's expiry check, the watch
        # b joins again under a new lease; the next write reaches it.
        wait_until("b back", lambda: prefix + "nodes/b" in keys(etcd, prefix), timeout=10)
        digest = sha(fill(src, seed=21))
        assert a.write("src", "b", "dst", MiB).wait(WAIT_S).state == "done"
        assert sha(dst.buffer) == digest


def test_tls_to_etcd(tmp_path) -> None:
    ca = certs.Ca(str(tmp_path / "pki"), "etcd-ca")
    server = ca.issue("etcd", dns=["localhost"], ips=["127.0.0.1"])
    client = ca.issue("xferd-client")
    with Etcd("secure", tls=(ca.cert, server.cert, server.key)) as etcd:
        prefix = "/secure/"
        config = (f'[cluster]\netcd = ["{etcd.endpoint}"]\nprefix = "{prefix}"\n'
                  f'ca = "{ca.cert}"\ncert = "{client.cert}"\nkey = "{client.key}"\n')
        with Cluster(("a",), config_extra=config) as cluster:
            assert keys(etcd, prefix)[prefix + "nodes/a"]["address"] == cluster["a"].address
            assert cluster["a"].client().node_info().directory_connected
        # Without a client certificate, etcd refuses the daemon, which says so.
        shm = tempfile.mkdtemp(prefix="xferd-test-", dir="/dev/shm")
        try:
            anonymous = Daemon("b", _short_dir(), shm, daemon_binary(),
                               config_extra=config.split("cert =")[0])
            with pytest.raises(AssertionError) as refused:
                anonymous.start()
        finally:
            shutil.rmtree(shm, ignore_errors=True)
        assert anonymous.proc.returncode == 1
        assert "cannot start: the cluster directory: etcd (cluster.etcd = " in str(refused.value)
        assert prefix + "nodes/b" not in keys(etcd, prefix)


def test_without_cluster_nothing_changes(etcd: Etcd) -> None:
    with Cluster(("solo",)) as cluster:
        c = cluster["solo"].client()
        info = c.node_info()
        assert not info.directory_enabled and not info.directory_connected
        with pytest.raises(xferd.FailedPrecondition, match=r"add a \[cluster\] section"):
            c.nodes()


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
