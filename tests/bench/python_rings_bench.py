#!/usr/bin/python3
"""Python 4 KiB write(wait=True) latency through the request rings beside
the same writes over gRPC (rings=False), in the same run, on two daemons on
loopback over TCP, taking turns. Prints p50/p99 of each and their ratio. A
program, not a test: figures are printed, never asserted.

    XFERD_BIN=bazel-bin/daemon/xferd PYTHONPATH=bazel-bin/client/python/xferd.zip:\
tests/testing/python tests/bench/python_rings_bench.py [--writes 5000]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Dict, List

import xferd
from daemons import Cluster

KiB = 1 << 10


def latencies(client: xferd.Client, count: int) -> List[float]:
    """Microseconds of each of `count` 4 KiB writes that wait for their end."""
    out = []
    for i in range(count):
        start = time.perf_counter()
        client.write("src", "b", "dst", 4 * KiB, src_offset=(i % 16) * 4 * KiB, wait=True)
        out.append((time.perf_counter() - start) * 1e6)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=5000, help="per path and turn")
    parser.add_argument("--turns", type=int, default=3)
    args = parser.parse_args()
    with Cluster(("a", "b")) as cluster:
        cluster["a"].client().connect_peer(cluster["b"].address)
        ring = cluster["a"].client()
        grpc_only = cluster["a"].client(rings=False)
        ring.register_region("src", 64 * KiB, backing="shm")
        cluster["b"].client().register_region("dst", 64 * KiB, backing="shm", remote_write=True)
        figures: Dict[str, List[float]] = {"ring": [], "grpc": []}
        for client in (ring, grpc_only):  # warm up: channels, rings, name handles
            latencies(client, 200)
        assert ring.rings_open and ring.ring_requests > 0
        for _ in range(args.turns):
            figures["ring"] += latencies(ring, args.writes)
            figures["grpc"] += latencies(grpc_only, args.writes)
    p50 = {k: statistics.median(v) for k, v in figures.items()}
    for name, values in figures.items():
        values.sort()
        p99 = values[int(len(values) * 0.99)]
        print(f"{name:5s} 4 KiB write(wait=True): p50 {p50[name]:7.1f} us  p99 {p99:7.1f} us  "
              f"({len(values)} writes)")
    print(f"ring/grpc p50 ratio: {p50['ring'] / p50['grpc']:.3f}")


if __name__ == "__main__":
    main()
