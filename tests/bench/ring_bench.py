#!/usr/bin/python3
"""ring_bench.py: requests through the local rings beside references
measured in the same run.

  tests/bench/ring_bench.py [--no-build] [--seconds S] [--pollers N] [--toml TEXT]

Builds the daemon and ring_bench_client with --config=opt, starts two
daemons on loopback over the TCP transport (a connected to b) and prints:
  1. the references: qperf tcp_lat with 4 KiB messages on 127.0.0.1 (the
     network's own one-way latency), the C++ client's bare gRPC unary call
     (GetNodeInfo) and its 4 KiB Write(wait) over gRPC;
  2. one write at a time through the rings (submit -> completion seen by the
     client), p50 and p99, at 1, 4, 16 and 64 KiB;
  3. 64 writes in flight from one client thread, completions reaped in
     batches: transfers/s at the same sizes;
  4. same-host writes (the peer is daemon a itself: a copy between two of
     its regions on its pollers), 4 KiB, one at a time and 64 in flight;
  5. the same from Python: xferd.Client write(wait=True) one at a time
     through the rings (to b and to a itself) and over gRPC (rings=False),
     and xferd.aio with 64 writes in flight, and how often b's pollers fell
     asleep per ring write (each sleep costs a wake-up; engine.spin and
     engine.spin_max decide);
with the client's CPU per request, and ratios to the references. Every run
writes SHM to SHM and compares the destination with the source after it.
A benchmark, not a test: it checks the bytes, never the speed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any, Callable, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import KiB, size_name, table  # noqa: E402

SIZES = [1 * KiB, 4 * KiB, 16 * KiB, 64 * KiB]
SLOTS = 256  # distinct destinations per run
DEPTH = 64
LATENCY_TARGET = 3.0  # ring 4 KiB p50 <= 3x qperf tcp_lat
RATE_TARGET = 100_000  # 4 KiB transfers/s, one thread, 64 in flight
SAME_HOST_TARGET_US = 10.0  # same-host 4 KiB p50
PYTHON_RATE_TARGET = 50_000  # xferd.aio, 4 KiB, 64 in flight


def qperf_tcp_lat(seconds: float, children: benchlib.Children) -> float:
    """qperf's tcp_lat with 4 KiB messages on loopback: one-way µs."""
    server = subprocess.Popen(["qperf"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    children.procs.append(server)
    try:
        for _ in range(50):  # until the server listens
            out = subprocess.run(["qperf", "-t", str(int(max(1, seconds))), "-m", "4096",
                                  "127.0.0.1", "tcp_lat"], capture_output=True, text=True)
            found = re.search(r"latency\s*=\s*([\d.]+)\s*(us|ms|ns)", out.stdout)
            if found:
                scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3}[found.group(2)]
                return float(found.group(1)) * scale
        raise SystemExit(f"qperf tcp_lat gave no latency: {out.stdout}{out.stderr}")
    finally:
        benchlib.stop_process(server)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-build", action="store_true")
    parser.add_argument("--bazel-bin")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--pollers", type=int, default=0, help="0: the daemon's default")
    parser.add_argument("--toml", default="", type=benchlib.toml_text,
                        help="extra configuration for both daemons, e.g. "
                             "'[engine]\\npoller_slice = \"100us\"'")
    args = parser.parse_args()
    bins = benchlib.build(args.no_build, args.bazel_bin)
    bins.import_client()
    client_bin = bins.ring_bench_client
    import numpy as np
    import xferd

    children = benchlib.Children()
    workdir = tempfile.mkdtemp(prefix="xferd-ring-bench-")
    try:
        ref_us = qperf_tcp_lat(args.seconds, children)
        benchlib.log(f"qperf tcp_lat 4 KiB: {ref_us:.1f} us")
        extra = ["--pollers", str(args.pollers)] if args.pollers else []
        a = benchlib.start_daemon(children, bins.xferd, workdir, "a", "tcp", extra, args.toml)
        # b's metrics (on a port it picks): how often its pollers fall asleep
        # between the writes.
        b = benchlib.start_daemon(children, bins.xferd, workdir, "b", "tcp",
                                  ["--metrics-listen", "127.0.0.1:0", *extra], args.toml)
        ca, cb = xferd.Client(a.target), xferd.Client(b.target)
        peer = ca.connect_peer(b.address).node_id
        span = max(SIZES) * SLOTS
        src = ca.register_region("ring_src", span, backing="shm")
        dst = cb.register_region("ring_dst", span, backing="shm", remote_write=True)
        own = ca.register_region("own_dst", span, backing="shm", remote_write=True)
        own_node = ca.node_info().node_id
        np.frombuffer(src.buffer, dtype=np.uint8)[:] = np.random.default_rng(7).integers(
            0, 256, span, dtype=np.uint8)
        common = [client_bin, "--target", a.target, "--src", "ring_src",
                  "--seconds", str(args.seconds), "--slots", str(SLOTS)]
        base = common + ["--peer", peer, "--dst", "ring_dst", "--verify-dst-target", b.target]
        same_host = common + ["--peer", own_node, "--dst", "own_dst",
                              "--verify-dst-target", a.target]

        def run(mode: str, size: int, *more: str, to_self: bool = False) -> Dict[str, Any]:
            np.frombuffer((own if to_self else dst).buffer, dtype=np.uint8)[:] = 0
            out = benchlib.run_json((same_host if to_self else base) +
                                    [mode, "--size", str(size), *more])
            if not out.get("verified"):
                raise SystemExit(f"{mode} {size}: the destination differs from the source")
            benchlib.log(f"{mode} {size_name(size)}: {json.dumps(out)}")
            return out

        unary = benchlib.run_json([bins.bench_client, "--target", a.target, "rpc",
                                   "--seconds", str(args.seconds)])
        grpc = run("grpc", 4 * KiB)
        lat = {s: run("lat", s) for s in SIZES}
        rate = {s: run("rate", s, "--depth", str(DEPTH)) for s in SIZES}
        own_lat = run("lat", 4 * KiB, to_self=True)
        own_rate = run("rate", 4 * KiB, "--depth", str(DEPTH), to_self=True)
        python = python_figures(a.target, peer, own_node, args.seconds,
                                lambda: poller_sleeps(b.info["metrics_address"]),
                                np.frombuffer(src.buffer, dtype=np.uint8),
                                np.frombuffer(dst.buffer, dtype=np.uint8),
                                np.frombuffer(own.buffer, dtype=np.uint8))
        ca.close()
        cb.close()
        benchlib.stop_daemon(a)
        benchlib.stop_daemon(b)
    finally:
        children.stop_all()
    report(ref_us, unary, grpc, lat, rate, own_lat, own_rate, python)
    return 0


def poller_sleeps(metrics_address: str) -> float:
    """xferd_poller_sleeps_total of the daemon whose metrics are at
    `metrics_address` (host:port), summed over its pollers."""
    with urllib.request.urlopen(f"http://{metrics_address}/metrics", timeout=10) as reply:
        text = reply.read().decode()
    return sum(float(v) for v in
               re.findall(r"^xferd_poller_sleeps_total\{[^}]*\} (\S+)$", text, re.M))


def python_figures(target: str, peer: str, own_node: str, seconds: float,
                   b_sleeps: Callable[[], float], src: Any, dst: Any,
                   own: Any) -> Dict[str, Dict[str, float]]:
    """The Python client's 4 KiB rows: write(wait=True) one at a time through
    the rings to b and to a itself and over gRPC, and xferd.aio with DEPTH
    in flight; each with its client CPU per request (this process's CPU
    time: the daemons run in others) and how often b's pollers fell asleep
    per request, each destination compared after."""
    import asyncio
    import numpy as np
    import xferd
    import xferd.aio

    size = 4 * KiB
    out: Dict[str, Dict[str, float]] = {}

    def measured(name: str, run: Callable[[], Dict[str, float]], into: Any) -> None:
        into[:SLOTS * size] = 0
        figures = run()
        if not np.array_equal(into[:SLOTS * size], src[:SLOTS * size]):
            raise SystemExit(f"python {name}: the destination differs from the source")
        benchlib.log(f"python {name}: {json.dumps(figures)}")
        out[name] = figures

    def with_cpu(figures: Dict[str, float], cpu_start: float) -> Dict[str, float]:
        figures["client_cpu_us"] = (time.process_time() - cpu_start) / figures["ops"] * 1e6
        return figures

    def one_at_a_time(client: Any, to: str, dst_name: str) -> Dict[str, float]:
        slot = iter(range(1 << 62))

        def write() -> None:
            at = next(slot) % SLOTS * size
            client.write("ring_src", to, dst_name, size, src_offset=at, dst_offset=at,
                         wait=True)

        for _ in range(SLOTS):  # warm: rings, names, and every slot written once
            write()
        sleeps = b_sleeps()  # before the CPU count starts: not the client's cost
        cpu = time.process_time()
        figures = with_cpu(benchlib.timed_loop(write, seconds), cpu)
        figures["b_poller_sleeps_per_req"] = (b_sleeps() - sleeps) / figures["ops"]
        return figures

    with xferd.Client(target) as ring, xferd.Client(target, rings=False) as plain:
        measured("ring", lambda: one_at_a_time(ring, peer, "ring_dst"), dst)
        measured("grpc", lambda: one_at_a_time(plain, peer, "ring_dst"), dst)
        measured("same_host", lambda: one_at_a_time(ring, own_node, "own_dst"), own)
        assert ring.rings_open and not plain.rings_open

    async def in_flight() -> Dict[str, float]:
        async with xferd.aio.Client(target) as client:
            async def write(k: int) -> None:
                at = k % SLOTS * size
                await client.write("ring_src", peer, "ring_dst", size, src_offset=at,
                                   dst_offset=at, wait=True)

            for k in range(SLOTS):  # warm, and every slot written once
                await write(k)
            slot = iter(range(1 << 62))
            cpu, start = time.process_time(), time.perf_counter()
            rate = await benchlib.aio_rate(lambda: write(next(slot)), seconds, DEPTH)
            assert client.rings_open
            return with_cpu({"rate": rate, "ops": rate * (time.perf_counter() - start)}, cpu)

    measured("aio", lambda: asyncio.run(in_flight()), dst)
    return out


def report(ref_us: float, unary: Dict[str, Any], grpc: Dict[str, Any],
           lat: Dict[int, Dict[str, Any]], rate: Dict[int, Dict[str, Any]],
           own_lat: Dict[str, Any], own_rate: Dict[str, Any],
           python: Dict[str, Dict[str, float]]) -> None:
    rows: List[List[Any]] = [
        ["qperf tcp_lat 4 KiB (one way)", f"{ref_us:.1f}", "", "", "", "1.0x"],
        ["C++ gRPC GetNodeInfo", f"{unary['p50_us']:.1f}", f"{unary['p99_us']:.1f}",
         f"{unary['rate']:.0f}", "", f"{unary['p50_us'] / ref_us:.1f}x"],
        ["C++ gRPC Write(wait) 4 KiB", f"{grpc['p50_us']:.1f}", f"{grpc['p99_us']:.1f}",
         f"{grpc['rate']:.0f}", f"{grpc['client_cpu_us']:.1f}", f"{grpc['p50_us'] / ref_us:.1f}x"],
    ]
    for size, r in lat.items():
        rows.append([f"ring write {size_name(size)}, one at a time", f"{r['p50_us']:.1f}",
                     f"{r['p99_us']:.1f}", f"{r['rate']:.0f}", f"{r['client_cpu_us']:.1f}",
                     f"{r['p50_us'] / ref_us:.1f}x"])
    for size, r in rate.items():
        rows.append([f"ring write {size_name(size)}, {DEPTH} in flight", "", "",
                     f"{r['rate']:.0f}", f"{r['client_cpu_us']:.2f}", ""])
    rows.append(["same-host ring write 4 KiB, one at a time", f"{own_lat['p50_us']:.1f}",
                 f"{own_lat['p99_us']:.1f}", f"{own_lat['rate']:.0f}",
                 f"{own_lat['client_cpu_us']:.1f}", f"{own_lat['p50_us'] / ref_us:.1f}x"])
    rows.append([f"same-host ring write 4 KiB, {DEPTH} in flight", "", "",
                 f"{own_rate['rate']:.0f}", f"{own_rate['client_cpu_us']:.2f}", ""])
    for name, what in (("grpc", "Python gRPC write(wait=True) 4 KiB"),
                       ("ring", "Python ring write(wait=True) 4 KiB"),
                       ("same_host", "Python same-host ring write(wait=True) 4 KiB")):
        r = python[name]
        rows.append([what, f"{r['p50_us']:.1f}", f"{r['p99_us']:.1f}", f"{r['rate']:.0f}",
                     f"{r['client_cpu_us']:.1f}", f"{r['p50_us'] / ref_us:.1f}x"])
    rows.append([f"Python xferd.aio ring write 4 KiB, {DEPTH} in flight", "", "",
                 f"{python['aio']['rate']:.0f}", f"{python['aio']['client_cpu_us']:.1f}", ""])
    print(table(["client / path", "p50 µs", "p99 µs", "per second", "client CPU µs/req",
                 "p50 / qperf"], rows))
    four = 4 * KiB
    print(f"\nring 4 KiB p50 = {lat[four]['p50_us'] / ref_us:.1f}x qperf tcp_lat "
          f"(target <= {LATENCY_TARGET:.0f}x): "
          f"{benchlib.verdict(lat[four]['p50_us'] / ref_us, LATENCY_TARGET, False)}")
    print(f"ring 4 KiB rate = {rate[four]['rate']:.0f}/s, {DEPTH} in flight "
          f"(target >= {RATE_TARGET}/s): {benchlib.verdict(rate[four]['rate'], RATE_TARGET)}")
    print(f"same-host 4 KiB p50 = {own_lat['p50_us']:.1f} µs "
          f"(target <= {SAME_HOST_TARGET_US:.0f} µs): "
          f"{benchlib.verdict(own_lat['p50_us'], SAME_HOST_TARGET_US, False)}")
    print(f"gRPC Write(wait) / ring p50, 4 KiB: {grpc['p50_us'] / lat[four]['p50_us']:.1f}x")
    py = python["ring"]["p50_us"] / ref_us
    print(f"Python ring 4 KiB p50 = {py:.1f}x qperf tcp_lat (target <= {LATENCY_TARGET:.0f}x): "
          f"{benchlib.verdict(py, LATENCY_TARGET, False)}")
    print(f"Python ring 4 KiB: b's pollers fell asleep "
          f"{python['ring']['b_poller_sleeps_per_req']:.2f} times per write "
          f"(a wake-up each; engine.spin and spin_max decide)")
    print(f"Python xferd.aio 4 KiB rate = {python['aio']['rate']:.0f}/s, {DEPTH} in flight "
          f"(target >= {PYTHON_RATE_TARGET}/s): "
          f"{benchlib.verdict(python['aio']['rate'], PYTHON_RATE_TARGET)}")
    print(json.dumps({"python": python, "qperf_tcp_lat_us": ref_us, "grpc_unary": unary,
                      "grpc_write": grpc, "ring_lat": lat, "ring_rate": rate,
                      "same_host_lat": own_lat, "same_host_rate": own_rate}))


if __name__ == "__main__":
    sys.exit(main())
