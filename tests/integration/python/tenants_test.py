"""Tenants (docs/tenants.md) over the real API, with local clients of two
different uids: this test (root) is tenant "ops"; xferctl run as uid 1001
(setpriv, its own process and connection) is tenant "kv", whose limits are
small. A TLS client whose certificate names "kv-client" is tenant "kv"
over TCP.

Checked: each tenant sees and acts on only its own regions, layouts and
transfers (list, watch, write from, read into, deregister, re-ACL,
cancel, map through the local socket), unless a region is shared; the
refusals name the tenant, the owner and the limit; the quotas
(registered bytes, transfers in flight, highest class) refuse with
RESOURCE_EXHAUSTED or PERMISSION_DENIED; a capped tenant's writes and
reads keep to its bandwidth; GetStats and xferctl tenants show per-tenant
limits, use and refusals. Every byte moved is checked."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Iterator, List

import pytest

import pytest_main
import xferd
from certs import Ca, Cert
from daemons import Daemon, daemon_binary
from testlib import WAIT_S, fill, sha
from xferd.local_socket import open_region

MiB = 1 << 20
KV_UID = 1001

TENANTS = f"""
[server]
unix_socket_mode = 0o666
[tenants.ops]
uids = [0]
[tenants.kv]
uids = [{KV_UID}]
cert_names = ["kv-client"]
max_registered_bytes = "8MiB"
max_inflight_transfers = 2
max_priority = "normal"
[tenants.slow]
cert_names = ["slow-client"]
max_bandwidth = "16MiB"
[tenants.operators]
cert_names = ["operator"]
admin = true
"""


class Cluster:
    """Daemons a (tenants as above) and b (no tenants), in a directory uid
    1001 may enter, with a copy of xferctl it may run."""

    def __init__(self, workdir: str) -> None:
        self.workdir = workdir
        self.ca = Ca(os.path.join(workdir, "pki"), "ca")
        self.kv_client: Cert = self.ca.issue("kv-client")
        self.slow_client: Cert = self.ca.issue("slow-client")
        self.operator: Cert = self.ca.issue("operator")
        # Both daemons are mTLS (a TCP client's certificate names its
        # tenant); b has no [tenants].
        self.a = Daemon("a", workdir, daemon_binary(), config_extra=TENANTS,
                        extra_args=self.ca.issue("a").daemon_args(self.ca))
        self.b = Daemon("b", workdir, daemon_binary(),
                        extra_args=self.ca.issue("b").daemon_args(self.ca))
        runfiles = os.environ["TEST_SRCDIR"]
        workspace = os.environ.get("TEST_WORKSPACE", "xferd")
        self.xferctl = os.path.join(workdir, "xferctl")
        shutil.copy(os.path.join(runfiles, workspace, "client", "cpp", "xferctl"), self.xferctl)
        os.chmod(self.xferctl, 0o755)

    def as_kv(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        """xferctl as uid 1001 (tenant kv) against daemon a's unix socket."""
        command = ["setpriv", f"--reuid={KV_UID}", f"--regid={KV_UID}", "--clear-groups",
                   self.xferctl, "--target", self.a.target, *args]
        done = subprocess.run(command, capture_output=True, text=True, timeout=WAIT_S)
        if check:
            assert done.returncode == 0, (command, done.stdout, done.stderr)
        return done


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    workdir = tempfile.mkdtemp(prefix="xft", dir="/tmp")
    os.chmod(workdir, 0o755)  # uid 1001 reaches the socket; its mode admits it
    try:
        c = Cluster(workdir)
        c.a.start()
        c.b.start()
        c.a.client().connect_peer(c.b.address)
        yield c
        c.a.stop()
        c.b.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def ops(cluster: Cluster) -> xferd.Client:
    return cluster.a.client()


def refused(done: subprocess.CompletedProcess) -> str:
    assert done.returncode != 0, done.stdout
    return done.stderr


def test_who_is_calling(cluster: Cluster, ops: xferd.Client) -> None:
    assert ops.node_info().tenant == "ops"
    info = json.loads(cluster.as_kv("--json", "info").stdout)
    assert info["tenant"] == "kv"
    # A daemon without [tenants]: everyone is "default".
    assert cluster.b.client().node_info().tenant == "default"


