"""The cluster directory on a real etcd (Debian's etcd-server, started here on
free loopback ports): what daemons publish and under which keys, a duplicate
node id refused at start-up, keys gone at SIGTERM and, after SIGKILL, within
the lease TTL, two prefixes on one etcd kept apart, a lost lease replaced by a
new one, etcd stopped and restarted while known peers keep moving bytes and
resolving from each daemon's cache, membership changes reaching the other
daemons within 1 s, the watch resuming from its revision after an etcd restart
(and reading everything again after a compaction), and a 3-member etcd losing
its leader.

Each test starts its own daemons under its own prefix; etcd is shared by the
module (the 3-member test runs its own). What etcd holds is read with etcdctl,
not through xferd.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, Iterator, List, Optional

import pytest

import certs
import pytest_main
import xferd
from daemons import Cluster, Daemon, daemon_binary
from etcd import Etcd, EtcdCluster
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


def directory_cluster(etcd: Etcd, prefix: str, names=("a", "b"), ttl_s: int = TTL_S,
                      **kwargs: object) -> Cluster:
    return Cluster(names, config_extra=cluster_config(etcd, prefix, ttl_s), **kwargs)


def listed(client: xferd.Client) -> Dict[str, xferd.ClusterNode]:
    """The daemons a daemon's cache holds, by node id."""
    return {n.node_id: n for n in client.nodes()}


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
                      "allowedPeers": ["b"], "tenant": "default"}

        # The same directory through the client API, from the other daemon's
        # cache (its watch brings each change within milliseconds).
        cb = b.client()
        wait_until("b's cache has a's regions",
                   lambda: "a" in listed(cb) and len(listed(cb)["a"].regions) == 2, timeout=5)
        nodes = listed(cb)
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
        assert info.directory_watching and info.directory_relists == 0
        assert info.directory_revision >= int(etcd.revision()) - 1 > 0

        # xferctl nodes, as a table and as JSON.
        table = run_xferctl(b, "nodes").splitlines()
        assert table[0].split() == ["NODE", "ADDRESS", "TRANSPORT", "STATE", "REGIONS"]
        assert table[1].split()[:4] == ["a", a.address, "tcp", "live"]
        assert "kv (1.00 MiB)" in table[1] and "scratch (2.00 MiB)" in table[1]
        assert table[2].split() == ["b", b.address, "tcp", "self", "-"]
        nodes_json = json.loads(run_xferctl(b, "nodes", "--json"))
        assert [(n["node"]["node_id"], n["state"]) for n in nodes_json["nodes"]] == [
            ("a", "live"), ("b", "self")]
        assert "connected to etcd " + etcd.endpoint in run_xferctl(b, "info")
        assert "(watch open)" in run_xferctl(b, "info")
        # xferctl regions --cluster: every daemon's published regions.
        table = run_xferctl(b, "regions", "--cluster").splitlines()
        assert table[0].split() == ["NODE", "NAME", "SIZE", "BACKING", "REMOTE", "ALLOWED",
                                    "PEERS"]
        assert [row.split() for row in table[1:]] == [
            ["a", "kv", "1.00", "MiB", "shm", "w", "b"],
            ["a", "scratch", "2.00", "MiB", "anonymous", "-", "any"]]
        as_json = json.loads(run_xferctl(b, "regions", "list", "--cluster", "--json"))
        assert [(r["node_id"], r["name"]) for r in as_json["regions"]] == [
            ("a", "kv"), ("a", "scratch")]
        assert run_xferctl(b, "regions").strip() == "no regions"

        ca.deregister_region("kv")
        wait_until("kv removed", lambda: region_key not in keys(etcd, prefix), timeout=5)
        assert prefix + "regions/a/scratch" in keys(etcd, prefix)

        # SIGTERM: b's keys are deleted as it leaves, not when its lease expires.
        b.stop()
        assert prefix + "nodes/b" not in keys(etcd, prefix)
        wait_until("b gone from a's cache", lambda: list(listed(ca)) == ["a"], timeout=1)


