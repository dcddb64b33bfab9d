"""A file region's file truncated by another process fails only the
transfers that use that region.

Daemons a and b on loopback over TCP, with plain data lanes and with TLS
lanes (user-space TLS here: this host has no kernel `tls` module). A file
region's pages past its file's new end are gone: the kernel's copies of the
lanes report them (EFAULT), TLS goes through guarded copies. Each case cuts
the file of a region in use (the test process truncates it, as any process
with write access to regions.file_dirs could) and then moves data through
it, while writes between two other regions run on the same link:

- a write into a truncated file (b receives into lost pages),
- a write out of one (a sends from lost pages: the frame's rest goes as
  zeros and b is told not to land it),
- a read out of one (b serves a read from lost pages),
- a read into one (a receives into lost pages);

and, with b frozen while ops of a write into its file region (or of a read
out of it) and of another write are on the wire, another process cuts the
file before b runs again.

Each fails FAILED_PRECONDITION "region '...' lost its memory: its file was
truncated by another process (...)"; both daemons live, the link is never
made again, and the other writes complete with every byte in place. The
first four also show every later transfer using the region failing at once
the same way until it is deregistered (ListRegions shows it `lost`, with
that status), and the write out of a cut file raising no landed event on
its destination; registered again, a region works.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

import pytest_main
import xferd
from certs import Ca
from conftest import Regions
from daemons import Cluster
from testlib import WAIT_S, fill, pattern, peer, sha, start_stalled

DAEMONS = ("a", "b")
CONNECT = (("a", "b"),)
Clients = Dict[str, xferd.Client]

KiB = 1 << 10
MiB = 1 << 20
LOST = "lost its memory: its file was truncated by another process"


@pytest.fixture(scope="module", params=["plain", "tls"])
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """a -> b, with plain data lanes or TLS ones (mTLS certificates)."""
    directory = tempfile.mkdtemp(prefix="xferd-pki-")
    try:
        c = Cluster(DAEMONS)
        if request.param == "tls":
            ca = Ca(os.path.join(directory, "ca"), "xferd-ca")
            for name in DAEMONS:
                c[name].extra_args = ca.issue(name).daemon_args(ca)
        with c:
            c["a"].client().connect_peer(c["b"].address)
            info = c["a"].client().node_info()
            assert ("TLS" in info.transport_reason) == (request.param == "tls"), info
            linked = peer(c["a"].client(), "b")
            assert linked is not None
            c.linked_at = linked.connected_at  # type: ignore[attr-defined]
            yield c
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def failure(call: Callable[[], Any]) -> Tuple[str, str]:
    code, message, _ = failed(call)
    return code, message


def failed(call: Callable[[], Any]) -> Tuple[str, str, Optional[xferd.Transfer]]:
    """The error code, message and final snapshot of a transfer that fails."""
    with pytest.raises(xferd.XferdError) as e:
        call()
    return e.value.code.name, e.value.message, e.value.transfer


def new_file(cluster: Cluster, daemon: str, data: bytes) -> str:
    """A file of `data` in `daemon`'s regions.file_dirs."""
    fd, path = tempfile.mkstemp(prefix="truncated-", dir=cluster[daemon].file_dirs[0])
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return path


def file_bytes(path: str, length: int) -> bytes:
    with open(path, "rb") as f:
        return f.read(length)