def test_identity_under_connection_churn(cluster: Cluster) -> None:
    """Connections of both uids open and close at once, so descriptor
    numbers are reused under the daemon: each call is still named by its
    own connection's credentials."""
    for _ in range(3):
        kv_calls = [subprocess.Popen(
            ["setpriv", f"--reuid={KV_UID}", f"--regid={KV_UID}", "--clear-groups",
             cluster.xferctl, "--target", cluster.a.target, "--json", "info"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(16)]
        for _ in range(16):
            with xferd.Client(cluster.a.target) as c:
                assert c.node_info().tenant == "ops"
        for call in kv_calls:
            out, err = call.communicate(timeout=WAIT_S)
            assert call.returncode == 0, err
            assert json.loads(out)["tenant"] == "kv", out


def test_namespaces(cluster: Cluster, ops: xferd.Client) -> None:
    ops.register_region("ops_src", 1 * MiB, backing="shm")
    cluster.as_kv("regions", "register", "kv_src", "1MiB", "--backing", "shm")
    try:
        # Each lists only its own.
        assert [(r.name, r.tenant) for r in ops.regions()] == [("ops_src", "ops")]
        kv_list = json.loads(cluster.as_kv("--json", "regions").stdout)
        assert [r["name"] for r in kv_list.get("regions", [])] == ["kv_src"]
        # kv may not deregister, re-ACL or write from ops's region.
        assert ("tenant 'kv' may not deregister region 'ops_src': only its owner, tenant 'ops'"
                in refused(cluster.as_kv("regions", "deregister", "ops_src", check=False)))
        assert ("tenant 'kv' may not change the ACL of region 'ops_src': only its owner"
                in refused(cluster.as_kv("regions", "acl", "ops_src", "--any", check=False)))
        # Nor watch it, nor map its memory.
        assert "belongs to tenant 'ops'" in refused(
            cluster.as_kv("regions", "watch", "ops_src", check=False))
        message = refused(cluster.as_kv("write", "ops_src", "b", "dst", "--length", "4KiB",
                                        check=False))
        assert "region 'ops_src' belongs to tenant 'ops' and is not shared with tenant 'kv'" \
            in message, message
        # And ops none of kv's.
        with pytest.raises(xferd.PermissionDenied, match="only its owner, tenant 'kv'"):
            ops.deregister_region("kv_src")
        with pytest.raises(xferd.PermissionDenied, match="only its owner, tenant 'kv'"):
            ops.set_region_acl("kv_src", ["b"])
        with pytest.raises(xferd.PermissionDenied, match="belongs to tenant 'kv'"):
            ops.watch_region("kv_src")
        b = cluster.b.client()
        b.register_region("dst", 1 * MiB, backing="shm", remote_write=True, remote_read=True)
        try:
            with pytest.raises(xferd.PermissionDenied, match="belongs to tenant 'kv'"):
                ops.write("kv_src", "b", "dst", 4096)
            with pytest.raises(xferd.PermissionDenied, match="belongs to tenant 'kv'"):
                ops.read("b", "dst", "kv_src", 4096)
        finally:
            b.deregister_region("dst")
        # Layouts: ops's own, invisible to kv, and a layout of kv's region
        # is refused to ops.
        ops.prepare_layout("ops_pages", "ops_src", 4096, count=4)
        assert "ops_pages" not in cluster.as_kv("layouts", "list").stdout
        assert "layout 'ops_pages' belongs to tenant 'ops', not to tenant 'kv'" in refused(
            cluster.as_kv("layouts", "delete", "ops_pages", check=False))
        with pytest.raises(xferd.PermissionDenied, match="belongs to tenant 'kv'"):
            ops.prepare_layout("kv_pages", "kv_src", 4096, count=4)
        assert [layout.name for layout in ops.layouts()] == ["ops_pages"]
        ops.delete_layout("ops_pages")
        # Its memory through the local socket: refused as well.
        with pytest.raises(xferd.PermissionDenied, match="belongs to tenant 'kv'"):
            open_region(cluster.a.info["local_socket"] if "local_socket" in cluster.a.info
                        else cluster.a.socket_path + ".local", "kv_src")
    finally:
        ops.deregister_region("ops_src")
        cluster.as_kv("regions", "deregister", "kv_src")


def test_a_shared_region_and_transfers_of_each(cluster: Cluster, ops: xferd.Client) -> None:
    b = cluster.b.client()
    size = 4 * MiB
    src = ops.register_region("shared_src", size, backing="shm", shared_with=["kv"])
    dst = b.register_region("shared_dst", size, backing="shm", remote_write=True)
    try:
        assert src.tenant == "ops" and src.shared_with == ("kv",)
        data = fill(src, seed=31)
        # kv may write from ops's shared region, and sees only its own transfer.
        out = cluster.as_kv("--json", "write", "shared_src", "b", "shared_dst",
                            "--length", str(size)).stdout
        kv_transfer = json.loads(out.splitlines()[-1])
        assert kv_transfer["state"] == "TRANSFER_STATE_DONE", out
        assert kv_transfer["tenant"] == "kv"
        assert sha(dst.buffer) == sha(data)
        kv_id = int(kv_transfer["id"])
        # ... but not deregister it.
        assert "only its owner" in refused(
            cluster.as_kv("regions", "deregister", "shared_src", check=False))
        mine = ops.write("shared_src", "b", "shared_dst", size).wait(WAIT_S)
        assert mine.state == "done" and sha(dst.buffer) == sha(data)
        ids = [t.id for t in ops.transfers(include_finished=True)]
        assert mine.id in ids and kv_id not in ids
        with pytest.raises(xferd.PermissionDenied,
                           match=f"transfer {kv_id} belongs to tenant 'kv'"):
            ops.transfer(kv_id)
        with pytest.raises(xferd.PermissionDenied, match="belongs to tenant 'kv'"):
            ops.cancel(kv_id)
        kv_ids = [t["id"] for t in json.loads(
            cluster.as_kv("--json", "transfers", "--all").stdout).get("transfers", [])]
        assert kv_ids == [str(kv_id)]
        assert "belongs to tenant 'ops'" in refused(
            cluster.as_kv("transfer", str(mine.id), check=False))
    finally:
        ops.deregister_region("shared_src")
        b.deregister_region("shared_dst")


def test_an_admin_tenant_acts_on_every_tenants_objects(cluster: Cluster,
                                                       ops: xferd.Client) -> None:
    tls = xferd.TlsConfig(ca=cluster.ca.cert, cert=cluster.operator.cert,
                          key=cluster.operator.key)
    cluster.as_kv("regions", "register", "kv_seen", "1MiB")
    ops.register_region("ops_seen", 1 * MiB)
    with xferd.Client(cluster.a.address, tls=tls) as admin:
        assert admin.node_info().tenant == "operators"
        seen = {r.name: r.tenant for r in admin.regions()}
        assert seen == {"kv_seen": "kv", "ops_seen": "ops"}, seen
        mine = ops.transfers(include_finished=True)
        everyone = {t.id for t in admin.transfers(include_finished=True)}
        assert {t.id for t in mine} <= everyone
        if mine:
            assert admin.transfer(mine[0].id).tenant == "ops"
        admin.deregister_region("kv_seen")
        admin.deregister_region("ops_seen")
    assert ops.regions() == []
    assert "operators (admin)" in cluster.as_kv("tenants").stdout


def test_quotas(cluster: Cluster, ops: xferd.Client) -> None:
    cluster.as_kv("regions", "register", "kv_a", "6MiB")
    try:
        message = refused(cluster.as_kv("regions", "register", "kv_b", "4MiB", check=False))
        assert ("RESOURCE_EXHAUSTED: tenant 'kv': registering 4.00 MiB would exceed its "
                "max_registered_bytes (8.00 MiB; 6.00 MiB registered)") in message, message
        # ops has no cap of its own.
        ops.register_region("ops_big", 16 * MiB)
        ops.deregister_region("ops_big")
        # Above its highest class.
        message = refused(cluster.as_kv("write", "kv_a", "b", "x", "--length", "4KiB",
                                        "--priority", "critical", check=False))
        assert ("PERMISSION_DENIED: tenant 'kv' may not use priority critical: its "
                "max_priority is normal") in message, message
        stats = {t.name: t for t in ops.stats().tenants}
        assert stats["kv"].registered_bytes == 6 * MiB
        assert stats["kv"].max_registered_bytes == 8 * MiB
        assert stats["kv"].max_inflight_transfers == 2
        assert stats["kv"].max_priority == "normal"
        assert stats["kv"].refused_quota >= 1 and stats["kv"].refused_access >= 1
        assert set(stats) == {"default", "kv", "operators", "ops", "slow"}
        table = cluster.as_kv("tenants").stdout
        assert "kv" in table and "6.00 MiB" in table and "8.00 MiB" in table, table
        top = cluster.as_kv("top", "-n", "1").stdout
        assert "kv 0 in flight" in top and "6.00 MiB registered" in top, top
    finally:
        cluster.as_kv("regions", "deregister", "kv_a")


def test_transfers_in_flight_quota(cluster: Cluster) -> None:
    """kv's max_inflight_transfers = 2: a third transfer in flight is refused
    (over TCP with its certificate, so kv's identity by certificate too)."""
    b = cluster.b.client()
    tls = xferd.TlsConfig(ca=cluster.ca.cert, cert=cluster.kv_client.cert,
                          key=cluster.kv_client.key)
    kv = xferd.Client(cluster.a.address, tls=tls)
    try:
        assert kv.node_info().tenant == "kv"
        size = 4 * MiB
        kv.register_region("kv_big", size)
        b.register_region("kv_dst", size, remote_write=True)
        handles: List[xferd.TransferHandle] = []
        try:
            # Small slices and a deadline-free queue: each takes a while.
            with pytest.raises(xferd.ResourceExhausted,
                               match="tenant 'kv' has 2 transfers in flight of its "
                                     "max_inflight_transfers=2"):
                for _ in range(64):
                    handles.append(kv.write("kv_big", "b", "kv_dst", size, slice_size=4096,
                                            wait=False))
            for h in handles:
                assert h.wait(WAIT_S).state == "done"
        finally:
            kv.deregister_region("kv_big")
            b.deregister_region("kv_dst")
    finally:
        kv.close()


def test_bandwidth_cap(cluster: Cluster) -> None:
    """Tenant slow (max_bandwidth 16 MiB/s, by its certificate) writes 32 MiB
    and reads it back: each takes about 2 s, never less than the cap allows
    (10% for the bucket's burst and the last op), and not twice that. While
    its transfer is in flight, another tenant may not disconnect the peer."""
    b = cluster.b.client()
    tls = xferd.TlsConfig(ca=cluster.ca.cert, cert=cluster.slow_client.cert,
                          key=cluster.slow_client.key)
    cap, size = 16 * MiB, 32 * MiB
    with xferd.Client(cluster.a.address, tls=tls) as slow:
        assert slow.node_info().tenant == "slow"
        slow.register_region("slow_src", size)
        slow.register_region("slow_back", size)
        dst = b.register_region("slow_dst", size, backing="shm", remote_write=True,
                                remote_read=True)
        try:
            data = fill(dst, seed=41)
            # The source's bytes come from b (a TCP client maps no region).
            slow.read("b", "slow_dst", "slow_src", size, slice_size=256 << 10).wait(WAIT_S)
            dst.buffer[:] = bytes(size)
            for op in ("write", "read"):
                start = time.monotonic()
                if op == "write":
                    done = slow.write("slow_src", "b", "slow_dst", size, slice_size=256 << 10)
                else:
                    done = slow.read("b", "slow_dst", "slow_back", size, slice_size=256 << 10)
                assert done.wait(WAIT_S).state == "done"
                rate = size / (time.monotonic() - start)
                print(f"slow's {op}: {rate / MiB:.1f} MiB/s under a cap of {cap / MiB:.0f} MiB/s")
                assert rate <= 1.1 * cap, rate
                assert rate >= 0.5 * cap, rate
            assert sha(dst.buffer) == sha(data)
            # While slow's write runs (2 s under its cap), kv may not take
            # the peer away from under it.
            running = slow.write("slow_back", "b", "slow_dst", size)
            message = refused(cluster.as_kv("peers", "disconnect", "b", check=False))
            assert ("tenant 'kv' may not disconnect peer 'b': transfers of tenant 'slow' are in "
                    "flight with it") in message, message
            assert running.wait(WAIT_S).state == "done"
            assert sha(dst.buffer) == sha(data)
            stats = {t.name: t for t in b.stats().tenants}
            assert stats["default"].max_bandwidth == 0
            mine = {t.name: t for t in slow.stats().tenants}["slow"]
            assert mine.max_bandwidth == cap and mine.weight == 1
            # Its four transfers posted ops, each after some wait in the queue.
            assert mine.transfers_started == 4, mine
            assert mine.mean_queue_wait > datetime.timedelta(0), mine
            table = cluster.as_kv("tenants").stdout
            assert "MEAN WAIT" in table, table
            row = next(line for line in table.splitlines() if line.startswith("slow "))
            assert re.search(r"\d(ns|us|ms|s)\b", row), row
        finally:
            slow.deregister_region("slow_src")
            slow.deregister_region("slow_back")
            b.deregister_region("slow_dst")


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
