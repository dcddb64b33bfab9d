"""Many-block transfers (a -> b) and reads (a <- b) when things go wrong
under them:

- the peer is SIGKILLed mid-write and mid-read: the survivor's transfer
  fails UNAVAILABLE naming the peer within 2 s, a read raises no landed
  event, nothing stays behind on the survivor (transfer table, lanes, memory
  registrations, memory, descriptors) and, with the peer restarted as a new
  process, blocks move again, every byte checked;
- the source region is deregistered on the peer in the middle of a read,
  and the read's local destination region here: the outcomes documented in
  docs/many-blocks.md. Over TCP the test makes the read be mid-flight
  (daemons frozen with SIGSTOP at the right moments), so the peer sends
  queued answers from a region already deregistered, and a's lane receives
  answers into a region already deregistered: under --config=asan any use
  after free in either daemon fails the test.

Sizes suit Soft-RoCE too (~50 MB/s: XFERD_TEST_TRANSPORT=verbs), where a
frozen daemon's NIC keeps answering RDMA, so a transfer may also end done
before the fault: then every byte must be right and the event raised.
"""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Any, Dict, Tuple

import numpy as np
import pytest

import pytest_main
import xferd
from daemons import TRANSPORT, Cluster, Daemon
from testlib import WAIT_S, start_stalled, wait_until

DAEMONS = ("a", "b")
CONNECT = (("a", "b"),)
# Small TCP socket buffers (the kernel doubles them): a reader frozen with
# reads in flight leaves most of their answers queued in the server's lane,
# holding the region they come from, rather than in the kernel's buffers.
DAEMON_CONFIG = "[transport]\ntcp_socket_buffer = \"64KiB\"\n"

KiB = 1 << 10
MiB = 1 << 20
PAGE = 4 * KiB
# Beyond what the lanes' socket buffers absorb while the peer is frozen, and
# a few seconds of Soft-RoCE.
BIG = 128 * MiB
# Byte-checked reads: a read of this size is mid-flight for a while on
# Soft-RoCE; over TCP frozen daemons keep it so.
CHECKED = 32 * MiB
FAIL_WITHIN_S = 2.0
# Slices of stalled byte-checked reads: 4 pages an op, so the lanes' credits
# (64 ops each) cover a small part of the read.
SMALL_SLICE = 16 * KiB
# A region of BIG bytes that stayed mapped would show; noise stays far below.
RSS_SLACK = 32 * MiB
# AddressSanitizer keeps freed memory in its quarantine (256 MiB by default):
# there resident memory says nothing of leaks, and LeakSanitizer checks them
# at the daemon's exit instead.
UNDER_ASAN = "ASAN_OPTIONS" in os.environ

Clients = Dict[str, xferd.Client]


def view(region: xferd.Region) -> np.ndarray:
    """An SHM region's bytes as a writable uint8 array (no copy)."""
    return np.frombuffer(region.buffer, dtype=np.uint8)


def random_fill(region: xferd.Region, seed: int) -> np.ndarray:
    data = view(region)
    data[:] = np.random.default_rng(seed).integers(0, 256, region.size, dtype=np.uint8)
    return data


