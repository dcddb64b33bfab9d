"""Two network namespaces joined by a veth pair, for fault tests.

    with NetPair() as net:        # namespaces <tag>a and <tag>b
        net.ip("a")               # "10.77.0.1"
        net.netem("delay 20ms loss 1%")
        net.link("down"); net.link("up")

The daemons run inside the namespaces (Daemon(netns=net.ns("a"))); the test
process stays outside and talks to them over their unix sockets, so only
daemon-to-daemon traffic crosses the veth pair where the faults are made.
Needs root, iproute2 and, for netem(), the sch_netem module (the Debian
kernel in tests/faults/run.sh's VM has it; tc says so when it is missing).
"""

from __future__ import annotations

import os
import subprocess
from typing import List

__all__ = ["NetPair"]

_SIDES = ("a", "b")


def _run(args: List[str]) -> None:
    result = subprocess.run(args, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"`{' '.join(args)}` failed ({result.returncode}): "
                           f"{result.stderr.strip()}")


class NetPair:
    """Namespaces `<tag>a` and `<tag>b`, veth `<tag>` between them.

    Side a is 10.77.0.1/24, side b 10.77.0.2/24. Faults apply to both ends
    unless a side is named, so they hit both directions of every lane.
    """

    def __init__(self, tag: str = f"xf{os.getpid()}") -> None:
        self.tag = tag
        self._made = False

    def ns(self, side: str) -> str:
        """The namespace of side "a" or "b"."""
        assert side in _SIDES, side
        return self.tag + side

    def ip(self, side: str) -> str:
        """Side a's or b's address on the veth pair."""
        return f"10.77.0.{_SIDES.index(side) + 1}"

    def dev(self, side: str) -> str:
        """The veth end inside side's namespace."""
        return f"{self.tag}{side}0"

    def _in(self, side: str, *args: str) -> None:
        _run(["ip", "netns", "exec", self.ns(side), *args])

    def __enter__(self) -> "NetPair":
        try:
            for side in _SIDES:
                _run(["ip", "netns", "add", self.ns(side)])
            self._made = True
            _run(["ip", "link", "add", self.dev("a"), "netns", self.ns("a"), "type", "veth",
                  "peer", "name", self.dev("b"), "netns", self.ns("b")])
            for side in _SIDES:
                self._in(side, "ip", "link", "set", "lo", "up")
                self._in(side, "ip", "addr", "add", f"{self.ip(side)}/24", "dev", self.dev(side))
                self._in(side, "ip", "link", "set", self.dev(side), "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        # Deleting a namespace deletes its veth end, and so the pair.
        if self._made:
            for side in _SIDES:
                subprocess.run(["ip", "netns", "del", self.ns(side)], stdin=subprocess.DEVNULL,
                               capture_output=True)
            self._made = False

    def link(self, state: str, side: str = "a") -> None:
        """Sets side's veth end "down" or "up" (the other end loses carrier)."""
        assert state in ("up", "down"), state
        self._in(side, "ip", "link", "set", self.dev(side), state)

    def netem(self, spec: str, sides: str = "ab") -> None:
        """Applies `tc netem <spec>` (e.g. "delay 20ms 5ms loss 1%") on the sides' egress."""
        for side in sides:
            self._in(side, "tc", "qdisc", "replace", "dev", self.dev(side), "root", "netem",
                     *spec.split())

    def clear(self) -> None:
        """Removes netem from both ends."""
        for side in _SIDES:
            subprocess.run(["ip", "netns", "exec", self.ns(side), "tc", "qdisc", "del", "dev",
                            self.dev(side), "root"], stdin=subprocess.DEVNULL, capture_output=True)
