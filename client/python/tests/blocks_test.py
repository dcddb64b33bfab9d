"""Unit tests of xferd.blocks: the exact bytes offsets and indices are packed
into, the ValueErrors bad arrays raise, and how requests are split into
SubmitStream chunks. With numpy and without it (the fallback path)."""

from __future__ import annotations

import array
import struct
import sys
import unittest
from typing import Any, Iterator, List
from unittest import mock

import numpy as np

import xferd
from xferd import blocks

U64_MAX = (1 << 64) - 1


def le64(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}Q", *values)


def le32(*values: int) -> bytes:
    return struct.pack(f"<{len(values)}I", *values)


def generator(values: List[int]) -> Iterator[int]:
    yield from values


class PackTest(unittest.TestCase):
    """pack_u64 / pack_u32 over every accepted input, numpy present."""

    values = [0, 1, 4096, 123456789, 255]

    def inputs(self) -> List[Any]:
        """The same integers in every form a caller may pass."""
        v = self.values
        forms: List[Any] = [v, tuple(v), generator(v)]
        forms += [array.array(code, v) for code in "ILQilq"]
        forms += [memoryview(array.array("Q", v)), memoryview(array.array("q", v)).cast("B")
                  .cast("q")]
        forms += [np.array(v, dtype=dtype) for dtype in (
            np.uint32, np.int32, np.int64, np.uint64, ">i8", ">u4")]
        forms.append(np.repeat(np.array(v, dtype=np.int64), 2)[::2])  # a strided view
        return forms

    def test_every_form_packs_to_the_same_little_endian_bytes(self) -> None:
        for form in self.inputs():
            with self.subTest(form=repr(form)[:60]):
                self.assertEqual(blocks.pack_u64(form, "x"), le64(*self.values))
        for form in self.inputs():
            with self.subTest(form=repr(form)[:60]):
                self.assertEqual(blocks.pack_u32(form, "x"), le32(*self.values))

    def test_narrow_integers(self) -> None:
        small = [0, 1, 127]
        forms: List[Any] = [array.array(code, small) for code in "BbHh"]
        forms += [np.array(small, dtype=t) for t in (np.uint8, np.int8, np.int16, ">u2")]
        for form in self.inputs_of(forms):
            with self.subTest(form=form):
                self.assertEqual(blocks.pack_u64(form, "x"), le64(*small))
                self.assertEqual(blocks.pack_u32(form, "x"), le32(*small))

    def inputs_of(self, forms: List[Any]) -> List[Any]:
        """`forms` this test class packs (all of them with numpy)."""
        return forms

    def test_extremes_and_empty(self) -> None:
        self.assertEqual(blocks.pack_u64(np.array([U64_MAX], dtype=np.uint64), "x"),
                         b"\xff" * 8)
        self.assertEqual(blocks.pack_u64([U64_MAX, 0], "x"), b"\xff" * 8 + b"\0" * 8)
        self.assertEqual(blocks.pack_u32([2**32 - 1], "x"), b"\xff" * 4)
        self.assertEqual(blocks.pack_u64(np.array([], dtype=np.int64), "x"), b"")
        self.assertEqual(blocks.pack_u64([], "x"), b"")

    def assert_refused(self, values: Any, message: str, pack: Any = blocks.pack_u64) -> None:
        with self.assertRaises(ValueError) as raised:
            pack(values, "src_offsets")
        self.assertIn(message, str(raised.exception))

    def test_bad_values_name_the_argument_and_the_element(self) -> None:
        for values in ([5, 6, -1, -2], np.array([5, 6, -1, -2]), array.array("q", [5, 6, -1])):
            with self.subTest(values=values):
                self.assert_refused(values, "src_offsets[2] is -1: every element must be >= 0")
        self.assert_refused([0, 1 << 64], "src_offsets[1] is 18446744073709551616")
        for values in ([0, 2**32], np.array([0, 2**32]), np.array([0, 2**32], dtype=np.uint64)):
            with self.subTest(values=values):
                self.assert_refused(values, "src_offsets[1] is 4294967296: every element must be "
                                    ">= 0 and < 2**32", blocks.pack_u32)
        self.assert_refused([1, 2.0], "src_offsets[1] is 2.0: every element must be an int")
        self.assert_refused([1, "2"], "src_offsets[1] is '2': every element must be an int")

    def test_bad_types_and_shapes(self) -> None:
        self.assert_refused(np.array([1.0, 2.0]), "src_offsets has dtype float64: it must hold "
                            "integers")
        self.assert_refused(np.array([True]), "dtype bool")
        self.assert_refused(np.zeros((2, 3), dtype=np.uint64), "src_offsets has shape (2, 3): it "
                            "must be one-dimensional")
        self.assert_refused(array.array("d", [1.0]), "buffer of format 'd'")
        self.assert_refused(memoryview(bytes(16)).cast("Q", (1, 2)), "has shape (1, 2)")
        for packed in (b"\0" * 8, bytearray(8), "12"):
            with self.subTest(packed=packed):
                self.assert_refused(packed, "not packed bytes")
        self.assert_refused(7, "src_offsets is int: pass integers")  # not iterable


