"""The enumerations' Literal types against the protos: every value the
generated enums define becomes one of its Literal's strings (a value added to
a proto without its string would read "unknown" and fail here), numbers this
client does not know become "unknown", and each Literal is exported."""

import sys
import typing
import unittest

import xferd
from xferd import models
from xferd.v1 import common_pb2, xferd_pb2

# (proto enum, prefix, Literal) as models.py converts them.
_ENUMS = [
    (common_pb2.TransportKind, "TRANSPORT_KIND_", models.Transport),
    (common_pb2.RegionBacking, "REGION_BACKING_", models.Backing),
    (common_pb2.TransferState, "TRANSFER_STATE_", models.TransferState),
    (xferd_pb2.Transfer.Direction, "DIRECTION_", models.Direction),
    (xferd_pb2.Peer.State, "STATE_", models.PeerState),
    (xferd_pb2.RegionEvent.Kind, "KIND_", models.EventKind),
]


class EnumLiteralTest(unittest.TestCase):

    def test_every_proto_value_has_its_string(self) -> None:
        for enum, prefix, literal in _ENUMS:
            strings = set(typing.get_args(literal))
            for name, number in enum.items():
                with self.subTest(enum=name):
                    converted = models._enum_name(enum, number, prefix, literal)
                    self.assertEqual(converted, name[len(prefix):].lower())
                    self.assertIn(converted, strings)
            # Nothing in the Literal that the proto lacks, beyond "unknown".
            expected = {n[len(prefix):].lower() for n in enum.keys()} | {"unknown"}
            self.assertEqual(strings, expected, prefix)

    def test_unknown_numbers_read_unknown(self) -> None:
        self.assertEqual(models.transport_name(99), "unknown")
        self.assertEqual(models.transport_name(1), "tcp")
        self.assertEqual(models.transport_name(2), "verbs")
        self.assertEqual(models.transport_name(0), "unspecified")

    def test_snapshots_carry_the_strings(self) -> None:
        t = models.Transfer.from_proto(xferd_pb2.Transfer(
            id=7, state=common_pb2.TRANSFER_STATE_DONE, transport=common_pb2.TRANSPORT_KIND_VERBS,
            direction=xferd_pb2.Transfer.DIRECTION_READ))
        self.assertEqual((t.state, t.transport, t.direction), ("done", "verbs", "read"))
        self.assertTrue(t.terminal)

    def test_literals_are_exported(self) -> None:
        for name in ("Transport", "Backing", "TransferState", "Direction", "PeerState",
                     "EventKind", "NodeState", "Unset"):
            self.assertIn(name, xferd.__all__)
            self.assertIs(getattr(xferd, name), getattr(models, name))


if __name__ == "__main__":
    unittest.main(argv=sys.argv)