class Traffic:
    """Writes between two other regions on the same link (a's traffic_src
    into b's traffic_dst), two in flight at a time from a thread, from
    before a case until after it: each ends done and b's region holds a's
    bytes exactly."""

    def __init__(self, clients: Clients, regions: Regions, size: int = 16 * MiB) -> None:
        self.a = clients["a"]
        self.src = regions.make("a", "traffic_src", size)
        self.dst = regions.make("b", "traffic_dst", size, remote_write=True)
        self.digest = sha(fill(self.src, seed=99))
        self.size = size
        self.done: List[xferd.Transfer] = []
        self.errors: List[BaseException] = []
        self.stop = threading.Event()
        self.submitted = threading.Event()  # the first write is on its way
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            previous = None
            while not self.stop.is_set():
                # Small slices: many frames on the lanes, between the case's.
                handle = self.a.write("traffic_src", "b", "traffic_dst", self.size,
                                      slice_size=256 * KiB)
                self.submitted.set()
                if previous is not None:
                    self.done.append(previous.wait(WAIT_S))
                previous = handle
            if previous is not None:
                self.done.append(previous.wait(WAIT_S))
        except BaseException as e:  # reported by __enter__ or __exit__
            self.errors.append(e)
            self.submitted.set()

    def __enter__(self) -> "Traffic":
        self.thread.start()
        # A case must not begin before the traffic it is to overlap: on a
        # loaded host (ASan) the thread's first write can come after a case
        # that fails at once.
        started = self.submitted.wait(WAIT_S)
        assert started and not self.errors, f"the traffic did not start: {self.errors}"
        return self

    def overlapped(self, failed_transfer: Optional[xferd.Transfer]) -> None:
        """Asserts that one of the writes was in flight on a (submitted
        before, finished after) when `failed_transfer` ended."""
        assert failed_transfer is not None and failed_transfer.finished_at is not None
        end = failed_transfer.finished_at
        self.stop.set()
        self.thread.join(WAIT_S)
        assert any(t.submitted_at is not None and t.finished_at is not None and
                   t.submitted_at < end < t.finished_at for t in self.done), \
            "no other write was in flight when the transfer failed"

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(WAIT_S)
        if exc[0] is not None:
            return
        assert not self.errors, self.errors
        assert self.done, "no other write ran"
        for t in self.done:
            assert (t.state, t.bytes_done) == ("done", self.size), t
        assert sha(self.dst.buffer) == self.digest, "the other regions' bytes differ"


def alive(cluster: Cluster, clients: Clients) -> None:
    """Both daemons run, and a still has b on the link it started with."""
    for name in DAEMONS:
        assert cluster[name].proc is not None and cluster[name].proc.poll() is None, name
        assert clients[name].node_info().node_id == name
    linked = peer(clients["a"], "b")
    assert linked is not None and linked.state == "connected", linked
    assert linked.connected_at == cluster.linked_at, "the link to b was made again"  # type: ignore


def lost(region: str, cut: int, size: int) -> str:
    """What a transfer meeting `region`'s cut file says."""
    return f"region '{region}' {LOST} (it has {cut} of the region's {size} bytes)"


def cut_during(cluster: Cluster, clients: Clients, regions: Regions, path: str, cut: int,
               transfer: Callable[[], Any], expect: str, again: Callable[[], Any],
               owner: str, region: str) -> None:
    """Cuts the file at `path` to `cut` bytes while other writes run on the
    link, then runs `transfer`, which must fail FAILED_PRECONDITION saying
    `expect`, while one of those writes is in flight; `region` (on daemon
    `owner`) then lists as lost, and `again`, a later use of it, fails at
    once the same way. The other writes complete with their bytes, and both
    daemons and the link live on."""
    assert clients[owner].region(region).lost is None
    with Traffic(clients, regions) as traffic:
        os.truncate(path, cut)
        code, message, ended = failed(transfer)
        traffic.overlapped(ended)
    assert code == "FAILED_PRECONDITION" and expect in message, message
    lost_now = clients[owner].region(region).lost
    assert lost_now is not None and lost_now.code.name == "FAILED_PRECONDITION", lost_now
    assert lost_now.message.startswith(f"region '{region}' {LOST}"), lost_now
    code, message = failure(again)
    assert code == "FAILED_PRECONDITION" and f"region '{region}' {LOST}" in message, message
    alive(cluster, clients)