def test_the_directory_shows_each_tenant_its_own_regions(etcd: Etcd, prefix: str) -> None:
    """Tenant names are the fleet's. On a, root's clients are tenant kv; b
    has no [tenants], so its clients are tenant default. A region's record
    names its tenant; b's clients see a's regions only when shared with
    them, in ListNodes and FindRegion alike (another tenant's is not
    found), and a's own clients see all of kv's."""
    config = cluster_config(etcd, prefix)
    with Cluster(("a", "b"), each={"a": {"config_extra": config + "[tenants.kv]\nuids = [0]\n"},
                                   "b": {"config_extra": config}}) as cluster:
        ca, cb = cluster["a"].client(), cluster["b"].client()
        assert ca.node_info().tenant == "kv" and cb.node_info().tenant == "default"
        ca.register_region("kv_pages", MiB)
        ca.register_region("kv_public", MiB, shared_with=["*"])
        published = {prefix + "regions/a/kv_pages", prefix + "regions/a/kv_public"}
        wait_until("both published", lambda: published <= set(keys(etcd, prefix)), timeout=5)
        held = keys(etcd, prefix)
        assert held[prefix + "regions/a/kv_pages"]["tenant"] == "kv"
        assert held[prefix + "regions/a/kv_public"]["sharedWith"] == ["*"]

        wait_until("b's cache has a's shared region",
                   lambda: "a" in listed(cb)
                   and [r.name for r in listed(cb)["a"].regions] == ["kv_public"], timeout=5)
        assert [r.name for r in cb.find_region("kv_public")] == ["kv_public"]
        with pytest.raises(xferd.NotFound, match="publishes a region named 'kv_pages'"):
            cb.find_region("kv_pages")
        wait_until("a's cache has both",
                   lambda: sorted(r.name for r in listed(ca)["a"].regions) == [
                       "kv_pages", "kv_public"], timeout=5)
        assert [r.node_id for r in ca.find_region("kv_pages")] == ["a"]


def test_duplicate_live_node_id_is_refused_at_start(etcd: Etcd, prefix: str) -> None:
    with directory_cluster(etcd, prefix, names=("a",)) as first:
        second = Daemon("a", _short_dir(), daemon_binary(),
                        config_extra=cluster_config(etcd, prefix))
        with pytest.raises(AssertionError) as refused:
            second.start()
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
        wait_until("b gone from a's cache", lambda: list(listed(cluster["a"].client())) == ["a"],
                   timeout=1)
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
        wait_until("z in a's cache",
                   lambda: list(listed(two["a"].client())) == ["a", "z"], timeout=1)
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


def test_etcd_down_known_peers_and_regions_resolve_from_the_cache(etcd: Etcd,
                                                                   prefix: str) -> None:
    with directory_cluster(etcd, prefix, names=("a", "b", "c")) as cluster:
        a, b, c = (cluster[n].client() for n in ("a", "b", "c"))
        a.connect_peer(cluster["b"].address)
        src = a.register_region("src", MiB, backing="shm")
        dst = b.register_region("dst", MiB, backing="shm", remote_write=True)
        csrc = c.register_region("csrc", MiB, backing="shm")
        wait_until("c's cache has b's dst",
                   lambda: "b" in listed(c) and [r.name for r in listed(c)["b"].regions] == ["dst"],
                   timeout=5)
        etcd.stop()
        try:
            wait_until("c sees etcd gone", lambda: not c.node_info().directory_connected,
                       timeout=TTL_S + 5)
            assert not c.node_info().directory_watching
            # The directory as last seen, saying so.
            nodes = listed(c)
            assert {n: nodes[n].state for n in nodes} == {"a": "cached", "b": "cached",
                                                          "c": "self"}
            assert [(r.node_id, r.name) for r in c.find_region("dst")] == [("b", "dst")]
            # c never connected b: its address comes from the cache, bytes flow.
            assert c.peers() == []
            digest = sha(fill(csrc, seed=5))
            assert c.write("csrc", "b", "dst", MiB).wait(WAIT_S).state == "done"
            assert sha(dst.buffer) == digest
            # What the cache does not hold needs etcd, and says so.
            with pytest.raises(xferd.Unavailable, match=r"etcd \(cluster.etcd = "
                               f"{etcd.endpoint}\\) did not answer"):
                c.find_region("nope")
            with pytest.raises(xferd.Unavailable, match=r"etcd \(cluster.etcd = "):
                a.write("src", "ghost", "dst", MiB)
            # Transfers to a connected peer do not need etcd either.
            for seed in range(3):
                digest = sha(fill(src, seed=seed))
                assert a.write("src", "b", "dst", MiB).wait(WAIT_S).state == "done"
                assert sha(dst.buffer) == digest
        finally:
            etcd.start()
        wait_until("a reconnected", lambda: a.node_info().directory_connected, timeout=10)
        # Once b's lease and watch are back, its listing is live again.
        wait_until("b's listing live", lambda: {n.node_id: n.state for n in b.nodes()} == {
            "a": "live", "b": "self", "c": "live"}, timeout=10)
        assert prefix + "regions/b/dst" in keys(etcd, prefix)


