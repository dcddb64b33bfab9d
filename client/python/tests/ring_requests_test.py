"""The ring's conversions against the gRPC path's: a write() or read() of one
range made straight from its arguments (range_request, the clients' fast
path) is the entry the request message would become (ring_request), and
arguments the message would refuse leave it to the generic path; a
completion becomes the Transfer a gRPC reply converts to."""

import itertools
import struct
import sys
import unittest
from typing import Any, Dict

from xferd import ring_layout as L
from xferd import ring_requests, requests
from xferd.models import Transfer
from xferd.rings import RingCompletion
from xferd.v1 import common_pb2, xferd_pb2


_DEFAULTS: Dict[str, Any] = dict(peer="b", src_region="src", dst_region="dst", length=4096,
                                 src_offset=0, dst_offset=0, slice_size=0, timeout=None,
                                 label="", wait=True)


def _fast(direction: str, **kw: Any) -> Any:
    """range_request's entry of a write() or read() with these arguments."""
    a = {**_DEFAULTS, **kw}
    return ring_requests.range_request(
        L.OP_WRITE if direction == "write" else L.OP_READ, a["peer"], a["src_region"],
        a["dst_region"], a["length"], a["src_offset"], a["dst_offset"], a["slice_size"],
        a["timeout"], a["label"], a["wait"])


def _slow(direction: str, **kw: Any) -> Any:
    """ring_request's entry of the message the same call builds."""
    return ring_requests.ring_request(requests.transfer_request(direction, **{**_DEFAULTS, **kw}),
                                      _DEFAULT_SLICE)


_DEFAULT_SLICE = 1 << 20


class RangeRequestTest(unittest.TestCase):

    def test_matches_the_message_path(self) -> None:
        cases = itertools.product(
            ("write", "read"),
            ({}, {"src_offset": 8192, "dst_offset": (1 << 64) - 1, "length": 1},
             {"slice_size": 64 << 10}, {"slice_size": 1000}, {"slice_size": 0x10000 << 10},
             {"timeout": 0.5}, {"timeout": 1e-7}, {"timeout": 3}, {"timeout": -1.0},
             {"timeout": 5e6}, {"label": "kv-cache"}, {"label": "é" * 128},
             {"label": "x" * 256}, {"peer": "10.0.0.1:7000"}, {"peer": ""},
             {"src_region": "ü" * 127}, {"src_region": "ü" * 128}, {"dst_region": ""}),
            (True, False))
        for direction, kw, wait in cases:
            with self.subTest(direction=direction, wait=wait, **kw):
                self.assertEqual(_fast(direction, wait=wait, **kw),
                                 _slow(direction, wait=wait, **kw))

    def test_leaves_what_the_message_refuses_to_the_generic_path(self) -> None:
        for kw in ({"length": -1}, {"src_offset": 1 << 64}, {"dst_offset": "0"},
                   {"length": 4096.0}, {"length": True}, {"slice_size": None},
                   {"peer": b"b"}, {"label": None}, {"wait": 1}, {"timeout": "1"},
                   {"timeout": float("nan")}, {"timeout": float("inf")}):
            with self.subTest(**kw):
                self.assertIsNone(_fast("write", **kw))

    def test_verify_rides_the_entry_when_its_checksums_fit_a_completion(self) -> None:
        self.assertIsNone(_slow("write").verify)  # the daemon's default
        self.assertEqual(_slow("write", verify=False).verify, False)
        fits = 64 * _DEFAULT_SLICE  # one checksum per slice of a range: 64
        r = _slow("write", verify=True, length=fits)
        self.assertEqual((r.verify, r.expected, r.arrays), (True, 0, b""))
        self.assertIsNone(_slow("write", verify=True, length=fits + 1))
        self.assertIsNone(_slow("write", verify=True, length=fits, slice_size=512 << 10))
        self.assertIsNotNone(_slow("write", verify=False, length=fits + 1))
        # A restore: its checksums after the arrays (a range has none: alone).
        r = _slow("read", expected_checksums=[7, 8], length=2 * _DEFAULT_SLICE)
        self.assertEqual((r.expected, r.arrays), (2, struct.pack("<2Q", 7, 8)))
        self.assertIsNone(_slow("read", expected_checksums=list(range(65)),
                                length=65 * _DEFAULT_SLICE))

    def test_verified_blocks_are_counted_per_slice(self) -> None:
        kib = 1 << 10

        def listed(direction: str, n: int, slice_size: int = 0, **kw: Any) -> Any:
            offsets = struct.pack(f"<{n}Q", *(i * 8 * kib for i in range(n)))
            m = requests.transfer_request(direction, "b", "src", "dst", slice_size=slice_size,
                                          wait=True, **kw)
            m.blocks.list.CopyFrom(xferd_pb2.BlockList(src_offsets=offsets, dst_offsets=offsets,
                                                       block_length=4 * kib))
            return ring_requests.ring_request(m, _DEFAULT_SLICE)

        def strided(count: int) -> Any:
            m = requests.transfer_request("write", "b", "src", "dst", wait=True, verify=True)
            m.blocks.strided.runs.add(block_length=4 * kib, src_stride=8 * kib,
                                      dst_stride=8 * kib, count=count)
            return ring_requests.ring_request(m, _DEFAULT_SLICE)

        r = listed("read", 2, expected_checksums=[5, 6])
        self.assertEqual((r.form, r.a, r.expected), (L.FORM_LIST, 2, 2))
        self.assertEqual(r.arrays[-16:], struct.pack("<2Q", 5, 6))
        # 64 blocks of two slices each: 128 checksums, beyond a completion.
        self.assertIsNone(listed("write", 64, slice_size=2 * kib, verify=True))
        self.assertIsNotNone(listed("write", 64, slice_size=2 * kib, verify=False))
        self.assertIsNotNone(listed("write", 64, verify=True))
        self.assertIsNotNone(strided(64))
        self.assertIsNone(strided(65))