def test_write_into_a_truncated_file(cluster: Cluster, clients: Clients,
                                     regions: Regions) -> None:
    a, b = clients["a"], clients["b"]
    size = 8 * MiB
    data = fill(regions.make("a", "w_src", size), seed=1)
    path = new_file(cluster, "b", b"")
    try:
        regions.make("b", "w_file", size, backing="file", file_path=path, create=True,
                     remote_write=True)
        a.write("w_src", "b", "w_file", size, slice_size=MiB).wait(WAIT_S)
        assert file_bytes(path, size) == data
        # Cut inside a slice, not on a page of its own: the frame that
        # reaches it faults part-way through its payload. Later writes fail
        # at once, even into the part the file still has.
        cut = 3 * MiB + 12 * KiB
        cut_during(cluster, clients, regions, path, cut,
                   lambda: a.write("w_src", "b", "w_file", size, slice_size=MiB).wait(WAIT_S),
                   lost("w_file", cut, size),
                   lambda: a.write("w_src", "b", "w_file", MiB).wait(WAIT_S), "b", "w_file")
        # Registered again (create grows the file back), it takes writes.
        b.deregister_region("w_file")
        regions.make("b", "w_file", size, backing="file", file_path=path, create=True,
                     remote_write=True)
        a.write("w_src", "b", "w_file", size, slice_size=MiB).wait(WAIT_S)
        assert file_bytes(path, size) == data
    finally:
        os.unlink(path)


def test_write_out_of_a_truncated_file(cluster: Cluster, clients: Clients,
                                       regions: Regions) -> None:
    a, b = clients["a"], clients["b"]
    size = 4 * MiB
    data = pattern(2, size)
    path = new_file(cluster, "a", data)
    try:
        regions.make("a", "s_file", size, backing="file", file_path=path)
        dst = regions.make("b", "s_dst", size, remote_write=True)
        cut = MiB + 12 * KiB
        with b.watch_region("s_dst", timeout=WAIT_S) as watch:
            # Watched from before the first write: b may raise its landed
            # event after a has seen the write done, and a watch opened
            # later would take it for the next write's.
            first = a.write("s_file", "b", "s_dst", size).wait(WAIT_S)
            assert bytes(dst.buffer) == data
            event = watch.next_event(WAIT_S)
            assert event is not None and event.source_transfer_id == first.id, event
            # One slice: the frame carrying the landing notice faults
            # part-way, after its header and notice went out.
            cut_during(cluster, clients, regions, path, cut,
                       lambda: a.write("s_file", "b", "s_dst", size,
                                       slice_size=size).wait(WAIT_S),
                       lost("s_file", cut, size),
                       lambda: a.write("s_file", "b", "s_dst", MiB).wait(WAIT_S),
                       "a", "s_file")
            # b landed none of it, and the lane is in step: the next write
            # into the same region lands, with its bytes.
            good = regions.make("a", "s_good", size)
            good_bytes = fill(good, seed=3)
            done = a.write("s_good", "b", "s_dst", size).wait(WAIT_S)
            event = watch.next_event(WAIT_S)
            assert event is not None and event.kind == "landed", event
            assert event.source_transfer_id == done.id, "a failed write landed"
            assert bytes(dst.buffer) == good_bytes
    finally:
        os.unlink(path)


def test_read_out_of_a_truncated_file(cluster: Cluster, clients: Clients,
                                      regions: Regions) -> None:
    a = clients["a"]
    size = 4 * MiB
    data = pattern(4, size)
    path = new_file(cluster, "b", data)
    try:
        regions.make("b", "r_file", size, backing="file", file_path=path, remote_read=True)
        dst = regions.make("a", "r_dst", size)
        a.read("b", "r_file", "r_dst", size, slice_size=MiB).wait(WAIT_S)
        assert bytes(dst.buffer) == data
        cut = 2 * MiB + 12 * KiB
        # Four reads of a slice each: the one that meets the cut first on b
        # fails ("failed the read"), and one that reaches b after the region
        # was marked lost is refused ("refused the read"). Which of them the
        # reader hears of first depends on its lanes' timing; both name the
        # cause.
        cut_during(cluster, clients, regions, path, cut,
                   lambda: a.read("b", "r_file", "r_dst", size, slice_size=MiB).wait(WAIT_S),
                   f"the read: {lost('r_file', cut, size)}",
                   lambda: a.read("b", "r_file", "r_dst", MiB).wait(WAIT_S), "b", "r_file")
    finally:
        os.unlink(path)


