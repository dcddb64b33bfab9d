"""End-to-end integrity (docs/integrity.md) between daemons on loopback, over
TCP and (in the Soft-RoCE VM) verbs: verified transfers of every form return
one CRC-64 per block and move the bytes unchanged; corruption from real
sources fails them DATA_LOSS naming a block: a local client rewriting the
source while it is sent, or the destination while it lands, a bit flipped
in the TCP receive path (a test build's hook; TCP only), a file altered on
disk before a restore is checked against the checksums stored when it was
written."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
import time
from typing import Callable, Dict, Iterator, List

import numpy as np
import pytest

import pytest_main
import xferd
from conftest import Regions
from daemons import TRANSPORT, Cluster
from testlib import WAIT_S, fill, sha

DAEMONS = ("a", "b")
CONNECT = (("a", "b"),)

KiB = 1 << 10
MiB = 1 << 20

Clients = Dict[str, xferd.Client]

def _crc64_table() -> List[int]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ (0xC96C5795D7870F42 if crc & 1 else 0)
        table.append(crc)
    return table


_CRC64_TABLE = _crc64_table()


def crc64_xz(data: bytes) -> int:
    """CRC-64/XZ (ECMA-182, reflected), a byte at a time: what the daemon's
    ISA-L computes, written independently of it."""
    crc = 0xFFFFFFFFFFFFFFFF
    for byte in data:
        crc = _CRC64_TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFFFFFFFFFF


def sums(transfer: xferd.Transfer) -> List[int]:
    return [int(v) for v in np.frombuffer(transfer.checksums, dtype="<u8")]


def test_the_checksum_is_crc64_xz(clients: Clients, regions: Regions) -> None:
    assert crc64_xz(b"123456789") == 0x995DC9BBDF1939FA  # the catalogue's check value
    src = regions.make("a", "crc_src", 4 * KiB)
    regions.make("b", "crc_dst", 4 * KiB, remote_write=True)
    src.buffer[:9] = b"123456789"
    done = clients["a"].write("crc_src", "b", "crc_dst", 9, verify=True).wait(WAIT_S)
    assert done.verify and sums(done) == [0x995DC9BBDF1939FA]


def test_every_form_verifies_and_returns_a_checksum_per_block(clients: Clients,
                                                              regions: Regions) -> None:
    a = clients["a"]
    size = 4 * MiB
    src = regions.make("a", "f_src", size)
    dst = regions.make("b", "f_dst", size, remote_write=True, remote_read=True)
    back = regions.make("a", "f_back", size, remote_write=True)
    data = fill(src, seed=3)

    # A range: one checksum per slice, the last one shorter.
    ranged = a.write("f_src", "b", "f_dst", size - 100, slice_size=MiB, verify=True).wait(WAIT_S)
    assert (ranged.verify, ranged.slices, len(sums(ranged))) == (True, 4, 4)
    assert sha(dst.buffer[:size - 100]) == sha(data[:size - 100])
    assert sums(ranged)[3] == crc64_xz(data[3 * MiB:size - 100])
    read = a.read("b", "f_dst", "f_back", size - 100, slice_size=MiB, verify=True).wait(WAIT_S)
    assert sums(read) == sums(ranged)
    assert sha(back.buffer[:size - 100]) == sha(data[:size - 100])

    # Many blocks, scattered: one checksum per request block, in its order,
    # even where blocks are contiguous (they are not merged).
    n = 256
    order = np.random.default_rng(5).permutation(n).astype(np.uint64)
    src_off = np.arange(n, dtype=np.uint64) * 4096
    dst_off = order * 4096
    w = a.write_blocks("f_src", "b", "f_dst", src_off, dst_off, block_length=4096,
                       verify=True).wait(WAIT_S)
    assert len(sums(w)) == n
    assert sums(w)[7] == crc64_xz(data[7 * 4096:8 * 4096])
    for i in (0, 7, 255):
        d = int(dst_off[i])
        assert bytes(dst.buffer[d:d + 4096]) == data[i * 4096:(i + 1) * 4096]
    r = a.read_blocks("b", "f_dst", "f_back", dst_off, src_off, block_length=4096,
                      verify=True).wait(WAIT_S)
    assert sums(r) == sums(w)
    assert sha(back.buffer[:n * 4096]) == sha(data[:n * 4096])

    runs = xferd.Strided(src_start=0, dst_start=MiB, block_length=8192, src_stride=16384,
                         dst_stride=8192, count=64)
    s = a.write_strided("f_src", "b", "f_dst", runs, verify=True).wait(WAIT_S)
    assert len(sums(s)) == 64 and sums(s)[1] == crc64_xz(data[16384:16384 + 8192])

    a.prepare_layout("f_lsrc", "f_src", 4096, count=n)
    a.prepare_layout("f_ldst", "f_dst", 4096, count=n, peer="b")
    try:
        idx = a.write_indexed("f_lsrc", "b", "f_ldst", order, np.arange(n), verify=True)
        assert sums(idx.wait(WAIT_S))[3] == crc64_xz(data[int(order[3]) * 4096:][:4096])
    finally:
        a.delete_layout("f_lsrc")
        a.delete_layout("f_ldst")

    # A batch, each write saying for itself.
    batch = a.submit_batch([
        xferd.WriteSpec("f_src", "b", "f_dst", MiB, slice_size=256 * KiB, verify=True),
        xferd.WriteSpec("f_src", "b", "f_dst", MiB, dst_offset=MiB, slice_size=256 * KiB),
    ])
    verified, plain_in_batch = (h.wait(WAIT_S) for h in batch)
    assert sums(verified)[1] == crc64_xz(data[256 * KiB:512 * KiB])
    assert (plain_in_batch.verify, plain_in_batch.checksums) == (False, b"")

    # Within one daemon (its own regions, the self link).
    own = regions.make("a", "f_own", size, remote_write=True, remote_read=True)
    local = a.write("f_src", "a", "f_own", size, slice_size=MiB, verify=True).wait(WAIT_S)
    assert sums(local)[:3] == sums(ranged)[:3] and len(sums(local)) == 4
    assert sha(own.buffer) == sha(data)
    local_read = a.read("a", "f_own", "f_back", size, slice_size=MiB, verify=True).wait(WAIT_S)
    assert sums(local_read) == sums(local)

    # Unverified transfers carry none; listings leave them out.
    plain = a.write("f_src", "b", "f_dst", MiB).wait(WAIT_S)
    assert (plain.verify, plain.checksums) == (False, b"")
    listed = {t.id: t for t in a.transfers(include_finished=True, limit=20)}
    assert listed[w.id].verify and listed[w.id].checksums == b""
    assert sums(a.transfer(w.id)) == sums(w)


@contextlib.contextmanager
def rewriting(buffer: "memoryview") -> Iterator[None]:
    """Rewrites all of `buffer` (an SHM region mapped by this client) with a
    new byte value, over and over, until the block ends: another process
    changing memory a transfer is moving."""
    array = np.frombuffer(buffer, dtype=np.uint8)
    stop = threading.Event()

    def loop() -> None:
        value = 0
        while not stop.is_set():
            value = (value + 1) % 251
            array.fill(value)  # numpy lets go of the GIL while it fills

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def until_data_loss(start: Callable[[], xferd.TransferHandle], check_done: Callable[
        [xferd.Transfer], None]) -> xferd.DataLoss:
    """Runs verified transfers until one fails DATA_LOSS; each that ended done
    instead must pass `check_done` (its destination holds what its checksums
    say). Over TCP a block is checked within microseconds of its copy, so a
    transfer fails only when the rewriter hits a block inside that window,
    and only while the rewriter has a CPU: on a loaded 2-core host many
    attempts may pass first. They are small and quick; the bound is time."""
    deadline = time.monotonic() + WAIT_S
    attempts = 0
    while time.monotonic() < deadline:
        attempts += 1
        try:
            check_done(start().wait(WAIT_S))
        except xferd.DataLoss as e:
            return e
    raise AssertionError(f"{attempts} verified transfers of changing bytes in {WAIT_S:.0f} s "
                         f"all passed")


def block_named(error: xferd.DataLoss, blocks: int) -> int:
    match = re.search(r"verify: block #(\d+) \(source offset (\d+), destination offset (\d+), "
                      r"(\d+) bytes\) (landed with|has) CRC-64 0x[0-9a-f]{16} (where the source "
                      r"sent|and expected_checksums\[\d+\] is) 0x[0-9a-f]{16}; (\d+) of "
                      rf"{blocks} blocks differ", error.message)
    assert match, error.message
    assert 1 <= int(match.group(7)) <= blocks
    return int(match.group(1))


def test_source_rewritten_while_it_is_sent(clients: Clients, regions: Regions) -> None:
    a, b = clients["a"], clients["b"]
    # Small, so that the rewriter comes back to every block within
    # microseconds; 4 KiB slices, so that each op is a short window.
    size, slice_size = 256 * KiB, 4 * KiB
    src = regions.make("a", "rs_src", size)
    regions.make("b", "rs_dst", size, remote_write=True, remote_read=True)
    regions.make("a", "rs_back", size, remote_write=True)
    n = size // slice_size

    def check_done(done: xferd.Transfer) -> None:
        # What landed is what its checksums say: read back against them.
        a.read("b", "rs_dst", "rs_back", size, slice_size=slice_size,
               expected_checksums=done.checksums).wait(WAIT_S)

    with b.watch_region("rs_dst", timeout=WAIT_S) as watch:
        with rewriting(src.buffer):
            error = until_data_loss(
                lambda: a.write("rs_src", "b", "rs_dst", size, slice_size=slice_size, verify=True),
                check_done)
        assert 0 <= block_named(error, n) < n
        assert error.transfer is not None and error.transfer.state == "failed"
        assert error.transfer.checksums == b""  # only a transfer done has them
        # Its landed event was never raised: the next one is a clean write's.
        fill(src, seed=9)
        clean = a.write("rs_src", "b", "rs_dst", size, verify=True).wait(WAIT_S)
        landed: List[int] = []
        while clean.id not in landed:
            event = watch.next_event(WAIT_S)
            assert event is not None, f"no landed event for {clean.id}: saw {landed}"
            if event.kind == "landed":
                landed.append(event.source_transfer_id)
        assert error.transfer.id not in landed


def test_destination_rewritten_while_it_lands(clients: Clients, regions: Regions) -> None:
    a = clients["a"]
    size, slice_size = 256 * KiB, 4 * KiB  # as in the test above
    data = fill(regions.make("a", "rd_src", size), seed=4)
    dst = regions.make("b", "rd_dst", size, remote_write=True)

    def check_done(done: xferd.Transfer) -> None:
        pass  # the rewriter changed it again since: nothing to hold it to

    with rewriting(dst.buffer):
        error = until_data_loss(
            lambda: a.write("rd_src", "b", "rd_dst", size, slice_size=slice_size, verify=True),
            check_done)
    assert 0 <= block_named(error, size // slice_size) < size // slice_size
    # Left alone, the same write verifies.
    a.write("rd_src", "b", "rd_dst", size, slice_size=slice_size, verify=True).wait(WAIT_S)
    assert sha(dst.buffer) == sha(data)


def test_restore_checked_against_stored_checksums(cluster: Cluster, clients: Clients,
                                                  regions: Regions) -> None:
    a = clients["a"]
    size = 4 * MiB
    data = fill(regions.make("a", "ck_src", size), seed=6)
    back = regions.make("a", "ck_back", size, remote_write=True)
    path = os.path.join(cluster.workdir, "checkpoint.bin")
    regions.make("b", "ck_file", size, backing="file", file_path=path, create=True,
                 remote_write=True, remote_read=True)
    n = size // (64 * KiB)
    offsets = np.arange(n, dtype=np.uint64) * 64 * KiB
    saved = a.write_blocks("ck_src", "b", "ck_file", offsets, offsets, block_length=64 * KiB,
                           verify=True).wait(WAIT_S)
    stored = saved.checksums  # kept beside the checkpoint

    restored = a.read_blocks("b", "ck_file", "ck_back", offsets, offsets, block_length=64 * KiB,
                             expected_checksums=stored).wait(WAIT_S)
    assert restored.verify and restored.checksums == stored

    # Someone alters the file on disk (bit rot, a stray writer): block 37.
    with open(path, "r+b") as f:
        f.seek(37 * 64 * KiB + 1000)
        f.write(b"\x00\x01\x02")
    with pytest.raises(xferd.DataLoss) as failed:
        a.read_blocks("b", "ck_file", "ck_back", offsets, offsets, block_length=64 * KiB,
                      expected_checksums=stored).wait(WAIT_S)
    assert block_named(failed.value, n) == 37
    assert "1 of 64 blocks differ from expected_checksums" in failed.value.message
    # As numpy integers too; and without them the altered data reads fine.
    a.read_blocks("b", "ck_file", "ck_back", offsets[:37], offsets[:37], block_length=64 * KiB,
                  expected_checksums=np.frombuffer(stored, "<u8")[:37]).wait(WAIT_S)
    a.read_blocks("b", "ck_file", "ck_back", offsets, offsets, block_length=64 * KiB,
                  verify=True).wait(WAIT_S)
    assert bytes(back.buffer[:37 * 64 * KiB]) == data[:37 * 64 * KiB]
    assert bytes(back.buffer[37 * 64 * KiB + 1000:][:3]) == b"\x00\x01\x02"


def test_bad_verification_requests_are_refused(clients: Clients, regions: Regions) -> None:
    a = clients["a"]
    regions.make("a", "bv_dst", MiB)
    regions.make("b", "bv_src", MiB, remote_read=True)
    with pytest.raises(xferd.InvalidArgument, match=r"expected_checksums holds 3 checksums and "
                       r"the read has 4 blocks"):
        a.read("b", "bv_src", "bv_dst", MiB, slice_size=256 * KiB, expected_checksums=[1, 2, 3])
    with pytest.raises(xferd.InvalidArgument, match="expected_checksums needs verify"):
        a.read("b", "bv_src", "bv_dst", MiB, verify=False, expected_checksums=[1])
    with pytest.raises(ValueError, match="8 bytes each"):
        a.read("b", "bv_src", "bv_dst", MiB, expected_checksums=b"\x00" * 9)


def flip_cluster(receiver: str) -> Cluster:
    """Daemons a and b, one poller each (one lane: frames in op order), the
    `receiver` flipping a bit of the second payload it receives."""
    env = {"XFERD_TEST_FLIP_RX_BIT": "2"}
    return Cluster(("a", "b"), each={receiver: {"env": env}}, pollers=1)


def hooked(cluster: Cluster, name: str) -> bool:
    with open(cluster[name].log_path, errors="replace") as log:
        return "test hook: flipped a bit" in log.read()


@pytest.mark.skipif(TRANSPORT != "tcp", reason="the hook is in the TCP receive path")
@pytest.mark.parametrize("direction", ["write", "read"])
def test_a_bit_flipped_in_the_tcp_receive_path(direction: str) -> None:
    receiver = "b" if direction == "write" else "a"
    with flip_cluster(receiver) as c:
        a = c["a"].client()
        b = c["b"].client()
        a.connect_peer(c["b"].address)
        n = 256  # 4 ops of 64 blocks: the second payload is op 1, blocks 64..127
        src = (a if direction == "write" else b).register_region("x_src", n * 4096, backing="shm",
                                                                 remote_read=True)
        (b if direction == "write" else a).register_region("x_dst", n * 4096, backing="shm",
                                                           remote_write=True)
        fill(src, seed=8)
        offsets = np.arange(n, dtype=np.uint64) * 4096
        start = a.write_blocks if direction == "write" else a.read_blocks
        args = ("x_src", "b", "x_dst") if direction == "write" else ("b", "x_src", "x_dst")
        try:
            start(*args, offsets, offsets, block_length=4096, verify=True).wait(WAIT_S)
            failure = None
        except xferd.DataLoss as e:
            failure = e
        if not hooked(c, receiver):
            if os.environ.get("XFERD_REQUIRE_TEST_HOOKS") == "1":
                pytest.fail("the daemon has no test hooks (XFERD_TEST_HOOKS): build it with "
                            "--config=asan")
            pytest.skip("the daemon is built without test hooks (run with --config=asan)")
        assert failure is not None, "a flipped bit went unnoticed"
        assert block_named(failure, n) == 127  # the last block of the second frame
        assert "; 1 of 256 blocks differ" in failure.message
        # The lane carries on: the same transfer verifies now.
        start(*args, offsets, offsets, block_length=4096, verify=True).wait(WAIT_S)


if __name__ == "__main__":
    sys.exit(pytest_main.main(__file__, sys.argv))