def test_membership_changes_reach_other_daemons_within_1s(etcd: Etcd, prefix: str) -> None:
    """The issue's bound: joins, graceful leaves and a restart's new address
    reach every daemon within 1 s (crashes within the TTL: see the SIGKILL test).
    Each change is timed from when the daemon has made it (it joins before it
    says it is ready; it leaves before it exits) to when a's cache shows it."""
    with directory_cluster(etcd, prefix, names=("a", "b")) as cluster:
        a = cluster["a"].client()
        b = cluster["b"]
        seen = {}

        def timed(what: str, change, check) -> None:
            change()
            start = time.monotonic()
            wait_until(what, lambda: check(listed(a)), timeout=5, period=0.005)
            seen[what] = time.monotonic() - start

        timed("leave", b.stop, lambda nodes: "b" not in nodes)
        b.port = 0
        timed("join", b.start, lambda nodes: nodes.get("b") and nodes["b"].address == b.address)
        old = b.address
        b.stop()
        b.port = 0
        timed("restart", b.start,
              lambda nodes: nodes.get("b") and nodes["b"].address == b.address != old)
        print("membership change seen by another daemon after: " +
              ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in seen.items()))
        for what, took in seen.items():
            assert took < 1.0, (what, took)


def region_names(node: Optional[xferd.ClusterNode]) -> List[str]:
    return [r.name for r in node.regions] if node else []


def _sleep_through_etcd_restart(cluster: Cluster, etcd: Etcd, prefix: str,
                                compact: bool) -> None:
    """Pauses a (SIGSTOP) while etcd restarts, b registers "late" and c leaves;
    with `compact`, etcd then compacts the revisions a's watch had not read."""
    cluster["a"].pause()
    try:
        etcd.stop()
        etcd.start()
        cluster["b"].client().register_region("late", MiB)
        wait_until("late published", lambda: prefix + "regions/b/late" in keys(etcd, prefix),
                   timeout=10)
        cluster["c"].stop()
        assert prefix + "nodes/c" not in keys(etcd, prefix)
        if compact:
            etcd.ctl("compact", str(etcd.revision()))
    finally:
        cluster["a"].resume()


def _wait_watching(client: xferd.Client) -> None:
    wait_until("watch open", lambda: client.node_info().directory_watching, timeout=15)


def test_watch_resumes_from_its_revision_after_an_etcd_restart(etcd: Etcd, prefix: str) -> None:
    # A long lease: a stays a member while it is paused below.
    with directory_cluster(etcd, prefix, names=("a", "b", "c"), ttl_s=30) as cluster:
        a, b = cluster["a"].client(), cluster["b"].client()
        b.register_region("early", MiB)
        wait_until("a has early", lambda: region_names(listed(a).get("b")) == ["early"],
                   timeout=5)
        before = a.node_info().directory_revision
        # Its watch can only learn of the changes by resuming from its revision.
        _sleep_through_etcd_restart(cluster, etcd, prefix, compact=False)
        wait_until("a's cache caught up", lambda: set(listed(a)) == {"a", "b"} and
                   region_names(listed(a)["b"]) == ["early", "late"], timeout=10)
        _wait_watching(a)
        info = a.node_info()
        assert info.directory_relists == 0  # resumed, not read again
        assert info.directory_revision > before
        wait_until("a's listing live", lambda: {n.node_id: n.state for n in a.nodes()} == {
            "a": "self", "b": "live"}, timeout=10)


def test_watch_reads_everything_again_after_a_compaction(etcd: Etcd, prefix: str) -> None:
    with directory_cluster(etcd, prefix, names=("a", "b", "c"), ttl_s=30) as cluster:
        a, b = cluster["a"].client(), cluster["b"].client()
        wait_until("a has c", lambda: "c" in listed(a), timeout=5)
        _sleep_through_etcd_restart(cluster, etcd, prefix, compact=True)
        wait_until("a read the directory again", lambda: a.node_info().directory_relists == 1,
                   timeout=10)
        _wait_watching(a)
        nodes = listed(a)
        assert set(nodes) == {"a", "b"}
        assert region_names(nodes["b"]) == ["late"]
        # And it follows etcd from there on.
        b.register_region("after", MiB)
        wait_until("a has after", lambda: region_names(listed(a)["b"]) == ["after", "late"],
                   timeout=1)