def page_blocks(size: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """Page offsets of a random permutation (remote side) and in order (local
    side): one block per page, none merged."""
    pages = size // PAGE
    return (np.random.default_rng(seed).permutation(pages) * PAGE,
            np.arange(pages, dtype=np.uint64) * PAGE)


def names_peer(message: str, node: str) -> bool:
    """Whether a failure message names peer `node` as TCP and verbs do."""
    return re.search(rf"\b(peer '?{node}'?|lane (to|from) {node}|link to {node}|towards {node})\b",
                     message) is not None


def resources(daemon: Daemon, client: xferd.Client, fds: bool = False) -> Dict[str, int]:
    """What `daemon` holds, once the memory of regions deregistered before
    (kept while their last transfers let go) is released: transfers in
    flight, regions, their bytes and registrations, and with `fds` its
    descriptors. Lanes are not in it: they come up after a connect
    completes, and are checked where they must be up or down."""
    wait_until(f"{daemon.name} let go of its deregistered SHM regions",
               lambda: shm_fds(daemon) == len(client.regions()), timeout=5.0)
    s = client.stats()
    held = {"in_flight": s.transfers_in_flight, "mrs": s.memory_registrations,
            "regions": s.regions, "registered_bytes": s.registered_bytes}
    return {**held, "fds": s.open_fds} if fds else held


def wait_holds(daemon: Daemon, client: xferd.Client, base: Dict[str, int]) -> None:
    """Waits until `daemon` holds what it held at `base` (from `resources`).
    A deregistered region's memory registrations go with the last transfer
    that used it, once the transfer table sweeps that transfer: the
    deregistration starts the sweep but does not wait for it."""
    held: Dict[str, int] = {}

    def back_to_base() -> bool:
        held.update(resources(daemon, client))
        return held == base

    try:
        wait_until(f"{daemon.name} to hold what it held before", back_to_base, timeout=5.0)
    except AssertionError as e:
        raise AssertionError(f"{e}: it holds {held}, before {base}\n{daemon.log_tail()}") from None


def fd_targets(pid: int) -> Dict[str, int]:
    """What a process's descriptors point at, counted (for failure messages)."""
    counts: Dict[str, int] = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = re.sub(r"\d+", "N", _readlink(f"/proc/{pid}/fd/{fd}"))
        counts[target] = counts.get(target, 0) + 1
    return counts


def shm_fds(daemon: Daemon) -> int:
    """Descriptors of `daemon` open on its SHM regions' memfds: a region's
    memory, still held by someone (deregistered regions stay until their
    transfers let go)."""
    return sum(1 for fd in os.listdir(f"/proc/{daemon.pid}/fd")
               if _readlink(f"/proc/{daemon.pid}/fd/{fd}").startswith("/memfd:xferd-region:"))


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return ""


def no_event(watch: xferd.RegionWatch) -> None:
    """Fails if the watch delivers any event within half a second."""
    with pytest.raises(TimeoutError):
        event = watch.next_event(0.5)
        raise AssertionError(f"unexpected event after a failed transfer: {event}")


def reconnect_and_move_blocks(cluster: Cluster, a: xferd.Client, direction: str) -> None:
    """b was restarted (a new process on a new port): a connects to it and
    moves 256 pages in `direction`, every byte checked."""
    cluster["b"].start()
    b = cluster["b"].client()
    assert a.connect_peer(cluster["b"].address).state == "connected"
    size = 256 * PAGE
    remote_offsets, local_offsets = page_blocks(size, seed=30)
    local = random_fill(a.register_region("again_local", size, backing="shm"), seed=31)
    remote = random_fill(b.register_region("again_remote", size, backing="shm",
                                           remote_write=True, remote_read=True), seed=32)
    if direction == "write":
        done = a.write_blocks("again_local", "b", "again_remote", local_offsets, remote_offsets,
                              block_length=PAGE).wait(WAIT_S)
        assert np.array_equal(remote.reshape(-1, PAGE)[remote_offsets // PAGE],
                              local.reshape(-1, PAGE))
    else:
        done = a.read_blocks("b", "again_remote", "again_local", remote_offsets, local_offsets,
                             block_length=PAGE).wait(WAIT_S)
        assert np.array_equal(local.reshape(-1, PAGE),
                              remote.reshape(-1, PAGE)[remote_offsets // PAGE])
    assert (done.state, done.direction, done.blocks) == ("done", direction, size // PAGE)
    a.deregister_region("again_local")
    b.deregister_region("again_remote")


def kill_mid_transfer(cluster: Cluster, a: xferd.Client, direction: str) -> Dict[str, int]:
    """One round: b is killed in the middle of a many-block `direction`,
    restarted and reconnected; returns a's resources after it."""
    b = cluster["b"].client()
    base = resources(cluster["a"], a)
    a.register_region("big_local", BIG, backing="anonymous")
    b.register_region("big_remote", BIG, backing="anonymous", remote_write=True,
                      remote_read=True)
    remote_offsets, local_offsets = page_blocks(BIG, seed=1)
    n = len(local_offsets)
    if direction == "write":
        a.write_blocks("big_local", "b", "big_remote", [0], [0], [1]).wait(WAIT_S)  # resolve

        def submit() -> xferd.TransferHandle:
            return a.write_blocks("big_local", "b", "big_remote", local_offsets, remote_offsets,
                                  block_length=PAGE)
    else:
        a.read_blocks("b", "big_remote", "big_local", [0], [0], [1]).wait(WAIT_S)

        def submit() -> xferd.TransferHandle:
            return a.read_blocks("b", "big_remote", "big_local", remote_offsets, local_offsets,
                                 block_length=PAGE)
    landed_before = a.stats().landed_events

    with a.watch_region("big_local", timeout=WAIT_S) as watch:
        handle = start_stalled(cluster["b"], a, submit)
        killed_at = time.monotonic()
        cluster["b"].kill()
        with pytest.raises(xferd.Unavailable) as failure:
            handle.wait(WAIT_S)
        took = time.monotonic() - killed_at
        # A read whose source died reports no success: no landed event.
        no_event(watch)
    assert took < FAIL_WITHIN_S, f"the {direction} failed only {took:.2f} s after the kill"
    assert names_peer(failure.value.message, "b"), failure.value.message
    # Gone, not refused: over verbs the NIC's refusal of a dying peer's
    # memory is looked into (it no longer answers).
    assert "deregistered" not in failure.value.message, failure.value.message
    if TRANSPORT == "verbs":
        assert re.search(r"peer b (died or reset|does not answer)", failure.value.message), (
            failure.value.message)
    ended = failure.value.transfer
    assert ended is not None
    assert (ended.state, ended.direction, ended.blocks) == ("failed", direction, n)
    assert ended.bytes_done < BIG
    assert a.stats().landed_events == landed_before

    # Nothing stays behind on a: no transfer in flight or listed, the dead
    # link's lanes closed, and once its region is gone, its registrations
    # and bytes too.
    assert a.stats().transfers_in_flight == 0 and a.transfers() == []
    wait_until("the dead link's lanes closed", lambda: a.stats().open_lanes == 0, timeout=5.0)
    a.deregister_region("big_local")
    wait_holds(cluster["a"], a, base)
    reconnect_and_move_blocks(cluster, a, direction)
    wait_until("a's lanes to the new b", lambda: a.stats().open_lanes == 2, timeout=5.0)
    after = resources(cluster["a"], a, fds=True)
    assert {**after, "fds": 0} == {**base, "fds": 0}, f"a before {base}, after {after}"
    return after


@pytest.mark.parametrize("direction", ["write", "read"])
def test_peer_killed_mid_many_block_transfer(cluster: Cluster, direction: str) -> None:
    a = cluster["a"].client()
    rss_before = a.stats().resident_bytes
    first = kill_mid_transfer(cluster, a, direction)
    fds_first = fd_targets(cluster["a"].pid)
    second = kill_mid_transfer(cluster, a, direction)
    # The first round may open descriptors gRPC keeps (its first reconnect);
    # a second round opens none for good.
    assert second == first, (f"a after one round {first}, after two {second}: descriptors "
                             f"{fds_first}, then {fd_targets(cluster['a'].pid)}")
    rss_after = a.stats().resident_bytes
    assert UNDER_ASAN or rss_after < rss_before + RSS_SLACK, (
        f"a's resident memory grew from {rss_before} to {rss_after} bytes")


def outcome_of(handle: xferd.TransferHandle) -> Tuple[Any, Any]:
    """(final snapshot, error or None) of a transfer."""
    try:
        return handle.wait(WAIT_S), None
    except xferd.XferdError as e:
        assert e.transfer is not None, e
        return e.transfer, e


def test_source_deregistered_on_the_peer_mid_read(cluster: Cluster) -> None:
    a = cluster["a"].client()
    b = cluster["b"].client()
    b_base = resources(cluster["b"], b)
    remote = random_fill(b.register_region("rd_src", CHECKED, backing="shm", remote_read=True),
                         seed=10)
    local = random_fill(a.register_region("rd_dst", CHECKED, backing="shm"), seed=11)
    remote_offsets, local_offsets = page_blocks(CHECKED, seed=12)
    expected = remote.reshape(-1, PAGE)[remote_offsets // PAGE].reshape(-1).copy()
    a.read_blocks("b", "rd_src", "rd_dst", [0], [0], [1]).wait(WAIT_S)  # resolve

    with a.watch_region("rd_dst", timeout=WAIT_S) as watch:
        handle = start_stalled(cluster["b"], a, lambda: a.read_blocks(
            "b", "rd_src", "rd_dst", remote_offsets, local_offsets, block_length=PAGE,
            slice_size=SMALL_SLICE))
        # a stops reading its lanes; b wakes and answers the READ_REQs it
        # holds into them (the answers it cannot send yet hold rd_src), then
        # deregisters rd_src, which no transfer of b's uses.
        cluster["a"].pause()
        cluster["b"].resume()
        try:
            assert b.deregister_region("rd_src") == 0
        finally:
            cluster["a"].resume()
        snapshot, error = outcome_of(handle)
        if error is None:
            event = watch.next_event(WAIT_S)
        else:
            no_event(watch)

    if TRANSPORT == "tcp":
        # Deterministic over TCP: the answers b had queued arrive (sent from
        # the deregistered region's memory, still alive), the next READ_REQ
        # is refused NOT_FOUND and the read fails with the peer's reason.
        assert isinstance(error, xferd.NotFound), error
        assert error.message.startswith("peer b refused the read: region id "), error.message
        assert "is not registered (deregistered since it was resolved?)" in error.message
    if error is None:  # verbs: the NIC may finish the read first
        assert np.array_equal(local, expected)
        assert (event.kind, event.read, event.source_transfer_id) == ("landed", True, snapshot.id)
    else:
        # Failed, not done: what landed is undefined, the transfer says so.
        assert isinstance(error, (xferd.NotFound, xferd.Unavailable)), error
        assert snapshot.state == "failed" and snapshot.bytes_done < CHECKED
    assert a.stats().transfers_in_flight == 0

    # b let the region go (its answers were sent: its memory with them) and
    # keeps serving: the
    # name is gone, and another region reads fine, every byte checked.
    wait_holds(cluster["b"], b, b_base)
    assert b.stats().open_lanes == 2
    with pytest.raises(xferd.NotFound):
        a.read_blocks("b", "rd_src", "rd_dst", [0], [0], [1])
    other = random_fill(b.register_region("rd_other", MiB, backing="shm", remote_read=True),
                        seed=13)
    offsets = np.arange(MiB // PAGE, dtype=np.uint64)[::-1] * PAGE
    a.read_blocks("b", "rd_other", "rd_dst", offsets, offsets[::-1],
                  block_length=PAGE).wait(WAIT_S)
    assert np.array_equal(local[:MiB].reshape(-1, PAGE), other.reshape(-1, PAGE)[::-1])
    a.deregister_region("rd_dst")
    b.deregister_region("rd_other")


def test_local_destination_deregistered_mid_read(cluster: Cluster) -> None:
    a = cluster["a"].client()
    b = cluster["b"].client()
    remote = random_fill(b.register_region("ld_src", CHECKED, backing="shm", remote_read=True),
                         seed=20)
    a_base = resources(cluster["a"], a)
    local = random_fill(a.register_region("ld_dst", CHECKED, backing="shm"), seed=21)
    remote_offsets, local_offsets = page_blocks(CHECKED, seed=22)
    expected = remote.reshape(-1, PAGE)[remote_offsets // PAGE].reshape(-1).copy()
    a.read_blocks("b", "ld_src", "ld_dst", [1], [1], [1]).wait(WAIT_S)  # resolve
    cancelled_before = a.stats().transfers_cancelled

    with a.watch_region("ld_dst", timeout=WAIT_S) as watch:
        handle = start_stalled(cluster["b"], a, lambda: a.read_blocks(
            "b", "ld_src", "ld_dst", remote_offsets, local_offsets, block_length=PAGE,
            slice_size=SMALL_SLICE))
        try:
            # Without force: refused, naming the region and its reader.
            try:
                a.deregister_region("ld_dst")
                refused = None
            except xferd.FailedPrecondition as e:
                refused = e
            if refused is not None:
                assert refused.message == (
                    "region 'ld_dst' is used by 1 transfer(s) in flight: wait for them, cancel "
                    "them, or deregister with force")
                # With force: the read is cancelled; READ_REQs already sent
                # are answered once b wakes, into memory the transfer keeps.
                assert a.deregister_region("ld_dst", force=True) == 1
        finally:
            cluster["b"].resume()
        snapshot, error = outcome_of(handle)
        if error is not None:
            # The watch hears the deregistration, then its stream ends: no landing.
            assert watch.next_event(WAIT_S).kind == "deregistered"
            assert watch.next_event(WAIT_S) is None
    if TRANSPORT == "tcp":
        assert refused is not None, "the read ended with b frozen"
    if refused is None:  # verbs: the NIC finished the read before the deregistration
        assert error is None and np.array_equal(local, expected)
    else:
        assert isinstance(error, xferd.Cancelled), error
        assert error.message == "destination region 'ld_dst' was deregistered under the read"
        assert snapshot.state == "cancelled" and snapshot.bytes_done < CHECKED
        assert a.stats().transfers_cancelled == cancelled_before + 1

    # Nothing stays on a once the answers in flight have landed, and b, whose
    # answers were refused no byte, keeps serving a new destination.
    wait_holds(cluster["a"], a, a_base)
    assert a.stats().open_lanes == 2
    again = random_fill(a.register_region("ld_again", CHECKED, backing="shm"), seed=23)
    a.read_blocks("b", "ld_src", "ld_again", remote_offsets, local_offsets,
                  block_length=PAGE).wait(WAIT_S)
    assert np.array_equal(again, expected)
    a.deregister_region("ld_again")
    b.deregister_region("ld_src")


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