class PackWithoutNumpyTest(PackTest):
    """The same cases with numpy hidden: array.array and memoryview paths."""

    def inputs_of(self, forms: List[Any]) -> List[Any]:
        # Non-native byte orders need numpy (a memoryview cannot read them).
        return [f for f in forms if not (isinstance(f, np.ndarray) and f.dtype.byteorder == ">")]

    def inputs(self) -> List[Any]:
        return self.inputs_of(super().inputs())

    def setUp(self) -> None:
        patcher = mock.patch.object(blocks, "_np", None)
        patcher.start()
        self.addCleanup(patcher.stop)

    def test_non_native_byte_order_is_refused(self) -> None:
        self.assert_refused(np.array([1], dtype=">u8"), "src_offsets")

    def test_bad_types_and_shapes(self) -> None:
        self.assert_refused(array.array("d", [1.0]), "buffer of format 'd'")
        self.assert_refused(memoryview(bytes(16)).cast("Q", (1, 2)), "has shape (1, 2)")
        self.assert_refused(b"\0" * 8, "not packed bytes")
        self.assert_refused(7, "src_offsets is int: pass integers")


class ChunkTest(unittest.TestCase):
    """Requests are split into Blocks messages whose concatenation is the
    request, each about STREAM_CHUNK_BYTES at most."""

    def test_block_list_in_one_chunk(self) -> None:
        (only,) = blocks.list_chunks(le64(0, 8), le64(16, 0), None, 8)
        self.assertEqual(only.WhichOneof("form"), "list")
        self.assertEqual((only.list.src_offsets, only.list.dst_offsets, only.list.lengths,
                          only.list.block_length), (le64(0, 8), le64(16, 0), b"", 8))
        (only,) = blocks.list_chunks(le64(0), le64(1), le64(5), 0)
        self.assertEqual((only.list.lengths, only.list.block_length), (le64(5), 0))

    def test_block_list_split_keeps_every_block_in_order(self) -> None:
        n = 1000
        src, dst, lengths = (le64(*range(k, k + n)) for k in (0, 5000, 1))
        chunks = list(blocks.list_chunks(src, dst, lengths, 0, chunk_bytes=24 * 300))
        self.assertEqual([len(c.list.src_offsets) // 8 for c in chunks], [300, 300, 300, 100])
        for field, packed in (("src_offsets", src), ("dst_offsets", dst), ("lengths", lengths)):
            self.assertEqual(b"".join(getattr(c.list, field) for c in chunks), packed)
        chunks = list(blocks.list_chunks(src, dst, None, 64, chunk_bytes=16 * 500))
        self.assertEqual([(len(c.list.dst_offsets), c.list.block_length) for c in chunks],
                         [(8 * 500, 64), (8 * 500, 64)])
        big = list(blocks.list_chunks(bytes(8 << 20), bytes(8 << 20), None, 1))
        self.assertEqual(len(big), 16)
        self.assertTrue(all(c.ByteSize() <= blocks.STREAM_CHUNK_BYTES + 64 for c in big))

    def test_block_list_errors(self) -> None:
        with self.assertRaisesRegex(ValueError, "src_offsets has 2, dst_offsets has 1"):
            list(blocks.list_chunks(le64(1, 2), le64(3), None, 8))
        with self.assertRaisesRegex(ValueError, "dst_offsets has 1, lengths has 2"):
            list(blocks.list_chunks(le64(1), le64(3), le64(1, 2), 0))
        with self.assertRaisesRegex(ValueError, "not both"):
            list(blocks.list_chunks(le64(1), le64(3), le64(1), 8))
        with self.assertRaisesRegex(ValueError, "not neither"):
            list(blocks.list_chunks(le64(1), le64(3), None, 0))

    def test_strided_runs(self) -> None:
        run = xferd.Strided(src_start=0, dst_start=4096, block_length=512, src_stride=512,
                            dst_stride=8192, count=3)
        (only,) = blocks.strided_chunks(run)
        self.assertEqual(list(only.strided.runs), [run.to_proto()])
        self.assertEqual((only.strided.runs[0].dst_stride, only.strided.runs[0].count), (8192, 3))
        runs = [xferd.Strided(k, k, 1, U64_MAX, U64_MAX, U64_MAX) for k in range(100)]
        chunks = list(blocks.strided_chunks(runs, chunk_bytes=30 * blocks._MAX_RUN_BYTES))
        self.assertEqual([len(c.strided.runs) for c in chunks], [30, 30, 30, 10])
        self.assertTrue(all(c.ByteSize() <= 30 * blocks._MAX_RUN_BYTES for c in chunks))
        self.assertEqual([r.src_start for c in chunks for r in c.strided.runs], list(range(100)))

    def test_strided_errors(self) -> None:
        with self.assertRaisesRegex(ValueError, "Strided.dst_stride is -1: it must be an int"):
            xferd.Strided(0, 0, 8, 8, -1, 1)
        with self.assertRaisesRegex(ValueError, "Strided.count is 2.0"):
            xferd.Strided(0, 0, 8, 8, 8, 2.0)  # type: ignore[arg-type]
        with self.assertRaisesRegex(ValueError, "block_length and count must be > 0"):
            xferd.Strided(0, 0, 0, 8, 8, 1)
        with self.assertRaisesRegex(ValueError, "runs is empty"):
            list(blocks.strided_chunks([]))
        with self.assertRaisesRegex(ValueError, r"runs\[1\] is tuple: it must be a Strided"):
            list(blocks.strided_chunks([xferd.Strided(0, 0, 1, 1, 1, 1), (0, 0, 1, 1, 1, 1)]))

    def test_layout_indices(self) -> None:
        src, dst = le32(*range(10)), le32(*range(10, 20))
        chunks = list(blocks.layout_chunks("kv_a", "kv_b", src, dst, chunk_bytes=8 * 4))
        self.assertEqual(len(chunks), 3)
        self.assertEqual({(c.layout.src_layout, c.layout.dst_layout) for c in chunks},
                         {("kv_a", "kv_b")})
        self.assertEqual(b"".join(c.layout.src_indices for c in chunks), src)
        self.assertEqual(b"".join(c.layout.dst_indices for c in chunks), dst)
        with self.assertRaisesRegex(ValueError, "src_indices has 10, dst_indices has 9"):
            list(blocks.layout_chunks("a", "b", src, dst[4:]))


class UnpackTest(unittest.TestCase):
    """A RegionEvent's packed ranges back as integers: numpy uint64 arrays,
    or array.array without numpy; a trailing partial value is ignored."""

    PACKED = struct.pack("<3Q", 0, 4096, 2**64 - 1) + b"\x01"

    def test_numpy(self) -> None:
        values = blocks.unpack_u64(self.PACKED)
        self.assertIsInstance(values, np.ndarray)
        self.assertEqual(values.dtype, np.uint64)
        self.assertEqual(values.tolist(), [0, 4096, 2**64 - 1])

    def test_without_numpy(self) -> None:
        with mock.patch.object(blocks, "_np", None):
            values = blocks.unpack_u64(self.PACKED)
        self.assertIsInstance(values, array.array)
        self.assertEqual(values.tolist(), [0, 4096, 2**64 - 1])
        self.assertEqual(len(blocks.unpack_u64(b"")), 0)


if __name__ == "__main__":
    unittest.main(argv=sys.argv)
