"""Fixtures: a module-wide cluster of daemons, clients on it, and regions
that are deregistered after each test.

A test module names its daemons in DAEMONS (default a, b, c), the peer
connections to make in CONNECT as (from, to) pairs (default a->b, b->c), and
may open every daemon's config file with DAEMON_CONFIG (TOML).
"""

from __future__ import annotations

from typing import Dict, Iterator, List, Tuple

import pytest

import xferd
from daemons import Cluster


def pytest_configure(config: pytest.Config) -> None:
    """Registers the markers these tests use."""
    config.addinivalue_line(
        "markers", "starts(n): the test starts n transfers on daemon a (default 0)")


@pytest.fixture(scope="module")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """The module's daemons, started once, connected, stopped by SIGTERM at
    the end (teardown fails if one exits badly or leaves files behind)."""
    names = getattr(request.module, "DAEMONS", ("a", "b", "c"))
    connect = getattr(request.module, "CONNECT", (("a", "b"), ("b", "c")))
    config = getattr(request.module, "DAEMON_CONFIG", "")
    with Cluster(names, config_extra=config) as c:
        for src, dst in connect:
            c[src].client().connect_peer(c[dst].address)
        yield c


@pytest.fixture(scope="module")
def clients(cluster: Cluster) -> Dict[str, xferd.Client]:
    """One client per daemon, over its unix socket, by daemon name."""
    return {name: daemon.client() for name, daemon in cluster.daemons.items()}


class Regions:
    """Registers regions on the cluster's daemons and removes them later."""

    def __init__(self, clients: Dict[str, xferd.Client]) -> None:
        self._clients = clients
        self._made: List[Tuple[str, str]] = []

    def make(self, daemon: str, name: str, size: int, backing: str = "shm",
             **kwargs: object) -> xferd.Region:
        """Registers `name` on `daemon` (SHM by default)."""
        region = self._clients[daemon].register_region(name, size, backing=backing,
                                                       **kwargs)  # type: ignore[arg-type]
        self._made.append((daemon, name))
        return region

    def cleanup(self) -> None:
        """Deregisters (force) every region made that still exists."""
        for daemon, name in reversed(self._made):
            try:
                self._clients[daemon].deregister_region(name, force=True)
            except xferd.NotFound:
                pass
        self._made.clear()


@pytest.fixture
def regions(clients: Dict[str, xferd.Client]) -> Iterator[Regions]:
    """A Regions factory; what a test registers through it goes away after it."""
    r = Regions(clients)
    yield r
    r.cleanup()
