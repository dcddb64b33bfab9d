"""Same-host transfers: a write or read whose peer is the daemon's own node
id copies region to region on its pollers. The same requests as to a peer
(ranges, blocks, strided runs, prepared layouts, reads), through the request
rings and over gRPC alike, with the same refusals (access flags, ACL,
bounds), the same landed events (ranges included), and two processes
handing data to each other through their daemon. A file region whose file
was truncated under it fails the copy with an error and stays broken until
it is deregistered; the daemon lives on.
Every byte is checked."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from typing import Any, Callable, List, Tuple

import numpy as np
import pytest

import pytest_main
import xferd
from conftest import Regions
from daemons import Cluster
from testlib import WAIT_S, as_array, fill_random

DAEMONS = ("a",)
CONNECT = ()
SELF = "a"  # daemon a's node id

KiB = 1 << 10
MiB = 1 << 20
PAGE = 4 * KiB


def landed(watch: xferd.RegionWatch) -> xferd.RegionEvent:
    event = watch.next_event(WAIT_S)
    assert event is not None and event.kind == "landed", event
    return event


@pytest.fixture(scope="module", params=["ring", "grpc"])
def client(cluster: Cluster, request: pytest.FixtureRequest) -> xferd.Client:
    """A client over the unix socket, with the request rings or without."""
    return cluster["a"].client(rings=request.param == "ring")


def test_write_and_read_to_own_node(client: xferd.Client, regions: Regions) -> None:
    data = fill_random(regions.make("a", "w_src", 4 * MiB), seed=1)
    dst = regions.make("a", "w_dst", 4 * MiB, remote_write=True, remote_read=True)
    back = regions.make("a", "w_back", 4 * MiB)
    with client.watch_region("w_dst", timeout=WAIT_S) as watch:
        done = client.write("w_src", SELF, "w_dst", 3 * MiB + 5, src_offset=7, dst_offset=3,
                            slice_size=MiB, wait=True).wait(WAIT_S)
        event = landed(watch)
    assert (done.state, done.peer, done.bytes_done, done.slices) == ("done", SELF, 3 * MiB + 5, 4)
    expect = np.zeros(4 * MiB, dtype=np.uint8)
    expect[3:3 + 3 * MiB + 5] = data[7:7 + 3 * MiB + 5]
    np.testing.assert_array_equal(as_array(dst), expect)
    assert (event.source_node, event.source_transfer_id, event.read) == (SELF, done.id, False)
    assert (event.offset, event.length, event.bytes) == (3, 3 * MiB + 5, 3 * MiB + 5)
    # And back: a read of the own node's region raises its event on the
    # local destination.
    with client.watch_region("w_back", timeout=WAIT_S) as watch:
        done = client.read(SELF, "w_dst", "w_back", 4 * MiB, wait=True).wait(WAIT_S)
        event = landed(watch)
    assert (done.state, done.direction, done.bytes_done) == ("done", "read", 4 * MiB)
    np.testing.assert_array_equal(as_array(back), expect)
    assert (event.read, event.source_node, event.length) == (True, SELF, 4 * MiB)
    assert done.id in [t.id for t in client.transfers(include_finished=True)]


def test_blocks_and_strided_runs(client: xferd.Client, regions: Regions) -> None:
    n = 2048
    src = fill_random(regions.make("a", "b_src", n * PAGE), seed=2)
    dst = regions.make("a", "b_dst", n * PAGE, remote_write=True, landed_ranges=True)
    perm = np.random.default_rng(3).permutation(n).astype(np.uint64)
    with client.watch_region("b_dst", timeout=WAIT_S, ranges=True) as watch:
        done = client.write_blocks("b_src", SELF, "b_dst", np.arange(n, dtype=np.uint64) * PAGE,
                                   perm * PAGE, block_length=PAGE, wait=True).wait(WAIT_S)
        event = landed(watch)
    assert (done.state, done.blocks, done.bytes_done) == ("done", n, n * PAGE)
    assert np.array_equal(as_array(dst).reshape(n, PAGE)[perm], src.reshape(n, PAGE))
    # The ranges were staged on the region itself: the whole of it, one range.
    assert event.ranges is not None and not event.ranges_missing
    assert (event.ranges[0].tolist(), event.ranges[1].tolist()) == ([0], [n * PAGE])
    # Every other page, 1 KiB of each, as a strided run.
    as_array(dst)[:] = 0
    run = xferd.Strided(src_start=0, dst_start=0, block_length=KiB, src_stride=2 * PAGE,
                        dst_stride=2 * PAGE, count=n // 2)
    done = client.write_strided("b_src", SELF, "b_dst", run, wait=True).wait(WAIT_S)
    assert (done.state, done.blocks) == ("done", n // 2)
    expect = np.zeros(n * PAGE, dtype=np.uint8)
    rows = expect.reshape(n // 2, 2 * PAGE)
    rows[:, :KiB] = src.reshape(n // 2, 2 * PAGE)[:, :KiB]
    np.testing.assert_array_equal(as_array(dst), expect)


def test_prepared_layouts_of_the_own_node(client: xferd.Client, regions: Regions) -> None:
    n = 256
    src = fill_random(regions.make("a", "l_src", n * PAGE), seed=6)
    dst = regions.make("a", "l_dst", n * PAGE, remote_write=True)
    client.prepare_layout("own_src_pages", "l_src", PAGE, count=n)
    client.prepare_layout("own_dst_pages", "l_dst", PAGE, count=n, peer=SELF)
    try:
        backwards = np.arange(n, dtype=np.uint32)[::-1].copy()
        done = client.write_indexed("own_src_pages", SELF, "own_dst_pages",
                                    np.arange(n, dtype=np.uint32), backwards,
                                    wait=True).wait(WAIT_S)
        assert (done.state, done.blocks, done.bytes_done) == ("done", n, n * PAGE)
        np.testing.assert_array_equal(as_array(dst).reshape(n, PAGE)[::-1], src.reshape(n, PAGE))
    finally:
        client.delete_layout("own_src_pages")
        client.delete_layout("own_dst_pages")


def refusal(call: Callable[[], Any]) -> Tuple[str, str]:
    with pytest.raises(xferd.XferdError) as e:
        call()
    return e.value.code.name, e.value.message


def test_refusals_name_the_own_node(cluster: Cluster, regions: Regions) -> None:
    """The checks a peer's region gets, by the ring and over gRPC alike."""
    regions.make("a", "r_src", 64 * KiB)
    regions.make("a", "r_dst", 64 * KiB, remote_write=True)
    regions.make("a", "r_plain", 64 * KiB)
    regions.make("a", "r_acl", 64 * KiB, remote_write=True, allowed_peers=["someone-else"])
    ring, grpc_only = cluster["a"].client(), cluster["a"].client(rings=False)
    bad: List[Callable[[xferd.Client], Any]] = [
        lambda c: c.write("r_src", SELF, "r_plain", KiB, wait=True),
        lambda c: c.read(SELF, "r_dst", "r_src", KiB, wait=True),
        lambda c: c.write("r_src", SELF, "r_acl", KiB, wait=True),
        lambda c: c.write("r_src", SELF, "no_such", KiB, wait=True),
        lambda c: c.write("r_src", SELF, "r_dst", KiB, dst_offset=64 * KiB - 10, wait=True),
        lambda c: c.write_blocks("r_src", SELF, "r_dst", [0, 8 * KiB], [0, 60 * KiB],
                                 block_length=8 * KiB, wait=True),
    ]
    got = [refusal(lambda: call(ring)) for call in bad]
    assert got == [refusal(lambda: call(grpc_only)) for call in bad]
    codes = [code for code, _ in got]
    assert codes == ["PERMISSION_DENIED", "PERMISSION_DENIED", "PERMISSION_DENIED", "NOT_FOUND",
                     "OUT_OF_RANGE", "OUT_OF_RANGE"], got
    assert "does not allow remote writes" in got[0][1]
    assert "does not allow remote reads" in got[1][1]
    assert "not in the ACL of region 'r_acl'" in got[2][1]
    assert "destination region 'no_such' on peer 'a' (this daemon)" in got[3][1]
    assert "block #1" in got[5][1]