class TransferOfTest(unittest.TestCase):

    def _entry(self, form: int = L.FORM_RANGE, opcode: int = L.OP_WRITE) -> Any:
        r = ring_requests.range_request(opcode, "b", "src", "dst", 4096, 8192, 12288, 0, None,
                                        "lbl", True)
        assert r is not None
        r.form = form
        return r

    def test_a_done_write(self) -> None:
        c = RingCompletion(7, 42, L.STATE_DONE, False, 4096, 4096, 1, 1, 5_000_000, 0, "")
        t = ring_requests.transfer_of(self._entry(), c, "tcp", 1 << 20)
        self.assertIsInstance(t, Transfer)
        self.assertEqual((t.id, t.state, t.direction, t.peer, t.label, t.transport),
                         (42, "done", "write", "b", "lbl", "tcp"))
        self.assertEqual((t.src_region, t.src_offset, t.dst_region, t.dst_offset),
                         ("src", 8192, "dst", 12288))
        self.assertEqual((t.length, t.bytes_done, t.blocks, t.slices, t.slice_size),
                         (4096, 4096, 1, 1, 1 << 20))
        self.assertIsNone(t.error)
        assert t.submitted_at is not None and t.finished_at is not None
        self.assertEqual((t.finished_at - t.submitted_at).total_seconds(), 0.005)
        self.assertTrue(t.terminal)

    def test_a_failed_read_carries_its_status(self) -> None:
        c = RingCompletion(7, 43, L.STATE_FAILED, False, 0, 4096, 1, 0, 1000, 14,
                           "lane to b failed")
        t = ring_requests.transfer_of(self._entry(opcode=L.OP_READ), c, "verbs", 1 << 20)
        self.assertEqual((t.state, t.direction, t.transport), ("failed", "read", "verbs"))
        assert t.error is not None
        self.assertEqual((t.error.code.value[0], t.error.message), (14, "lane to b failed"))

    def test_a_verified_completion_carries_its_checksums(self) -> None:
        sums = struct.pack("<2Q", 0xAB, 0xCD)
        c = RingCompletion(7, 46, L.STATE_DONE, False, 8192, 8192, 2, 2, 10, 0, "", True, sums)
        t = ring_requests.transfer_of(self._entry(), c, "tcp", 1 << 20)
        self.assertEqual((t.verify, t.checksums), (True, sums))
        plain = ring_requests.transfer_of(
            self._entry(), RingCompletion(7, 47, L.STATE_DONE, False, 1, 1, 1, 1, 1, 0, ""),
            "tcp", 1 << 20)
        self.assertEqual((plain.verify, plain.checksums), (False, b""))

    def test_a_queued_notice_has_no_end(self) -> None:
        c = RingCompletion(7, 44, L.STATE_QUEUED, True, 0, 4096, 1, 0, 0, 0, "")
        t = ring_requests.transfer_of(self._entry(), c, "tcp", 1 << 20)
        self.assertEqual(t.state, "queued")
        self.assertIsNotNone(t.submitted_at)
        self.assertIsNone(t.finished_at)

    def test_layouts_name_no_regions_and_blocks_no_offsets(self) -> None:
        c = RingCompletion(7, 45, L.STATE_DONE, False, 65536, 65536, 16, 1, 10, 0, "")
        layout = ring_requests.transfer_of(self._entry(L.FORM_LAYOUT), c, "tcp", 1 << 20)
        self.assertEqual((layout.src_region, layout.dst_region, layout.src_offset), ("", "", 0))
        listed = ring_requests.transfer_of(self._entry(L.FORM_LIST), c, "tcp", 1 << 20)
        self.assertEqual((listed.src_region, listed.dst_offset, listed.blocks), ("src", 0, 16))

    def test_a_refusal_raises_the_daemons_error(self) -> None:
        c = RingCompletion(7, 0, L.STATE_FAILED, False, 0, 0, 0, 0, 0, 5,
                           "region 'dst' not found")
        with self.assertRaises(Exception) as raised:
            ring_requests.transfer_of(self._entry(), c, "tcp", 1 << 20)
        self.assertIn("region 'dst' not found", str(raised.exception))
        self.assertEqual(type(raised.exception).__name__, "NotFound")

    def test_states_match_the_protos(self) -> None:
        # The strings transfer_of gives are those Transfer.from_proto gives.
        for state, number in ((L.STATE_QUEUED, common_pb2.TRANSFER_STATE_QUEUED),
                              (L.STATE_DONE, common_pb2.TRANSFER_STATE_DONE),
                              (L.STATE_FAILED, common_pb2.TRANSFER_STATE_FAILED),
                              (L.STATE_CANCELLED, common_pb2.TRANSFER_STATE_CANCELLED)):
            c = RingCompletion(1, 1, state, state == L.STATE_QUEUED, 0, 1, 1, 0, 0,
                               0 if state in (L.STATE_QUEUED, L.STATE_DONE) else 1, "x")
            ours = ring_requests.transfer_of(self._entry(), c, "tcp", 1 << 20)
            theirs = Transfer.from_proto(xferd_pb2.Transfer(state=number))
            self.assertEqual(ours.state, theirs.state)


if __name__ == "__main__":
    sys.exit(unittest.main())