def test_twenty_daemons_churn_while_writes_flow_between_those_that_stay(etcd: Etcd,
                                                                          prefix: str) -> None:
    """3 daemons stay and write to each other by node id, each write checked
    byte for byte, while 17 others join, publish a region and leave (SIGTERM
    or SIGKILL), twice each: no write among those that stay may fail, and in
    the end every cache holds exactly the daemons etcd holds."""
    stay = ("s0", "s1", "s2")
    churn = tuple(f"c{i:02d}" for i in range(17))
    with directory_cluster(etcd, prefix, names=stay + churn) as cluster:
        # Only those that stay run now; the others join and leave below.
        for name in churn:
            cluster[name].stop()
        failures: List[str] = []
        writes = [0]
        stop = threading.Event()

        def writer(i: int) -> None:
            me, to = stay[i], stay[(i + 1) % len(stay)]
            client, peer = cluster[me].client(), cluster[to].client()
            src = client.register_region("src", MiB, backing="shm")
            dst = peer.register_region(f"from_{me}", MiB, backing="shm", remote_write=True)
            seed = 0
            while not stop.is_set():
                seed += 1
                digest = sha(fill(src, seed=seed))
                try:
                    state = client.write("src", to, f"from_{me}", MiB).wait(WAIT_S).state
                    if state != "done" or sha(dst.buffer) != digest:
                        failures.append(f"{me} -> {to}: {state}, bytes match: "
                                        f"{sha(dst.buffer) == digest}")
                except xferd.XferdError as e:
                    failures.append(f"{me} -> {to}: {e}")
                writes[0] += 1

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(len(stay))]
        for t in threads:
            t.start()
        try:
            for round_ in range(2):
                for i, name in enumerate(churn):
                    # A killed daemon's id stays taken until its lease expires.
                    wait_until(f"{name}'s old lease gone",
                               lambda: prefix + "nodes/" + name not in keys(etcd, prefix),
                               timeout=TTL_S + 3)
                    d = cluster[name]
                    d.port = 0
                    d.start()
                    d.client().register_region("kv", MiB)
                    # Leave some running, so that several are members at once.
                    if i >= 4:
                        old = cluster[churn[i - 4]]
                        old.kill() if (i + round_) % 2 else old.stop()
                for name in churn[-4:]:
                    cluster[name].stop()
        finally:
            stop.set()
            for t in threads:
                t.join(WAIT_S)
        assert failures == [], failures
        assert writes[0] >= 3, writes  # writes did flow all along
        print(f"{writes[0]} writes among the daemons that stay, none failed")
        # Killed daemons' keys go with their leases; every cache then agrees.
        wait_until("only those that stay in etcd",
                   lambda: {k for k in keys(etcd, prefix) if "/nodes/" in k} ==
                   {prefix + "nodes/" + n for n in stay}, timeout=TTL_S + 3)
        for name in stay:
            wait_until(f"{name}'s cache", lambda: set(listed(cluster[name].client())) ==
                       set(stay), timeout=1)