# Run by a second process: registers "handoff_in", says so, waits for a
# write to land there and prints the landed bytes' digest.
RECEIVER = """
import hashlib, sys
import numpy as np
import xferd
with xferd.Client(sys.argv[1]) as c:
    region = c.register_region("handoff_in", int(sys.argv[2]), backing="shm",
                               remote_write=True)
    with c.watch_region("handoff_in", timeout=30) as watch:
        print("ready", flush=True)
        event = watch.next_event(30)
        assert event is not None and event.kind == "landed", event
        print(event.source_node, event.length,
              hashlib.sha256(bytes(region.buffer)).hexdigest(), flush=True)
    c.deregister_region("handoff_in")
"""


def test_two_processes_hand_data_over_through_their_daemon(cluster: Cluster,
                                                           client: xferd.Client,
                                                           regions: Regions) -> None:
    import hashlib
    size = 8 * MiB
    data = fill_random(regions.make("a", "handoff_out", size), seed=4)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER, cluster["a"].target, str(size)],
                                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                env=env)
    try:
        assert receiver.stdout is not None
        assert receiver.stdout.readline().strip() == "ready"
        done = client.write("handoff_out", SELF, "handoff_in", size, wait=True).wait(WAIT_S)
        assert done.state == "done"
        line = receiver.stdout.readline().split()
        assert receiver.wait(WAIT_S) == 0
    finally:
        if receiver.poll() is None:
            receiver.kill()
            receiver.wait()
    assert line == [SELF, str(size), hashlib.sha256(data.tobytes()).hexdigest()]