def test_read_into_a_truncated_file(cluster: Cluster, clients: Clients,
                                    regions: Regions) -> None:
    a = clients["a"]
    size = 4 * MiB
    src = regions.make("b", "i_src", size, remote_read=True)
    data = fill(src, seed=5)
    path = new_file(cluster, "a", b"")
    try:
        regions.make("a", "i_file", size, backing="file", file_path=path, create=True)
        a.read("b", "i_src", "i_file", size, slice_size=MiB).wait(WAIT_S)
        assert file_bytes(path, size) == data
        cut = MiB + 12 * KiB
        cut_during(cluster, clients, regions, path, cut,
                   lambda: a.read("b", "i_src", "i_file", size, slice_size=MiB).wait(WAIT_S),
                   lost("i_file", cut, size),
                   lambda: a.read("b", "i_src", "i_file", MiB).wait(WAIT_S), "a", "i_file")
    finally:
        os.unlink(path)


def truncate_elsewhere(path: str, size: int) -> None:
    """Truncates `path` to `size` from a process of its own."""
    subprocess.run(["/usr/bin/python3", "-c", "import os, sys; os.truncate(sys.argv[1], "
                    "int(sys.argv[2]))", path, str(size)], check=True, timeout=WAIT_S)


@pytest.mark.parametrize("direction", ["write into", "read out of"])
def test_cut_while_the_transfer_is_on_the_wire(cluster: Cluster, clients: Clients,
                                               regions: Regions, direction: str) -> None:
    """b's file region is the destination of a write, or the source of a
    read, whose ops are on the wire (b frozen) when another process cuts its
    file; a write between two other regions is on the same link too. Once
    b runs again, the first fails naming the region and the other completes
    with its bytes."""
    a = clients["a"]
    size = 32 * MiB
    src = regions.make("a", "o_src", size)
    data = fill(src, seed=6)
    path = new_file(cluster, "b", data)
    try:
        regions.make("b", "o_file", size, backing="file", file_path=path,
                     remote_write=True, remote_read=True)
        regions.make("a", "o_mine", size)
        other_src = regions.make("a", "o_other_src", 16 * MiB)
        other_dst = regions.make("b", "o_other_dst", 16 * MiB, remote_write=True)
        other_bytes = fill(other_src, seed=7)
        # Resolve both destinations while b still answers.
        a.write("o_src", "b", "o_file", 1).wait(WAIT_S)
        a.write("o_other_src", "b", "o_other_dst", 1).wait(WAIT_S)
        if direction == "write into":
            submit = lambda: a.write("o_src", "b", "o_file", size, slice_size=MiB)  # noqa: E731
        else:
            submit = lambda: a.read("b", "o_file", "o_mine", size, slice_size=MiB)  # noqa: E731
        b = cluster["b"]
        try:
            handle = start_stalled(b, a, submit)
            other = a.write("o_other_src", "b", "o_other_dst", 16 * MiB, slice_size=256 * KiB)
            cut = MiB + 12 * KiB
            truncate_elsewhere(path, cut)
        finally:
            b.resume()
        with pytest.raises(xferd.XferdError) as e:
            handle.wait(WAIT_S)
        assert e.value.code.name == "FAILED_PRECONDITION", e.value
        assert f"region 'o_file' {LOST}" in e.value.message, e.value.message
        done = other.wait(WAIT_S)
        assert (done.state, done.bytes_done) == ("done", 16 * MiB), done
        assert bytes(other_dst.buffer) == other_bytes
        alive(cluster, clients)
    finally:
        os.unlink(path)


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
