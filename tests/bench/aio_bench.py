#!/usr/bin/python3
"""4 KiB writes per second from asyncio (xferd.aio, 64 in flight) beside the
blocking client (xferd.Client, one at a time and from 64 threads) and
beside bare grpc.aio unary calls (GetNodeInfo, and the Write stub), all in
the same run on two daemons on loopback over TCP. Prints each rate and its
ratio to the bare grpc.aio call of the same shape. A program, not a test:
figures are printed, never asserted.

    tests/bench/aio_bench.py [--seconds 3] [--in-flight 64] [--no-build]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import benchlib

# Rounds the compared patterns take turns in.
TURNS = 3
SMALL = 4 * benchlib.KiB


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--in-flight", type=int, default=64, help="concurrent calls")
    parser.add_argument("--no-build", action="store_true", help="use the existing opt build")
    parser.add_argument("--bazel-bin", help="bazel-bin of an existing --config=opt build")
    return parser.parse_args()


def thread_rate(op: Callable[[], Any], seconds: float, threads: int) -> float:
    """Calls per second of `op` from `threads` threads calling it back to back."""
    counts = [0] * threads
    deadline = time.perf_counter() + seconds

    def worker(i: int) -> None:
        while time.perf_counter() < deadline:
            op()
            counts[i] += 1

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, range(threads)))
    return sum(counts) / (time.perf_counter() - start)


async def measure_aio(a: Any, args: argparse.Namespace) -> List[Tuple[str, str, float]]:
    """The asyncio rows: (client, operation, rate)."""
    import xferd.aio
    from xferd.v1 import xferd_pb2

    n, secs = args.in_flight, args.seconds
    rows: List[Tuple[str, str, float]] = []
    async with xferd.aio.Client(a.target) as c:
        info = xferd_pb2.GetNodeInfoRequest()
        write = xferd_pb2.WriteRequest(src_region="small_src", peer="b", dst_region="small_dst",
                                       length=SMALL, wait=True)
        rows.append(("grpc.aio stub", "GetNodeInfo",
                     await benchlib.aio_rate(lambda: c.stub.GetNodeInfo(info, timeout=10),
                                             secs, n)))
        rows.append(("grpc.aio stub", "Write(wait=True) 4 KiB",
                     await benchlib.aio_rate(lambda: c.stub.Write(write, timeout=10), secs, n)))

        async def waited() -> None:
            await c.write("small_src", "b", "small_dst", SMALL, wait=True)

        async def then_wait() -> None:
            await (await c.write("small_src", "b", "small_dst", SMALL)).wait(10)

        # The two patterns compared take turns (the host's load reaches both).
        both: List[List[float]] = [[], []]
        for _ in range(TURNS):
            for i, op in enumerate((waited, then_wait)):
                both[i].append(await benchlib.aio_rate(op, secs / TURNS, n))
        rows.append(("xferd.aio.Client", "write(wait=True) 4 KiB", statistics.mean(both[0])))
        rows.append(("xferd.aio.Client", "write().wait() 4 KiB", statistics.mean(both[1])))
    return rows


def measure(children: benchlib.Children, bins: benchlib.Binaries, workdir: str,
            args: argparse.Namespace) -> List[Tuple[str, str, float]]:
    import xferd

    a, b = (benchlib.start_daemon(children, bins.xferd, workdir, name, "tcp")
            for name in ("a", "b"))
    ca, cb = xferd.Client(a.target), xferd.Client(b.target)
    ca.connect_peer(b.address)
    ca.register_region("small_src", benchlib.MiB)
    cb.register_region("small_dst", benchlib.MiB, remote_write=True)
    ca.write("small_src", "b", "small_dst", SMALL, wait=True)  # resolves the destination
    rows = asyncio.run(measure_aio(a, args))
    n, secs = args.in_flight, args.seconds

    def sync_write() -> None:
        ca.write("small_src", "b", "small_dst", SMALL, wait=True)

    def sync_then_wait() -> None:
        ca.write("small_src", "b", "small_dst", SMALL).wait(10)

    rows.append(("xferd.Client", "write(wait=True) 4 KiB, one at a time",
                 thread_rate(sync_write, secs, 1)))
    both: List[List[float]] = [[], []]
    for _ in range(TURNS):
        for i, op in enumerate((sync_write, sync_then_wait)):
            both[i].append(thread_rate(op, secs / TURNS, n))
    rows.append(("xferd.Client", f"write(wait=True) 4 KiB, {n} threads", statistics.mean(both[0])))
    rows.append(("xferd.Client", f"write().wait() 4 KiB, {n} threads", statistics.mean(both[1])))
    ca.close()
    cb.close()
    benchlib.stop_daemon(a)
    benchlib.stop_daemon(b)
    return rows


def main() -> int:
    args = parse_args()
    bins = benchlib.build(args.no_build, args.bazel_bin)
    bins.import_client()
    children = benchlib.Children()
    workdir = tempfile.mkdtemp(prefix="xfa", dir="/tmp")
    try:
        rows = measure(children, bins, workdir, args)
    finally:
        children.stop_all()
        shutil.rmtree(workdir, ignore_errors=True)
    rates: Dict[str, float] = {f"{c}|{o}": r for c, o, r in rows}
    unary = rates["grpc.aio stub|GetNodeInfo"]
    bare_write: Optional[float] = rates.get("grpc.aio stub|Write(wait=True) 4 KiB")
    print(f"\n== aio_bench: 4 KiB writes, {args.in_flight} in flight unless said, TCP on "
          f"loopback, {args.seconds:g} s each, same run ==")
    print(benchlib.table(
        ["client", "operation", "calls/s", "x bare unary", "x bare Write"],
        [(c, o, f"{r:.0f}", f"{r / unary:.2f}", f"{r / bare_write:.2f}" if bare_write else "-")
         for c, o, r in rows], align="ll"))
    print("\nbare unary: grpc.aio GetNodeInfo with the same calls in flight; bare Write: the "
          "grpc.aio Write stub with wait=True (the floor a client adds nothing to).")
    for client, threads in (("xferd.aio.Client", ""), ("xferd.Client", f", {args.in_flight} threads")):
        ratio = (rates[f"{client}|write().wait() 4 KiB{threads}"]
                 / rates[f"{client}|write(wait=True) 4 KiB{threads}"])
        print(f"{client}: write().wait() / write(wait=True), taking turns: {ratio:.2f}x "
              "(target: no less than 1 within the noise)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