def test_a_truncated_file_region_fails_the_copy_not_the_daemon(cluster: Cluster,
                                                               client: xferd.Client,
                                                               regions: Regions) -> None:
    fd, path = tempfile.mkstemp(prefix="same-host-", dir=cluster["a"].file_dirs[0])
    os.close(fd)
    try:
        src = fill_random(regions.make("a", "f_src", MiB), seed=5)
        regions.make("a", "f_file", MiB, backing="file", file_path=path, create=True,
                     remote_write=True, remote_read=True)
        back = regions.make("a", "f_back", MiB)
        # Whole: it takes a write and gives it back.
        client.write("f_src", SELF, "f_file", MiB, wait=True).wait(WAIT_S)
        client.read(SELF, "f_file", "f_back", MiB, wait=True).wait(WAIT_S)
        np.testing.assert_array_equal(as_array(back), src)
        # Another process cuts the file to half the region: the pages past
        # its end are gone. The copy that meets them fails, and the region
        # is broken from then on, both ways, until it is deregistered.
        os.truncate(path, MiB // 2)
        for call in (lambda: client.write("f_src", SELF, "f_file", MiB, wait=True).wait(WAIT_S),
                     lambda: client.read(SELF, "f_file", "f_back", MiB // 2,
                                         wait=True).wait(WAIT_S)):
            code, message = refusal(call)
            assert code == "FAILED_PRECONDITION", message
            assert "region 'f_file' lost its memory: its file was truncated by another " \
                "process (it has 524288 of the region's 1048576 bytes)" in message, message
        # The daemon is fine; registered again (create grows the file
        # back), the region moves bytes both ways.
        assert client.node_info().node_id == SELF
        client.deregister_region("f_file")
        regions.make("a", "f_file", MiB, backing="file", file_path=path, create=True,
                     remote_write=True, remote_read=True)
        as_array(back)[:] = 0
        client.write("f_src", SELF, "f_file", MiB, wait=True).wait(WAIT_S)
        client.read(SELF, "f_file", "f_back", MiB, wait=True).wait(WAIT_S)
        np.testing.assert_array_equal(as_array(back), src)
    finally:
        os.unlink(path)


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