def test_three_member_etcd_loses_its_leader() -> None:
    with EtcdCluster() as members:
        endpoints = ", ".join(f'"{e}"' for e in members.endpoints)
        prefix = "/xferd-3/"
        config = (f'[cluster]\netcd = [{endpoints}]\nprefix = "{prefix}"\n'
                  f'lease_ttl = "{TTL_S}s"\n')
        with Cluster(("a", "b"), config_extra=config) as cluster:
            a, b = cluster["a"].client(), cluster["b"].client()
            src = a.register_region("src", MiB, backing="shm")
            leases = {k: v["lease"] for k, v in
                      keys(members.live(), prefix).items() if "/nodes/" in k}
            assert set(leases) == {prefix + "nodes/a", prefix + "nodes/b"}
            leader = members.leader()
            leader.kill()
            # Several TTLs later both are still members under the same leases:
            # their keep-alives went to the members left.
            time.sleep(3 * TTL_S)
            survivor = members.live()
            held = keys(survivor, prefix)
            assert {k: held[k]["lease"] for k in leases} == leases
            assert a.node_info().directory_connected and b.node_info().directory_connected
            # Lookups that need etcd work: a region and a daemon that are new.
            b.register_region("after", MiB)  # published by b's directory thread
            wait_until("after published",
                       lambda: prefix + "regions/b/after" in keys(survivor, prefix), timeout=5)
            assert [r.node_id for r in a.find_region("after")] == ["b"]
            c = Daemon("c", _short_dir(), daemon_binary(), config_extra=config)
            try:
                c.start()
                dst = c.client().register_region("dst", MiB, backing="shm", remote_write=True)
                digest = sha(fill(src, seed=3))
                assert a.write("src", "c", "dst", MiB).wait(WAIT_S).state == "done"
                assert sha(dst.buffer) == digest
            finally:
                c.stop()


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
        anonymous = Daemon("b", _short_dir(), daemon_binary(),
                           config_extra=config.split("cert =")[0])
        with pytest.raises(AssertionError) as refused:
            anonymous.start()
        assert anonymous.proc.returncode == 1
        assert "cannot start: the cluster directory: etcd (cluster.etcd = " in str(refused.value)
        assert prefix + "nodes/b" not in keys(etcd, prefix)


def test_mtls_and_acls_unchanged_by_the_directory(etcd: Etcd, prefix: str, tmp_path) -> None:
    """The directory names peers; it never vouches for them: mTLS and region
    ACLs decide exactly as without it."""
    ca = certs.Ca(str(tmp_path / "ca"), "xferd-ca")
    rogue_ca = certs.Ca(str(tmp_path / "rogue"), "rogue-ca")
    each = {n: {"extra_args": ca.issue(n).daemon_args(ca)} for n in ("a", "b", "c")}
    each["r"] = {"extra_args": rogue_ca.issue("r").daemon_args(rogue_ca)}
    with directory_cluster(etcd, prefix, names=("a", "b", "c", "r"), each=each) as cluster:
        a, b, c, r = (cluster[n].client() for n in ("a", "b", "c", "r"))
        assert a.node_info().security.startswith("mtls")
        # The names the certificate carries are published with the record.
        assert "a" in keys(etcd, prefix)[prefix + "nodes/a"]["identity"]
        dst = b.register_region("dst", MiB, backing="shm", remote_write=True,
                                allowed_peers=["a"])
        fill(dst, seed=1)
        sent = {n: sha(fill(client.register_region("src", MiB, backing="shm"), seed=ord(n)))
                for n, client in (("a", a), ("c", c), ("r", r))}
        wait_until("dst published", lambda: prefix + "regions/b/dst" in keys(etcd, prefix),
                   timeout=5)
        assert keys(etcd, prefix)[prefix + "regions/b/dst"]["allowedPeers"] == ["a"]
        wait_until("every cache has r", lambda: all("r" in listed(x) for x in (a, b, c)),
                   timeout=5)

        # a, in the ACL, writes by node id over mTLS to b, never connected.
        assert a.peers() == []
        assert a.write("src", "b", "dst", MiB).wait(WAIT_S).state == "done"
        written = sha(dst.buffer)
        assert written == sent["a"]
        # c is authenticated but not in the ACL: refused, nothing written.
        with pytest.raises(xferd.PermissionDenied, match="node 'c' is not in the ACL"):
            c.write("src", "b", "dst", MiB).wait(WAIT_S)
        # r is in the directory, but its certificate is from another CA.
        with pytest.raises(xferd.Unavailable, match="TLS handshake"):
            a.connect_peer("r")
        with pytest.raises(xferd.XferdError):
            r.write("src", "b", "dst", MiB).wait(WAIT_S)
        assert sha(dst.buffer) == written
        # c is a peer (authenticated, only not allowed into dst); r never was.
        assert sorted(p.node_id for p in b.peers()) == ["a", "c"]


def test_without_cluster_nothing_changes(etcd: Etcd) -> None:
    with Cluster(("solo",)) as cluster:
        c = cluster["solo"].client()
        info = c.node_info()
        assert not info.directory_enabled and not info.directory_connected
        with pytest.raises(xferd.FailedPrecondition, match=r"add a \[cluster\] section"):
            c.nodes()


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
